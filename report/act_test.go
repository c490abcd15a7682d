package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fleetWithBadNodes is three pods on nodes gpu-05, gpu-06, gpu-40: two
// fail (a NIC's bandwidth, a GPU's copy rate), one passes, with PP-08's
// rail bandwidth recorded.
func fleetWithBadNodes() []Run {
	pp := "github.com/gdrconf/gdrconf/conformance/pingpong"
	host := func(name, node, bw, result string) Run {
		evs := events(pp,
			tc{name: "TestPP08Bandwidth", result: result, attrs: []string{"gdr.req", "PP-08"}},
			tc{name: "TestPP08Bandwidth/rail1", result: result, attrs: []string{"gdr.rail", "1", "gdr.nic", "mlx5_1", "gdr.nic_pci", "0000:14:00.0"}},
			tc{name: "TestPP08Bandwidth/rail1/WRITE/1048576", result: result,
				attrs: []string{"gdr.op", "WRITE", "gdr.size_bytes", "1048576", "gdr.bw_gbit_s", bw, "gdr.min_bw_gbit_s", "300",
					"gdr.cause", "RDMA WRITE reaches " + bw + " Gbit/s", "gdr.outcome", "fell_short", "gdr.measured", "gdr.bw_gbit_s", "gdr.threshold", "gdr.min_bw_gbit_s"}},
			tc{name: "TestPP08Bandwidth/rail1/WRITE/65536", result: "pass",
				attrs: []string{"gdr.op", "WRITE", "gdr.size_bytes", "65536", "gdr.bw_gbit_s", "999"}})
		return Run{Host: Identity{Host: name, Node: node}, Events: evs}
	}
	return []Run{
		host("gdrconf-0", "gpu-05", "120.5", "fail"),
		host("gdrconf-1", "gpu-06", "371.25", "pass"),
		host("gdrconf-2", "gpu-40", "98", "fail"),
	}
}

// The bad nodes come out as a Slurm hostlist and ready drain, taint and
// label lines, by node name (never the pod's), printed only.
func TestActionsNameTheNodes(t *testing.T) {
	r := Build(fleetWithBadNodes())
	bad := r.BadNodes()
	require.Len(t, bad, 2)
	assert.Equal(t, "gpu-05", bad[0].Node)
	assert.Equal(t, "gdrconf-0", bad[0].Host)
	assert.Contains(t, bad[0].Cause, "PP-08: ")
	var b bytes.Buffer
	require.NoError(t, r.WriteActions(&b))
	s := b.String()
	assert.Contains(t, s, "# gdrconf: 2 node(s) not qualified: gpu-[05,40]\n")
	assert.Contains(t, s, "scontrol update nodename=gpu-05 state=drain reason='gdrconf: ")
	assert.Contains(t, s, "kubectl taint nodes gpu-40 gdrconf.io/not-qualified=")
	assert.Contains(t, s, ":NoSchedule --overwrite\n")
	assert.Contains(t, s, "kubectl label nodes gpu-05 gdrconf.io/verdict=not-qualified --overwrite\n")
	assert.NotContains(t, s, "gdrconf-0 ", "pods are never named as nodes")
	assert.NotContains(t, s, "gpu-06", "the qualified node is left alone")

	out := t.TempDir()
	require.NoError(t, r.WriteAll(out))
	sum, err := os.ReadFile(filepath.Join(out, SummaryText))
	require.NoError(t, err)
	assert.Contains(t, string(sum), "nodes to drain: gpu-[05,40] (the scontrol and kubectl lines are in actions.txt)")
	assert.FileExists(t, filepath.Join(out, ActionsFile))

	// A run with nothing to act on leaves no actions.txt, and removes one
	// an earlier render left.
	good := Build(fleetWithBadNodes()[1:2])
	require.NoError(t, good.WriteAll(out))
	assert.NoFileExists(t, filepath.Join(out, ActionsFile))

	assert.Equal(t, "nic", labelValue("nic"))
	assert.Equal(t, "cable-optic-of-mlx5_1", labelValue("cable/optic of mlx5_1"))
	assert.Len(t, labelValue(strings.Repeat("a", 100)), 63)
}

// The Prometheus textfile parses with Prometheus's own text parser and
// holds the verdict, the counts, each rail's bandwidth at the largest size
// and the run's start, per host and node.
func TestPrometheusTextfile(t *testing.T) {
	r := Build(fleetWithBadNodes())
	var b bytes.Buffer
	require.NoError(t, r.WritePrometheus(&b))
	p := expfmt.NewTextParser(model.LegacyValidation) // node_exporter's textfile collector's names
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	require.NoError(t, err, b.String())
	for _, name := range []string{"gdrconf_qualified", "gdrconf_verdict", "gdrconf_requirements", "gdrconf_rail_bandwidth_gbits"} {
		require.Contains(t, fams, name)
	}
	get := func(fam, host string, extra ...string) (float64, bool) {
		for _, m := range fams[fam].GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			if ls["host"] != host {
				continue
			}
			ok := true
			for i := 0; i+1 < len(extra); i += 2 {
				ok = ok && ls[extra[i]] == extra[i+1]
			}
			if ok {
				return m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	v, ok := get("gdrconf_qualified", "gdrconf-0", "node", "gpu-05")
	require.True(t, ok)
	assert.Equal(t, 0.0, v)
	v, ok = get("gdrconf_rail_bandwidth_gbits", "gdrconf-1", "rail", "1", "nic", "mlx5_1")
	require.True(t, ok)
	assert.Equal(t, 371.25, v, "the WRITE figure at the largest size, not 64 KiB's")
	v, ok = get("gdrconf_verdict", "gdrconf-2", "verdict", "NOT QUALIFIED")
	require.True(t, ok)
	assert.Equal(t, 1.0, v)
	v, ok = get("gdrconf_requirements", "gdrconf-0", "status", "failed")
	require.True(t, ok)
	assert.Equal(t, 1.0, v)
	for name := range fams {
		assert.True(t, model.LegacyValidation.IsValidMetricName(name), name)
	}
}
