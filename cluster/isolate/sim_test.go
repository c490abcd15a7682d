package isolate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// planting is one set of faults for a simulated cluster.
type planting struct {
	name     string
	nic      hostRail // the bad NIC
	slowNIC  bool     // degraded (30% bandwidth, tests pass) instead of dead
	host     string   // the bad host
	link     [2]string
	linkRail int
}

// simOutcome is what one simulated run found.
type simOutcome struct {
	rounds                      int
	nicRound, hostRound, linkAt int // first round after which each was found; 0 = never
	falseBad, falseSuspects     int // at the end; falseBad counts any round
	suspects                    int
}

func simulate(t *testing.T, kind pairing.Kind, n, rails int, p planting, seed uint64) simOutcome {
	f := newFabric(n, rails)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	noise := make([]float64, n*rails)
	for i := range noise {
		noise[i] = (rng.Float64() - 0.5) * 0.1 // +-5% run-to-run spread
	}
	f.noise = func(i int) float64 { return noise[i%len(noise)] }
	if p.slowNIC {
		f.slowNIC[p.nic] = true
	} else {
		f.deadNIC[p.nic] = true
	}
	f.deadHost[p.host] = true
	f.badLink[key2(p.link[0], p.link[1])] = p.linkRail

	planted := map[hostRail]bool{p.nic: true}
	for r := range rails {
		planted[hostRail{p.host, r}] = true
	}
	var out simOutcome
	var results []Result
	falseBad := map[hostRail]bool{}
	for k := 0; ; k++ {
		r, done := Round(kind, f.names, k, 2, results, opt)
		if done {
			out.rounds = k
			break
		}
		results = append(results, f.run(r)...)
		if out.nicRound > 0 && out.hostRound > 0 && out.linkAt > 0 {
			continue // all found: the final analysis checks the rest
		}
		a := Analyze(f.names, results, opt)
		if out.nicRound == 0 && a.State(p.nic.host, p.nic.rail) == Bad {
			out.nicRound = k + 1
		}
		if out.hostRound == 0 {
			all := true
			for rr := range rails {
				all = all && a.State(p.host, rr) == Bad
			}
			if all {
				out.hostRound = k + 1
			}
		}
		if out.linkAt == 0 {
			for _, l := range a.Links {
				if key2(l.A, l.B) == key2(p.link[0], p.link[1]) && l.Rail == p.linkRail {
					out.linkAt = k + 1
				}
			}
		}
		for _, s := range a.Suspects {
			if s.Verdict == Bad && !planted[hostRail{s.Host, s.Rail}] {
				falseBad[hostRail{s.Host, s.Rail}] = true
			}
		}
	}
	final := Analyze(f.names, results, opt)
	out.suspects = len(final.Suspects)
	for _, s := range final.Suspects {
		if !planted[hostRail{s.Host, s.Rail}] {
			out.falseSuspects++
			if s.Verdict == Bad {
				falseBad[hostRail{s.Host, s.Rail}] = true
			}
		}
	}
	out.falseBad = len(falseBad)
	return out
}

func name(i int) string { return fmt.Sprintf("gpu%04d", i+1) }

// plantings returns random independent faults for seed, plus fixed
// adversarial ones where faults sit next to each other on the ring.
func plantings(n, rails int, seed uint64) []planting {
	rng := rand.New(rand.NewPCG(seed, 7))
	perm := rng.Perm(n)
	// Hosts far apart on the ring: the link's ends, the NIC's host, the bad host.
	l := perm[0]
	ps := []planting{{
		name: "random", nic: hostRail{name(perm[1]), rng.IntN(rails)}, slowNIC: seed%2 == 0,
		host: name(perm[2]), link: [2]string{name(l), name((l + 1) % n)}, linkRail: rng.IntN(rails),
	}}
	h := rng.IntN(n)
	r := rng.IntN(rails)
	// bad host, then its neighbour's NIC, then a bad link beyond.
	ps = append(ps, planting{name: "nic-next-to-host", host: name(h), nic: hostRail{name((h + 1) % n), r}, slowNIC: true,
		link: [2]string{name((h + 3) % n), name((h + 4) % n)}, linkRail: r})
	// a good host squeezed between the bad NIC and the bad host.
	ps = append(ps, planting{name: "host-squeezed", nic: hostRail{name(h), r}, host: name((h + 2) % n),
		link: [2]string{name((h + 5) % n), name((h + 6) % n)}, linkRail: (r + 1) % rails})
	// a bad link whose end also meets the bad host.
	ps = append(ps, planting{name: "link-next-to-host", host: name(h), link: [2]string{name((h + 1) % n), name((h + 2) % n)},
		linkRail: r, nic: hostRail{name((h + n/2) % n), (r + 3) % rails}})
	return ps
}

// Scale on paper: 1024 hosts x 8 rails, ring schedule with re-pairing, with
// one bad NIC, one bad host and one bad link planted, over several seeds and
// plantings. Target: every planted bad NIC and host found within 3 rounds,
// the link within 4 (a link is bad only once a re-test failed too: where
// its end needs a clean partner first, link-next-to-host, the re-test is
// the fourth round), no false suspects. Run with -v to see the table.
func TestSimulate1024x8(t *testing.T) {
	const n, rails = 1024, 8
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			var lines []string
			for _, p := range plantings(n, rails, seed) {
				o := simulate(t, pairing.Ring, n, rails, p, seed)
				kind := "dead"
				if p.slowNIC {
					kind = "slow"
				}
				lines = append(lines, fmt.Sprintf("seed %d %-17s | rounds %d | NIC %s/%d (%s) found after %d | host %s after %d | link %s-%s/%d after %d | suspects %d, false %d, false bad at any round %d",
					seed, p.name, o.rounds, p.nic.host, p.nic.rail, kind, o.nicRound, p.host, o.hostRound, p.link[0], p.link[1], p.linkRail, o.linkAt,
					o.suspects, o.falseSuspects, o.falseBad))
				msg := fmt.Sprintf("seed %d %s: %+v", seed, p.name, o)
				assert.True(t, o.nicRound >= 1 && o.nicRound <= 3, "bad NIC within 3 rounds: "+msg)
				assert.True(t, o.hostRound >= 1 && o.hostRound <= 3, "bad host within 3 rounds: "+msg)
				assert.True(t, o.linkAt >= 1 && o.linkAt <= 4, "bad link within 4 rounds: "+msg)
				assert.LessOrEqual(t, o.rounds, 4, msg)
				assert.Zero(t, o.falseSuspects, msg)
				assert.Zero(t, o.falseBad, msg)
				assert.Equal(t, rails+1, o.suspects, "exactly the planted (host, rail)s: "+msg)
			}
			t.Logf("ring, %d hosts x %d rails, at most 2 re-pairing rounds (found after N rounds):\n%s", n, rails, strings.Join(lines, "\n"))
		})
	}
}

// The all-pairs schedule on a smaller cluster finds the host and the NIC
// without re-pairing (every host meets every other), and the link with one
// repair round: the two meet once in the schedule, and a link is bad only
// when its re-test failed too.
func TestSimulateAllPairs(t *testing.T) {
	const n, rails = 32, 8
	for seed := uint64(1); seed <= 3; seed++ {
		for _, p := range plantings(n, rails, seed) {
			o := simulate(t, pairing.All, n, rails, p, seed)
			msg := fmt.Sprintf("seed %d %s: %+v", seed, p.name, o)
			assert.Equal(t, n, o.rounds, "the schedule's n-1 rounds and the link's re-test: "+msg)
			assert.True(t, o.nicRound >= 1 && o.hostRound >= 1 && o.linkAt >= 1, msg)
			assert.Zero(t, o.falseSuspects, msg)
			assert.Zero(t, o.falseBad, msg)
			t.Logf("all, %d x %d, seed %d %-18s: NIC after round %d, host after round %d, link after round %d, false suspects %d",
				n, rails, seed, p.name, o.nicRound, o.hostRound, o.linkAt, o.falseSuspects)
		}
	}
}

// BenchmarkAnalyze1024x8 times one analysis of three rounds of results.
func BenchmarkAnalyze1024x8(b *testing.B) {
	f := newFabric(1024, 8)
	f.deadHost["gpu0100"] = true
	var res []Result
	for _, r := range pairing.Base(pairing.Ring, 1024) {
		res = append(res, f.run(r)...)
	}
	b.ResetTimer()
	for b.Loop() {
		Analyze(f.names, res, opt)
	}
	b.ReportMetric(float64(len(res)), "results")
}

// liveScenario is one simulated run with hosts that leave and faults that
// come and go, beside the static ones.
type liveScenario struct {
	notStarted []string // never reached the start barrier
	dies       string   // dies in round 1
	nic        hostRail // static: a dead NIC
	host       string   // static: a dead host (its task runs; its fabric fails)
	link       [2]string
	linkRail   int
	transients []transientAt // one round only
}

type transientAt struct {
	round int
	pair  [2]string
	rail  int // AllRails: every rail
}

// liveScenarioFor draws seed's scenario: 1 to 3 hosts that did not start
// (an odd ring for two of three seeds), a host dead from round 1, a bad
// NIC, a bad host, a bad link between two ring neighbours, a pair that
// loses every rail in round 0 and one that loses one rail in round 1. A
// transient never touches a host of a static fault: one NIC failing with
// two partners that passed elsewhere is bad by the model (faults are
// static), whatever made each failure; two independent faults on one NIC
// within the schedule are beyond it (docs/clusters.md).
func liveScenarioFor(names []string, rails int, seed uint64) (liveScenario, []string) {
	rng := rand.New(rand.NewPCG(seed, 11))
	n := len(names)
	perm := rng.Perm(n)
	var sc liveScenario
	out := map[string]bool{}
	for _, i := range perm[:1+seed%3] {
		sc.notStarted = append(sc.notStarted, names[i])
		out[names[i]] = true
	}
	var started []string
	for _, h := range names {
		if !out[h] {
			started = append(started, h)
		}
	}
	pos := map[string]int{}
	for i, h := range started {
		pos[h] = i
	}
	taken := map[string]bool{}
	pick := func() string {
		for {
			h := started[rng.IntN(len(started))]
			if !taken[h] {
				taken[h] = true
				return h
			}
		}
	}
	sc.dies = pick()
	sc.nic = hostRail{pick(), rng.IntN(rails)}
	sc.host = pick()
	for {
		a := started[rng.IntN(len(started))]
		b := started[(pos[a]+1)%len(started)]
		if !taken[a] && !taken[b] {
			taken[a], taken[b] = true, true
			sc.link, sc.linkRail = [2]string{a, b}, rng.IntN(rails)
			break
		}
	}
	base := pairing.Base(pairing.Ring, len(started))
	for _, tr := range []transientAt{{round: 0, rail: AllRails}, {round: 1, rail: rng.IntN(rails)}} {
		for {
			p := base[tr.round].Pairs[rng.IntN(len(base[tr.round].Pairs))]
			a, b := started[p.Server], started[p.Client]
			if !taken[a] && !taken[b] {
				taken[a], taken[b] = true, true
				tr.pair = [2]string{a, b}
				sc.transients = append(sc.transients, tr)
				break
			}
		}
	}
	return sc, started
}

// The fleet the issue asks for: 1024 hosts x 8 rails, ring, 2 repair
// rounds, with late starts, a host dead from round 1 and transient losses
// beside a static bad NIC, bad host and bad link, over 20 seeds. Target:
// no part bad that was not planted (at any round), every static fault
// found, each transient pair flaky and nothing else, the dead host's
// partners not suspect, and the rounds within the budget (the schedule's
// and GDR_REPAIR_ROUNDS).
func TestSimulate1024x8Liveness(t *testing.T) {
	const n, rails, repair = 1024, 8, 2
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			f := newFabric(n, rails)
			sc, started := liveScenarioFor(f.names, rails, seed)
			f.deadNIC[sc.nic] = true
			f.deadHost[sc.host] = true
			f.badLink[key2(sc.link[0], sc.link[1])] = sc.linkRail
			f.stops[sc.dies] = 1
			for _, tr := range sc.transients {
				f.transient[transientKey{tr.round, key2(tr.pair[0], tr.pair[1])}] = tr.rail
			}
			o := opt
			o.Live = Liveness{NotStarted: map[string]bool{}, Stopped: map[string]int{sc.dies: 1}}
			for _, h := range sc.notStarted {
				o.Live.NotStarted[h] = true
			}
			planted := map[hostRail]bool{sc.nic: true}
			for r := range rails {
				planted[hostRail{sc.host, r}] = true
			}
			var results []Result
			falseBad := map[string]bool{}
			rounds, nicAt, hostAt, linkAt := 0, 0, 0, 0
			for k := 0; ; k++ {
				r, done := Round(pairing.Ring, f.names, k, repair, results, o)
				if done {
					rounds = k
					break
				}
				results = append(results, f.run(r)...)
				// What the planner of round k+1 and a merge after round k
				// would know: the stops before round k+1.
				a := Analyze(f.names, results, Options{MinFraction: o.MinFraction, Live: o.Live.Before(k + 1)})
				for _, s := range a.Suspects {
					if s.Verdict == Bad && !planted[hostRail{s.Host, s.Rail}] {
						falseBad[fmt.Sprintf("%s rail %d after round %d", s.Host, s.Rail, k)] = true
					}
				}
				for _, l := range a.Links {
					if key2(l.A, l.B) != key2(sc.link[0], sc.link[1]) || l.Rail != sc.linkRail {
						falseBad[fmt.Sprintf("link %s-%s rail %d after round %d", l.A, l.B, l.Rail, k)] = true
					} else if linkAt == 0 {
						linkAt = k + 1
					}
				}
				if nicAt == 0 && a.State(sc.nic.host, sc.nic.rail) == Bad {
					nicAt = k + 1
				}
				if hostAt == 0 && a.HostState(sc.host) == Bad && len(a.Summary(nil).Hosts[a.index[sc.host]].BadRails) == rails {
					hostAt = k + 1
				}
			}
			budget := len(pairing.Base(pairing.Ring, len(started))) + repair
			a := Analyze(f.names, results, o)
			msg := fmt.Sprintf("seed %d: %+v", seed, sc)
			assert.Empty(t, falseBad, msg)
			assert.LessOrEqual(t, rounds, budget, msg)
			for _, at := range []int{nicAt, hostAt, linkAt} {
				assert.True(t, at >= 1 && at <= budget, "found within the budget: nic %d host %d link %d: %s", nicAt, hostAt, linkAt, msg)
			}

			got := verdicts(a)
			want := map[hostRail]State{}
			for hr := range planted {
				want[hr] = Bad
			}
			assert.Equal(t, want, got, "exactly the planted NIC and host, found bad: "+msg)
			require.Len(t, a.Links, 1, msg)
			assert.Equal(t, key2(sc.link[0], sc.link[1]), key2(a.Links[0].A, a.Links[0].B), msg)
			assert.Equal(t, sc.linkRail, a.Links[0].Rail, msg)
			assert.Empty(t, a.LinkSuspects, msg)

			flaky := map[[2]string]int{}
			for _, l := range a.Flaky {
				flaky[key2(l.A, l.B)]++
			}
			wantFlaky := map[[2]string]int{}
			for _, tr := range sc.transients {
				wantFlaky[key2(tr.pair[0], tr.pair[1])] = 1
				if tr.rail == AllRails {
					wantFlaky[key2(tr.pair[0], tr.pair[1])] = rails
				}
			}
			assert.Equal(t, wantFlaky, flaky, "each transient pair flaky on the rails it lost: "+msg)

			s := a.Summary(nil)
			for _, h := range s.Hosts {
				switch {
				case o.Live.NotStarted[h.Host]:
					assert.Equal(t, DidNotStart, h.Liveness)
				case h.Host == sc.dies:
					assert.Equal(t, "stopped in round 1", h.Liveness)
					assert.Empty(t, h.BadRails)
				default:
					assert.Empty(t, h.Liveness, h.Host)
				}
			}
			flakyRails := 0
			for _, c := range flaky {
				flakyRails += c
			}
			t.Logf("seed %2d | %4d started (%d did not), %s dies in round 1 | rounds %d of %d | found after: NIC %s/%d %d, host %s %d, link %s-%s/%d %d | flaky %d (rails) | false bad %d",
				seed, len(started), len(sc.notStarted), sc.dies, rounds, budget, sc.nic.host, sc.nic.rail, nicAt, sc.host, hostAt,
				sc.link[0], sc.link[1], sc.linkRail, linkAt, flakyRails, len(falseBad))
		})
	}
}
