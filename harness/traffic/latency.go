//go:build rdma

package traffic

import (
	"fmt"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/stats"
)

const (
	// LatSize is ib_write_lat's default message size.
	LatSize = 2
	// LatRegion is each half of a latency buffer (one sends, one is
	// written): the buffer holds 2*LatRegion bytes.
	LatRegion = 4096
)

// LatResult is a latency run: the client's numbers with the p50 ceiling
// that applies (rc.End.LatCeiling).
type LatResult struct {
	Lat  stats.Latency
	Ceil rc.LatCeiling
}

// Log is the run's line for the test log.
func (r LatResult) Log() string {
	l := r.Lat
	return fmt.Sprintf("WRITE %d B latency (one way, us): p50 %.2f p99 %.2f p99.9 %.2f min %.2f max %.2f over %d round trips",
		LatSize, stats.US(l.P50), stats.US(l.P99), stats.US(l.P999), stats.US(l.Min), stats.US(l.Max), l.N)
}

// Latency measures LatSize-byte RDMA WRITE round trips on connected ends
// (buffers of at least 2*LatRegion bytes), records them on the ends and
// returns the client's numbers; the caller decides whether to enforce the
// ceiling. forceImm waits on WRITE_WITH_IMM completions even on host
// memory, so host and GPU runs are timed the same way.
func Latency(ends []*rc.End, forceImm bool) (LatResult, []error) {
	var res LatResult
	errs := rc.Each(ends, func(e *rc.End) error {
		// Host memory: poll the last byte like ib_write_lat. Memory the CPU
		// cannot poll (GPU) waits on WRITE_WITH_IMM completions.
		useImm := forceImm || !e.Host() || e.Peer.Mem != string(membuf.Host)
		l, err := latencyEnd(e, useImm)
		if err != nil {
			return err
		}
		if e.Role == "client" || len(ends) == 1 {
			res = LatResult{Lat: l, Ceil: e.LatCeiling(!useImm)}
		}
		return nil
	})
	return res, errs
}

// latencyEnd is one end's run: round trips on the NIC's CPUs, then the
// client's numbers, which both sides report (the side that started).
func latencyEnd(e *rc.End, useImm bool) (stats.Latency, error) {
	if err := e.FillPoison(2*LatRegion, 0); err != nil {
		return stats.Latency{}, err
	}
	iters := e.Cfg.Iters + 1 // n+1 posts give n round trips
	pre, err := prepost(e, useImm, iters)
	if err != nil {
		return stats.Latency{}, err
	}
	if err := e.Sess.Barrier("lat start", 0); err != nil {
		return stats.Latency{}, err
	}
	l, err := roundTrips(e, useImm, iters, pre)
	if err != nil {
		return stats.Latency{}, err
	}
	r, err := e.Sess.ExchangeResult(resultOf("latency", l))
	if err != nil {
		return stats.Latency{}, err
	}
	if e.Role == "server" {
		l = latencyOf(r)
	}
	latencyAttrs(e, l, useImm)
	return l, nil
}

// prepost posts the receives of a WRITE_WITH_IMM run before the barrier:
// the peer's first write finds one (else an RNR NAK, which HLTH-01 would
// count). It returns how many.
func prepost(e *rc.End, useImm bool, iters int) (int, error) {
	if !useImm {
		return 0, nil
	}
	pre := 0
	for pre < verbs.LatRecvs(iters) {
		if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(pre)}); err != nil {
			return pre, err
		}
		pre++
	}
	return pre, nil
}

func roundTrips(e *rc.End, useImm bool, iters, pre int) (stats.Latency, error) {
	mr, remote := e.MR(), e.Remote()
	var stamps []int64
	err := e.OnNICCPUs(func() (err error) {
		stamps, err = e.QP.Latency(verbs.LatArgs{SendCQ: e.SCQ, RecvCQ: e.RCQ, Local: mr, SendAddr: mr.Addr,
			PollAddr: mr.Addr + LatRegion + LatSize - 1, RemoteAddr: remote.Addr + LatRegion, RKey: remote.RKey,
			Size: LatSize, Iters: iters, First: e.Role == "client", UseImm: useImm, Preposted: pre, Timeout: e.Timeout()})
		return err
	})
	if err != nil {
		return stats.Latency{}, err
	}
	return stats.Summarize(deltas(stamps), true)
}

// deltas are the round trips between consecutive time stamps.
func deltas(stamps []int64) []time.Duration {
	rt := make([]time.Duration, max(len(stamps)-1, 0))
	for i := range rt {
		rt[i] = time.Duration(stamps[i+1] - stamps[i])
	}
	return rt
}

func latencyAttrs(e *rc.End, l stats.Latency, useImm bool) {
	e.Attr("lat_us_p50", stats.US(l.P50))
	e.Attr("lat_us_p99", stats.US(l.P99))
	e.Attr("lat_us_p999", stats.US(l.P999))
	e.Attr("lat_us_min", stats.US(l.Min))
	e.Attr("lat_us_max", stats.US(l.Max))
	e.Attr("iters", l.N)
	e.Attr("size_bytes", LatSize)
	e.Attr("lat_mode", latMode(useImm))
	e.Attr("mr_path", e.MR().Path)
}

func latMode(useImm bool) string {
	if useImm {
		return "write_with_imm+cq"
	}
	return "write+poll_last_byte"
}

func resultOf(name string, l stats.Latency) oob.Result {
	return oob.Result{Name: name, OK: true, Values: map[string]float64{
		"p50": float64(l.P50), "p99": float64(l.P99), "p999": float64(l.P999), "min": float64(l.Min), "max": float64(l.Max), "n": float64(l.N)}}
}

func latencyOf(r oob.Result) stats.Latency {
	v := r.Values
	return stats.Latency{P50: time.Duration(v["p50"]), P99: time.Duration(v["p99"]), P999: time.Duration(v["p999"]),
		Min: time.Duration(v["min"]), Max: time.Duration(v["max"]), N: int(v["n"])}
}

// LatRemedy is what a latency failure tells the operator to look at.
const LatRemedy = "check the path between NIC and memory (PCIe topology, GDR_MAX_PATH), NIC firmware, CPU placement (gdr.poll_cpus) and the fabric; or set GDR_MAX_LAT_US / GDR_MAX_LAT_P99_US / GDR_MAX_LAT_P999_US"

// p999Iters is how many round trips make a p99.9 worth judging.
const p999Iters = 10000

// JudgeLatency holds r against its p50 ceiling and the tail ceilings
// maxP99 and maxP999 (GDR_MAX_LAT_P99_US, GDR_MAX_LAT_P999_US; 0: twice
// and four times the p50 ceiling). No p50 ceiling, no judgement; p99.9 is
// judged from p999Iters round trips.
func JudgeLatency(r LatResult, maxP99, maxP999 float64) Judgement {
	var v Judgement
	lat, ceil := r.Lat, r.Ceil
	threshold, thrWhy := ceil.US, ceil.Why
	v.attr("threshold_source", thrWhy)
	if ceil.Kind != "" {
		v.attr("max_lat_kind", ceil.Kind) // which memory kind's ceiling applied
		v.attr("max_lat_source", ceil.Source)
	}
	if threshold <= 0 {
		return v
	}
	p99, p999 := tailCeilings(threshold, maxP99, maxP999)
	v.attr("max_lat_us_p50", threshold)
	v.attr("max_lat_us_p99", p99)
	if stats.US(lat.P50) > threshold {
		v.fail(false, LatRemedy, "lat_us_p50", "max_lat_us_p50", "WRITE %d B latency p50 %.2f us is above the %.2f us ceiling (%s)", LatSize, stats.US(lat.P50), threshold, thrWhy)
	}
	if stats.US(lat.P99) > p99 {
		v.fail(false, LatRemedy, "lat_us_p99", "max_lat_us_p99", "WRITE %d B latency p99 %.2f us is above the %.2f us tail ceiling (p50 %.2f us): the tail shows jitter the median hides", LatSize, stats.US(lat.P99), p99, stats.US(lat.P50))
	}
	if lat.N < p999Iters {
		v.attr("p999_judged", fmt.Sprintf("no: %d round trips, p99.9 needs 10000 (GDR_ITERS)", lat.N))
		return v
	}
	v.attr("max_lat_us_p999", p999)
	if stats.US(lat.P999) > p999 {
		v.fail(false, LatRemedy, "lat_us_p999", "max_lat_us_p999", "WRITE %d B latency p99.9 %.2f us is above the %.2f us ceiling", LatSize, stats.US(lat.P999), p999)
	}
	return v
}

// tailCeilings are the p99 and p99.9 ceilings: the configured ones, else
// twice and four times the p50 ceiling.
func tailCeilings(p50, maxP99, maxP999 float64) (p99, p999 float64) {
	p99, p999 = maxP99, maxP999
	if p99 <= 0 {
		p99 = 2 * p50
	}
	if p999 <= 0 {
		p999 = 4 * p50
	}
	return p99, p999
}
