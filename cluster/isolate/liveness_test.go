package isolate

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/pairing"
)

func gdrconfFabric(n, rails int) *fabric {
	f := newFabric(n, rails)
	for i := range f.names {
		f.names[i] = fmt.Sprintf("gdrconf-%d", i)
	}
	return f
}

// The failure a late pod caused: 16 hosts x 8 rails, the round-0 pair
// gdrconf-0 - gdrconf-1 lost on every rail (one end was not there yet),
// both ends fine with everyone else. One round alone called it 8 bad links
// (cables, switch ports, path) and failed the merge; a repair round now
// pairs the two again, the pair passes, and the loss is flaky on each rail:
// no bad link, no suspect.
func TestOneOffLossIsFlakyNotALink(t *testing.T) {
	f := gdrconfFabric(16, 8)
	f.transient[transientKey{0, key2("gdrconf-0", "gdrconf-1")}] = AllRails
	results, rounds := f.drive(t, pairing.Ring, 2, opt)
	a := Analyze(f.names, results, opt)
	assert.Empty(t, a.Links, "no bad link from one round alone")
	assert.Empty(t, a.Suspects)
	assert.Equal(t, 3, rounds, "the schedule's two and one re-test")

	require.Len(t, a.Flaky, 8, "one per rail")
	for rail, l := range a.Flaky {
		assert.Equal(t, Flaky, l.Verdict)
		assert.Equal(t, rail, l.Rail)
		assert.ElementsMatch(t, []string{"gdrconf-0", "gdrconf-1"}, []string{l.A, l.B})
		assert.Contains(t, l.Reason, "in round 0 (fail) and passed when paired again in round 2")
		require.Len(t, l.Evidence, 3, "both ends of the failure, and the re-test")
		assert.Equal(t, Pass, l.Evidence[2].Status)
	}
	assert.Empty(t, a.LinkSuspects)
	for _, h := range []string{"gdrconf-0", "gdrconf-1"} {
		assert.Equal(t, Cleared, a.HostState(h), h)
	}
	s := a.Summary(nil)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"links":[],"link_suspects":[],"flaky":[{"a":"gdrconf-0","b":"gdrconf-1","rail":0,"verdict":"flaky"`)
}

// A loss on one rail in one round is flaky too; a fault that fails the
// re-test as well is a bad link, found as fast with a transient beside it.
func TestTransientBesideAStaticLink(t *testing.T) {
	f := gdrconfFabric(16, 8)
	f.transient[transientKey{1, key2("gdrconf-3", "gdrconf-4")}] = 5
	f.badLink[key2("gdrconf-8", "gdrconf-9")] = 2
	results, rounds := f.drive(t, pairing.Ring, 2, opt)
	assert.Equal(t, 3, rounds)
	a := Analyze(f.names, results, opt)
	require.Len(t, a.Flaky, 1)
	assert.Equal(t, 5, a.Flaky[0].Rail)
	require.Len(t, a.Links, 1)
	assert.Equal(t, Link{A: "gdrconf-8", B: "gdrconf-9", Rail: 2, Verdict: Bad}, Link{A: a.Links[0].A, B: a.Links[0].B, Rail: a.Links[0].Rail, Verdict: a.Links[0].Verdict})
	assert.Empty(t, a.Suspects)
}

// Without a repair round the one-off loss cannot be re-tested: it stays a
// suspect (the merge is INCOMPLETE), never a bad link.
func TestNoRepairRoundLeavesTheLinkSuspect(t *testing.T) {
	f := gdrconfFabric(16, 2)
	f.transient[transientKey{0, key2("gdrconf-0", "gdrconf-1")}] = 0
	results, rounds := f.drive(t, pairing.Ring, 0, opt)
	assert.Equal(t, 2, rounds)
	a := Analyze(f.names, results, opt)
	assert.Empty(t, a.Links)
	require.Len(t, a.LinkSuspects, 1)
	assert.Contains(t, a.LinkSuspects[0].Reason, "a re-test tells a bad link (cables, switch ports, path) from a one-off loss")
}

// A host that did not start is left out of the schedule: the others make a
// ring of their own (15 hosts: three rounds), nobody fails with it, and
// the summary says it did not start, naming no part.
func TestDidNotStartIsPlannedAround(t *testing.T) {
	f := gdrconfFabric(16, 8)
	o := opt
	o.Live = Liveness{NotStarted: map[string]bool{"gdrconf-1": true}}
	results, rounds := f.drive(t, pairing.Ring, 2, o)
	assert.Equal(t, 3, rounds, "a ring of 15")
	for _, r := range results {
		assert.NotEqual(t, "gdrconf-1", r.Peer, "nobody is paired with it")
	}
	a := Analyze(f.names, results, o)
	assert.Empty(t, a.Suspects)
	assert.Empty(t, a.Links)
	assert.Empty(t, a.LinkSuspects)
	assert.True(t, a.Met("gdrconf-0", "gdrconf-2"), "its ring neighbours meet each other")
	s := a.Summary(nil)
	assert.Equal(t, Host{Host: "gdrconf-1", Fabric: Untested, Liveness: DidNotStart}, s.Hosts[1])
	assert.Equal(t, Host{Host: "gdrconf-0", Fabric: Good}, s.Hosts[0])
}

// A host that dies in round 1: its partner's failures with it there are
// "stopped", not the partner's, and in later rounds the partner idles.
// Where both of a host's partners stopped, it is re-paired like an
// untested host, and judged good.
func TestStoppedHostsPartnersAreNotBlamed(t *testing.T) {
	f := gdrconfFabric(16, 8)
	// Round 0: (4,5) (2,3) ...; round 1: (3,4) (5,6) ... gdrconf-5 dies in
	// round 0 and gdrconf-3 in round 1: gdrconf-4 loses both partners.
	f.stops["gdrconf-5"], f.stops["gdrconf-3"] = 0, 1
	o := opt
	o.Live = Liveness{Stopped: map[string]int{"gdrconf-5": 0, "gdrconf-3": 1}}
	results, rounds := f.drive(t, pairing.Ring, 2, o)
	assert.Equal(t, 3, rounds, "gdrconf-4 is re-paired (gdrconf-6 passed with gdrconf-7)")
	a := Analyze(f.names, results, o)
	assert.Empty(t, a.Suspects)
	assert.Empty(t, a.Links)
	assert.Empty(t, a.LinkSuspects)
	for _, h := range []string{"gdrconf-4", "gdrconf-6", "gdrconf-2"} {
		assert.Equal(t, Good, a.HostState(h), h)
	}
	var stopped int
	for _, p := range a.Pairs {
		if p.A == "gdrconf-5" || p.B == "gdrconf-5" {
			assert.Equal(t, Stopped, p.Status, "%+v", p)
			stopped++
		}
		if p.Round == 2 {
			assert.NotContains(t, []string{"gdrconf-3", "gdrconf-5"}, p.A, "a stopped host is never scheduled again")
			assert.NotContains(t, []string{"gdrconf-3", "gdrconf-5"}, p.B)
		}
	}
	assert.Equal(t, 16, stopped, "8 rails of round 0 and of round 1")
	s := a.Summary(nil)
	assert.Equal(t, "stopped in round 0", s.Hosts[5].Liveness)
	assert.Equal(t, "stopped in round 1", s.Hosts[3].Liveness)
	assert.Empty(t, s.Hosts[3].BadRails)

	// Planned before round 1's barrier closed, round 2 knew only of
	// gdrconf-5: the planner ignores stops of the round it plans and later.
	r1, _ := Round(pairing.Ring, f.names, 1, 2, results, o)
	assert.Equal(t, pairing.Base(pairing.Ring, 16)[1], r1, "the schedule's round: the stopped host's partner idles by its plan")
}

// The worst place for a one-off loss: gdrconf-2 loses round 0 with
// gdrconf-3, and its round-1 partner gdrconf-1 dies. gdrconf-2 has passed
// with nobody: it meets a clean host in round 2, then gdrconf-3 again in
// round 3; the loss is flaky, nothing is bad, and it fits the two repair
// rounds.
func TestTransientBesideADeadPartner(t *testing.T) {
	f := gdrconfFabric(16, 8)
	f.transient[transientKey{0, key2("gdrconf-2", "gdrconf-3")}] = AllRails
	f.stops["gdrconf-1"] = 1
	o := opt
	o.Live = Liveness{Stopped: map[string]int{"gdrconf-1": 1}}
	results, rounds := f.drive(t, pairing.Ring, 2, o)
	assert.Equal(t, 4, rounds)
	a := Analyze(f.names, results, o)
	assert.Empty(t, a.Suspects)
	assert.Empty(t, a.Links)
	assert.Empty(t, a.LinkSuspects)
	assert.Len(t, a.Flaky, 8)
	assert.Equal(t, Cleared, a.HostState("gdrconf-2"))
}

// Compact results judge as the full ones: several tests per rail (sizes,
// READ beside WRITE, a skip, a failure's detail), a slow NIC, a dead host,
// a transient and a host that stopped.
func TestCompactJudgesAsTheFullResults(t *testing.T) {
	f := gdrconfFabric(64, 4)
	f.slowNIC[hostRail{"gdrconf-9", 2}] = true
	f.deadHost["gdrconf-20"] = true
	f.badLink[key2("gdrconf-30", "gdrconf-31")] = 1
	f.transient[transientKey{1, key2("gdrconf-41", "gdrconf-42")}] = AllRails
	f.stops["gdrconf-50"] = 1
	o := opt
	o.Live = Liveness{Stopped: map[string]int{"gdrconf-50": 1}}
	results, _ := f.drive(t, pairing.Ring, 2, o)
	var full []Result
	for _, r := range results {
		full = append(full, r)
		if r.Rail == AllRails || r.Status == Stopped {
			continue
		}
		small, read, skip := r, r, r
		small.Size, small.BWGbitS, small.Test = 4096, r.BWGbitS/3, "TestPP08Bandwidth/WRITE/4096"
		read.Op, read.BWGbitS = "READ", r.BWGbitS*1.1
		skip.Status, skip.Test, skip.BWGbitS = Skip, "TestPP09HostVsGPU", 0
		full = append(full, small, read, skip)
	}
	c := Compact(full)
	assert.Less(t, len(c), len(full)/3)
	want, got := Analyze(f.names, full, o), Analyze(f.names, c, o)
	assert.Equal(t, want.Pairs, got.Pairs)
	assert.Equal(t, want.Suspects, got.Suspects)
	assert.Equal(t, want.Links, got.Links)
	assert.Equal(t, want.Flaky, got.Flaky)
	assert.Equal(t, want.Summary(nil), got.Summary(nil))
	r, _ := Round(pairing.Ring, f.names, 3, 2, full, o)
	rc, _ := Round(pairing.Ring, f.names, 3, 2, c, o)
	assert.Equal(t, r, rc)
	assert.NotEmpty(t, want.Flaky)
	assert.NotEmpty(t, want.Links)
}
