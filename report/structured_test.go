package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// structuredHost is a run recorded after harness/testenv wrote failures as
// attributes: causes with PCI addresses, an outcome of each kind, and a
// judged value named by gdr.measured / gdr.threshold.
func structuredHost() Run {
	const pp = "github.com/gdrconf/gdrconf/conformance/pingpong"
	const topo = "github.com/gdrconf/gdrconf/conformance/topology"
	railCause := "rail 1 (mlx5_1 (0000:9b:00.0)) keeps 50% of its bandwidth alone (200.00 of 400.00 Gb/s) while all 4 rails run, below 80%; it shares root port 0000:97:01.0 with rail 0"
	railRemedy := "check the PCIe uplink these NICs share (lspci -vvv on the root port and switch: width, speed) and the NIC placement; a rail alone is PP-08"
	var evs []Event
	evs = append(evs, events(pp,
		tc{name: "TestPP10AllRails", result: "fail", attrs: []string{"gdr.req", "PP-10", "gdr.threshold_source", "80% of the rail's rate alone"}},
		tc{name: "TestPP10AllRails/rail1", result: "fail", attrs: []string{
			"gdr.bw_gbit_s", "200.000", "gdr.bw_ratio_concurrent", "0.500", "gdr.min_bw_ratio", "0.800",
			"gdr.outcome", "fell_short", "gdr.cause", railCause, "gdr.remedy", railRemedy,
			"gdr.measured", "gdr.bw_ratio_concurrent", "gdr.threshold", "gdr.min_bw_ratio"},
			out: []string{"    multirail_test.go:60: " + railCause + "; remedy: " + railRemedy}},
		tc{name: "TestPP10AllRails/rail2", result: "pass", attrs: []string{"gdr.bw_gbit_s", "390.000"}},
		// The peer was lost: the suite could not judge. Its log line is not
		// in the suite's form; the attributes are read, not the line.
		tc{name: "TestPP02Connect", result: "fail", attrs: []string{"gdr.req", "PP-02",
			"gdr.outcome", "not_judged", "gdr.cause", "server: peer vanished: connection reset client: the budget ran out"},
			out: []string{"    rc.go:463: server: peer vanished: connection reset", "        client: the budget ran out"}},
	)...)
	// Two requirements failing for one GPU: the cause starts with its address.
	gpuCause := "GPU 0000:3b:00.0: link trained to x4 of x16 lanes"
	evs = append(evs, events(topo,
		tc{name: "TestTOPO04LinkTraining", result: "fail", attrs: []string{"gdr.req", "TOPO-04",
			"gdr.outcome", "fell_short", "gdr.cause", gpuCause, "gdr.remedy", "reseat the GPU", "gdr.failures_count", "2"},
			out: []string{"    topology_test.go:10: " + gpuCause + "; remedy: reseat the GPU"}},
		tc{name: "TestTOPO05IOMMU", result: "fail", attrs: []string{"gdr.req", "TOPO-05",
			"gdr.outcome", "fell_short", "gdr.cause", gpuCause + ": IOMMU translation on its path"},
			out: []string{"    topology_test.go:20: " + gpuCause + ": IOMMU translation on its path"}},
	)...)
	return Run{Host: Identity{Host: "h1"}, Events: evs}
}

func TestStructuredFailuresAreRead(t *testing.T) {
	h := Build([]Run{structuredHost()}).Hosts[0]
	by := map[string]*ReqResult{}
	for _, r := range h.Reqs {
		by[r.ID] = r
	}

	pp10 := by["PP-10"]
	require.Equal(t, Fail, pp10.Status)
	assert.Equal(t, "rail 1 (mlx5_1 (0000:9b:00.0)) keeps 50% of its bandwidth alone (200.00 of 400.00 Gb/s) while all 4 rails run, below 80%; it shares root port 0000:97:01.0 with rail 0", pp10.Reason)
	assert.Equal(t, "check the PCIe uplink these NICs share (lspci -vvv on the root port and switch: width, speed) and the NIC placement; a rail alone is PP-08", pp10.Remedy)
	assert.Equal(t, OutcomeFellShort, pp10.Outcome)
	var judged []Number
	for _, n := range pp10.Nums {
		if n.Judged {
			judged = append(judged, n)
		}
	}
	require.Len(t, judged, 1, "%v", pp10.Nums)
	assert.Equal(t, "rail1: bw_ratio_concurrent 0.500 (floor 0.800 (80% of the rail's rate alone))", judged[0].String())

	pp02 := by["PP-02"]
	assert.Equal(t, OutcomeNotJudged, pp02.Outcome)
	assert.Equal(t, "server: peer vanished: connection reset client: the budget ran out", pp02.Reason, "both ends' lines, which the log's first line does not hold")
	assert.Empty(t, pp02.Remedy)

	// Grouped by the recorded cause: the GPU's address does not end the clause.
	var gpu *Cause
	for _, c := range h.Causes {
		if c.Key == "GPU 0000:3b:00.0" {
			gpu = c
		}
	}
	require.NotNil(t, gpu, "%+v", h.Causes)
	assert.Equal(t, []string{"TOPO-04", "TOPO-05"}, gpu.Reqs)
	assert.Equal(t, "reseat the GPU", gpu.Remedy)

	for _, c := range h.AllCases() {
		switch c.Name {
		case "TestPP10AllRails/rail2":
			assert.Empty(t, c.Outcome, "passed")
			assert.NotContains(t, c.Attrs, "gdr.cause", "a failure's attributes are not inherited")
		case "TestPP10AllRails/rail1":
			assert.Equal(t, "80% of the rail's rate alone", c.Attrs["gdr.threshold_source"], "the source is")
		case "TestPP02Connect":
			assert.Equal(t, OutcomeNotJudged, c.Outcome)
		}
	}
}

// A recording made before the attributes: its failure counts as
// fell_short, and its log line is the cause, whole. Nothing is cut out of
// it or guessed from its words: an old line's remedy stays in its text.
func TestLegacyFailureIsFellShort(t *testing.T) {
	const line = "GPU 0000:00:06.0: pinned HtoD copies reach 20.10 GB/s, below GDR_MIN_COPY_FRACTION=0.60; remedy: check the GPU link (GPU-11)"
	h := Build([]Run{gpuHostRecorded("h200", false)}).Hosts[0]
	for _, r := range h.Reqs {
		switch r.ID {
		case "GPU-09":
			assert.Equal(t, OutcomeFellShort, r.Outcome)
			assert.Equal(t, line, r.Reason)
			assert.Empty(t, r.Remedy)
		case "PP-01":
			assert.Equal(t, noRDMA, r.Reason, "a skip's reason, whole")
			assert.Empty(t, r.Remedy, "no remedy guessed from its last clause")
		}
	}
	for _, c := range h.Cases() {
		if c.Status() == Fail {
			cause, remedy := c.CauseAndRemedy()
			assert.Equal(t, line, cause)
			assert.Empty(t, remedy)
			assert.Equal(t, OutcomeFellShort, c.Outcome)
		}
	}
}

// A skip recorded as a finding carries its remedy; the report shows it
// and reads nothing out of the reason.
func TestAbsentFindingCarriesItsRemedy(t *testing.T) {
	h := Build([]Run{gpuHost("h200")}).Hosts[0]
	for _, r := range h.Reqs {
		if r.ID == "PP-01" {
			assert.Equal(t, Skip, r.Status)
			assert.Equal(t, noRDMA, r.Reason)
			assert.Equal(t, "load the NIC's RDMA driver (mlx5_ib, irdma, ...)", r.Remedy)
		}
	}
}

// gdr.threshold named the threshold's words before gdr.threshold_source.
func TestThresholdSourceOfOldRecordings(t *testing.T) {
	assert.Equal(t, "75% of the 400 Gb/s port rate", thresholdSource(map[string]string{"gdr.threshold": "75% of the 400 Gb/s port rate"}))
	assert.Equal(t, "derived", thresholdSource(map[string]string{"gdr.threshold": "gdr.min_bw_gbit_s", "gdr.threshold_source": "derived"}))
	assert.Empty(t, thresholdSource(map[string]string{"gdr.threshold": "gdr.min_bw_gbit_s"}))
}
