//go:build rdma

package traffic

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/stats"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestRailSum(t *testing.T) {
	res := []RailResult{{Gbps: 300}, {Gbps: 250, Err: errors.New("client: boom")}, {Gbps: 200}}
	sum, bytes := RailSum(res, 1<<20, 1000)
	assert.Equal(t, 500.0, sum, "a failed rail counts nothing")
	assert.Equal(t, int64(2*(1<<20)*1000), bytes)
}

func TestJudgeRail(t *testing.T) {
	r := RailResult{Rail: &rails.Rail{Index: 3, NIC: &rails.NIC{Name: "mlx5_3", PCI: "0000:9b:00.0"}}, Gbps: 200}
	asked := 0
	sharing := func() string { asked++; return "no other rail shares its root port" }

	v := JudgeRail(r, 0, false, 4, sharing)
	assert.Equal(t, Judgement{{Key: "bw_gbit_s", Value: 200.0}, {Key: "threshold_source", Value: "reported only: PP-08 did not measure this rail alone in this run"}}, v)

	soft := r
	soft.Soft = true
	v = JudgeRail(soft, 100, true, 4, sharing)
	assert.False(t, v.Failed())
	assert.Equal(t, Entry{Key: "threshold_source", Value: "no threshold: software device, its rate is the CPU's"}, v[len(v)-1])

	v = JudgeRail(r, 220, true, 4, sharing)
	assert.False(t, v.Failed())
	assert.Equal(t, Judgement{{Key: "bw_gbit_s", Value: 200.0}, {Key: "bw_gbit_s_alone", Value: 220.0}, {Key: "bw_ratio_concurrent", Value: 200.0 / 220},
		{Key: "min_bw_ratio", Value: 0.8}}, v)
	assert.Zero(t, asked, "the root ports are named only for a failure")

	v = JudgeRail(r, 400, true, 4, sharing)
	require.True(t, v.Failed())
	e := v[len(v)-1]
	assert.True(t, e.Fatal)
	assert.Equal(t, RailRemedy, e.Finding.Remedy)
	assert.Equal(t, "rail 3 (mlx5_3 (0000:9b:00.0)) keeps 50% of its bandwidth alone (200.00 of 400.00 Gb/s) while all 4 rails run, below 80%; no other rail shares its root port", e.Finding.Cause)
}

func TestSharing(t *testing.T) {
	nic := func(name, pci string) *rails.NIC { return &rails.NIC{Name: name, PCI: pci} }
	run := []*rails.Rail{
		{Index: 0, NIC: nic("mlx5_0", "0000:19:00.0")},
		{Index: 1, NIC: nic("mlx5_1", "0000:1a:00.0")},
		{Index: 2, NIC: nic("mlx5_2", "0000:9b:00.0")},
		{Index: 3},
	}
	chains := map[string][]string{
		"0000:19:00.0": {"0000:00:01.0", "0000:18:00.0", "0000:19:00.0"},
		"0000:1a:00.0": {"0000:00:01.0", "0000:18:01.0", "0000:1a:00.0"},
		"0000:9b:00.0": {"0000:80:01.0", "0000:9b:00.0"},
	}
	chain := func(b string) []string { return chains[b] }
	assert.Equal(t, "it shares root port 0000:00:01.0 with rail 1 (mlx5_1 (0000:1a:00.0))", Sharing(run, 0, chain))
	assert.Equal(t, "no other rail shares its root port", Sharing(run, 2, chain))
	assert.Equal(t, "no other rail shares its root port", Sharing(run, 3, chain), "a rail without a NIC shares nothing")
}

// Several queue pairs: one clock from the earliest start to the latest end.
func TestSpan(t *testing.T) {
	s := int64(time.Second)
	d, err := span([]stats.Interval{{Start: s, End: 3 * s}, {Start: 2 * s, End: 4 * s}}, []error{nil, nil})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d)
	_, err = span(make([]stats.Interval, 2), []error{nil, errors.New("CQ error")})
	assert.EqualError(t, err, "queue pair 1 of 2: CQ error")
	assert.Equal(t, 4, rttIters(true))
	assert.Equal(t, 32, rttIters(false))
}

// Fewer than two rails is absent, naming the ones there are and how to
// select more.
func TestNeedRails(t *testing.T) {
	g := &rails.GPU{PCI: "0000:05:00.0"}
	n := &rails.NIC{Name: "mlx5_0"}
	one := []*rails.Rail{{Index: 0, GPU: g, NIC: n}}
	err := NeedRails(one)
	f, ok := verdict.As(err)
	require.True(t, ok)
	assert.Equal(t, verdict.Absent, f.Kind())
	assert.Equal(t, "all-rails bandwidth needs two or more rails (GPU+NIC pairs), and this run has 1 ("+one[0].String()+"); rails come from testenv.Selection (GDR_RAILS)", f.Cause)
	assert.Equal(t, "select two or more rails (GDR_RAILS) on a host that has them", f.Remedy)
	assert.True(t, verdict.IsAbsent(NeedRails(nil)))
	assert.NoError(t, NeedRails(append(one, &rails.Rail{Index: 1, GPU: g, NIC: n})))
}
