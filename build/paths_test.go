// Package build holds the tests of the project's build and run paths: the
// Makefile's conformance target and the dist scripts that rounds.sh, the
// Slurm script and the Kubernetes Job call.
package build

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/report"
)

// make conformance must run the conformance packages one at a time: go
// test's -p defaults to the CPU count, and on 2 cores without -p 1 the
// packages' tests were seen to overlap (gpu and install, 36 ms). GOFLAGS's
// -exec starts every test binary under a recorder that logs when it started
// and ended and holds it 0.3 s: binaries that go test ran at once overlap
// in that log whatever their own speed. The events must show no overlap
// either.
func TestMakeConformanceRunsPackagesOneAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make conformance (-short)")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make here")
	}
	out, shim := t.TempDir(), t.TempDir()
	log := filepath.Join(shim, "binaries.log")
	write(t, filepath.Join(shim, "record"), "#!/bin/sh\n"+
		"echo \"start $$ $(date +%s.%N)\" >>"+log+"\nsleep 0.3\n\"$@\"\nrc=$?\n"+
		"echo \"end $$ $(date +%s.%N)\" >>"+log+"\nexit $rc\n")
	cmd := exec.Command("make", "-s", "conformance", "REPORTS="+out)
	cmd.Dir = ".."
	// go commands that do not know -exec (build, tool) ignore it.
	cmd.Env = cleanEnv("GDR_SUITE_LOCK="+filepath.Join(out, "suite.lock"),
		strings.TrimSpace("GOFLAGS="+os.Getenv("GOFLAGS")+" -exec="+filepath.Join(shim, "record")))
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	f, ferr := os.Open(filepath.Join(out, report.EventsFile))
	require.NoError(t, ferr, "make conformance left no %s (make: %v)\n%s", report.EventsFile, err, buf.String())
	defer f.Close()
	evs, err := report.ReadEvents(f)
	require.NoError(t, err)

	lines, err := os.ReadFile(log)
	require.NoError(t, err, "no test binary ran under the recorder:\n%s", buf.String())
	running, most, starts := 0, 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		switch strings.Fields(l)[0] {
		case "start":
			running++
			starts++
		case "end":
			running--
		}
		most = max(most, running)
	}
	require.GreaterOrEqual(t, starts, 2, "too few test binaries ran to tell an overlap:\n%s\n%s", lines, buf.String())
	assert.Equal(t, 1, most, "make conformance ran test binaries at the same time:\n%s", lines)
	assert.Empty(t, report.Overlaps(evs), "the packages' tests overlapped")
	assert.False(t, strings.Contains(buf.String(), "another conformance binary runs on this host"),
		"a binary found another holding the suite lock")
}

// dist/run.sh's run-json.sh (which rounds.sh, the sbatch script and the
// Job run) starts each test binary only after the one before it ended.
func TestDistRunsPackagesOneAtATime(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	script, err := os.ReadFile("dist/run-json.sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run-json.sh"), script, 0o755))
	log := filepath.Join(dir, "log")
	// test2json stand-in: drop -t -p <pkg>, run the binary.
	write(t, filepath.Join(bin, "test2json"), "#!/bin/sh\nshift 3\nexec \"$@\"\n")
	for _, name := range []string{"a", "b", "c"} {
		write(t, filepath.Join(bin, name+".test"), "#!/bin/sh\necho start "+name+" >>"+log+"\nsleep 0.2\necho end "+name+" >>"+log+"\n")
		write(t, filepath.Join(bin, name+".pkg"), "example/"+name+"\n")
	}
	out, err := exec.Command(filepath.Join(dir, "run-json.sh")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "start a\nend a\nstart b\nend b\nstart c\nend c\n", string(got), "each binary ends before the next starts")
}

// A cluster run's later rounds (rounds.sh sets GDR_PAIRED_ONLY=1) run only
// the binaries that meet a peer, marked .paired by build.sh.
func TestDistPairedOnly(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	script, err := os.ReadFile("dist/run-json.sh")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run-json.sh"), script, 0o755))
	log := filepath.Join(dir, "log")
	write(t, filepath.Join(bin, "test2json"), "#!/bin/sh\nshift 3\nexec \"$@\"\n")
	for _, name := range []string{"install", "pingpong", "topology"} {
		write(t, filepath.Join(bin, name+".test"), "#!/bin/sh\necho "+name+" >>"+log+"\n")
		write(t, filepath.Join(bin, name+".pkg"), "example/"+name+"\n")
	}
	write(t, filepath.Join(bin, "pingpong.paired"), "")
	b, err := os.ReadFile("dist/build.sh")
	require.NoError(t, err)
	assert.Contains(t, string(b), `$name == `+reqs.PairedArea+` ]] && : >"$out/bin/$name.paired"`, "build.sh marks reqs.PairedArea, the package that meets a peer")
	for _, c := range []struct{ env, want string }{
		{"GDR_PAIRED_ONLY=1", "pingpong\n"},
		{"GDR_PAIRED_ONLY=0", "install\npingpong\ntopology\n"},
		{"", "install\npingpong\ntopology\n"},
	} {
		require.NoError(t, os.RemoveAll(log))
		cmd := exec.Command(filepath.Join(dir, "run-json.sh"))
		cmd.Env = cleanEnv(c.env)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		got, err := os.ReadFile(log)
		require.NoError(t, err)
		assert.Equal(t, c.want, string(got), c.env)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, []byte(s), 0o755))
}

// cleanEnv is the environment without the suite's variables (a developer's
// GDR_* must not steer the run), plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GDR_") && !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// dist/run.sh writes the events to test.json.partial while the suite runs
// and renames it test.json when the run ends, so a merge on another host
// never reads half a run as a whole one.
func TestDistRunRenamesEventsWhenDone(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, s := range []string{"run.sh", "run-json.sh"} {
		b, err := os.ReadFile("dist/" + s)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, s), b, 0o755))
	}
	reports := filepath.Join(dir, "reports")
	// gotestsum stand-in: write an event to --jsonfile's file, and say
	// whether test.json existed meanwhile.
	write(t, filepath.Join(bin, "gotestsum"), "#!/bin/sh\n"+
		"while [ \"$1\" != --jsonfile ]; do shift; done; f=$2\n"+
		"echo '{\"Action\":\"pass\",\"Package\":\"p\"}' >\"$f\"\n"+
		"[ -e "+reports+"/test.json ] && echo seen >"+dir+"/early\n"+
		"echo \"$f\" >"+dir+"/jsonfile\nexit 0\n")
	write(t, filepath.Join(bin, "gdrreport"), "#!/bin/sh\necho \"$*\" >"+dir+"/gdrreport-args\nexit 0\n")
	cmd := exec.Command(filepath.Join(dir, "run.sh"))
	cmd.Env = cleanEnv("GDR_REPORTS="+reports, "SLURM_STEP_NUM_TASKS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	args, err := os.ReadFile(filepath.Join(dir, "gdrreport-args"))
	require.NoError(t, err)
	assert.Equal(t, "-collect -go-exit 0 "+reports+"\n", string(args), "a host's own run keeps every report")
	// A round of a cluster run (rounds.sh exports GDR_PLAN) is compacted:
	// it lives on the shared folder with thousands of others.
	cmd = exec.Command(filepath.Join(dir, "run.sh"))
	cmd.Env = cleanEnv("GDR_REPORTS="+reports, "SLURM_STEP_NUM_TASKS=", "GDR_PLAN=run")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	args, err = os.ReadFile(filepath.Join(dir, "gdrreport-args"))
	require.NoError(t, err)
	assert.Equal(t, "-collect -compact -go-exit 0 "+reports+"\n", string(args))
	b, err := os.ReadFile(filepath.Join(dir, "jsonfile"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(reports, "test.json.partial")+"\n", string(b), "the suite writes the partial file")
	assert.NoFileExists(t, filepath.Join(dir, "early"), "no test.json while the suite runs")
	assert.FileExists(t, filepath.Join(reports, "test.json"), "renamed when the run ended")
	assert.NoFileExists(t, filepath.Join(reports, "test.json.partial"))
}
