//go:build rdma

package pingpong

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// concurrentFraction: a rail running beside all others must keep this
// share of its bandwidth alone (PP-08). Rails that share a switch uplink or
// a root port fall below it first, which is what this test exists to show;
// a healthy 8-rail host keeps each rail near its solo rate.
const concurrentFraction = 0.8

// railResult is one rail's part of the all-rails run.
type railResult struct {
	rail    *rails.Rail
	gbps    float64
	elapsed time.Duration
	soft    bool
	err     error
}

// PP-10: RDMA WRITE bandwidth on every rail at once. Each rail connects on
// its own out-of-band port (GDR_LISTEN + 1 + rail), then all measure
// together; the per-rail rates are compared with each rail's rate alone.
func TestPP10AllRails(t *testing.T) {
	testenv.Req(t, "PP-10")
	cfg := testenv.Config(t)
	rs := rc.Rails(t)
	rc.NeedNIC(t, rs)
	run, missing := rc.PlanRails(t, rs)
	if missing != "" {
		testenv.Attr(t, "rails_missing", missing)
	}
	if len(run) < 2 {
		names := make([]string, len(run))
		for i, r := range run {
			names[i] = r.String()
		}
		testenv.Absent(t, "all-rails bandwidth needs two or more rails (GPU+NIC pairs), and this run has %d (%s); rails come from testenv.Selection (GDR_RAILS)",
			len(run), strings.Join(names, ", "))
	}
	size := maxBWSize(cfg.BWSizes)
	conns := make([][]*rc.End, len(run))
	for i, r := range run {
		o := connOptions(t, r, size, nil, "")
		o.Session = t.Name() + "/" + r.Name()
		o.PortOffset = 1 + max(r.Index, 0)
		conns[i] = rc.Connect(t, o)
	}
	res := make([]railResult, len(run))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range run {
		wg.Go(func() {
			res[i] = measureRail(conns[i], run[i], size)
		})
	}
	wg.Wait()
	wall := time.Since(start)
	var sum float64
	var bytes int64
	for i, r := range res {
		rc.Report(t, conns[i])
		if r.err != nil {
			continue
		}
		sum += r.gbps
		bytes += int64(size) * int64(cfg.BWIters)
	}
	testenv.Attr(t, "rails", len(run))
	testenv.Attr(t, "size_bytes", size)
	testenv.Attr(t, "bw_gbit_s_sum", sum)
	testenv.Attr(t, "bw_gbit_s_wall", stats.Gbps(bytes, wall))
	t.Logf("all %d rails at once, WRITE %d B: sum of per-rail rates %.3f Gb/s, %.3f Gb/s over the wall time", len(run), size, sum, stats.Gbps(bytes, wall))
	for i, r := range res {
		t.Run(r.rail.Name(), func(t *testing.T) {
			testenv.Req(t, "PP-10")
			testenv.RailAttrs(t, r.rail)
			if r.err != nil {
				t.Fatal(r.err)
			}
			judgeRail(t, r, run, i)
		})
	}
}

// measureRail runs one rail's WRITE bandwidth with both ends (loopback) or
// this host's end, as PP-08 does, and returns the client's rate.
func measureRail(ends []*rc.End, r *rails.Rail, size int) railResult {
	out := railResult{rail: r, soft: ends[0].Software}
	var mu sync.Mutex
	errs := rc.Each(ends, func(e *rc.End) error {
		step := fmt.Sprintf("all rails %d", size)
		if err := e.Sess.Barrier(step, 0); err != nil {
			return err
		}
		var res oob.Result
		if e.Role == "client" {
			td := min(e.Cfg.TxDepth, e.QP.SQDepth)
			mr, remote := e.MR(), e.Remote()
			stop := e.Sess.Heartbeat()
			var el time.Duration
			err := e.OnNICCPUs(func() (err error) {
				el, err = e.QP.Bandwidth(verbs.BWArgs{CQ: e.SCQ, Op: verbs.OpWrite, Local: mr, LocalAddr: mr.Addr, RemoteAddr: remote.Addr,
					RKey: remote.RKey, Size: size, Iters: e.Cfg.BWIters, TxDepth: td, CQMod: min(cqMod, td),
					Warmup: min(td, e.Cfg.BWIters/10), Timeout: bwStall(e, td, size), YieldAfter: e.YieldAfter(size, min(cqMod, td))})
				return err
			})
			stop()
			if err != nil {
				return err
			}
			res = oob.Result{Name: step, OK: true, Values: map[string]float64{"gbps": stats.Gbps(int64(size)*int64(e.Cfg.BWIters), el), "ns": float64(el)}}
		} else {
			res = oob.Result{Name: step, OK: true}
		}
		restore := e.Sess.Within(e.WaitBudget(int64(size) * int64(e.Cfg.BWIters)))
		peer, err := e.Sess.ExchangeResult(res)
		restore()
		if err != nil {
			return err
		}
		if e.Role == "server" {
			res = peer
		}
		mu.Lock()
		out.gbps, out.elapsed = res.Values["gbps"], time.Duration(res.Values["ns"])
		mu.Unlock()
		return nil
	})
	for i, err := range errs {
		if err != nil {
			out.err = fmt.Errorf("%s: %w", ends[i].Role, err)
			break
		}
	}
	return out
}

// judgeRail compares a rail's rate beside the others with its rate alone.
func judgeRail(t *testing.T, r railResult, run []*rails.Rail, i int) {
	testenv.Attr(t, "bw_gbit_s", r.gbps)
	solo, ok := soloBW.Load(r.rail.Index)
	if !ok {
		testenv.Attr(t, "threshold", "reported only: PP-08 did not measure this rail alone in this run")
		return
	}
	alone := solo.(float64)
	ratio := ratio(r.gbps, alone)
	testenv.Attr(t, "bw_gbit_s_alone", alone)
	testenv.Attr(t, "bw_ratio_concurrent", ratio)
	if r.soft {
		testenv.Attr(t, "threshold", "no threshold: software device, its rate is the CPU's")
		return
	}
	testenv.Attr(t, "min_bw_ratio", concurrentFraction)
	if ratio < concurrentFraction {
		testenv.Failf(t, "check the PCIe uplink these NICs share (lspci -vvv on the root port and switch: width, speed) and the NIC placement; a rail alone is PP-08",
			"rail %d (%s) keeps %.0f%% of its bandwidth alone (%.2f of %.2f Gb/s) while all %d rails run, below %.0f%%; %s",
			r.rail.Index, r.rail.NIC, 100*ratio, r.gbps, alone, len(run), 100*concurrentFraction, sharing(t, run, i))
	}
}

// sharing names the rails whose NICs hang off the same root port as rail
// i's (their traffic shares that uplink to the CPU).
func sharing(t *testing.T, run []*rails.Rail, i int) string {
	ix := testenv.Selection(t).Index
	root := func(r *rails.Rail) string {
		if r.NIC == nil || r.NIC.PCI == "" {
			return ""
		}
		if d := ix.Device(r.NIC.PCI); d != nil && len(d.Chain) > 1 {
			return d.Chain[0]
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
