package isolate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// fabric simulates a rail-aligned cluster with planted faults.
type fabric struct {
	names    []string
	rails    int
	slowNIC  map[hostRail]bool // passes, at 30% bandwidth
	deadNIC  map[hostRail]bool // fails with everyone
	deadHost map[string]bool   // fails on every rail
	badLink  map[[2]string]int // fails on that rail only between these two
	// transient: these two fail in that round only, on one rail or AllRails.
	transient map[transientKey]int
	// stops: the host dies in that round: its partner fails (no answer), it
	// writes nothing; in later rounds its partner's plan idles it (Stopped).
	stops map[string]int
	noise func(i int) float64
}

type transientKey struct {
	round int
	pair  [2]string
}

func newFabric(n, rails int) *fabric {
	f := &fabric{rails: rails, slowNIC: map[hostRail]bool{}, deadNIC: map[hostRail]bool{}, deadHost: map[string]bool{},
		badLink: map[[2]string]int{}, transient: map[transientKey]int{}, stops: map[string]int{}, noise: func(int) float64 { return 0 }}
	for i := range n {
		f.names = append(f.names, fmt.Sprintf("gpu%04d", i+1))
	}
	return f
}

// run returns both ends' results of one round.
func (f *fabric) run(r pairing.Round) []Result {
	var out []Result
	for pi, p := range r.Pairs {
		s, c := f.names[p.Server], f.names[p.Client]
		gone := func(h string) bool { k, ok := f.stops[h]; return ok && k < r.Index }
		dies := func(h string) bool { k, ok := f.stops[h]; return ok && k == r.Index }
		if gone(s) || gone(c) {
			for _, e := range [][2]string{{s, c}, {c, s}} {
				if !gone(e[0]) {
					out = append(out, Result{Host: e[0], Round: r.Index, Rail: AllRails, Peer: e[1], Status: Stopped,
						Detail: e[1] + " stopped in round " + fmt.Sprint(f.stops[e[1]]) + ": idle"})
				}
			}
			continue
		}
		for rail := 0; rail < f.rails; rail++ {
			st, bw, why := Pass, 390.0*(1+f.noise(pi*f.rails+rail)), ""
			l, ok := f.badLink[key2(s, c)]
			tr, blip := f.transient[transientKey{r.Index, key2(s, c)}]
			switch {
			case dies(s) || dies(c):
				st, bw, why = Fail, 0, "oob: peer did not answer within 30s"
			case blip && (tr == AllRails || tr == rail):
				st, bw, why = Fail, 0, "RDMA WRITE: retry exceeded (a one-off)"
			case f.deadHost[s] || f.deadHost[c]:
				st, bw, why = Fail, 0, "oob: peer did not answer within 30s"
			case f.deadNIC[hostRail{s, rail}] || f.deadNIC[hostRail{c, rail}]:
				st, bw, why = Fail, 0, "RC QP to RTR: timeout"
			case ok && l == rail:
				st, bw, why = Fail, 0, "RDMA WRITE: retry exceeded"
			case f.slowNIC[hostRail{s, rail}] || f.slowNIC[hostRail{c, rail}]:
				bw *= 0.3
			}
			for _, e := range []struct{ host, peer, role string }{{s, c, "server"}, {c, s, "client"}} {
				if dies(e.host) {
					continue
				}
				out = append(out, Result{Host: e.host, Round: r.Index, Rail: rail, Peer: e.peer, Role: e.role,
					Test: "TestPP08Bandwidth/WRITE/1048576", Status: st, BWGbitS: bw, Size: 1 << 20, Op: "WRITE", Detail: why})
			}
		}
	}
	return out
}

// drive runs rounds until the schedule says done; it returns every result
// and the number of rounds.
func (f *fabric) drive(t testing.TB, kind pairing.Kind, maxRepair int, opt Options) ([]Result, int) {
	var results []Result
	k := 0
	for ; ; k++ {
		r, done := Round(kind, f.names, k, maxRepair, results, opt)
		if done {
			break
		}
		require.Equal(t, k, r.Index)
		results = append(results, f.run(r)...)
	}
	return results, k
}

func verdicts(a *Analysis) map[hostRail]State {
	m := map[hostRail]State{}
	for _, s := range a.Suspects {
		m[hostRail{s.Host, s.Rail}] = s.Verdict
	}
	return m
}

var opt = Options{MinFraction: 0.5}

func TestBadNICIsolatedToItsRail(t *testing.T) {
	f := newFabric(4, 2)
	f.slowNIC[hostRail{"gpu0003", 1}] = true
	results, rounds := f.drive(t, pairing.Ring, 2, opt)
	assert.Equal(t, 2, rounds, "found by the schedule itself: no re-pairing")
	a := Analyze(f.names, results, opt)
	assert.Equal(t, map[hostRail]State{{"gpu0003", 1}: Bad}, verdicts(a))
	assert.Equal(t, Good, a.State("gpu0003", 0), "the host's other rail is not blamed")
	for _, h := range []string{"gpu0002", "gpu0004"} {
		assert.Equal(t, Cleared, a.State(h, 1), "%s: partner of the bad NIC is cleared", h)
	}
	assert.Equal(t, Good, a.State("gpu0001", 1))
	assert.Empty(t, a.Links)
	s := a.Suspects[0]
	require.Len(t, s.Evidence, 2)
	assert.Equal(t, Slow, s.Evidence[0].Status)
	assert.InDelta(t, 117, s.Evidence[0].BWGbitS, 0.1)
	assert.InDelta(t, 195, s.Evidence[0].FloorGbitS, 0.1, "half of the other pairs' median")
	assert.Contains(t, s.Reason, "gpu0003 rail 1 failed with 2 partners that passed with others: gpu0004 (round 0, slow 117 < 195 Gbit/s, partner cleared)")
	// Every judged pair carries its floor and where it comes from, passed
	// ones too: the link's JUnit case shows value against floor.
	for _, p := range a.Pairs {
		if p.Status == Pass {
			assert.Positive(t, p.FloorGbitS, "%+v", p)
			assert.Less(t, p.FloorGbitS, p.BWGbitS, "%+v", p)
			assert.Contains(t, p.FloorSource, "GDR_PAIR_MIN_FRACTION 0.5 x the median", "%+v", p)
		}
	}
	assert.Contains(t, s.Evidence[0].Detail, "without gpu0003 or gpu0004", "the slow pair's floor says which pairs set it")
	sum := a.Summary(map[string]string{"gpu0003": "NOT QUALIFIED (1)"})
	assert.Equal(t, Host{Host: "gpu0003", Verdict: "NOT QUALIFIED (1)", Fabric: Bad, BadRails: []int{1}}, sum.Hosts[2])
	assert.Equal(t, Cleared, sum.Hosts[1].Fabric)
}

func TestBadHost(t *testing.T) {
	f := newFabric(6, 4)
	f.deadHost["gpu0005"] = true
	results, rounds := f.drive(t, pairing.Ring, 2, opt)
	assert.Equal(t, 2, rounds)
	a := Analyze(f.names, results, opt)
	want := map[hostRail]State{}
	for r := range 4 {
		want[hostRail{"gpu0005", r}] = Bad
	}
	assert.Equal(t, want, verdicts(a))
	assert.Equal(t, Bad, a.HostState("gpu0005"))
	assert.Equal(t, Cleared, a.HostState("gpu0004"))
	assert.Equal(t, Cleared, a.HostState("gpu0006"))
	assert.Equal(t, Good, a.HostState("gpu0001"))
}

// A link is bad once it failed in the schedule and again when the same two
// hosts were paired in a repair round: one round alone could be a one-off.
func TestBadLinkBlamesNeitherHost(t *testing.T) {
	f := newFabric(6, 2)
	f.badLink[key2("gpu0002", "gpu0003")] = 0
	results, rounds := f.drive(t, pairing.Ring, 2, opt)
	assert.Equal(t, 3, rounds, "the schedule's two and the link's re-test")
	a := Analyze(f.names, results, opt)
	assert.Empty(t, a.Suspects)
	assert.Empty(t, a.LinkSuspects)
	assert.Empty(t, a.Flaky)
	require.Len(t, a.Links, 1)
	l := a.Links[0]
	assert.Equal(t, 0, l.Rail)
	assert.Equal(t, Bad, l.Verdict)
	assert.ElementsMatch(t, []string{"gpu0002", "gpu0003"}, []string{l.A, l.B})
	assert.Contains(t, l.Reason, "failed together on rail 0 in rounds 1 and 2 (fail, fail) while each passed with other partners")
	require.Len(t, l.Evidence, 4, "both ends of both rounds")
	assert.Equal(t, 2, l.Evidence[2].Round)

	// Two rounds only: it failed once and was not re-tested.
	var schedule []Result
	for _, r := range results {
		if r.Round < 2 {
			schedule = append(schedule, r)
		}
	}
	a = Analyze(f.names, schedule, opt)
	assert.Empty(t, a.Links)
	require.Len(t, a.LinkSuspects, 1)
	assert.Equal(t, Suspected, a.LinkSuspects[0].Verdict)
	assert.Contains(t, a.LinkSuspects[0].Reason, "have not been paired again")
	assert.Equal(t, Cleared, a.State("gpu0002", 0))
	assert.Equal(t, Good, a.State("gpu0002", 1))
}

// A host between two bad ones fails with both; it is re-paired, not blamed.
func TestSqueezedHostIsRepairedNotBlamed(t *testing.T) {
	f := newFabric(8, 1)
	f.deadHost["gpu0003"], f.deadHost["gpu0005"] = true, true
	var results []Result
	for k := range 2 {
		r, done := Round(pairing.Ring, f.names, k, 2, results, opt)
		require.False(t, done)
		results = append(results, f.run(r)...)
	}
	a := Analyze(f.names, results, opt)
	assert.Equal(t, Suspected, a.State("gpu0004", 0), "both partners failed it, but neither passed elsewhere: not bad")
	assert.Equal(t, Suspected, a.State("gpu0003", 0), "one partner passed elsewhere, one did not: not yet bad")
	assert.Equal(t, Suspected, a.State("gpu0005", 0))

	r, done := Round(pairing.Ring, f.names, 2, 2, results, opt)
	require.False(t, done)
	assert.True(t, r.Repair)
	require.Len(t, r.Pairs, 3, "gpu0003, gpu0004, gpu0005 each meet a clean host")
	for _, p := range r.Pairs {
		assert.False(t, a.Met(f.names[p.Server], f.names[p.Client]), "re-paired with a host it has not met")
	}
	results = append(results, f.run(r)...)
	a = Analyze(f.names, results, opt)
	assert.Equal(t, map[hostRail]State{{"gpu0003", 0}: Bad, {"gpu0005", 0}: Bad}, verdicts(a))
	assert.Equal(t, Cleared, a.State("gpu0004", 0))
	_, done = Round(pairing.Ring, f.names, 3, 2, results, opt)
	assert.True(t, done, "nothing left to re-pair")
}

func TestTwoHostsStaySuspect(t *testing.T) {
	f := newFabric(2, 1)
	f.deadNIC[hostRail{"gpu0002", 0}] = true
	results, rounds := f.drive(t, pairing.Ring, 2, opt)
	assert.Equal(t, 1, rounds, "no third host to re-pair with")
	a := Analyze(f.names, results, opt)
	assert.Equal(t, map[hostRail]State{{"gpu0001", 0}: Suspected, {"gpu0002", 0}: Suspected}, verdicts(a))
	assert.Contains(t, a.Suspects[0].Reason, "re-pair it with a host that passed everywhere")
}

func TestMissingResultsFailEveryRail(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	var res []Result
	add := func(round int, host, peer, role string, st Status) {
		for rail := range 2 {
			res = append(res, Result{Host: host, Round: round, Rail: rail, Peer: peer, Role: role, Status: st, BWGbitS: 100})
		}
	}
	// Round 0: (a,b) (c,d); round 1: (b,c) (d,a). d never reports.
	add(0, "a", "b", "server", Pass)
	add(0, "b", "a", "client", Pass)
	res = append(res, Result{Host: "c", Round: 0, Rail: AllRails, Peer: "d", Role: "server", Status: Missing, Detail: "no test results"})
	add(1, "b", "c", "server", Pass)
	add(1, "c", "b", "client", Pass)
	res = append(res, Result{Host: "a", Round: 1, Rail: 0, Peer: "d", Role: "client", Status: Fail, Detail: "oob: no answer"})
	res = append(res, Result{Host: "a", Round: 1, Rail: 1, Peer: "d", Role: "client", Status: Fail, Detail: "oob: no answer"})
	a := Analyze(names, res, Options{})
	assert.Equal(t, map[hostRail]State{{"d", 0}: Bad, {"d", 1}: Bad}, verdicts(a))
	var cd Pair
	for _, p := range a.Pairs {
		if p.Round == 0 && p.Rail == 1 && (p.A == "c" || p.B == "c") {
			cd = p
		}
	}
	assert.Equal(t, Pair{Round: 0, A: "c", B: "d", Rail: 1, Status: Missing, Detail: "c: no test results"}, cd)
}

func TestPairMerge(t *testing.T) {
	res := []Result{
		// the client's end: the server is b
		{Host: "a", Round: 0, Rail: 0, Peer: "b", Role: "client", Status: Pass, BWGbitS: 50, Size: 4096, Op: "WRITE"},
		{Host: "a", Round: 0, Rail: 0, Peer: "b", Role: "client", Status: Pass, BWGbitS: 380, Size: 1 << 20, Op: "WRITE"},
		{Host: "a", Round: 0, Rail: 0, Peer: "b", Role: "client", Status: Pass, BWGbitS: 395, Size: 1 << 20, Op: "READ"},
		{Host: "a", Round: 0, Rail: 0, Peer: "b", Role: "client", Status: Skip, Test: "TestPP09"},
		{Host: "b", Round: 0, Rail: 0, Peer: "a", Role: "server", Status: Pass},
		// one end fails, the other passes: the pair fails with the failing end's detail
		{Host: "a", Round: 1, Rail: 0, Peer: "c", Status: Pass},
		{Host: "c", Round: 1, Rail: 0, Peer: "a", Status: Fail, Test: "TestPP03Write/rail0"},
		// only skips: not judged
		{Host: "b", Round: 1, Rail: 0, Peer: "d", Status: Skip},
		{Host: "d", Round: 1, Rail: 0, Peer: "b", Status: Skip},
	}
	a := Analyze([]string{"a", "b", "c", "d"}, res, Options{})
	require.Len(t, a.Pairs, 3)
	assert.Equal(t, Pair{Round: 0, A: "b", B: "a", Rail: 0, Status: Pass, BWGbitS: 380}, a.Pairs[0], "WRITE at the largest size")
	assert.Equal(t, Pair{Round: 1, A: "a", B: "c", Rail: 0, Status: Fail, Detail: "c: TestPP03Write/rail0 fail"}, a.Pairs[1])
	assert.Equal(t, Skip, a.Pairs[2].Status)
	assert.Equal(t, Untested, a.State("d", 0))
	assert.False(t, a.needsRepair("d"), "a host that only skipped has nothing to re-pair")
	assert.True(t, a.needsRepair("c"))
}

func TestFloors(t *testing.T) {
	mk := func(bws ...float64) []Result {
		var res []Result
		for i, bw := range bws {
			a, b := fmt.Sprintf("h%d", 2*i), fmt.Sprintf("h%d", 2*i+1)
			res = append(res, Result{Host: a, Peer: b, Rail: 0, Status: Pass, BWGbitS: bw},
				Result{Host: b, Peer: a, Rail: 0, Status: Pass, BWGbitS: bw})
		}
		return res
	}
	status := func(a *Analysis) []Status {
		var s []Status
		for _, p := range a.Pairs {
			s = append(s, p.Status)
		}
		return s
	}
	// One slow pair of four: compared with the other three (median 100), not
	// with a median it drags down itself.
	assert.Equal(t, []Status{Pass, Pass, Pass, Slow}, status(Analyze(nil, mk(100, 98, 101, 45), Options{MinFraction: 0.5})))
	// Two pairs only: nothing to compare with.
	assert.Equal(t, []Status{Pass, Pass}, status(Analyze(nil, mk(100, 10), Options{MinFraction: 0.5})))
	// Absolute floor applies to any count.
	assert.Equal(t, []Status{Pass, Slow}, status(Analyze(nil, mk(100, 10), Options{MinGbitS: 50})))
	// Off.
	assert.Equal(t, []Status{Pass, Pass, Pass, Pass}, status(Analyze(nil, mk(100, 98, 101, 45), Options{})))
	assert.InDelta(t, 100, medianWithout([]float64{45, 98, 100, 101}, 45), 1e-9)
	assert.InDelta(t, 98, medianWithout([]float64{45, 98, 100, 101}, 101), 1e-9)
}

func TestRoundSchedule(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	r, done := Round(pairing.Ring, names, 1, 2, nil, opt)
	assert.False(t, done)
	assert.Equal(t, pairing.Base(pairing.Ring, 4)[1], r)
	_, done = Round(pairing.Ring, names, 2, 2, nil, opt)
	assert.True(t, done, "no results, nothing to re-pair")
	_, done = Round(pairing.Ring, names, 2, 0, nil, opt)
	assert.True(t, done)
	_, done = Round(pairing.Ring, names, -1, 2, nil, opt)
	assert.True(t, done)
	// Results of round 2 and later do not change round 2.
	f := newFabric(6, 1)
	f.deadNIC[hostRail{"gpu0001", 0}] = true
	f.deadNIC[hostRail{"gpu0002", 0}] = true // neighbours: each has one partner that passed
	res, _ := f.drive(t, pairing.Ring, 0, opt)
	r2, done := Round(pairing.Ring, f.names, 2, 2, res, opt)
	require.False(t, done)
	later := append(res, Result{Host: "gpu0003", Round: 2, Rail: 0, Peer: "gpu0004", Status: Fail})
	r2b, _ := Round(pairing.Ring, f.names, 2, 2, later, opt)
	assert.Equal(t, r2, r2b)
}

func TestSummaryJSON(t *testing.T) {
	f := newFabric(4, 1)
	f.deadNIC[hostRail{"gpu0001", 0}] = true
	res, _ := f.drive(t, pairing.Ring, 2, opt)
	b, err := json.Marshal(Analyze(f.names, res, opt).Summary(nil))
	require.NoError(t, err)
	s := string(b)
	for _, want := range []string{`"hosts":[{"host":"gpu0001","verdict":"","fabric":"bad","bad_rails":[0]}`,
		`"pairs":[{"round":0,"a":"gpu0001","b":"gpu0002","rail":0,"status":"fail"`,
		`"bw_gbit_s":390`, `"suspects":[{"host":"gpu0001","rail":0,"verdict":"bad"`, `"partner_state":"cleared"`, `"links":[]`} {
		assert.Contains(t, s, want)
	}
	empty, err := json.Marshal(Analyze(nil, nil, opt).Summary(nil))
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(empty), `"pairs":[]`) && strings.Contains(string(empty), `"suspects":[]`), string(empty))
}

// The lab-cluster case (4 hosts, ring, one rail of h3 bad): two of the
// rail's four pairs hold h3, and with "the other three" as the reference
// one of them (0.017 against 0.015, 0.032, 0.059) passed; against the pairs
// sharing no host with it, both are slow and only h3 is bad.
func TestFloorsApartFromBothEnds(t *testing.T) {
	res := []Result{}
	add := func(round int, a, b string, bw float64) {
		res = append(res, Result{Round: round, Host: a, Peer: b, Rail: 1, Status: Pass, BWGbitS: bw},
			Result{Round: round, Host: b, Peer: a, Rail: 1, Status: Pass, BWGbitS: bw})
	}
	add(0, "h1", "h2", 0.032)
	add(0, "h3", "h4", 0.015)
	add(1, "h4", "h1", 0.059)
	add(1, "h2", "h3", 0.017)
	a := Analyze(nil, res, Options{MinFraction: 0.5})
	got := map[string]Status{}
	for _, p := range a.Pairs {
		got[p.A+"-"+p.B] = p.Status
	}
	slow := 0
	for k, s := range got {
		if strings.Contains(k, "h3") {
			assert.Equal(t, Slow, s, k)
			slow++
		} else {
			assert.Equal(t, Pass, s, k)
		}
	}
	assert.Equal(t, 2, slow)
	assert.Equal(t, Bad, a.State("h3", 1))
	for _, h := range []string{"h1", "h2", "h4"} {
		assert.NotEqual(t, Bad, a.State(h, 1), h)
	}
}

// With the fabric's groups, the schedule's rounds pair hosts of different
// leaves, the hosts that did not start left out; every host still meets
// two partners. Without groups, the job's order.
func TestRoundAcrossGroups(t *testing.T) {
	names := []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"}
	g := pairing.Groups{"a1": 0, "a2": 0, "a3": 0, "a4": 0, "b1": 1, "b2": 1, "b3": 1, "b4": 1}
	o := opt
	o.Groups = g
	partners := map[string]map[string]bool{}
	for k := 0; k < 2; k++ {
		r, done := Round(pairing.Ring, names, k, 0, nil, o)
		require.False(t, done)
		require.Len(t, r.Pairs, 4)
		for _, p := range r.Pairs {
			a, b := names[p.Server], names[p.Client]
			assert.NotEqual(t, a[0], b[0], "round %d pairs %s with %s, one leaf", k, a, b)
			for _, x := range [][2]string{{a, b}, {b, a}} {
				if partners[x[0]] == nil {
					partners[x[0]] = map[string]bool{}
				}
				partners[x[0]][x[1]] = true
			}
		}
		plain, _ := Round(pairing.Ring, names, k, 0, nil, opt)
		assert.Equal(t, pairing.Base(pairing.Ring, 8)[k], plain, "no groups: the job's order")
	}
	for _, h := range names {
		assert.Len(t, partners[h], 2, "%s meets two partners", h)
	}

	// b2 did not start: seven hosts, three rounds, b2 in none, and still
	// as few pairs within a leaf as four a's and three b's allow (one).
	o.Live = Liveness{NotStarted: map[string]bool{"b2": true}}
	within := 0
	for k := 0; k < 3; k++ {
		r, _ := Round(pairing.Ring, names, k, 0, nil, o)
		for _, p := range r.Pairs {
			assert.NotEqual(t, "b2", names[p.Server])
			assert.NotEqual(t, "b2", names[p.Client])
			if names[p.Server][0] == names[p.Client][0] {
				within++
			}
		}
	}
	assert.Equal(t, 1, within)
}
