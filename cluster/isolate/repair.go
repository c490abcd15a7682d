package isolate

import (
	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// needsRepair reports whether host has a rail that the results cannot judge
// yet although it was tried: Suspect, or Untested after failures that its
// bad partners explain.
func (a *Analysis) needsRepair(host string) bool {
	for _, r := range a.Rails {
		hr := hostRail{host, r}
		switch a.State(host, r) {
		case Suspected:
			return true
		case Untested:
			if a.failed[hr] && !a.idleRail[hr] {
				return true
			}
		}
	}
	return false
}

// goodEverywhere reports whether host passed on every rail; clean also
// requires that it never failed at all ("passed everywhere").
func (a *Analysis) goodEverywhere(host string, clean bool) bool {
	if len(a.Rails) == 0 || clean && a.anyFail[host] {
		return false
	}
	for _, r := range a.Rails {
		if s := a.State(host, r); s != Good && s != Cleared {
			return false
		}
	}
	return true
}

// Repair is re-pairing round index: every host that needs judging meets a
// host it has not met that passed everywhere (failing that, one that passed
// on every rail), each at most once. ok is false when nobody needs it or no
// partner is left; the hosts still suspect stay so in the summary.
//
// The choice is deterministic (schedule order, partners taken in turn), so
// every task computes the same round from the same results.
func (a *Analysis) Repair(index int) (r pairing.Round, ok bool) {
	r = pairing.Round{Index: index, Repair: true}
	var needy, clean, fallback []string
	for _, h := range a.Hosts {
		switch {
		case a.needsRepair(h):
			needy = append(needy, h)
		case a.goodEverywhere(h, true):
			clean = append(clean, h)
		case a.goodEverywhere(h, false):
			fallback = append(fallback, h)
		}
	}
	pool := append(clean, fallback...)
	used := map[string]bool{}
	next := 0
	for _, h := range needy {
		for tries := 0; tries < len(pool); tries++ {
			g := pool[(next+tries)%len(pool)]
			if used[g] || a.Met(h, g) {
				continue
			}
			used[g] = true
			next = (next + tries + 1) % len(pool)
			r.Pairs = append(r.Pairs, pairing.Meet(index, a.index[h], a.index[g]))
			break
		}
	}
	return r, len(r.Pairs) > 0
}

// Round returns round k of a run over hosts: the schedule's own rounds, then
// at most maxRepair re-pairing rounds, each computed from the results of the
// rounds before it (results of round k and later are ignored). done is true
// when there is no round k: the schedule is over and nothing is left to
// re-pair.
func Round(kind pairing.Kind, hosts []string, k, maxRepair int, results []Result, opt Options) (r pairing.Round, done bool) {
	base := pairing.Base(kind, len(hosts))
	if k < 0 {
		return pairing.Round{}, true
	}
	if k < len(base) {
		return base[k], false
	}
	if k >= len(base)+maxRepair {
		return pairing.Round{}, true
	}
	var before []Result
	for _, res := range results {
		if res.Round < k {
			before = append(before, res)
		}
	}
	r, ok := Analyze(hosts, before, opt).Repair(k)
	return r, !ok
}
