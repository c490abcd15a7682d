package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/jstemmer/go-junit-report/v2/junit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tc is one test of a synthetic run: name, result (pass/fail/skip, "" = never
// finished), attributes as key/value pairs, and the lines it printed.
type tc struct {
	name, result string
	attrs        []string
	out          []string
}

// events renders tests as go test -json events of package pkg, as
// test2json writes them (framing lines included).
func events(pkg string, tests ...tc) []Event {
	evs := []Event{{Action: "start", Package: pkg}}
	for _, t := range tests {
		evs = append(evs, Event{Action: "run", Package: pkg, Test: t.name},
			Event{Action: "output", Package: pkg, Test: t.name, Output: "=== RUN   " + t.name + "\n"})
		for i := 0; i+1 < len(t.attrs); i += 2 {
			evs = append(evs, Event{Action: "attr", Package: pkg, Test: t.name, Key: t.attrs[i], Value: t.attrs[i+1]},
				Event{Action: "output", Package: pkg, Test: t.name, Output: "=== ATTR  " + t.name + " " + t.attrs[i] + " " + t.attrs[i+1] + "\n"})
		}
		for _, l := range t.out {
			evs = append(evs, Event{Action: "output", Package: pkg, Test: t.name, Output: l + "\n"})
		}
		if t.result != "" {
			evs = append(evs, Event{Action: "output", Package: pkg, Test: t.name, Output: "--- " + strings.ToUpper(t.result) + ": " + t.name + " (0.01s)\n"},
				Event{Action: t.result, Package: pkg, Test: t.name, Elapsed: 0.01})
		}
	}
	return evs
}

const noRDMA = "no RDMA device: /sys/class/infiniband is empty; RDMA kernel modules loaded: ib_core (built in); load the NIC's RDMA driver (mlx5_ib, irdma, ...)"

// gpuHost is a host whose GPU checks ran and whose NIC is absent, like the
// one-GPU H200 machine, with one GPU-09 failure, recorded as
// harness/testenv records findings (gdr.outcome, gdr.cause, gdr.remedy).
func gpuHost(name string) Run { return gpuHostRecorded(name, true) }

// gpuHostRecorded is gpuHost; without findings, as recordings made before
// gdr.cause were: the failure and the skips are their log lines only.
func gpuHostRecorded(name string, findings bool) Run {
	gpu09 := []string{"gdr.gpu", "0000:00:06.0", "gdr.copy_gbyte_s", "20.100", "gdr.link_gbyte_s", "63.015", "gdr.copy_fraction", "0.319", "gdr.min_copy_fraction", "0.600"}
	skip := []string{}
	if findings {
		gpu09 = append(gpu09, "gdr.outcome", "fell_short", "gdr.cause", "GPU 0000:00:06.0: pinned HtoD copies reach 20.10 GB/s, below GDR_MIN_COPY_FRACTION=0.60",
			"gdr.remedy", "check the GPU link (GPU-11)")
		skip = []string{"gdr.outcome", "absent", "gdr.remedy", "load the NIC's RDMA driver (mlx5_ib, irdma, ...)"}
	}
	var evs []Event
	evs = append(evs, events("github.com/gdrconf/gdrconf/conformance/gpu",
		tc{name: "TestGPU02ComputeCapability", result: "pass", attrs: []string{"gdr.req", "GPU-02"}},
		tc{name: "TestGPU02ComputeCapability/0000:00:06.0", result: "pass", attrs: []string{"gdr.gpu", "0000:00:06.0", "gdr.gpu_name", "NVIDIA H200", "gdr.cc", "9.0"}},
		tc{name: "TestGPU09HtoDBandwidth", result: "fail", attrs: []string{"gdr.req", "GPU-09"}},
		tc{name: "TestGPU09HtoDBandwidth/0000:00:06.0", result: "fail",
			attrs: gpu09,
			out: []string{"    gpu_test.go:280: GPU 0000:00:06.0 HtoD pinned 256 MiB: best 20.10 GB/s",
				"    gpu_test.go:290: GPU 0000:00:06.0: pinned HtoD copies reach 20.10 GB/s, below GDR_MIN_COPY_FRACTION=0.60; remedy: check the GPU link (GPU-11)",
				"        and more detail on a second line"}},
	)...)
	evs = append(evs, events("github.com/gdrconf/gdrconf/conformance/pingpong",
		tc{name: "TestPP01Device", result: "skip", attrs: append([]string{"gdr.req", "PP-01", "gdr.skip", noRDMA}, skip...), out: []string{"    pingpong_test.go:33: " + noRDMA}},
		tc{name: "TestPP02Connect", result: "skip", attrs: append([]string{"gdr.req", "PP-02", "gdr.skip", noRDMA}, skip...), out: []string{"    pingpong_test.go:70: " + noRDMA}},
	)...)
	evs = append(evs, events("github.com/gdrconf/gdrconf/conformance/memreg",
		tc{name: "TestMREG01HostBaseline", result: "skip", attrs: []string{"gdr.req", "MREG-01", "gdr.skip", "no RDMA device in /sys/class/infiniband, so nothing registers"},
			out: []string{"    memreg_test.go:10: no RDMA device in /sys/class/infiniband, so nothing registers"}},
	)...)
	return Run{Host: Identity{Host: name, Kernel: "6.18.44", NvidiaDriver: "580.159.04"}, Events: evs}
}

func TestBuildCountsLeavesOnlyAndInheritsReq(t *testing.T) {
	r := Build([]Run{gpuHost("h200")})
	h := r.Hosts[0]
	var names []string
	for _, c := range h.Cases() {
		names = append(names, c.Name)
		assert.NotEmpty(t, c.Req, "%s inherits gdr.req from its parent", c.Name)
	}
	assert.Equal(t, []string{"TestGPU02ComputeCapability/0000:00:06.0", "TestGPU09HtoDBandwidth/0000:00:06.0", "TestPP01Device", "TestPP02Connect", "TestMREG01HostBaseline"}, names,
		"parents whose subtests carry the verdict are not rows of their own")
	byID := map[string]*ReqResult{}
	for _, rq := range h.Reqs {
		byID[rq.ID] = rq
	}
	assert.Equal(t, Fail, byID["GPU-09"].Status)
	assert.Equal(t, "GPU 0000:00:06.0: pinned HtoD copies reach 20.10 GB/s, below GDR_MIN_COPY_FRACTION=0.60", byID["GPU-09"].Reason)
	assert.Equal(t, "check the GPU link (GPU-11)", byID["GPU-09"].Remedy)
	assert.Equal(t, Pass, byID["GPU-02"].Status)
	assert.Equal(t, Skip, byID["PP-01"].Status)
	assert.Equal(t, NotRun, byID["INST-01"].Status)
	assert.Contains(t, byID["INST-01"].Reason, "conformance/install is not in this run")
	// Numbers carry units and the floor beside them.
	var nums []string
	for _, n := range byID["GPU-09"].Nums {
		nums = append(nums, n.String())
	}
	assert.Contains(t, nums, "0000:00:06.0: copy_gbyte_s 20.100 GB/s")
	assert.Contains(t, nums, "0000:00:06.0: copy_fraction 0.319 (floor 0.600)")
	// One shared cause for the three RDMA skips, whatever their wording.
	require.NotEmpty(t, h.Causes)
	assert.Equal(t, "no RDMA device", h.Causes[0].Key, "skips come before requirements that did not run")
	assert.Equal(t, NotRun, h.Causes[len(h.Causes)-1].Status)
	assert.Equal(t, []string{"MREG-01", "PP-01", "PP-02"}, h.Causes[0].Reqs)
	assert.Equal(t, "load the NIC's RDMA driver (mlx5_ib, irdma, ...)", h.Causes[0].Remedy)
	assert.Equal(t, NotQualified, h.Verdict.Verdict)
	assert.Equal(t, "NOT QUALIFIED (1 must requirement failed)", h.Verdict.Line)
	assert.Equal(t, 1, r.ExitCode())
}

func TestVerdicts(t *testing.T) {
	pass := events("x/conformance/gpu", tc{name: "TestGPU02ComputeCapability", result: "pass", attrs: []string{"gdr.req", "GPU-02"}})
	r := Build([]Run{{Host: Identity{Host: "a"}, Events: pass}})
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
	assert.Regexp(t, `^INCOMPLETE \(\d+ must requirements not run\)$`, r.Verdict.Line)
	assert.Contains(t, r.Verdict.Advice, "GDR_STRICT=1")
	assert.Equal(t, 0, r.ExitCode(), "INCOMPLETE passes without GDR_STRICT")
	r = Build([]Run{{Host: Identity{Host: "a", Strict: true}, Events: pass}})
	assert.Equal(t, 3, r.ExitCode(), "INCOMPLETE fails under GDR_STRICT=1")

	// A test that never finished fails; so does go test's non-zero exit
	// with no failed test.
	crash := events("x/conformance/gpu", tc{name: "TestGPU02ComputeCapability", attrs: []string{"gdr.req", "GPU-02"}, out: []string{"panic: boom"}})
	r = Build([]Run{{Host: Identity{Host: "a"}, Events: crash}})
	assert.Equal(t, NotQualified, r.Verdict.Verdict)
	gpu02 := r.Hosts[0].Reqs[indexOf(r.Hosts[0], "GPU-02")]
	assert.Equal(t, "did not finish: the test binary stopped on panic: boom", gpu02.Reason)
	assert.Equal(t, OutcomeDidNotFinish, gpu02.Outcome)
	two := 2
	r = Build([]Run{{Host: Identity{Host: "a", GoTestExit: &two}, Events: pass}})
	assert.Equal(t, NotQualified, r.Verdict.Verdict)
	assert.Contains(t, r.Hosts[0].Errors[0], "go test exited 2 with no failed test")

	// Many hosts: NOT QUALIFIED counts hosts.
	r = Build([]Run{gpuHost("h1"), {Host: Identity{Host: "h2"}, Events: pass}})
	assert.Equal(t, "NOT QUALIFIED (1 of 2 hosts: h1)", r.Verdict.Line)
}

func indexOf(h *HostResult, id string) int {
	for i, r := range h.Reqs {
		if r.ID == id {
			return i
		}
	}
	return -1
}

// A parent that fails on its own (no subtest failed) is a row; a parent
// failing because a subtest did is not.
func TestParentFailingOnItsOwnCounts(t *testing.T) {
	evs := events("x/conformance/topology",
		tc{name: "TestTOPO04LinkTraining", result: "fail", attrs: []string{"gdr.req", "TOPO-04"},
			out: []string{"    topology_test.go:9: PCI devices that could not be read: bad; remedy: check sysfs"}},
		tc{name: "TestTOPO04LinkTraining/0000:00:06.0", result: "pass"},
		tc{name: "TestTOPO05IOMMU", result: "fail", attrs: []string{"gdr.req", "TOPO-05"}},
		tc{name: "TestTOPO05IOMMU/0000:00:06.0", result: "fail", out: []string{"    t.go:1: translated DMA; remedy: boot with iommu=pt"}},
	)
	h := Build([]Run{{Host: Identity{Host: "a"}, Events: evs}}).Hosts[0]
	var names []string
	for _, c := range h.Cases() {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"TestTOPO04LinkTraining", "TestTOPO04LinkTraining/0000:00:06.0", "TestTOPO05IOMMU/0000:00:06.0"}, names)
}

func TestCauseKey(t *testing.T) {
	for msg, want := range map[string]string{
		"no RDMA device: /sys/class/infiniband is empty":                                            "no RDMA device",
		"no RDMA device in /sys/class/infiniband, so GPU peer memory cannot be used":                "no RDMA device",
		"no RDMA device (/sys/class/infiniband missing), no InfiniBand":                             "no RDMA device",
		"GDR_STRICT=1: no RDMA device: /sys/class/infiniband is empty":                              "no RDMA device",
		"PP-09 needs both halves, and the host-memory half was skipped: no RDMA device: /sys/class": "no RDMA device",
		"no NVIDIA driver and no NVIDIA GPU: /proc/driver/nvidia/version missing":                   "no NVIDIA driver",
		"no NVIDIA driver loaded (/proc/driver/nvidia/version missing), so NVML cannot be checked":  "no NVIDIA driver",
		"no CUDA driver: libcuda.so.1 does not open":                                                "no CUDA driver",
		"GPU-to-GPU topology needs two GPUs; /sys/bus/pci/devices lists one":                        "GPU-to-GPU topology needs two GPUs",
		"GPU 0000:3b:00.0 cannot export dma-buf (DMA_BUF_SUPPORTED=0): see GPU-04":                  "GPU 0000:3b:00.0 cannot export dma-buf (DMA_BUF_SUPPORTED=0)",
	} {
		assert.Equal(t, want, causeKey(msg), msg)
	}
}

func parseJUnit(t *testing.T, b []byte) JUnit {
	t.Helper()
	doc, err := ParseJUnit(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}

// checkJUnitRules checks what CI systems rely on: suites <host>/<area> with
// hostname set, one classname dot (Jenkins splits at the last one), host
// in every case name (GitLab keeps one case per name), a result's message
// one line, a skip's message ending with the reason, the full output in a
// failure's body, gdr.req on every case (in its block of the suite's
// system-out, or the case itself in older files), and unit-bearing keys.
func checkJUnitRules(t *testing.T, doc JUnit) {
	t.Helper()
	names := map[string]bool{}
	for _, s := range suitesByName(doc) {
		host, area, ok := strings.Cut(s.Name, "/")
		require.True(t, ok, "suite %q is <host>/<area>", s.Name)
		assert.Equal(t, host, s.Hostname, "suite %s sets hostname", s.Name)
		assert.NotEmpty(t, area)
		props := map[string]string{}
		if s.Properties != nil {
			for _, p := range *s.Properties {
				props[p.Name] = p.Value
			}
		}
		assert.Equal(t, host, props["gdr.host"], "suite %s carries the host's facts", s.Name)
		assert.Contains(t, props, "gdr.verdict")
		for _, c := range s.Cases {
			assert.False(t, names[c.Name], "case name %q appears twice", c.Name)
			names[c.Name] = true
			assert.True(t, strings.HasSuffix(c.Name, " ["+host+"]"), "case %q names its host", c.Name)
			assert.Equal(t, 1, strings.Count(c.Classname, "."), "classname %q has one dot", c.Classname)
			cp := map[string]string{}
			props, _ := caseEvidence(c, caseBlocks(s.SystemOut.Data))
			for _, p := range props {
				cp[p.Name] = p.Value
				assert.NotContains(t, p.Name, ":", "property key %q holds an address", p.Name)
				for _, bad := range []string{"_gbps", "_mbps"} {
					assert.NotContains(t, p.Name, bad, "property key %q has an ambiguous unit", p.Name)
				}
			}
			if reqNamed.MatchString(c.Name) || strings.Contains(c.Name, " (not run)") {
				assert.NotEmpty(t, cp["gdr.req"], "case %q has gdr.req", c.Name)
			}
			for _, m := range []string{msg(c.Failure), msg(c.Skipped)} {
				assert.NotContains(t, m, "\n", "case %q: the message is one line", c.Name)
				assert.NotContains(t, m, "=== ", "case %q: the message is not raw output", c.Name)
				assert.NotEqual(t, "Failed", m)
			}
			if c.Failure != nil && !strings.Contains(c.Name, "(") {
				assert.Contains(t, c.Failure.Data, "--- FAIL", "case %q: the full output is in the body", c.Name)
			}
			if c.Skipped != nil && cp["gdr.skip"] != "" {
				assert.True(t, strings.HasSuffix(c.Skipped.Message, ": "+cp["gdr.skip"]), "case %q: the skip message ends with the reason: %q", c.Name, c.Skipped.Message)
			}
		}
	}
}

var reqNamed = regexp.MustCompile(`^Test[A-Z]+\d{2}[A-Z]`)

func msg(r *junit.Result) string {
	if r == nil {
		return ""
	}
	return r.Message
}

func TestJUnitRoundTrip(t *testing.T) {
	r := Build([]Run{gpuHost("gpu-01.example.com"), gpuHost("gpu-02.example.com")})
	var b bytes.Buffer
	require.NoError(t, r.WriteJUnit(&b))
	doc := parseJUnit(t, b.Bytes())
	checkJUnitRules(t, doc)
	var fail *string
	cases := 0
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			cases++
			if c.Failure != nil && strings.HasPrefix(c.Name, "TestGPU09HtoDBandwidth/") && s.Hostname == "gpu-01.example.com" {
				fail = &c.Failure.Message
				assert.Equal(t, "gpu-01_example_com.gpu", c.Classname, "the host's dots do not split the class")
			}
		}
	}
	require.NotNil(t, fail)
	assert.Equal(t, "GPU-09 must on gpu-01.example.com: copy_fraction 0.319 < floor 0.600: GPU 0000:00:06.0: pinned HtoD copies reach 20.10 GB/s, below GDR_MIN_COPY_FRACTION=0.60", *fail)
	// The report's JUnit reads back into the same rows.
	evs, err := ReadJUnit(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	back := Build([]Run{{Host: Identity{Host: "gpu-01.example.com"}, Events: evs}})
	assert.Equal(t, NotQualified, back.Verdict.Verdict)
}

func TestSummaries(t *testing.T) {
	r := Build([]Run{gpuHost("h200")})
	var txt, md, js bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteJSON(&js))
	s := txt.String()
	assert.True(t, strings.HasPrefix(s, "GPUDirect RDMA qualification: NOT QUALIFIED (1 must requirement failed)\n"), s)
	// The shared cause comes before the rows.
	assert.Less(t, strings.Index(s, "Shared causes"), strings.Index(s, "Requirements:"))
	assert.Contains(t, s, "SKIP  no RDMA device: 3 requirements: MREG-01 PP-01 PP-02")
	assert.Contains(t, s, "remedy: check the GPU link (GPU-11)")
	assert.Contains(t, md.String(), "| GPU-09 |")
	var sum struct {
		Verdict string `json:"verdict"`
		Host    struct {
			Host string `json:"host"`
		} `json:"host"`
		Requirements []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"requirements"`
		Hosts []struct {
			Host    string `json:"host"`
			Verdict string `json:"verdict"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &sum))
	assert.Equal(t, NotQualified, sum.Verdict)
	assert.Equal(t, "h200", sum.Host.Host)
	assert.NotEmpty(t, sum.Requirements)
	assert.Equal(t, "h200", sum.Hosts[0].Host)
}

// test2json cuts a long line into several output events, only the last
// ending in a newline: the case keeps it one line.
func TestLongLineStaysOneLine(t *testing.T) {
	pkg := "github.com/gdrconf/gdrconf/conformance/pingpong"
	out := func(s string) Event { return Event{Action: "output", Package: pkg, Test: "TestPP01Device", Output: s} }
	evs := []Event{{Action: "run", Package: pkg, Test: "TestPP01Device"}, out("=== RUN   TestPP01Device\n"),
		out("=== ATTR  TestPP01Device gdr.warning a long "), out("warning, cut "), out("in three\nx_test.go:1: next\n"),
		out("\n"), out("tail"), {Action: "pass", Package: pkg, Test: "TestPP01Device"}}
	cs := Build([]Run{{Host: Identity{Host: "h"}, Events: evs}}).Hosts[0].AllCases()
	require.Len(t, cs, 1)
	assert.Equal(t, []string{"=== RUN   TestPP01Device", "=== ATTR  TestPP01Device gdr.warning a long warning, cut in three", "x_test.go:1: next", "tail"}, cs[0].Output)
}
