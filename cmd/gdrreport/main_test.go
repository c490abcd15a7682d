package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/report"
	"github.com/gdrconf/gdrconf/report/evidence"
)

func hostDir(t *testing.T, id report.Identity, result string) string {
	t.Helper()
	dir := t.TempDir()
	evs := []report.Event{
		{Action: "run", Package: "x/conformance/gpu", Test: "TestGPU02ComputeCapability"},
		{Action: "attr", Package: "x/conformance/gpu", Test: "TestGPU02ComputeCapability", Key: "gdr.req", Value: "GPU-02"},
		{Action: "output", Package: "x/conformance/gpu", Test: "TestGPU02ComputeCapability", Output: "    g.go:1: compute capability 5.2; remedy: use a newer GPU\n"},
		{Action: result, Package: "x/conformance/gpu", Test: "TestGPU02ComputeCapability"},
	}
	require.NoError(t, report.SaveRun(dir, report.Run{Host: id, Events: evs}))
	return dir
}

// The exit status is the verdict's, and every report file is written.
func TestExitStatus(t *testing.T) {
	failed := hostDir(t, report.Identity{Host: "a"}, "fail")
	assert.Equal(t, 1, run([]string{"-q", failed}), "NOT QUALIFIED")
	for _, f := range []string{"junit.xml", "summary.txt", "summary.md", "summary.json", "report.html"} {
		assert.FileExists(t, filepath.Join(failed, f))
	}
	assert.Equal(t, 0, run([]string{"-q", hostDir(t, report.Identity{Host: "b"}, "pass")}), "INCOMPLETE without GDR_STRICT")
	assert.Equal(t, 3, run([]string{"-q", hostDir(t, report.Identity{Host: "c", Strict: true}, "pass")}), "INCOMPLETE under GDR_STRICT=1")
	assert.Equal(t, 2, run([]string{"-q", t.TempDir()}), "no results")
	assert.Equal(t, 2, run([]string{"-q", failed, failed}), "two inputs need -out")

	// Many hosts merge into -out.
	out := t.TempDir()
	assert.Equal(t, 1, run([]string{"-q", "-out", out, failed, hostDir(t, report.Identity{Host: "b"}, "pass")}))
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"verdict": "NOT QUALIFIED"`)
	assert.Contains(t, string(b), `"host": "b"`)
}

// A JUnit-only recording is never overwritten by its own report.
func TestRecordingNotOverwritten(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../fixtures/runs/h200-suite/junit.xml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "junit.xml"), src, 0o644))
	assert.Equal(t, 2, run([]string{"-q", dir}))
	b, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	require.NoError(t, err)
	assert.Equal(t, string(src), string(b))
	assert.Equal(t, 0, run([]string{"-q", "-out", t.TempDir(), dir}))
}

// -collect writes this host's host.json with go test's exit status; a
// non-zero exit with no failed test fails the host.
func TestCollect(t *testing.T) {
	dir := hostDir(t, report.Identity{Host: "x"}, "pass")
	assert.Equal(t, 1, run([]string{"-q", "-collect", "-go-exit", "2", dir}))
	id, err := report.ReadIdentity(filepath.Join(dir, "host.json"))
	require.NoError(t, err)
	assert.NotEmpty(t, id.Host)
	require.NotNil(t, id.GoTestExit)
	assert.Equal(t, 0, run([]string{"-q", "-collect", "-host", "h200-1", dir}))
	id, err = report.ReadIdentity(filepath.Join(dir, "host.json"))
	require.NoError(t, err)
	assert.Equal(t, "h200-1", id.Host)
	if hn, _ := os.ReadFile("/proc/sys/kernel/hostname"); len(hn) > 0 && strings.TrimSpace(string(hn)) != "h200-1" {
		assert.Equal(t, strings.TrimSpace(string(hn)), id.Node, "-host keeps the machine's own name as node")
	}
	id.GoTestExit = nil
	require.NoError(t, report.WriteIdentity(dir, id))
	assert.Equal(t, 1, run([]string{"-q", "-collect", "-go-exit", "2", dir}))
	id, err = report.ReadIdentity(filepath.Join(dir, "host.json"))
	require.NoError(t, err)
	require.NotNil(t, id.GoTestExit)
	assert.Equal(t, 2, *id.GoTestExit)
	assert.NotEmpty(t, id.Suite)

	// -stopped: dist/run.sh saw SIGTERM; the host.json says so. A value
	// that is no signal's name is refused, naming it.
	assert.Equal(t, 3, run([]string{"-q", "-collect", "-go-exit", "1", "-stopped", "SIGTERM", dir}), "stopped: INCOMPLETE, never exit 0")
	id, err = report.ReadIdentity(filepath.Join(dir, "host.json"))
	require.NoError(t, err)
	assert.Equal(t, "SIGTERM", id.Stopped)
	assert.Equal(t, 2, run([]string{"-q", "-collect", "-stopped", "TERM; rm -rf /", dir}))
}

// Two hosts of one name do not merge: exit 2 (no report), and the code is
// written to GDR_EXIT_CODE_FILE for build/verdict.sh.
func TestDuplicateHostsRefused(t *testing.T) {
	codeFile := filepath.Join(t.TempDir(), "code")
	t.Setenv(exitCodeEnv, codeFile)
	a := hostDir(t, report.Identity{Host: "localhost"}, "pass")
	b := hostDir(t, report.Identity{Host: "localhost"}, "pass")
	out := t.TempDir()
	assert.Equal(t, 2, run([]string{"-q", "-out", out, a, b}))
	assert.NoFileExists(t, filepath.Join(out, "summary.json"))
	// One host's two runs merge only when the operator says the latest
	// judges (a folder with a copied host.json must not replace a real
	// run unseen); then the code lands in the report folder.
	c := hostDir(t, report.Identity{Host: "gpu01", MachineID: "m", Time: "2026-12-01T10:00:00Z"}, "fail")
	d := hostDir(t, report.Identity{Host: "gpu01", MachineID: "m", Time: "2026-12-01T11:00:00Z"}, "pass")
	assert.Equal(t, 2, run([]string{"-q", "-out", out, c, d}), "refused without -latest")
	assert.NoFileExists(t, filepath.Join(out, "summary.json"))
	assert.Equal(t, 0, run([]string{"-q", "-latest", "-out", out, c, d}), "the later run passes and judges")
	b2, err := os.ReadFile(filepath.Join(out, "exit-code"))
	require.NoError(t, err)
	assert.Equal(t, "0\n", string(b2))
}

// GDR_SIGN_KEY makes the report folder carry a signed bundle that
// `gdrreport verify` accepts with the public key, and rejects (exit 1) once
// a member changed; a bad key value is exit 2 naming the variable.
func TestEvidenceBundle(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "lab")
	require.Equal(t, 0, run([]string{"keygen", "-out", keys}))
	dir := hostDir(t, report.Identity{Host: "a"}, "fail")
	t.Setenv(evidence.KeyEnv, keys+".pem")
	assert.Equal(t, 1, run([]string{"-q", dir}), "the verdict's exit status is unchanged")
	bundle := filepath.Join(dir, evidence.BundleFile)
	require.FileExists(t, bundle)
	assert.Equal(t, 0, run([]string{"verify", "-key", keys + ".pub.pem", bundle}))
	assert.Equal(t, 2, run([]string{"verify", bundle}), "no key: usage")

	b, err := os.ReadFile(bundle)
	require.NoError(t, err)
	b[len(b)/2] ^= 0xff
	bad := filepath.Join(t.TempDir(), "bad.tar.gz")
	require.NoError(t, os.WriteFile(bad, b, 0o644))
	assert.Equal(t, 1, run([]string{"verify", "-key", keys + ".pub.pem", bad}), "a changed byte")

	t.Setenv(evidence.KeyEnv, filepath.Join(t.TempDir(), "missing.pem"))
	assert.Equal(t, 2, run([]string{"-q", dir}))
}

// -compact (a cluster round, dist/run.sh) keeps test.json as test.json.gz
// and writes summary.txt and exit-code only; the merge reads the folder as
// before. It takes one folder and writes into it.
func TestCompactRound(t *testing.T) {
	dir := hostDir(t, report.Identity{Host: "n1"}, "fail")
	assert.Equal(t, 1, run([]string{"-q", "-collect", "-compact", "-host", "n1", dir}))
	assert.NoFileExists(t, filepath.Join(dir, report.EventsFile))
	assert.FileExists(t, filepath.Join(dir, report.EventsGzFile))
	for _, f := range []string{report.SummaryText, report.ExitCodeFile, report.HostFile} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	for _, f := range []string{report.JUnitFile, report.HTMLFile, report.SummaryJSON, report.DCGMFile} {
		assert.NoFileExists(t, filepath.Join(dir, f))
	}
	out := t.TempDir()
	assert.Equal(t, 1, run([]string{"-q", "-out", out, dir}), "the compacted round merges with its verdict")
	b, err := os.ReadFile(filepath.Join(out, report.SummaryText))
	require.NoError(t, err)
	assert.Contains(t, string(b), "n1")
	assert.Equal(t, 2, run([]string{"-q", "-compact", "-out", t.TempDir(), dir}), "-compact writes into its folder")
}
