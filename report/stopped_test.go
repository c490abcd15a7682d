package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run stopped by a signal (dist/run.sh saw it: host.json's stopped)
// reads as stopped: the test it cut short is not judged, what it had not
// reached is not run, and with nothing failed the host is INCOMPLETE, not
// NOT QUALIFIED. The same events without the signal still fail, as a test
// killed without a word must.
func TestStoppedRunIsNotAFailure(t *testing.T) {
	const soak = `{"Action":"run","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability"}
{"Action":"attr","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability","Key":"gdr.req","Value":"GPU-02"}
{"Action":"pass","Package":"x/conformance/gpu","Test":"TestGPU02ComputeCapability"}
{"Action":"run","Package":"x/conformance/soak","Test":"TestSOAK01NoDip"}
{"Action":"attr","Package":"x/conformance/soak","Test":"TestSOAK01NoDip","Key":"gdr.req","Value":"SOAK-01"}
{"Action":"run","Package":"x/conformance/soak","Test":"TestSOAK01NoDip/rail0"}
{"Action":"pass","Package":"x/conformance/soak","Test":"TestSOAK01NoDip/rail0"}
{"Action":"run","Package":"x/conformance/soak","Test":"TestSOAK01NoDip/rail1"}
{"Action":"output","Package":"x/conformance/soak","Test":"TestSOAK01NoDip/rail1","Output":"    soak.go:1: soak 45s of 1m30s, 45s left\n"}
`
	dir := func(name, sig string) string {
		d := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, WriteIdentity(d, Identity{Host: name, Stopped: sig}))
		require.NoError(t, os.WriteFile(filepath.Join(d, PartialEvents), []byte(soak), 0o644))
		return d
	}
	r, err := FromDirs([]string{dir("cut", "SIGTERM")}, Options{})
	require.NoError(t, err)
	h := r.Hosts[0]
	assert.Empty(t, h.Errors, "a stopped run's partial file is no failure outside any test")
	assert.Equal(t, Incomplete, h.Verdict.Verdict)
	assert.Contains(t, h.Verdict.Line, "stopped by SIGTERM")
	assert.Contains(t, h.Verdict.Advice, "the run was stopped by SIGTERM (Slurm's scancel or time limit, Kubernetes deleting the pod) before it ended")
	s1 := h.Reqs[indexOf(h, "SOAK-01")]
	assert.Equal(t, NotRun, s1.Status, "cut short: not judged, though one rail passed before the stop")
	assert.Contains(t, s1.Reason, "1 of 2 passed, then did not finish: the run was stopped by SIGTERM while it ran")
	assert.Contains(t, s1.Reason, "its last message: soak 45s of 1m30s, 45s left")
	assert.Contains(t, s1.Remedy, "run the suite again and let it end")
	s2 := h.Reqs[indexOf(h, "SOAK-02")]
	assert.Equal(t, NotRun, s2.Status)
	assert.Equal(t, "not reached: the run was stopped by SIGTERM while conformance/soak ran TestSOAK01NoDip", s2.Reason)
	assert.Equal(t, Pass, h.Reqs[indexOf(h, "GPU-02")].Status, "what finished before the stop is judged")
	for _, c := range h.Cases() {
		assert.NotEqual(t, Fail, c.Status(), "%s: no case of a stopped run fails for the stop", c.Name)
	}
	var junit strings.Builder
	require.NoError(t, r.WriteJUnit(&junit))
	assert.Contains(t, junit.String(), "the run was stopped by SIGTERM while it ran", "JUnit says why, as an error (not a failure)")
	assert.NotContains(t, junit.String(), `type="fell_short"`)

	// The same events with no signal recorded: a test that died without a
	// word still fails its host, and the partial file is named.
	r, err = FromDirs([]string{dir("dead", "")}, Options{})
	require.NoError(t, err)
	h = r.Hosts[0]
	assert.Equal(t, NotQualified, h.Verdict.Verdict)
	assert.Contains(t, strings.Join(h.Errors, " | "), "has only test.json.partial: the run did not end")
	assert.Equal(t, Fail, h.Reqs[indexOf(h, "SOAK-01")].Status)
}
