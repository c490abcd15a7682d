package report

import (
	"strings"
	"testing"

	"github.com/jstemmer/go-junit-report/v2/junit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/reqs"
)

// allPass is a strict run in which every requirement passed except those
// in skip, which skipped with the given attributes.
func allPass(skip map[string][]string) Run {
	var evs []Event
	for _, a := range reqs.Areas {
		var tests []tc
		for _, r := range reqs.All() {
			if r.Area != a.Name {
				continue
			}
			name := "Test" + strings.ReplaceAll(r.ID, "-", "")
			if attrs, ok := skip[r.ID]; ok {
				tests = append(tests, tc{name: name, result: "skip", attrs: append([]string{"gdr.req", r.ID}, attrs...),
					out: []string{"    x_test.go:1: " + attrs[len(attrs)-1]}})
				continue
			}
			tests = append(tests, tc{name: name, result: "pass", attrs: []string{"gdr.req", r.ID}})
		}
		evs = append(evs, events("x/conformance/"+a.Name, tests...)...)
	}
	return Run{Host: Identity{Host: "pod0", Strict: true}, Events: evs}
}

// INST-05 and INST-14 skipped as host only in a pod: QUALIFIED under
// GDR_STRICT=1, shown apart; a requirement without a host-only rule that
// claims it is an ordinary skip and leaves the host INCOMPLETE.
func TestHostOnlyINST05INST14DoNotHoldBackQualified(t *testing.T) {
	const why = "not judgeable from a container: nvcc is a developer's tool; run on the host"
	host := []string{"gdr.host_only", "the host's developer environment", "gdr.skip", why}
	r := Build([]Run{allPass(map[string][]string{"INST-05": host, "INST-14": host})})
	h := r.Hosts[0]
	assert.Equal(t, Qualified, r.Verdict.Verdict, r.Verdict.Advice)
	assert.Equal(t, 0, r.ExitCode())
	assert.Equal(t, HostOnly, h.Reqs[indexOf(h, "INST-05")].Status)
	assert.Equal(t, why, h.Reqs[indexOf(h, "INST-14")].Reason)
	c := h.Counts()
	assert.Equal(t, 2, c.Must.HostOnly)
	assert.Zero(t, c.Must.Skipped)
	assert.Contains(t, c.Must.String(), "2 host only")
	assert.Contains(t, r.Verdict.Advice, "2 requirements are not judgeable from a container")

	// A test cannot excuse its own requirement.
	r = Build([]Run{allPass(map[string][]string{"TOPO-03": {"gdr.host_only", "x", "gdr.skip", "not judgeable from a container: no CAP_SYS_ADMIN"}})})
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
	assert.Equal(t, Skip, r.Hosts[0].Reqs[indexOf(r.Hosts[0], "TOPO-03")].Status)
	assert.Equal(t, 3, r.ExitCode())

	// JUnit keeps the case a skip, told apart from absent hardware by its
	// gdr.host_only in its block (the Ant schema allows no type on a skip).
	doc := parseJUnit(t, junitOf(t, Build([]Run{allPass(map[string][]string{"INST-14": host})})))
	var found bool
	for _, s := range doc.Suites {
		for _, k := range s.Cases {
			if k.Skipped != nil && strings.Contains(k.Name, "INST14") {
				found = true
				assert.Empty(t, k.Skipped.Type)
				b := caseBlocks(s.SystemOut.Data)[k.Name]
				require.NotNil(t, b)
				assert.Contains(t, b.props, junit.Property{Name: "gdr.host_only", Value: "the host's developer environment"})
			}
		}
	}
	assert.True(t, found)
}
