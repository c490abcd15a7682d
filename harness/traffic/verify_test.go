//go:build rdma

package traffic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// Every transfer of a data check fits VerifyBuf with its guard, at an
// offset that is not aligned.
func TestVerifyOffsets(t *testing.T) {
	assert.Equal(t, 1, verifyIters(0))
	assert.Equal(t, 2, verifyIters(2))
	assert.Equal(t, 4, verifyIters(1000))
	for _, size := range VerifySizes {
		for i := range verifyIters(1000) {
			off := verifyOffset(size, i)
			assert.LessOrEqual(t, off+size+64, VerifyBuf, "size %d iteration %d", size, i)
		}
	}
	assert.NotZero(t, verifyOffset(1, 0)%8)
	assert.NotEqual(t, roundSeed(1, 0, 4093, 0), roundSeed(1, 1, 4093, 0), "each round has its own pattern")
	assert.NotEqual(t, roundSeed(1, 0, 4093, 0), roundSeed(1, 0, 4093, 1))
}

// Up to four WRs cover the transfer exactly, the last one signaled.
func TestChunks(t *testing.T) {
	for _, size := range []int{1, 2, 3, 4, 5, 4093, 65536, 1 << 20} {
		cs := chunks(size)
		require.NotEmpty(t, cs)
		assert.LessOrEqual(t, len(cs), 4)
		next := 0
		for _, c := range cs {
			assert.Equal(t, next, c[0], "size %d", size)
			assert.Positive(t, c[1])
			next += c[1]
		}
		assert.Equal(t, size, next, "size %d", size)
	}
	assert.Equal(t, [][2]int{{0, 1023}, {1023, 1023}, {2046, 1023}, {3069, 1024}}, chunks(4093))

	mr := &verbs.MR{Addr: 0x1000}
	wrs := chained(verbs.OpWrite, mr, oob.RemoteMR{Addr: 0x9000, RKey: 7}, 3, 4093)
	require.Len(t, wrs, 4)
	for k, w := range wrs {
		assert.Equal(t, k == 3, w.Signaled)
		assert.Equal(t, w.LocalAddr-mr.Addr, w.RemoteAddr-0x9000, "the same offset at both ends")
		assert.Equal(t, uint32(7), w.RKey)
	}
	assert.Equal(t, uint64(0x1003), wrs[0].LocalAddr)
}

// The receive side's own checks, before the data is read back.
func TestArrived(t *testing.T) {
	x := Xfer{Seed: 0xdeadbeef01, Size: 4093}
	err := writeImmArrived(nil, verbs.WC{Opcode: verbs.WCRecv}, uint32(x.Seed), x)
	assert.EqualError(t, err, "receive completion opcode 128, want RECV_RDMA_WITH_IMM (129)")
	err = writeImmArrived(nil, verbs.WC{Opcode: verbs.WCRecvWriteImm, Imm: 1, HasImm: true}, uint32(x.Seed), x)
	assert.EqualError(t, err, "immediate value 0x00000001 (present true), want 0xadbeef01")
	err = writeImmArrived(nil, verbs.WC{Opcode: verbs.WCRecvWriteImm, Imm: uint32(x.Seed), HasImm: true, ByteLen: 1}, uint32(x.Seed), x)
	assert.EqualError(t, err, "completion byte_len 1, want 4093")
	err = sendArrived(nil, verbs.WC{Opcode: verbs.WCRecvWriteImm}, x)
	assert.EqualError(t, err, "receive completion opcode 129, want RECV (128)")
	err = sendArrived(nil, verbs.WC{Opcode: verbs.WCRecv, ByteLen: 4092}, x)
	assert.EqualError(t, err, "completion byte_len 4092, want 4093")
}
