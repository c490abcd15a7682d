package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A test that never ended is a fault of the run: JUnit <error> of type
// did_not_finish saying how the binary stopped, no part blamed, and the
// tests after it "not reached", never "-run filter?".
func TestDidNotFinish(t *testing.T) {
	const install = "github.com/gdrconf/gdrconf/conformance/install"
	for _, c := range []struct {
		name, last, want string
	}{
		{"killed", "signal: killed", "did not finish: the test binary was killed (signal: killed)"},
		{"deadline", "panic: test timed out after 10m0s", "did not finish: the test binary's deadline ran out (go test -timeout 10m0s)"},
		{"panic", "panic: runtime error: invalid memory address or nil pointer dereference", "did not finish: the test binary stopped on panic: runtime error: invalid memory address or nil pointer dereference"},
		{"silent", "", "did not finish: its package ended while it ran (the test binary exited or was killed without a word)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := events(install,
				tc{name: "TestINST01DriverLoaded", result: "pass", attrs: []string{"gdr.req", "INST-01"}},
				tc{name: "TestINST05CUDAToolkit", attrs: []string{"gdr.req", "INST-05"}, out: []string{"    driver_test.go:180: running nvcc -V"}})
			if c.last != "" {
				evs = append(evs, Event{Action: "output", Package: install, Output: c.last + "\n"})
			}
			evs = append(evs, Event{Action: "output", Package: install, Output: "FAIL\t" + install + "\t600.1s\n"},
				Event{Action: "fail", Package: install, Elapsed: 600.1})
			two := 2
			r := Build([]Run{{Host: Identity{Host: "dgx-1", GoTestExit: &two}, Events: evs}})
			h := r.Hosts[0]
			inst05 := h.Reqs[indexOf(h, "INST-05")]
			assert.Equal(t, Fail, inst05.Status)
			assert.Equal(t, OutcomeDidNotFinish, inst05.Outcome)
			assert.Equal(t, c.want+"; its last message: running nvcc -V", inst05.Reason, "how it stopped, and what it was doing")
			for _, cs := range h.Cases() {
				assert.Nil(t, cs.Part, "%s: a run that did not finish names no part", cs.Name)
			}
			inst07 := h.Reqs[indexOf(h, "INST-07")]
			assert.Equal(t, NotRun, inst07.Status)
			assert.Equal(t, "not reached: conformance/install stopped at TestINST05CUDAToolkit, which did not finish", inst07.Reason)
			topo := h.Reqs[indexOf(h, "TOPO-01")]
			assert.Contains(t, topo.Reason, "is not in this run", "another package: not this one's stop")
			assert.Equal(t, NotQualified, r.Verdict.Verdict)

			var found bool
			for _, s := range r.JUnit().Suites {
				for _, jc := range s.Testcases {
					if strings.HasPrefix(jc.Name, "TestINST05CUDAToolkit") {
						found = true
						require.NotNil(t, jc.Error, "an error, not a failure")
						assert.Nil(t, jc.Failure)
						assert.Equal(t, OutcomeDidNotFinish, jc.Error.Type)
						assert.Contains(t, jc.Error.Message, "did not finish")
						assert.NotContains(t, jc.Error.Data, "gdr.part")
					}
				}
			}
			assert.True(t, found)
		})
	}
}

// A run where no test ran at all is its own INCOMPLETE, with advice that
// fits it (not "run with GDR_STRICT=1"), and exits 3 whatever GDR_STRICT
// says: a pipeline must not pass on it.
func TestEmptyRun(t *testing.T) {
	r := Build([]Run{{Host: Identity{Host: "gpu01"}}})
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
	assert.Equal(t, "INCOMPLETE (no test ran)", r.Verdict.Line)
	assert.Contains(t, r.Verdict.Advice, "no test ran at all")
	assert.NotContains(t, r.Verdict.Advice, "GDR_STRICT=1")
	assert.Equal(t, 3, r.ExitCode())

	// In a fleet, one empty host keeps the exit non-zero.
	pass := events("x/conformance/gpu", tc{name: "TestGPU02ComputeCapability", result: "pass", attrs: []string{"gdr.req", "GPU-02"}})
	r = Build([]Run{{Host: Identity{Host: "gpu01"}, Events: pass}, {Host: Identity{Host: "gpu02"}}})
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
	assert.True(t, r.Verdict.NoTests)
	assert.Equal(t, 3, r.ExitCode())
	// A run that ran tests and skipped some is the plain INCOMPLETE: 0.
	r = Build([]Run{{Host: Identity{Host: "gpu01"}, Events: pass}})
	assert.False(t, r.Verdict.NoTests)
	assert.Equal(t, 0, r.ExitCode())
}
