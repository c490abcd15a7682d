//go:build rdma

package traffic

import (
	"fmt"
	"sync"
	"time"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// stall is the longest a bandwidth run may go without a completion:
// GDR_TIMEOUT plus the data between two completions (one signaled WR in
// CQMod) at rc's pessimistic rate. On a lossy or loaded link 100 WRs of
// 1 MiB take far longer than a small message's round trip.
func stall(e *rc.End, td, size int) time.Duration {
	return e.WaitBudget(int64(min(CQMod, td)) * int64(size))
}

// SoftwareBytesPerPoint is the most a software device's bandwidth point
// moves per queue pair and direction. rxe's rate is the host CPU's (lab:
// 0.03 Gbit/s at 1 MiB under LAB_LOAD=2), so GDR_BW_ITERS x 1 MiB took 59 s
// one way and, both ways, ran into the test binary's deadline after 176 of
// 200 iterations (issue 17, the fault matrix's load case); 64 MiB is 17 s
// at that rate, still hundreds of WRs at the small sizes, and what
// make lab-bench moves per point beside perftest (64 x 1 MiB, 1000 x
// 64 KiB), which therefore compares equal work as before. A hardware NIC
// moves GDR_BW_ITERS at line rate and keeps them.
const SoftwareBytesPerPoint = 64 << 20

// PointIters is the WRs a bandwidth point of size-byte WRs posts per queue
// pair: GDR_BW_ITERS (cfg), and on a software device no more than
// SoftwareBytesPerPoint's worth, never fewer than 8 (a warm-up and a
// steady state).
func PointIters(cfg, size int, software bool) int {
	if !software || size <= 0 {
		return cfg
	}
	return max(1, min(cfg, max(8, SoftwareBytesPerPoint/size)))
}

func pointIters(e *rc.End, size int) int { return PointIters(e.Cfg.BWIters, size, e.Software) }

// loopArgs are a measured bandwidth loop's settings, like perftest's:
// pointIters WRs (GDR_BW_ITERS) of size bytes after a warm-up of a tenth of them (at
// most td), td in flight, one signaled in CQMod, bounded by stall (the
// caller sets the CQ).
func loopArgs(e *rc.End, op verbs.Opcode, mr *verbs.MR, laddr, raddr uint64, rkey uint32, size, td int, yield time.Duration) verbs.BWArgs {
	iters := pointIters(e, size)
	return verbs.BWArgs{Op: op, Local: mr, LocalAddr: laddr, RemoteAddr: raddr,
		RKey: rkey, Size: size, Iters: iters, TxDepth: td, CQMod: min(CQMod, td),
		Warmup: min(td, iters/10), Timeout: stall(e, td, size), YieldAfter: yield}
}

// allQPs runs a bandwidth loop on every queue pair of e at once, each on
// its own thread with its own send CQ, on the NIC's local CPUs (perftest -q
// posts round-robin from one thread; separate threads keep the C loop
// unchanged and scale the same on a real NIC). With several queue pairs the
// loops wait at a start gate after their warm-ups, and the time returned is
// the union of their runs, earliest first post to latest last completion:
// the aggregate rate is all bytes over one clock, as perftest -q measures
// it, not over the longest single run.
func allQPs(e *rc.End, a verbs.BWArgs) (time.Duration, error) {
	ivs := make([]stats.Interval, len(e.QPs))
	errs := make([]error, len(e.QPs))
	if len(e.QPs) > 1 {
		gate, err := verbs.NewStartGate(len(e.QPs))
		if err != nil {
			return 0, err
		}
		defer gate.Close() // after every loop has returned (wg.Wait)
		a.Gate = gate
	}
	var wg sync.WaitGroup
	for i, qp := range e.QPs {
		wg.Go(func() {
			aa := a
			aa.CQ = e.SCQs[i]
			errs[i] = e.OnNICCPUs(func() (err error) {
				ivs[i], err = qp.BandwidthSpan(aa)
				return err
			})
		})
	}
	wg.Wait()
	return span(ivs, errs)
}

// span is the union of the queue pairs' runs, or the first one's error.
func span(ivs []stats.Interval, errs []error) (time.Duration, error) {
	for i, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("queue pair %d of %d: %w", i, len(errs), err)
		}
	}
	u, err := stats.Union(ivs)
	return u.Duration(), err
}

// readRTTIters READs of one size, one in flight at a time, time the round
// trip of the outstanding-read bound on a hardware NIC (about 100 us in
// all); a software device gets no floor, and 4 keep the lab's rxe (tens
// of milliseconds per READ under qemu) from paying for the attribute.
const readRTTIters, readRTTItersSoft = 32, 4

func rttIters(software bool) int {
	if software {
		return readRTTItersSoft
	}
	return readRTTIters
}

// readRTT is the mean time from post to completion of one size-byte READ
// with nothing else in flight (the first queue pair, after one untimed
// READ). Posting and polling are inside it, so it errs long and the bound
// low: the floor it lowers is never above what the path allows.
func readRTT(e *rc.End, mr *verbs.MR, laddr, raddr uint64, rkey uint32, size int) (time.Duration, error) {
	rtt, err := roundTrip(e, verbs.OpRead, mr, laddr, raddr, rkey, size)
	if err != nil {
		return 0, fmt.Errorf("READ round trip at %d B (one in flight, for the outstanding-read bound): %w", size, err)
	}
	return rtt, nil
}

// roundTrip is the mean time from post to completion of one size-byte op
// with nothing else in flight on the first queue pair, after one untimed.
func roundTrip(e *rc.End, op verbs.Opcode, mr *verbs.MR, laddr, raddr uint64, rkey uint32, size int) (time.Duration, error) {
	n := rttIters(e.Software)
	var el time.Duration
	err := e.OnNICCPUs(func() (err error) {
		el, err = e.QP.Bandwidth(verbs.BWArgs{CQ: e.SCQ, Op: op, Local: mr, LocalAddr: laddr, RemoteAddr: raddr,
			RKey: rkey, Size: size, Iters: n, TxDepth: 1, CQMod: 1, Warmup: 1, Timeout: stall(e, 1, size)})
		return err
	})
	return el / time.Duration(n), err
}
