package report

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/reqs"
)

// A requirement added after the suite a host ran was built reads "not in
// this suite version", not "-run filter?": the suite's commit time (its
// version) or the run's start bounds when it was built. Without either, or
// for a build from uncommitted changes, nothing is claimed.
func TestRequirementNewerThanTheSuite(t *testing.T) {
	added, ok := reqs.Added("TOPO-10")
	if !ok {
		t.Fatal("TOPO-10 has no added time")
	}
	run := func(suite string, start time.Time) *HostResult {
		r := Run{Host: Identity{Host: "h", Suite: suite}, Events: events("x/conformance/topology",
			tc{name: "TestTOPO01Inventory", result: "pass", attrs: []string{"gdr.req", "TOPO-01"}})}
		if !start.IsZero() {
			r = at(r, start)
		}
		return Build([]Run{r}).Hosts[0]
	}
	reason := func(h *HostResult, id string) string { return h.Reqs[indexOf(h, id)].Reason }
	before, after := added.Add(-time.Hour), added.Add(time.Hour)

	h := run("v0.0.0-x ("+before.Format(time.RFC3339)+")", after)
	assert.True(t, strings.HasPrefix(reason(h, "TOPO-10"), "not in this suite version: the suite this host ran was built by "+before.Format(time.RFC3339)), reason(h, "TOPO-10"))
	assert.Equal(t, "run the current suite on this host to judge it", h.Reqs[indexOf(h, "TOPO-10")].Remedy)
	assert.Equal(t, NotRun, h.Reqs[indexOf(h, "TOPO-10")].Status, "still not judged")
	assert.Contains(t, reason(h, "TOPO-02"), "-run filter?", "a requirement the suite had")

	h = run("", before) // no version: the run's start bounds the build
	assert.True(t, strings.HasPrefix(reason(h, "TOPO-10"), "not in this suite version"), reason(h, "TOPO-10"))
	h = run("v0.0.0-x ("+after.Format(time.RFC3339)+")", after.Add(time.Hour))
	assert.Contains(t, reason(h, "TOPO-10"), "-run filter?", "built after the requirement: it was filtered")
	h = run("abc123-dirty", before)
	assert.Contains(t, reason(h, "TOPO-10"), "-run filter?", "uncommitted changes may hold it")
	h = run("", time.Time{})
	assert.Contains(t, reason(h, "TOPO-10"), "-run filter?", "no time known")

	// In JUnit the reason stands as it is, not as "not run: not in ...".
	doc := parseJUnit(t, junitOf(t, Build([]Run{at(Run{Host: Identity{Host: "h"}, Events: events("x/conformance/topology",
		tc{name: "TestTOPO01Inventory", result: "pass", attrs: []string{"gdr.req", "TOPO-01"}})}, before)})))
	var msg string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Name == "TOPO-10 (not run) [h]" {
				msg = c.Skipped.Message
			}
		}
	}
	assert.True(t, strings.HasPrefix(msg, "TOPO-10 must on h: not in this suite version: "), msg)
}
