//go:build rdma

package pingpong

import (
	"strconv"
	"testing"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// perftest's bandwidth tools keep 128 WRs outstanding and signal one in 100.
const (
	txDepth = 128
	cqMod   = 100
)

// connect connects this test's ends (harness/rc) on a buffer of bufSize
// bytes from alloc (nil: the memory GDR_MEM selects), with the settings both
// hosts must share. skip, when set, is a reason only this host knows of.
func connect(t *testing.T, bufSize int, alloc rc.Alloc, skip string) []*rc.End {
	t.Helper()
	cfg := testenv.Config(t)
	if alloc == nil {
		alloc = newBuffer
	}
	return rc.Connect(t, rc.Options{BufSize: bufSize, Alloc: alloc, Skip: skip,
		Info: map[string]string{"GDR_ITERS": strconv.Itoa(cfg.Iters), "GDR_BW_SIZES": rc.JoinInts(cfg.BWSizes)}})
}

// threshold rules, documented in README: on hardware NICs, bandwidth at the
// largest size >= bwFraction of the port rate, and small-WRITE p50 latency
// <= defaultMaxLatUS; software devices (rxe, siw) get none.
const (
	bwFraction      = 0.75
	defaultMaxLatUS = 10.0
)

// wr is a send WR on e's registration local at offset off for n bytes,
// aimed at the same offset of the peer's registration remote.
func wr(id uint64, op verbs.Opcode, local *verbs.MR, remoteAddr uint64, rkey uint32, off, n int, signaled bool) verbs.SendWR {
	return verbs.SendWR{ID: id, Op: op, Local: local, LocalAddr: local.Addr + uint64(off), Len: uint32(n),
		RemoteAddr: remoteAddr + uint64(off), RKey: rkey, Signaled: signaled}
}
