//go:build rdma

package verbs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestErrorText(t *testing.T) {
	e := &Error{Verb: "ibv_modify_qp(RTR)", Errno: syscall.EINVAL}
	assert.Equal(t, "ibv_modify_qp(RTR): errno 22 (EINVAL)", e.Error())
	assert.ErrorIs(t, e, syscall.EINVAL)
	e.Hint = "check the GID index"
	assert.Equal(t, "ibv_modify_qp(RTR): errno 22 (EINVAL): check the GID index", e.Error())
	_, ok := verdict.As(e)
	assert.False(t, ok, "no remedy: no finding")
	// A remedy is a field, found in the chain by the callers' verdict.Of
	// and joined into the log line; the error's text is the cause alone.
	reg := withFinding(&Error{Verb: "ibv_reg_mr(0x1000, 4096)", Errno: syscall.ENOMEM, Hint: "the locked-memory limit: 64 KiB"},
		verdict.Finding{Cause: "the locked-memory limit: 64 KiB", Remedy: MemlockRemedy})
	assert.Equal(t, "ibv_reg_mr(0x1000, 4096): errno 12 (ENOMEM): the locked-memory limit: 64 KiB", reg.Error())
	assert.ErrorIs(t, reg, syscall.ENOMEM)
	f := verdict.Of(fmt.Errorf("registering the host buffer: %w", reg))
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, MemlockRemedy, f.Remedy)
	assert.Equal(t, "registering the host buffer: ibv_reg_mr(0x1000, 4096): errno 12 (ENOMEM): the locked-memory limit: 64 KiB; remedy: "+MemlockRemedy, f.Line(),
		"the line a recording holds is the one the text form gave")
	le := &LoadError{Msg: "libibverbs.so.1: cannot open shared object file"}
	for _, s := range []string{"libibverbs.so.1", "libibverbs1", "rdma-core", "MLNX_OFED"} {
		assert.Contains(t, le.Error(), s)
	}
	te := &TimeoutError{What: "RDMA WRITE", Timeout: time.Second, Got: 1, Want: 2}
	assert.Contains(t, te.Error(), "RDMA WRITE: no completion within 1s (got 1 of 2)")
}

// Inline sends are decided from the MR, never by the caller: a provider
// copies inline data with the CPU, and a CPU read of GPU memory faults, so
// device memory (peermem or dma-buf) is never inline, whatever its size.
func TestInlineOnlyFromHostMemory(t *testing.T) {
	host := &MR{Addr: 0x10000, Len: 8192, LKey: 1, Mem: membuf.Host, Path: PathHost}
	peer := &MR{Addr: 0x7f0000000000, Len: 8192, LKey: 2, Mem: membuf.GPU, Path: PathPeermem}
	dmab := &MR{Addr: 0, Len: 8192, LKey: 3, Mem: membuf.GPU, Path: PathDmabuf}
	odd := &MR{Addr: 0x20000, Len: 8192, LKey: 4, Mem: membuf.Host, Path: PathDmabuf} // an iova is no CPU address
	for _, c := range []struct {
		mr   *MR
		n    uint32
		want bool
	}{
		{host, 1, true}, {host, 64, true}, {host, 65, false}, {host, 0, false},
		{peer, 1, false}, {peer, 2, false}, {peer, 64, false},
		{dmab, 1, false}, {dmab, 64, false}, {odd, 2, false},
	} {
		for _, op := range []Opcode{OpSend, OpWrite, OpWriteImm} {
			fl, err := sendFlags([]SendWR{{Op: op, Local: c.mr, LocalAddr: c.mr.Addr, Len: c.n, Signaled: true}}, 64)
			require.NoError(t, err)
			assert.Equal(t, c.want, fl[0]&flagInline != 0, "%v of %d bytes on %s/%s memory", op, c.n, c.mr.Mem, c.mr.Path)
			assert.NotZero(t, fl[0]&flagSignaled)
		}
	}
	// An RDMA READ is never inline, even from host memory: the response
	// needs the local buffer (inline READs fail with a local protection
	// error on rxe, seen in the lab).
	fl, err := sendFlags([]SendWR{{Op: OpRead, Local: host, LocalAddr: host.Addr, Len: 1, Signaled: true}}, 64)
	require.NoError(t, err)
	assert.Zero(t, fl[0]&flagInline)
	// A chain mixing both kinds decides per WR.
	fl, err = sendFlags([]SendWR{{Op: OpWrite, Local: peer, LocalAddr: peer.Addr, Len: 2}, {Op: OpWrite, Local: host, LocalAddr: host.Addr, Len: 2}}, 64)
	require.NoError(t, err)
	assert.Zero(t, fl[0]&flagInline)
	assert.NotZero(t, fl[1]&flagInline)
	// A WR outside its MR, or with data and no MR, is refused before posting.
	_, err = sendFlags([]SendWR{{Op: OpWrite, Local: host, LocalAddr: host.Addr + 8000, Len: 400}}, 64)
	assert.ErrorContains(t, err, "outside its MR")
	_, err = sendFlags([]SendWR{{Op: OpWrite, LocalAddr: 0x1000, Len: 4}}, 64)
	assert.ErrorContains(t, err, "names no MR")
	_, err = sendFlags([]SendWR{{Op: OpSend}}, 64)
	assert.NoError(t, err, "a zero-length SEND needs no MR")
}

func TestMTU(t *testing.T) {
	for e, b := range map[int]int{1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096} {
		assert.Equal(t, b, MTUBytes(e))
		assert.Equal(t, e, MTUEnum(b))
	}
	assert.Zero(t, MTUBytes(0))
	assert.Zero(t, MTUEnum(1500))
}

// loaded skips when this machine has no libibverbs (a unit-test machine
// without rdma-core); the conformance suite turns the same error into an
// absence.
func loaded(t *testing.T) {
	t.Helper()
	if err := Load(); err != nil {
		var le *LoadError
		require.True(t, errors.As(err, &le), "Load error is a *LoadError: %v", err)
		t.Skipf("%v", err)
	}
}

func TestLoadAndList(t *testing.T) {
	loaded(t)
	devs, err := Devices()
	require.NoError(t, err)
	t.Logf("devices: %v", devs)
	_, err = Open("gdr-no-such-device")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gdr-no-such-device")
	assert.Equal(t, "success", strings.ToLower(StatusString(0)))
	assert.Contains(t, strings.ToLower(StatusString(10)), "remote access")
}

// device opens the first RDMA device with an ACTIVE port 1, or skips.
func device(t *testing.T) *Context {
	t.Helper()
	loaded(t)
	root, err := hostfs.New("/")
	require.NoError(t, err)
	devs, _ := rdmadev.Scan(root)
	if len(devs) == 0 {
		t.Skip("no RDMA device in /sys/class/infiniband: the lab (make lab LAB_PKGS=./harness/verbs) runs these for real")
	}
	name := os.Getenv("GDR_RDMA_DEVICE")
	c, err := Open(name)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	p, err := c.QueryPort(1)
	require.NoError(t, err)
	if p.State != PortActive {
		t.Skipf("%s port 1 is %s", c.Name, p.StateName)
	}
	return c
}

// must registers v's Close (LIFO, so objects close in reverse order).
func must[T interface{ Close() error }](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, v.Close()) })
		return v
	}
}

type side struct {
	qp       *QP
	scq, rcq *CQ
	mr       *MR
	mem      []byte
}

// loopPair connects two RC QPs on one device, both at RTS.
func loopPair(t *testing.T, c *Context) (a, b side, gid rdmadev.GID) {
	root, _ := hostfs.New("/")
	port, err := c.QueryPort(1)
	require.NoError(t, err)
	d, err := rdmadev.Load(root, c.Name)
	require.NoError(t, err)
	gid, err = rdmadev.PickGID(d, 1, -1, "")
	require.NoError(t, err)
	pd := must[*PD](t)(c.AllocPD())
	mk := func() side {
		var s side
		s.scq = must[*CQ](t)(c.CreateCQ(64))
		s.rcq = must[*CQ](t)(c.CreateCQ(64))
		s.qp = must[*QP](t)(pd.CreateRCQP(s.scq, s.rcq, QPCaps{SendWR: 32, RecvWR: 32, MaxInline: 64}, membuf.Host))
		mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Munmap(mem) })
		s.mem = mem
		s.mr = must[*MR](t)(pd.RegMR(uintptr(unsafe.Pointer(&mem[0])), len(mem), AccessRW, membuf.Host))
		require.NoError(t, s.qp.Init(1, AccessRW))
		return s
	}
	a, b = mk(), mk()
	// Both ends are this port: the connection's own rule (NeedGRH), so a
	// port that requires a GRH gets one here as in harness/rc.
	end := GRHEnd{GID: [16]byte(gid.Addr.To16()), Required: port.GRHRequired, FlagsRead: port.FlagsRead}
	for _, x := range [][2]side{{a, b}, {b, a}} {
		r := Remote{QPN: x[1].qp.Num, PSN: 0, LID: port.LID, GID: end.GID, GRH: NeedGRH(port.LinkLayer, end, end),
			MTU: port.ActiveMTU, RdAtom: 4, SGIDIdx: gid.Index}
		require.NoError(t, x[0].qp.RTR(r))
		require.NoError(t, x[0].qp.RTS(0, 4, 0))
	}
	return a, b, gid
}

// A chained list of WRITEs with only the last signaled gives one completion
// and all the data; a wrong rkey gives REM_ACCESS_ERR with its status text.
func TestChainedWriteAndErrors(t *testing.T) {
	c := device(t)
	a, b, _ := loopPair(t, c)
	for i := range a.mem[:4096] {
		a.mem[i] = byte(i * 7)
	}
	var wrs []SendWR
	for k := 0; k < 4; k++ {
		wrs = append(wrs, SendWR{ID: uint64(k), Op: OpWrite, LocalAddr: a.mr.Addr + uint64(k*1024), Len: 1024, Local: a.mr,
			RemoteAddr: b.mr.Addr + uint64(k*1024), RKey: b.mr.RKey, Signaled: k == 3})
	}
	require.NoError(t, a.qp.PostSend(wrs...))
	wc, err := a.scq.Wait(1, "chained WRITE", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), wc[0].ID)
	assert.Equal(t, WCWrite, wc[0].Opcode)
	assert.Equal(t, a.mem[:4096], b.mem[:4096])
	// Nothing else completes: the unsignaled WRs produce no completion.
	out := make([]WC, 4)
	n, err := a.scq.Poll(out, 1, 50*time.Millisecond)
	assert.Equal(t, 0, n)
	var te *TimeoutError
	assert.True(t, errors.As(err, &te), "%v", err)

	// WRITE_WITH_IMM and SEND land on b's receive queue, batched poll.
	require.NoError(t, b.qp.PostRecv(RecvWR{ID: 10}, RecvWR{ID: 11, LocalAddr: b.mr.Addr + 8192, Len: 4096, Local: b.mr}))
	require.NoError(t, a.qp.PostSend(
		SendWR{ID: 20, Op: OpWriteImm, LocalAddr: a.mr.Addr, Len: 16, Local: a.mr, RemoteAddr: b.mr.Addr + 4096, RKey: b.mr.RKey, Imm: 0xdeadbeef, Signaled: true},
		SendWR{ID: 21, Op: OpSend, LocalAddr: a.mr.Addr, Len: 32, Local: a.mr, Signaled: true}))
	_, err = a.scq.Wait(2, "WRITE_WITH_IMM+SEND", 10*time.Second)
	require.NoError(t, err)
	rw, err := b.rcq.Wait(2, "receives", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, WCRecvWriteImm, rw[0].Opcode)
	assert.True(t, rw[0].HasImm)
	assert.Equal(t, uint32(0xdeadbeef), rw[0].Imm)
	assert.Equal(t, uint32(16), rw[0].ByteLen)
	assert.Equal(t, WCRecv, rw[1].Opcode)
	assert.Equal(t, uint32(32), rw[1].ByteLen)
	assert.Equal(t, a.mem[:32], b.mem[8192:8192+32])

	// READ back from b.
	require.NoError(t, a.qp.PostSend(SendWR{ID: 30, Op: OpRead, LocalAddr: a.mr.Addr + 8192, Len: 4096, Local: a.mr, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey, Signaled: true}))
	rr, err := a.scq.Wait(1, "READ", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, WCRead, rr[0].Opcode)
	assert.Equal(t, b.mem[:4096], a.mem[8192:8192+4096])

	// Wrong rkey: the responder refuses and the completion says why.
	require.NoError(t, a.qp.PostSend(SendWR{ID: 40, Op: OpWrite, LocalAddr: a.mr.Addr, Len: 64, Local: a.mr, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey ^ 0xff00, Signaled: true}))
	_, err = a.scq.Wait(1, "WRITE with a bad rkey", 10*time.Second)
	var we *WCError
	require.True(t, errors.As(err, &we), "%v", err)
	assert.Contains(t, err.Error(), "remote access error")
	t.Logf("bad rkey: %v", err)
}

func TestBadRTR(t *testing.T) {
	c := device(t)
	pd := must[*PD](t)(c.AllocPD())
	cq := must[*CQ](t)(c.CreateCQ(8))
	qp := must[*QP](t)(pd.CreateRCQP(cq, cq, QPCaps{SendWR: 4, RecvWR: 4}, membuf.Host))
	require.NoError(t, qp.Init(1, AccessRW))
	port, _ := c.QueryPort(1)
	// A GID index far past the table is rejected at RTR with EINVAL. With
	// no GRH (plain InfiniBand) the index is not used: this one sends a GRH
	// on every fabric.
	g := NeedGRH(port.LinkLayer, GRHEnd{Required: true, FlagsRead: true}, GRHEnd{})
	err := qp.RTR(Remote{QPN: qp.Num, GRH: g, MTU: port.ActiveMTU, RdAtom: 1, SGIDIdx: 250, LID: port.LID})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ibv_modify_qp(RTR): errno")
	t.Logf("bad RTR: %v", err)
	_, err = c.QueryPort(77)
	assert.Error(t, err)
	t.Logf("bad port: %v", err)
	// Objects close once; a second Close is a no-op.
	require.NoError(t, qp.Close())
	require.NoError(t, qp.Close())
}

func TestLatencyAndBandwidthLoops(t *testing.T) {
	c := device(t)
	a, b, _ := loopPair(t, c)
	// Both latency ends in one process: b waits, a starts.
	errc := make(chan error, 1)
	go func() {
		_, err := b.qp.Latency(LatArgs{SendCQ: b.scq, RecvCQ: b.rcq, Local: b.mr, SendAddr: b.mr.Addr, PollAddr: b.mr.Addr + 4096 + 1,
			RemoteAddr: a.mr.Addr + 4096, RKey: a.mr.RKey, Size: 2, Iters: 20, Timeout: 10 * time.Second})
		errc <- err
	}()
	st, err := a.qp.Latency(LatArgs{SendCQ: a.scq, RecvCQ: a.rcq, Local: a.mr, SendAddr: a.mr.Addr, PollAddr: a.mr.Addr + 4096 + 1,
		RemoteAddr: b.mr.Addr + 4096, RKey: b.mr.RKey, Size: 2, Iters: 20, First: true, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, <-errc)
	require.Len(t, st, 20)
	for i := 1; i < len(st); i++ {
		assert.Greater(t, st[i], st[i-1])
	}
	// The mode for memory the CPU cannot poll (GPU): WRITE_WITH_IMM, each
	// side waiting on its receive CQ.
	go func() {
		_, err := b.qp.Latency(LatArgs{SendCQ: b.scq, RecvCQ: b.rcq, Local: b.mr, SendAddr: b.mr.Addr, RemoteAddr: a.mr.Addr + 4096,
			RKey: a.mr.RKey, Size: 2, Iters: 20, UseImm: true, Timeout: 10 * time.Second})
		errc <- err
	}()
	st, err = a.qp.Latency(LatArgs{SendCQ: a.scq, RecvCQ: a.rcq, Local: a.mr, SendAddr: a.mr.Addr, RemoteAddr: b.mr.Addr + 4096,
		RKey: b.mr.RKey, Size: 2, Iters: 20, First: true, UseImm: true, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, <-errc)
	t.Logf("loopback WRITE_WITH_IMM ping-pong: %d posts, %.1f us per round trip", len(st), float64(st[len(st)-1]-st[0])/float64(len(st)-1)/1e3)
	n, _ := a.rcq.Poll(make([]WC, 4), 0, 0)
	assert.Zero(t, n, "every receive was consumed")

	el, err := a.qp.Bandwidth(BWArgs{CQ: a.scq, Op: OpWrite, Local: a.mr, LocalAddr: a.mr.Addr, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
		Size: 65536, Iters: 50, TxDepth: 16, CQMod: 8, Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Positive(t, el)
	// Through a gate of one, with a yield threshold: the run's stamps are
	// on the monotonic clock, the timed run after the warm-up.
	gate, err := NewStartGate(1)
	require.NoError(t, err)
	defer gate.Close()
	before := MonotonicNS()
	iv, err := a.qp.BandwidthSpan(BWArgs{CQ: a.scq, Op: OpWrite, Local: a.mr, LocalAddr: a.mr.Addr, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
		Size: 65536, Iters: 50, TxDepth: 16, CQMod: 8, Warmup: 8, Timeout: 10 * time.Second, YieldAfter: time.Millisecond, Gate: gate})
	require.NoError(t, err)
	assert.Greater(t, iv.Start, before)
	assert.Greater(t, iv.End, iv.Start)
	assert.LessOrEqual(t, iv.End, MonotonicNS())
	assert.Equal(t, 1, gate.arrived())
	t.Logf("loopback WRITE 64 KiB x 50: %v (%.1f MB/s)", el, 50*65536/el.Seconds()/1e6)
	// A peer that never answers: the ping-pong gives up at its deadline.
	start := time.Now()
	_, err = a.qp.Latency(LatArgs{SendCQ: a.scq, RecvCQ: a.rcq, Local: a.mr, SendAddr: a.mr.Addr, PollAddr: a.mr.Addr + 4096 + 1,
		RemoteAddr: b.mr.Addr + 4096, RKey: b.mr.RKey, Size: 2, Iters: 3, First: true, Timeout: 300 * time.Millisecond})
	var te *TimeoutError
	require.True(t, errors.As(err, &te), "%v", err)
	assert.Less(t, time.Since(start), 3*time.Second)
}

func TestDmabufProbe(t *testing.T) {
	c := device(t)
	pd := must[*PD](t)(c.AllocPD())
	s, err := pd.ProbeDmabuf()
	require.NoError(t, err)
	t.Logf("dma-buf MR probe on %s: supported=%v errno=%v: %s", c.Name, s.Supported, s.Errno, s.Reason)
	if !HasDmabuf() {
		assert.Contains(t, s.Reason, "not supported by this libibverbs")
		return
	}
	assert.NotZero(t, s.Errno)
	_, err = pd.RegDmabufMR(0, 4096, 0, -1, AccessLocalWrite)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ibv_reg_dmabuf_mr(fd -1")
}

// SetError ends a polling loop on another goroutine (harness/rc's budget
// watchdog): the loop's WRs flush and it returns a completion error
// instead of running on to its iterations.
func TestSetErrorEndsALoop(t *testing.T) {
	c := device(t)
	a, b, _ := loopPair(t, c)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := a.qp.Bandwidth(BWArgs{CQ: a.scq, Op: OpWrite, Local: a.mr, LocalAddr: a.mr.Addr, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey,
			Size: 4096, Iters: 10_000_000, TxDepth: 16, CQMod: 8, Timeout: time.Minute})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, a.qp.SetError())
	select {
	case err := <-done:
		var we *WCError
		require.True(t, errors.As(err, &we), "%v", err)
		assert.Contains(t, strings.ToLower(StatusString(we.WC.Status)), "flush", "the WRs were flushed, not completed")
		t.Logf("after SetError: %v (%v)", err, time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not end after SetError")
	}
	require.NoError(t, a.qp.SetError(), "ERR -> ERR is allowed")
}

// The start gate (no device needed): n loops on their own threads all pass
// once the last arrives; one that never comes times the others out with a
// count of who came; bad sizes are errors.
func TestStartGate(t *testing.T) {
	const n = 4
	g, err := NewStartGate(n)
	require.NoError(t, err)
	defer g.Close()
	errs := make(chan error, n)
	for range n {
		go func() { errs <- g.wait(10 * time.Second) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, n, g.arrived())

	short, err := NewStartGate(3)
	require.NoError(t, err)
	defer short.Close()
	for range 2 {
		go func() { errs <- short.wait(time.Second) }()
	}
	for range 2 {
		err := <-errs
		require.Error(t, err)
		assert.Contains(t, err.Error(), "only 2 of 3 queue pairs reached the start gate")
	}
	for _, bad := range []int{0, -1, 1025} {
		_, err := NewStartGate(bad)
		assert.ErrorContains(t, err, "want 1..1024")
	}
	short.Close()
	short.Close() // twice is safe
}

// A fabric class out of range is refused before it reaches the NIC (no
// device needed: the check comes before ibv_modify_qp).
func TestRTRClassRange(t *testing.T) {
	q := &QP{}
	for r, want := range map[Remote]string{
		{MTU: 1024, SL: 16}: "service level 16 out of range", {MTU: 1024, SL: -1}: "service level -1 out of range",
		{MTU: 1024, TC: 256}: "traffic class 256 out of range", {MTU: 1024, TC: -1}: "traffic class -1 out of range",
	} {
		err := q.RTR(r)
		require.Error(t, err, "%+v", r)
		assert.Contains(t, err.Error(), want)
	}
}

// The C side sees what the Go side forced (libmlx5 reads the C environment),
// and shim.c's guard refuses a device-memory QP on mlx5 unless mlx5dv or the
// environment turns scatter-to-CQE off: no QP can skip both.
func TestScatterToCQEGuard(t *testing.T) {
	assert.Equal(t, []mlx5Kind{mlx5Absent, mlx5Not, mlx5DV, mlx5NoDV, mlx5Unknown}, shimMLX5Kinds(), "shim.h's GDR_MLX5_* and mlx5Kind agree")
	// READ responses are scattered to the CQE only with sq_sig_all.
	assert.Zero(t, shimSQSigAll())

	resetScatterEnv(t)
	t.Setenv(ScatterEnvVar, "1")
	assert.False(t, scatterEnvOffC())
	for _, dev := range []mlx5Kind{mlx5NoDV, mlx5Unknown, mlx5DV} {
		assert.ErrorIs(t, scatterGuard(true, dev, false), syscall.EPERM, "device memory on %v without dv or env", dev)
	}
	assert.NoError(t, scatterGuard(true, mlx5DV, true))
	assert.ErrorIs(t, scatterGuard(true, mlx5NoDV, true), syscall.EPERM, "dv asked for where libmlx5 has none")
	for _, dev := range []mlx5Kind{mlx5Absent, mlx5Not} {
		assert.NoError(t, scatterGuard(true, dev, false), "not mlx5: %v", dev)
	}
	for _, dev := range []mlx5Kind{mlx5Absent, mlx5Not, mlx5DV, mlx5NoDV, mlx5Unknown} {
		assert.NoError(t, scatterGuard(false, dev, false), "host memory keeps the default: %v", dev)
	}

	// The entry point's plan forces the variable where it must; then the
	// guard passes.
	p, err := prepareScatter(membuf.GPU, mlx5NoDV, false, scatterEnvOffC())
	require.NoError(t, err)
	require.True(t, p.ForceEnv)
	assert.True(t, scatterEnvOffC(), "C getenv sees MLX5_SCATTER_TO_CQE=0")
	assert.NoError(t, scatterGuard(true, mlx5NoDV, false))
	// libmlx5 compares with "0" exactly.
	t.Setenv(ScatterEnvVar, "00")
	assert.False(t, scatterEnvOffC())
}

// Every post path decides inline from the MR: PostSend (toC, covered by
// TestInlineOnlyFromHostMemory), the latency loop (inline_ok from the same
// decision) and the bandwidth loop (never inline). shim.c sets
// IBV_SEND_INLINE in one place only, behind inline_ok.
func TestInlineNeverFromDeviceMemoryOnAnyPath(t *testing.T) {
	q := &QP{MaxInline: 64, SQDepth: 8}
	cq := &CQ{}
	host := &MR{Addr: 0x10000, Len: 8192, LKey: 1, Mem: membuf.Host, Path: PathHost}
	for _, c := range []struct {
		mr   *MR
		size int
		want bool
	}{
		{host, 2, true}, {host, 64, true}, {host, 65, false},
		{&MR{Addr: 0x7f0000000000, Len: 8192, LKey: 2, Mem: membuf.GPU, Path: PathPeermem}, 2, false},
		{&MR{Addr: 0x7f0000000000, Len: 8192, LKey: 3, Mem: membuf.GPU, Path: PathDmabuf}, 2, false},
	} {
		got, err := q.latInline(LatArgs{SendCQ: cq, RecvCQ: cq, Local: c.mr, SendAddr: c.mr.Addr, Size: c.size, Iters: 4, UseImm: true})
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "latency from %s/%s, %d bytes", c.mr.Mem, c.mr.Path, c.size)
	}
	// Polling mode on device memory is refused (perftest: device-memory
	// WRITE latency needs --write_with_imm).
	_, err := q.latInline(LatArgs{SendCQ: cq, RecvCQ: cq, Local: &MR{Addr: 1 << 40, Len: 64, Mem: membuf.GPU, Path: PathPeermem}, SendAddr: 1 << 40, Size: 2, Iters: 4})
	assert.ErrorContains(t, err, "polling mode needs CPU-readable host memory")

	src := readSource(t, "shim.c")
	var lines []string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.Contains(l, "IBV_SEND_INLINE") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	require.Len(t, lines, 1, "shim.c sets IBV_SEND_INLINE in exactly one place: %q", lines)
	assert.Contains(t, lines[0], "a->inline_ok ? IBV_SEND_INLINE : 0")
}

// Relaxed ordering is an optional access flag: RegMR passes it through
// ibv_reg_mr_iova2 (rdma-core drops it where unsupported), plain access
// through ibv_reg_mr.
func TestRelaxedOrderingEntryPoint(t *testing.T) {
	loaded(t)
	require.True(t, hasIova2(), "libibverbs of rdma-core >= 24 exports ibv_reg_mr_iova2")
	assert.True(t, regMRUsesIova2(AccessRW|AccessRelaxed))
	assert.False(t, regMRUsesIova2(AccessRW))
	assert.NotZero(t, AccessRelaxed&accessOptionalRange, "relaxed ordering is in the optional range")
}

// The fd=-1 probe's answers, as NCCL reads them.
func TestDmabufProbeAnswer(t *testing.T) {
	d, err := dmabufProbeAnswer(syscall.EBADF, "mlx5_0")
	require.NoError(t, err)
	assert.True(t, d.Supported)
	for _, en := range []syscall.Errno{syscall.EOPNOTSUPP, syscall.EPROTONOSUPPORT, syscall.ENOSYS} {
		d, err = dmabufProbeAnswer(en, "rxe0")
		require.NoError(t, err)
		assert.False(t, d.Supported || d.Inconclusive, "%v", en)
		assert.Contains(t, d.Reason, "rxe0")
	}
	d, err = dmabufProbeAnswer(syscall.EINVAL, "mlx5_0")
	require.NoError(t, err)
	assert.True(t, d.Inconclusive)
	assert.False(t, d.Supported)
	_, err = dmabufProbeAnswer(syscall.EIO, "mlx5_0")
	assert.ErrorContains(t, err, "unexpected answer")
}

// The real probe, on stand-in devices: before libmlx5 is loaded an rxe
// device is no mlx5 and an mlx5-named one is taken as mlx5 without mlx5dv
// (the environment path); once libmlx5.so.1 is loaded, as libibverbs loads
// it for an mlx5 NIC, mlx5dv_is_supported answers (no, for a device of no
// provider) through the symbols the QP path uses.
func TestMLX5Probe(t *testing.T) {
	loaded(t)
	if !mlx5Loaded() {
		assert.Equal(t, mlx5Absent, probeStandin("rxe0"))
		assert.Equal(t, mlx5Unknown, probeStandin("mlx5_0"), "an mlx5-named device without libmlx5 loaded")
	} else {
		t.Log("libmlx5.so.1 already loaded in this process: the not-loaded answers are not exercised")
	}
	if !loadMLX5() {
		t.Skip("libmlx5.so.1 does not load here (ibverbs-providers not installed)")
	}
	for _, name := range []string{"rxe0", "mlx5_0"} {
		assert.Equal(t, mlx5Not, probeStandin(name), "%s is a stand-in of no provider: mlx5dv_is_supported says no", name)
	}
	assert.True(t, mlx5HasDV(), "libmlx5 of rdma-core >= 17 exports mlx5dv_create_qp")
}

// QueryPort's conversion reads ibv_port_attr.flags: IBV_QPF_GRH_REQUIRED
// becomes GRHRequired, on a struct filled as a provider fills it (no device
// needed). The Go constant is the headers' value.
func TestPortFlags(t *testing.T) {
	p, qpf := portAttrOf(LinkLayerIB, QPFGRHRequired)
	require.NotZero(t, qpf, "these headers define IBV_QPF_GRH_REQUIRED (rdma-core 20 or later)")
	assert.Equal(t, QPFGRHRequired, qpf)
	assert.True(t, p.FlagsRead)
	assert.True(t, p.GRHRequired)
	assert.Equal(t, uint8(QPFGRHRequired), p.Flags)
	assert.Equal(t, "InfiniBand", p.LinkLayer)
	assert.Equal(t, uint16(7), p.LID)
	assert.Equal(t, 4096, p.ActiveMTU)

	p, _ = portAttrOf(LinkLayerIB, 0)
	assert.True(t, p.FlagsRead)
	assert.False(t, p.GRHRequired)
	p, _ = portAttrOf(LinkLayerEthernet, 0)
	assert.Equal(t, "Ethernet", p.LinkLayer)
	assert.False(t, p.GRHRequired)
}
