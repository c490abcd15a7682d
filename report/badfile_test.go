package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostDir writes a host folder with host.json and test.json as given.
func hostDir(t *testing.T, parent, name, events string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(d, 0o755))
	require.NoError(t, WriteIdentity(d, Identity{Host: name}))
	if events != "" {
		require.NoError(t, os.WriteFile(filepath.Join(d, EventsFile), []byte(events), 0o644))
	}
	return d
}

const oneTest = `{"Action":"run","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability"}
{"Action":"attr","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability","Key":"gdr.req","Value":"GPU-02"}
{"Action":"pass","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability"}
`

// One bad file in a fleet's folder stops neither the merge nor the other
// hosts: each is named on its host, which it fails.
func TestBadFilesStopNoFleet(t *testing.T) {
	fleet := t.TempDir()
	hostDir(t, fleet, "good", oneTest)
	// A node that died mid-write: the last event is cut short.
	hostDir(t, fleet, "cut", oneTest+`{"Action":"pass","Package":"x/conf`)
	// A line of 20 MiB (a test that printed a huge blob), then more events.
	hostDir(t, fleet, "long", `{"Action":"output","Package":"x/conformance/gpu","Output":"`+strings.Repeat("x", 20<<20)+`"}`+"\n"+oneTest)
	// A FIFO where test.json should be: a plain read would block for ever.
	d := hostDir(t, fleet, "fifo", "")
	require.NoError(t, syscall.Mkfifo(filepath.Join(d, EventsFile), 0o644))
	// A run that never ended: only dist/run.sh's partial file.
	d = hostDir(t, fleet, "partial", "")
	require.NoError(t, os.WriteFile(filepath.Join(d, PartialEvents), []byte(oneTest), 0o644))

	done := make(chan struct{})
	var r *Report
	var err error
	go func() {
		defer close(done)
		r, err = FromDirs([]string{fleet}, Options{})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the merge hung on a bad file")
	}
	require.NoError(t, err)
	errs := map[string]string{}
	for _, h := range r.Hosts {
		errs[h.Identity.Host] = strings.Join(h.Errors, " | ")
	}
	assert.Empty(t, errs["good"])
	assert.Contains(t, errs["cut"], "test.json: its last line is cut short (the run was stopped mid-write, or is still writing): that event is lost")
	assert.Contains(t, errs["long"], "1 line(s) longer than 16777216 bytes skipped (the first is line 1)")
	assert.Contains(t, errs["fifo"], "test.json is not a regular file (a FIFO): not read")
	assert.Contains(t, errs["partial"], "has only test.json.partial: the run did not end")
	for _, h := range r.Hosts {
		if h.Identity.Host == "good" {
			continue
		}
		assert.Equal(t, NotQualified, h.Verdict.Verdict, "%s: a damaged run fails its host", h.Identity.Host)
	}
	// The events that were whole still count: GPU-02 passed on "cut".
	for _, h := range r.Hosts {
		if h.Identity.Host == "cut" || h.Identity.Host == "long" || h.Identity.Host == "partial" {
			assert.Equal(t, Pass, h.Reqs[indexOf(h, "GPU-02")].Status, h.Identity.Host)
		}
	}

	// host.json linked to /dev/zero is refused by name, not read for ever.
	bad := t.TempDir()
	d = filepath.Join(bad, "zero")
	require.NoError(t, os.MkdirAll(d, 0o755))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(d, HostFile)))
	_, err = LoadDir(d)
	assert.ErrorContains(t, err, "host.json is not a regular file (a character device): not read")
}

// Host names the file-name mapping would join keep files of their own:
// "gpu.01" and "gpu_01" once both wrote dcgm-diag/gpu_01.json at once.
func TestHostFileNamesDoNotCollide(t *testing.T) {
	fleet := t.TempDir()
	hostDir(t, fleet, "gpu.01", oneTest)
	hostDir(t, fleet, "gpu_01", oneTest)
	hostDir(t, fleet, "gpu-02", oneTest)
	r, err := FromDirs([]string{fleet}, Options{})
	require.NoError(t, err)
	out := t.TempDir()
	require.NoError(t, r.WriteAll(out))
	files, err := filepath.Glob(filepath.Join(out, DCGMDir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 3, "one file per host")
	names := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.True(t, json.Valid(b), "%s is whole JSON", f)
		names[filepath.Base(f)] = true
	}
	assert.True(t, names["gpu-02.json"], "a name that needs no mapping keeps it: %v", names)
	assert.NotEqual(t, anchor("gpu.01"), anchor("gpu_01"))
	assert.Regexp(t, `^gpu_01-[0-9a-f]{8}$`, anchor("gpu.01"))
}

// Control characters a host or its tests wrote (ESC sequences, BEL, NUL,
// the C1 CSI, a bidi override, U+FFFD itself) reach no format raw: the
// terminal prints summary.txt, the browser shows report.html, CI parses
// junit.xml.
func TestControlCharactersEscapedEverywhere(t *testing.T) {
	fleet := t.TempDir()
	evil := "\x1b[2J\x07\x00\u009b1m\u202eevil\ufffd"
	ev := `{"Action":"run","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability"}
{"Action":"attr","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability","Key":"gdr.req","Value":"GPU-02"}
{"Action":"output","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability","Output":"    gpu_test.go:9: ` + jsonEscape(evil) + `; remedy: do ` + jsonEscape(evil) + `\n"}
{"Action":"fail","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability"}
`
	d := hostDir(t, fleet, "h1", ev)
	id := Identity{Host: "h1", Kernel: evil}
	require.NoError(t, WriteIdentity(d, id))
	r, err := FromDirs([]string{fleet}, Options{})
	require.NoError(t, err)
	out := t.TempDir()
	require.NoError(t, r.WriteAll(out))
	for _, f := range []string{SummaryText, SummaryMD, SummaryJSON, HTMLFile, JUnitFile} {
		b, err := os.ReadFile(filepath.Join(out, f))
		require.NoError(t, err)
		s := string(b)
		for _, bad := range []string{"\x1b", "\x07", "\x00", "\u009b", "\u202e", "\ufffd"} {
			assert.NotContains(t, s, bad, "%s carries %q raw", f, bad)
		}
		if f != SummaryJSON { // JSON escapes the backslash itself
			assert.Contains(t, s, `\x1b[2J`, "%s shows the escape as text", f)
		}
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// FromDirs leaves each host's events on disk until Build reaches the host
// (a fleet's are never all in memory): a test.json gone or damaged by then
// fails that host, naming the file, and the merge goes on.
func TestEventsReadWhenBuilt(t *testing.T) {
	fleet := t.TempDir()
	hostDir(t, fleet, "good", oneTest)
	gone := hostDir(t, fleet, "gone", oneTest)
	runs, err := loadDir(fleet, newInterner(), true)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	for _, r := range runs {
		assert.Nil(t, r.Events, "%s: read when built", r.Host.Host)
	}
	require.NoError(t, os.Remove(filepath.Join(gone, EventsFile)))
	r := Build(runs)
	byName := map[string]*HostResult{}
	for _, h := range r.Hosts {
		byName[h.Identity.Host] = h
	}
	assert.Equal(t, Pass, byName["good"].Reqs[indexOf(byName["good"], "GPU-02")].Status)
	assert.Equal(t, NotQualified, byName["gone"].Verdict.Verdict)
	assert.Contains(t, strings.Join(byName["gone"].Errors, " | "), "its events could not be read: "+gone+": no test.json, test.json.gz or test.json.partial")
}
