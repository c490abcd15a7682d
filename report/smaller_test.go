package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reqOf(t *testing.T, h *HostResult, id string) *ReqResult {
	t.Helper()
	i := indexOf(h, id)
	require.GreaterOrEqual(t, i, 0, id)
	return h.Reqs[i]
}

// noGPUHost is a host without an NVIDIA GPU as the suite sees it: the copy
// tests skip for want of the CUDA driver, so HLTH-02 finds no traffic.
func noGPUHost() Run {
	const noCUDA = "no CUDA driver: libcuda.so.1 does not open (cannot open shared object file); install the NVIDIA driver's CUDA library"
	const hlth = "HLTH-02: none of the copy tests (GPU-09..GPU-13, GPU-15) ran before this test in this binary (a -run filter?), so there is no traffic to judge counters around; run them together, e.g. -run 'Test(PP|GPU|HLTH)'"
	const noGPU = "no NVIDIA GPU: /sys/bus/pci/devices under / lists 6 PCI functions, none with vendor 0x10de and class 0x03xxxx"
	evs := events("github.com/gdrconf/gdrconf/conformance/gpu",
		tc{name: "TestGPU09HtoDBandwidth", result: "skip", attrs: []string{"gdr.req", "GPU-09", "gdr.skip", noCUDA}},
		tc{name: "TestGPU10DtoHBandwidth", result: "skip", attrs: []string{"gdr.req", "GPU-10", "gdr.skip", noCUDA}},
		tc{name: "TestHLTH02CopyHealth", result: "skip", attrs: []string{"gdr.req", "HLTH-02", "gdr.skip", hlth}},
	)
	evs = append(evs, events("github.com/gdrconf/gdrconf/conformance/topology",
		tc{name: "TestTOPO01Inventory", result: "skip", attrs: []string{"gdr.req", "TOPO-01", "gdr.skip", noGPU}},
		tc{name: "TestTOPO02NearestNIC", result: "skip", attrs: []string{"gdr.req", "TOPO-02", "gdr.skip", noGPU}},
	)...)
	return Run{Host: Identity{Host: "ci-runner"}, Events: evs}
}

// On a host without a GPU, HLTH-02 is not put down to a -run filter: it
// says the tests it judges skipped, and why, under their shared cause.
func TestHLTH02WithoutGPU(t *testing.T) {
	h := Build([]Run{noGPUHost()}).Hosts[0]
	r := reqOf(t, h, "HLTH-02")
	assert.Equal(t, Skip, r.Status)
	assert.NotContains(t, r.Reason, "-run filter")
	assert.NotContains(t, r.Remedy, "run them together")
	assert.Contains(t, r.Reason, "no CUDA driver")
	assert.Equal(t, "no CUDA driver", r.Cause)
	var cause *Cause
	for _, c := range h.Causes {
		if c.Key == "no CUDA driver" {
			cause = c
		}
	}
	require.NotNil(t, cause)
	assert.Contains(t, cause.Reqs, "HLTH-02")

	// Where the copy tests ran, the -run filter wording stays.
	run := noGPUHost()
	var kept []Event
	for _, e := range run.Events {
		if e.Test != "TestGPU09HtoDBandwidth" && e.Test != "TestGPU10DtoHBandwidth" {
			kept = append(kept, e)
		}
	}
	run.Events = kept
	assert.Contains(t, reqOf(t, Build([]Run{run}).Hosts[0], "HLTH-02").Reason, "-run filter")
}

// "no NVIDIA GPU" (and "no NVIDIA driver") causes carry a remedy.
func TestAbsentNVIDIACausesHaveRemedies(t *testing.T) {
	h := Build([]Run{noGPUHost()}).Hosts[0]
	var found bool
	for _, c := range h.Causes {
		if c.Key == "no NVIDIA GPU" {
			found = true
			assert.Contains(t, c.Remedy, "NVIDIA data-center GPU")
		}
	}
	assert.True(t, found, "causes: %+v", h.Causes)
	assert.NotEmpty(t, reqOf(t, h, "TOPO-01").Remedy)

	drv := "no NVIDIA driver and no NVIDIA GPU: /proc/driver/nvidia/version missing, module nvidia not loaded"
	run := Run{Host: Identity{Host: "x"}, Events: events("github.com/gdrconf/gdrconf/conformance/install",
		tc{name: "TestINST01DriverLoaded", result: "skip", attrs: []string{"gdr.req", "INST-01", "gdr.skip", drv}})}
	assert.Contains(t, reqOf(t, Build([]Run{run}).Hosts[0], "INST-01").Remedy, "install and load the NVIDIA data-center driver")
}

// INST-06 shows what it judges, the compute capability, first; a test's
// gdr.measured names that for any requirement.
func TestJudgedNumberLeads(t *testing.T) {
	run := Run{Host: Identity{Host: "x"}, Events: events("github.com/gdrconf/gdrconf/conformance/install",
		tc{name: "TestINST06ComputeCapability", result: "pass", attrs: []string{"gdr.req", "INST-06"}},
		tc{name: "TestINST06ComputeCapability/0000:00:06.0", result: "pass",
			attrs: []string{"gdr.gpu", "0000:00:06.0", "gdr.compute_capability", "9.0", "gdr.bar1_mib", "262144"}},
		tc{name: "TestINST02NVML", result: "pass",
			attrs: []string{"gdr.req", "INST-02", "gdr.gpu_count", "2", "gdr.bar1_mib", "256", "gdr.measured", "gdr.gpu_count"}},
	)}
	h := Build([]Run{run}).Hosts[0]
	shown, _ := headline(reqOf(t, h, "INST-06").Nums, 1)
	require.Len(t, shown, 1)
	assert.Equal(t, "0000:00:06.0: compute_capability 9.0", shown[0])
	shown, _ = headline(reqOf(t, h, "INST-02").Nums, 1)
	require.Len(t, shown, 1)
	assert.Equal(t, "gpu_count 2", shown[0])
}
