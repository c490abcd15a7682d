package report

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/reqs"
)

// withoutArea is allPass less one area's package: a run that did not have
// it at all.
func withoutArea(r Run, area string) Run {
	var evs []Event
	for _, e := range r.Events {
		if e.Package != "x/conformance/"+area {
			evs = append(evs, e)
		}
	}
	r.Events = evs
	return r
}

// The soak's requirements count only in a run that asked for it
// (reqs.Req.OptIn): without conformance/soak, or with its tests skipped as
// not asked (testenv.NotAsked), the host is QUALIFIED and the requirements
// are not in its results; a run that asked judges them like any other.
func TestOptInSoakCountsOnlyWhereAsked(t *testing.T) {
	var soakIDs []string
	notAsked := map[string][]string{}
	for _, r := range reqs.All() {
		if r.Area == "soak" {
			soakIDs = append(soakIDs, r.ID)
			notAsked[r.ID] = []string{"gdr.not_asked", r.OptIn, "gdr.skip", "not asked: set GDR_SOAK=2h (or make soak) to run a soak"}
		}
	}
	assert.NotEmpty(t, soakIDs)
	has := func(h *HostResult, id string) bool {
		for _, rq := range h.Reqs {
			if rq.ID == id {
				return true
			}
		}
		return false
	}

	// No soak package in the run: a plain make conformance.
	r := Build([]Run{withoutArea(allPass(nil), "soak")})
	assert.Equal(t, Qualified, r.Verdict.Verdict, r.Verdict.Advice)
	for _, id := range soakIDs {
		assert.False(t, has(r.Hosts[0], id), id)
	}
	assert.True(t, has(r.Hosts[0], "PP-08"))

	// The soak package ran and skipped as not asked, under GDR_STRICT=1.
	r = Build([]Run{allPass(notAsked)})
	assert.Equal(t, Qualified, r.Verdict.Verdict, r.Verdict.Advice)
	assert.Equal(t, 0, r.ExitCode())
	for _, id := range soakIDs {
		assert.False(t, has(r.Hosts[0], id), id)
	}
	assert.Zero(t, r.Hosts[0].Counts().Must.Skipped)

	// A soak skipped for another reason (no rail) is a skip like any other.
	r = Build([]Run{allPass(map[string][]string{"SOAK-01": {"gdr.skip", "no RDMA device"}})})
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
	assert.Equal(t, Skip, r.Hosts[0].Reqs[indexOf(r.Hosts[0], "SOAK-01")].Status)

	// A soak that ran: every requirement is judged; SOAK-08's flap guard,
	// not asked on its own, stays out.
	r = Build([]Run{allPass(map[string][]string{"SOAK-08": notAsked["SOAK-08"]})})
	assert.Equal(t, Qualified, r.Verdict.Verdict, r.Verdict.Advice)
	assert.True(t, has(r.Hosts[0], "SOAK-01"))
	assert.False(t, has(r.Hosts[0], "SOAK-08"))

	// A non-opt-in requirement cannot leave itself out.
	r = Build([]Run{allPass(map[string][]string{"PP-08": {"gdr.not_asked", "GDR_SOAK", "gdr.skip", "not asked"}})})
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
}
