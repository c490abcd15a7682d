//go:build rdma

package traffic

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/stats"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// ConcurrentFraction: a rail running beside all others must keep this
// share of its bandwidth alone (PP-08). Rails that share a switch uplink or
// a root port fall below it first, which is what PP-10 exists to show; a
// healthy 8-rail host keeps each rail near its solo rate.
const ConcurrentFraction = 0.8

// RailResult is one rail's part of the all-rails run.
type RailResult struct {
	Rail    *rails.Rail
	Gbps    float64
	Elapsed time.Duration
	Soft    bool // a software device: its rate is the CPU's
	Err     error
}

// NeedRails is nil when run holds two or more rails, the fewest an
// all-rails measurement (PP-10) compares; otherwise an absent finding
// naming the rails there are.
func NeedRails(run []*rails.Rail) error {
	if len(run) >= 2 {
		return nil
	}
	names := make([]string, len(run))
	for i, r := range run {
		names[i] = r.String()
	}
	return verdict.Absentf("select two or more rails (GDR_RAILS) on a host that has them", "all-rails bandwidth needs two or more rails (GPU+NIC pairs), and this run has %d (%s); rails come from testenv.Selection (GDR_RAILS)",
		len(run), strings.Join(names, ", "))
}

// AllRails measures size-byte WRITE bandwidth on every rail's connection
// (conns[i] is run[i]'s ends) at once and returns each rail's result with
// the wall time of the whole run.
func AllRails(conns [][]*rc.End, run []*rails.Rail, size int) ([]RailResult, time.Duration) {
	res := make([]RailResult, len(run))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range run {
		wg.Go(func() {
			res[i] = MeasureRail(conns[i], run[i], size)
		})
	}
	wg.Wait()
	return res, time.Since(start)
}

// MeasureRail runs one rail's WRITE bandwidth with both ends (loopback) or
// this host's end, as PP-08 does, and returns the client's rate.
func MeasureRail(ends []*rc.End, r *rails.Rail, size int) RailResult {
	out := RailResult{Rail: r, Soft: ends[0].Software}
	var mu sync.Mutex
	errs := rc.Each(ends, func(e *rc.End) error {
		res, err := railEnd(e, size)
		if err != nil {
			return err
		}
		mu.Lock()
		out.Gbps, out.Elapsed = res.Values["gbps"], time.Duration(res.Values["ns"])
		mu.Unlock()
		return nil
	})
	for i, err := range errs {
		if err != nil {
			out.Err = fmt.Errorf("%s: %w", ends[i].Role, err)
			break
		}
	}
	return out
}

// railEnd is one end's part of a rail's run: the client measures, both
// return the client's result.
func railEnd(e *rc.End, size int) (oob.Result, error) {
	step := fmt.Sprintf("all rails %d", size)
	if err := e.Sess.Barrier(step, 0); err != nil {
		return oob.Result{}, err
	}
	res := oob.Result{Name: step, OK: true}
	if e.Role == "client" {
		var err error
		if res, err = railPost(e, step, size); err != nil {
			return oob.Result{}, err
		}
	}
	restore := e.Sess.Within(e.WaitBudget(int64(size) * int64(pointIters(e, size))))
	peer, err := e.Sess.ExchangeResult(res)
	restore()
	if err != nil {
		return oob.Result{}, err
	}
	if e.Role == "server" {
		res = peer
	}
	return res, nil
}

func railPost(e *rc.End, step string, size int) (oob.Result, error) {
	td := min(e.Cfg.TxDepth, e.QP.SQDepth)
	mr, remote := e.MR(), e.Remote()
	stop := e.Sess.Heartbeat()
	var el time.Duration
	err := e.OnNICCPUs(func() (err error) {
		a := loopArgs(e, verbs.OpWrite, mr, mr.Addr, remote.Addr, remote.RKey, size, td, e.YieldAfter(size, min(CQMod, td)))
		a.CQ = e.SCQ
		el, err = e.QP.Bandwidth(a)
		return err
	})
	stop()
	if err != nil {
		return oob.Result{}, err
	}
	return oob.Result{Name: step, OK: true, Values: map[string]float64{"gbps": stats.Gbps(int64(size)*int64(pointIters(e, size)), el), "ns": float64(el)}}, nil
}

// RailSum is the sum of the rates of the rails that ran without error and
// the bytes they moved (iters WRs of size bytes each, PointIters of them on
// a software device).
func RailSum(res []RailResult, size, iters int) (gbps float64, bytes int64) {
	for _, r := range res {
		if r.Err != nil {
			continue
		}
		gbps += r.Gbps
		bytes += int64(size) * int64(PointIters(iters, size, r.Soft))
	}
	return gbps, bytes
}

// RailRemedy is what a rail slowed by the others tells the operator.
const RailRemedy = "check the PCIe uplink these NICs share (lspci -vvv on the root port and switch: width, speed) and the NIC placement; a rail alone is PP-08"

// JudgeRail compares r's rate beside the others (rails rails in all) with
// its rate alone (known: PP-08 measured it in this run). sharing names the
// rails sharing its root port (Sharing), asked only for a failure.
func JudgeRail(r RailResult, alone float64, known bool, rails int, sharing func() string) Judgement {
	var v Judgement
	v.attr("bw_gbit_s", r.Gbps)
	if !known {
		v.attr("threshold_source", "reported only: PP-08 did not measure this rail alone in this run")
		return v
	}
	ratio := ratio(r.Gbps, alone)
	v.attr("bw_gbit_s_alone", alone)
	v.attr("bw_ratio_concurrent", ratio)
	if r.Soft {
		v.attr("threshold_source", "no threshold: software device, its rate is the CPU's")
		return v
	}
	v.attr("min_bw_ratio", ConcurrentFraction)
	if ratio < ConcurrentFraction {
		v.fail(true, RailRemedy, "bw_ratio_concurrent", "min_bw_ratio", "rail %d (%s) keeps %.0f%% of its bandwidth alone (%.2f of %.2f Gb/s) while all %d rails run, below %.0f%%; %s",
			r.Rail.Index, r.Rail.NIC, 100*ratio, r.Gbps, alone, rails, 100*ConcurrentFraction, sharing())
	}
	return v
}

// Sharing names the rails of run whose NICs hang off the same root port
// as rail i's (their traffic shares that uplink to the CPU); chain is a PCI
// function's path from its root port down (topo.Index), nil when unknown.
func Sharing(run []*rails.Rail, i int, chain func(bdf string) []string) string {
	root := func(r *rails.Rail) string {
		if r.NIC == nil || r.NIC.PCI == "" {
			return ""
		}
		if c := chain(r.NIC.PCI); len(c) > 1 {
			return c[0]
		}
		return ""
	}
	mine := root(run[i])
	var same []string
	for j, r := range run {
		if j != i && mine != "" && root(r) == mine {
			same = append(same, fmt.Sprintf("rail %d (%s)", r.Index, r.NIC))
		}
	}
	if len(same) == 0 {
		return "no other rail shares its root port"
	}
	return "it shares root port " + mine + " with " + strings.Join(same, ", ")
}

// SharingIn is Sharing on the PCI tree ix.
func SharingIn(run []*rails.Rail, i int, ix *topo.Index) string {
	return Sharing(run, i, func(bdf string) []string {
		if d := ix.Device(bdf); d != nil {
			return d.Chain
		}
		return nil
	})
}
