package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/report/junitcheck"
)

// at stamps every event of run with time t (go test -json carries one).
func at(run Run, t time.Time) Run {
	for i := range run.Events {
		tt := t.Add(time.Duration(i) * time.Millisecond)
		run.Events[i].Time = &tt
	}
	return run
}

// Eight hosts called localhost (no machine-id to tell them apart) are an
// error naming two of the folders and the variable that fixes it.
func TestMergeRefusesHostsOfOneName(t *testing.T) {
	var runs []Run
	for i := 0; i < 8; i++ {
		r := gpuHost("localhost")
		r.Source = filepath.Join("all", "node"+string(rune('0'+i)))
		runs = append(runs, r)
	}
	_, err := MergeRuns(runs, true)
	require.Error(t, err)
	for _, want := range []string{`8 runs are named "localhost"`, "all/node0", "all/node1", "GDR_REPORT_HOST=<name>"} {
		assert.Contains(t, err.Error(), want)
	}

	// Two machines of one name (machine-ids differ) are refused as well.
	a, b := gpuHost("gpu01"), gpuHost("gpu01")
	a.Host.MachineID, b.Host.MachineID, a.Source, b.Source = "aaaa", "bbbb", "x/gpu01", "y/gpu01"
	_, err = MergeRuns([]Run{a, b}, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "machine-id aaaa and bbbb")

	// A cloned machine-id: both ran at once, so they are not one host.
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a.Host.MachineID, b.Host.MachineID = "cccc", "cccc"
	_, err = MergeRuns([]Run{at(a, t0), at(b, t0.Add(time.Millisecond))}, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "same time")
}

// Two runs of one host (one machine-id, one after the other) are both kept:
// the latest judges, the earlier is labelled with its start time and left
// out of the verdict.
func TestMergeKeepsTwoRunsOfOneHost(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	early := at(gpuHost("gpu01"), t0) // GPU-09 fails
	late := at(gpuHost("gpu01"), t0.Add(time.Hour))
	for i, e := range late.Events {
		if e.Test == "TestGPU09HtoDBandwidth" || e.Test == "TestGPU09HtoDBandwidth/0000:00:06.0" {
			if e.Action == "fail" {
				late.Events[i].Action = "pass"
			}
		}
	}
	early.Host.MachineID, late.Host.MachineID = "m1", "m1"
	other := gpuHost("gpu02")
	runs, err := MergeRuns([]Run{late, early, other}, true)
	require.NoError(t, err)
	r := Build(runs)
	require.Len(t, r.Hosts, 3)
	byName := map[string]*HostResult{}
	for _, h := range r.Hosts {
		byName[h.Identity.Host] = h
	}
	old := byName["gpu01 (earlier run, started 2026-12-01T10:00:00Z)"]
	require.NotNil(t, old, "the earlier run is labelled with its start time: %v", byName)
	assert.True(t, old.Earlier)
	assert.Equal(t, NotQualified, old.Verdict.Verdict)
	require.NotNil(t, byName["gpu01"])
	assert.True(t, byName["gpu01"].Latest)
	// gpu02 fails GPU-09; gpu01's earlier failure no longer counts.
	assert.Equal(t, "NOT QUALIFIED (1 of 2 hosts: gpu02)", r.Verdict.Line)

	// Recorded before host.json kept a machine-id: the same addresses,
	// kernel and GPUs at different times are one host too; other addresses are not.
	early.Host.MachineID, late.Host.MachineID = "", ""
	for _, x := range []*Run{&early, &late} {
		x.Host.Addrs, x.Host.GPUs = []string{"192.0.2.2"}, []string{"0000:00:06.0"}
	}
	_, err = MergeRuns([]Run{early, late}, true)
	require.NoError(t, err)
	late.Host.Addrs = []string{"192.0.2.3"}
	_, err = MergeRuns([]Run{early, late}, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no machine_id")

	var txt bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	assert.Contains(t, txt.String(), "gpu01 (earlier run, started 2026-12-01T10:00:00Z): NOT QUALIFIED (1 must requirement failed) (superseded by a later run: not in the verdict)")
	assert.Contains(t, txt.String(), "total over 2 hosts: 1 NOT QUALIFIED, 1 INCOMPLETE, 0 QUALIFIED", "the earlier run is not counted")
	assert.Contains(t, txt.String(), "== gpu01: ")
	assert.Contains(t, txt.String(), "(latest run: this one judges)")

	// In JUnit the earlier run's failure is a skip naming the later run:
	// CI must not turn red for a run that was repeated.
	var x bytes.Buffer
	require.NoError(t, r.WriteJUnit(&x))
	t.Run("schemas", func(t *testing.T) {
		problems, err := junitcheck.Check(x.Bytes())
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
	doc, err := ParseJUnit(&x)
	require.NoError(t, err)
	var superseded, failed []string
	for _, su := range doc.Suites {
		for _, c := range su.Cases {
			if c.Skipped != nil && strings.HasPrefix(c.Skipped.Message, "superseded by a later run") {
				superseded = append(superseded, c.Name)
			}
			if c.Failure != nil {
				failed = append(failed, c.Name)
			}
		}
	}
	assert.NotEmpty(t, superseded)
	for _, n := range failed {
		assert.NotContains(t, n, "earlier run", "an earlier run fails no case")
	}
	assert.NotEmpty(t, failed, "gpu02's failure stays a failure")
}

// Hosts that ran different suite versions are flagged in the merged
// headline, and the page states the versions the hosts ran beside the
// renderer's own.
func TestMixedSuiteVersionsFlagged(t *testing.T) {
	a, b, c := gpuHost("a"), gpuHost("b"), gpuHost("c")
	a.Host.Suite, b.Host.Suite, c.Host.Suite = "v1.2.0", "v1.3.0", "v1.2.0"
	r := Build([]Run{a, b, c})
	assert.Equal(t, []string{"v1.2.0", "v1.3.0"}, r.Versions)
	require.Len(t, r.Verdict.Flags, 1)
	assert.Contains(t, r.Verdict.Flags[0], "mixed suite versions: v1.2.0 (2 hosts), v1.3.0 (1 host)")
	var txt, page, js bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	assert.Contains(t, strings.SplitN(txt.String(), "\n", 4)[2], "FLAG: mixed suite versions")
	require.NoError(t, r.WriteHTML(&page))
	assert.Contains(t, page.String(), "hosts ran suite v1.2.0, v1.3.0 · rendered by gdrreport "+r.Suite)
	require.NoError(t, r.WriteJSON(&js))
	var sum struct {
		Flags    []string `json:"flags"`
		Versions []string `json:"suite_versions"`
		Exit     *int     `json:"exit_code"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &sum))
	assert.Equal(t, r.Verdict.Flags, sum.Flags)
	assert.Equal(t, r.Versions, sum.Versions)
	require.NotNil(t, sum.Exit)
	assert.Equal(t, 1, *sum.Exit)

	b.Host.Suite = "v1.2.0"
	assert.Empty(t, Build([]Run{a, b, c}).Verdict.Flags, "one version: no flag")
}

// The report folder holds the verdict's exit code.
func TestExitCodeFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Build([]Run{gpuHost("a")}).WriteAll(dir))
	b, err := os.ReadFile(filepath.Join(dir, ExitCodeFile))
	require.NoError(t, err)
	assert.Equal(t, "1\n", string(b))
}

// GDR_REPORT_HOST names the host in host.json over its hostname.
func TestCollectReportHost(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/sys/kernel/random"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/sys/kernel/hostname"), []byte("localhost\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/machine-id"), []byte("0123abcd\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/sys/kernel/random/boot_id"), []byte("b-1\n"), 0o644))
	t.Setenv("GDR_HOST_ROOT", root)
	t.Setenv(ReportHostEnv, "")
	id := Collect()
	assert.Equal(t, "localhost", id.Host)
	assert.Equal(t, "0123abcd", id.MachineID)
	assert.Equal(t, "b-1", id.BootID)
	assert.Empty(t, id.Node)
	t.Setenv(ReportHostEnv, "rack3-node7")
	id = Collect()
	assert.Equal(t, "rack3-node7", id.Host)
	assert.Equal(t, "localhost", id.Node, "a pod named gdrconf-<i> keeps its node's host name")
	t.Setenv(ReportHostEnv, "localhost")
	assert.Empty(t, Collect().Node, "the same name: nothing to keep")
}

// A folder with a copy of a host's host.json and edited results does not
// replace the host's real run in a merge unless the operator names the
// rule (-latest): it is refused, naming both folders.
func TestForgedRunDoesNotReplaceTheReal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	real := at(gpuHost("gpu01"), t0)
	real.Host.MachineID, real.Source = "m1", "fleet/gpu01"
	forged := at(Run{Host: real.Host, Events: events("x/conformance/gpu", tc{name: "TestGPU02ComputeCapability", result: "pass", attrs: []string{"gdr.req", "GPU-02"}})}, t0.Add(time.Hour))
	forged.Source = "planted/gpu01"
	_, err := MergeRuns([]Run{real, forged}, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `host "gpu01" has 2 runs in this merge, among them fleet/gpu01 (started 2026-12-01T10:00:00Z) and planted/gpu01 (started 2026-12-01T11:00:00Z)`)
	assert.Contains(t, err.Error(), "pass -latest")
	runs, err := MergeRuns([]Run{real, forged}, true)
	require.NoError(t, err)
	assert.Len(t, runs, 2, "with -latest both are kept, the latest judges")
}

// Two-host tests that ran without GDR_TOKEN are flagged under the verdict
// in every format (gdr.oob_auth was read by nothing).
func TestUnauthenticatedPeerFlagged(t *testing.T) {
	pp := "github.com/gdrconf/gdrconf/conformance/pingpong"
	run := func(auth string) Run {
		return Run{Host: Identity{Host: "gpu01"}, Events: events(pp,
			tc{name: "TestPP03Write", result: "pass", attrs: []string{"gdr.req", "PP-03"}},
			tc{name: "TestPP03Write/rail0", result: "pass", attrs: []string{"gdr.oob_auth", auth, "gdr.role", "client"}})}
	}
	r := Build([]Run{run("none (GDR_TOKEN unset)")})
	require.Len(t, r.Verdict.Flags, 1)
	assert.Contains(t, r.Verdict.Flags[0], "peers not authenticated: gpu01 ran two-host tests without GDR_TOKEN")
	var txt, md, js bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteJSON(&js))
	for name, s := range map[string]string{"summary.txt": txt.String(), "summary.md": md.String(), "summary.json": js.String()} {
		assert.Contains(t, s, "peers not authenticated", name)
	}
	assert.Empty(t, Build([]Run{run("hmac-sha256")}).Verdict.Flags, "an authenticated peer is no flag")
}
