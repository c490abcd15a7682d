//go:build rdma

// perftest-style latency and bandwidth loops that run in C, and the gate that starts them together.

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/gdrconf/gdrconf/internal/stats"
)

// LatArgs drive a perftest-style WRITE latency ping-pong run in C.
type LatArgs struct {
	SendCQ, RecvCQ *CQ
	Local          *MR
	SendAddr       uint64 // what we write from; its last byte carries the tag
	PollAddr       uint64 // host byte the peer's write tags (ignored with UseImm)
	RemoteAddr     uint64
	RKey           uint32
	Size           int
	Iters          int
	First          bool // this side posts first (client)
	UseImm         bool // wait on RECV_RDMA_WITH_IMM completions (non-host memory)
	// Preposted (UseImm) is how many zero-length receives the caller posted
	// before the barrier it passes with the peer: min(2, Iters) (LatRecvs)
	// closes the race where the peer's first write arrives before this
	// side's loop posts its receives (an RNR NAK the NIC counts). 0: the
	// loop posts them itself.
	Preposted int
	Timeout   time.Duration
}

// LatRecvs is how many receives a WRITE_WITH_IMM latency run of iters
// keeps posted (LatArgs.Preposted).
func LatRecvs(iters int) int { return min(2, iters) }

// Latency runs the ping-pong; it returns the post timestamps (ns), so
// consecutive differences are round trips.
func (q *QP) Latency(a LatArgs) ([]int64, error) {
	ca, err := q.latArgs(a)
	if err != nil {
		return nil, err
	}
	stamps := make([]int64, a.Iters)
	var st, done C.int
	rc := C.gdr_lat(&ca, (*C.int64_t)(unsafe.Pointer(&stamps[0])), &st, &done)
	return stamps, q.runErr("latency ping-pong", rc, st, int(done), a.Iters, a.Timeout)
}

// latArgs checks a and builds the C loop's arguments, inline_ok included:
// the loop posts IBV_SEND_INLINE exactly when inline_ok is set.
func (q *QP) latArgs(a LatArgs) (C.gdr_lat_args, error) {
	var ca C.gdr_lat_args
	if a.Iters < 1 || a.Size < 1 {
		return ca, fmt.Errorf("latency: iters %d and size %d must be >= 1", a.Iters, a.Size)
	}
	if a.Local == nil {
		return ca, fmt.Errorf("latency: no local MR")
	}
	if _, err := sge("latency send buffer", a.Local, a.SendAddr, uint32(a.Size)); err != nil {
		return ca, err
	}
	// Polling mode tags the send buffer's last byte and spins on PollAddr
	// from the CPU: host memory only.
	if !a.UseImm && !a.Local.CPUReadable() {
		return ca, fmt.Errorf("latency: polling mode needs CPU-readable host memory, the MR is %s memory (%s): use WRITE_WITH_IMM completions (UseImm)", a.Local.Mem, a.Local.Path)
	}
	ca = C.gdr_lat_args{qp: q.qp, laddr: C.uint64_t(a.SendAddr), lkey: C.uint32_t(a.Local.LKey),
		poll_addr: C.uint64_t(a.PollAddr), raddr: C.uint64_t(a.RemoteAddr), rkey: C.uint32_t(a.RKey), size: C.uint32_t(a.Size),
		iters: C.int32_t(a.Iters), sq_depth: C.int32_t(q.SQDepth), timeout_ns: C.int64_t(a.Timeout)}
	if a.SendCQ == nil || (a.UseImm && a.RecvCQ == nil) {
		return ca, fmt.Errorf("latency: no send CQ, or WRITE_WITH_IMM completions without a receive CQ")
	}
	ca.scq = a.SendCQ.cq
	if a.RecvCQ != nil {
		ca.rcq = a.RecvCQ.cq
	}
	if a.First {
		ca.first = 1
	}
	if a.UseImm {
		ca.use_imm = 1
		if a.Preposted < 0 || a.Preposted > LatRecvs(a.Iters) {
			return ca, fmt.Errorf("latency: %d receives preposted, want 0..%d", a.Preposted, LatRecvs(a.Iters))
		}
		ca.preposted = C.int32_t(a.Preposted)
	}
	if inline(OpWrite, a.Local, uint32(a.Size), q.MaxInline) {
		ca.inline_ok = 1
	}
	return ca, nil
}

// latInline is whether Latency would post inline (for tests).
func (q *QP) latInline(a LatArgs) (bool, error) {
	ca, err := q.latArgs(a)
	return ca.inline_ok != 0, err
}

func (q *QP) runErr(what string, rc, st C.int, done, iters int, to time.Duration) error {
	switch {
	case rc == 0:
		return nil
	case syscall.Errno(rc) == syscall.ETIMEDOUT:
		return &TimeoutError{What: fmt.Sprintf("%s (after %d of %d iterations)", what, done, iters), Timeout: to, Got: done, Want: iters}
	case st >= 0:
		return &WCError{WC: WC{Status: int(st)}, What: fmt.Sprintf("%s (after %d of %d iterations)", what, done, iters)}
	}
	return verr(what, rc, "")
}

// BWArgs drive a perftest-style bandwidth run in C.
type BWArgs struct {
	CQ         *CQ
	Op         Opcode
	Local      *MR
	LocalAddr  uint64
	RemoteAddr uint64
	RKey       uint32
	Size       int
	Iters      int
	TxDepth    int
	CQMod      int
	Warmup     int           // untimed WRs posted (and completed) first
	Timeout    time.Duration // longest time without progress
	// YieldAfter is how long a wait for a completion spins before it
	// yields the CPU (0: 20 us, the software-device setting); harness/rc
	// sets it from the device and the port rate (rc.YieldAfter).
	YieldAfter time.Duration
	// Gate, when set, holds the timed run until every loop of the gate has
	// finished its warm-up (one clock for several queue pairs).
	Gate *StartGate
}

// Bandwidth posts Iters WRs as ib_write_bw does and returns the time from
// the first post to the last completion.
func (q *QP) Bandwidth(a BWArgs) (time.Duration, error) {
	iv, err := q.BandwidthSpan(a)
	return iv.Duration(), err
}

// BandwidthSpan is Bandwidth returning the run's first post and last
// completion on CLOCK_MONOTONIC, so runs on several threads can be put on
// one clock (stats.Union).
func (q *QP) BandwidthSpan(a BWArgs) (stats.Interval, error) {
	if a.Iters < 1 || a.Size < 1 || a.TxDepth < 1 || a.TxDepth > q.SQDepth {
		return stats.Interval{}, fmt.Errorf("bandwidth: iters %d, size %d, tx depth %d (send queue %d) out of range", a.Iters, a.Size, a.TxDepth, q.SQDepth)
	}
	if _, err := sge("bandwidth buffer", a.Local, a.LocalAddr, uint32(a.Size)); err != nil {
		return stats.Interval{}, err
	}
	ca := C.gdr_bw_args{qp: q.qp, scq: a.CQ.cq, opcode: C.int32_t(a.Op), laddr: C.uint64_t(a.LocalAddr), lkey: C.uint32_t(a.Local.LKey),
		raddr: C.uint64_t(a.RemoteAddr), rkey: C.uint32_t(a.RKey), size: C.uint32_t(a.Size), iters: C.int32_t(a.Iters),
		tx_depth: C.int32_t(a.TxDepth), cq_mod: C.int32_t(a.CQMod), warmup: C.int32_t(max(a.Warmup, 0)), timeout_ns: C.int64_t(a.Timeout),
		yield_after_ns: C.int64_t(max(a.YieldAfter, 0))}
	if a.Gate != nil {
		ca.gate, ca.gate_n = a.Gate.p, C.int32_t(a.Gate.n)
	}
	var start, end C.int64_t
	var st, done C.int
	rc := C.gdr_bw(&ca, &start, &end, &st, &done)
	what := fmt.Sprintf("%v bandwidth", a.Op)
	if a.Gate != nil && syscall.Errno(rc) == syscall.ETIME {
		return stats.Interval{}, a.Gate.timeout(what, a.Timeout)
	}
	return stats.Interval{Start: int64(start), End: int64(end)}, q.runErr(what, rc, st, int(done), a.Iters, a.Timeout)
}

// MonotonicNS is the C side's clock (CLOCK_MONOTONIC, ns): the one
// BandwidthSpan's stamps are on.
func MonotonicNS() int64 { return int64(C.gdr_now_ns()) }

// StartGate lets the bandwidth loops of n queue pairs (one thread each)
// begin their timed runs together, after every warm-up: perftest -q posts
// all its QPs from one loop, so they start at once. Its counter is C
// memory (cgo may not keep a Go pointer inside the argument struct).
type StartGate struct {
	p *C.int32_t
	n int
}

// NewStartGate makes a gate for n loops; Close frees it after they return.
func NewStartGate(n int) (*StartGate, error) {
	if n < 1 || n > 1024 {
		return nil, fmt.Errorf("start gate for %d loops: want 1..1024", n)
	}
	p := (*C.int32_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int32_t(0)))))
	if p == nil {
		return nil, errors.New("start gate: calloc failed")
	}
	return &StartGate{p: p, n: n}, nil
}

// Close frees the gate; safe to call twice, not while a loop waits on it.
func (g *StartGate) Close() {
	if g != nil && g.p != nil {
		C.free(unsafe.Pointer(g.p))
		g.p = nil
	}
}

// arrived is how many loops have reached the gate.
func (g *StartGate) arrived() int {
	return int(C.gdr_gate_count(g.p))
}

// wait arrives at the gate from Go (tests); nil or a timeout naming the
// loops that came.
func (g *StartGate) wait(timeout time.Duration) error {
	if C.gdr_gate_wait(g.p, C.int32_t(g.n), C.int64_t(timeout)) != 0 {
		return g.timeout("start gate", timeout)
	}
	return nil
}

func (g *StartGate) timeout(what string, to time.Duration) error {
	return fmt.Errorf("%s: only %d of %d queue pairs reached the start gate within %v (a warm-up stalled on another queue pair; see its error)",
		what, g.arrived(), g.n, to)
}
