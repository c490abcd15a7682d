//go:build rdma

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/stats"
)

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
	testenv.Stop(t, traffic.NeedRails(run))
	size := traffic.MaxSize(cfg.BWSizes)
	conns := connectRails(t, run, size)
	res, wall := traffic.AllRails(conns, run, size)
	for i := range res {
		rc.Report(t, conns[i])
	}
	sum, bytes := traffic.RailSum(res, size, cfg.BWIters)
	testenv.Attr(t, "rails", len(run))
	testenv.Attr(t, "size_bytes", size)
	testenv.Attr(t, "bw_gbit_s_sum", sum)
	testenv.Attr(t, "bw_gbit_s_wall", stats.Gbps(bytes, wall))
	t.Logf("all %d rails at once, WRITE %d B: sum of per-rail rates %.3f Gb/s, %.3f Gb/s over the wall time", len(run), size, sum, stats.Gbps(bytes, wall))
	for i, r := range res {
		t.Run(r.Rail.Name(), func(t *testing.T) {
			testenv.Req(t, "PP-10")
			testenv.RailAttrs(t, r.Rail)
			if r.Err != nil {
				rc.Stop(t, r.Err)
			}
			solo, known := soloBW.Load(r.Rail.Index)
			alone, _ := solo.(float64)
			traffic.JudgeRail(r, alone, known, len(run), func() string { return traffic.SharingIn(run, i, testenv.Selection(t).Index) }).Record(t)
		})
	}
}

// connectRails connects every rail of run on its own session and
// out-of-band port (GDR_LISTEN + 1 + rail), on buffers of size bytes.
func connectRails(t *testing.T, run []*rails.Rail, size int) [][]*rc.End {
	conns := make([][]*rc.End, len(run))
	for i, r := range run {
		o := connOptions(t, r, size, nil, "")
		o.Session = t.Name() + "/" + r.Name()
		o.PortOffset = 1 + max(r.Index, 0)
		conns[i] = rc.Connect(t, o)
	}
	return conns
}
