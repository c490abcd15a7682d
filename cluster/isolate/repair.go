package isolate

import (
	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// needsRepair reports whether host has a rail that the results cannot judge
// yet although it was tried: Suspect, or Untested after failures that its
// bad partners explain, or after a round whose partner stopped.
func (a *Analysis) needsRepair(host string) bool {
	for _, r := range a.Rails {
		hr := hostRail{host, r}
		switch a.State(host, r) {
		case Suspected:
			return true
		case Untested:
			if a.failed[hr] && !a.idleRail[hr] || a.lost[hr] {
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

// Repair is re-pairing round index. First the two ends of every link that
// failed once and was not re-tested meet again (once: afterwards the link is
// bad or flaky), so that a one-off loss never stands as a bad link; then
// every host that needs judging meets a host it has not met that passed
// everywhere (failing that, one that passed on every rail). Each host meets
// at most one. Hosts that did not start or stopped (Analysis.Live) meet
// nobody. ok is false when nobody needs it or no partner is left; the hosts
// still suspect stay so in the summary.
//
// The choice is deterministic (schedule order, partners taken in turn), so
// every task computes the same round from the same results.
func (a *Analysis) Repair(index int) (r pairing.Round, ok bool) {
	r = pairing.Round{Index: index, Repair: true}
	var needy, clean, fallback []string
	isNeedy := map[string]bool{}
	for _, h := range a.Hosts {
		switch {
		case a.Live.Gone(h, index):
		case a.needsRepair(h):
			needy = append(needy, h)
			isNeedy[h] = true
		case a.goodEverywhere(h, true):
			clean = append(clean, h)
		case a.goodEverywhere(h, false):
			fallback = append(fallback, h)
		}
	}
	used := map[string]bool{}
	for _, l := range a.LinkSuspects {
		if used[l.A] || used[l.B] || isNeedy[l.A] || isNeedy[l.B] || a.Live.Gone(l.A, index) || a.Live.Gone(l.B, index) {
			continue // a needy end meets a clean host first; the link waits for the next round
		}
		used[l.A], used[l.B] = true, true
		r.Pairs = append(r.Pairs, pairing.Meet(index, a.index[l.A], a.index[l.B]))
	}
	pool := append(clean, fallback...)
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
//
// opt.Live takes out the hosts that did not start: the schedule's rounds
// pair the others (indexes stay those of hosts). opt.Domains and
// opt.Groups order them across NVLink domains, then the fabric's groups
// (pairing.Arrange). Its stops in round k and
// later are ignored: the planner of round k knows only the rounds before
// it. A pair of the schedule with a host that stopped before round k stays
// in the round: its partner's plan idles it (and records why).
func Round(kind pairing.Kind, hosts []string, k, maxRepair int, results []Result, opt Options) (r pairing.Round, done bool) {
	opt.Live = opt.Live.Before(k)
	started, at := opt.Live.started(hosts)
	base := pairing.Base(kind, len(started))
	if k < 0 {
		return pairing.Round{}, true
	}
	if k < len(base) {
		r := base[k]
		if len(started) < len(hosts) || len(opt.Groups) > 0 || len(opt.Domains) > 0 {
			// The schedule numbers the hosts that started, in the order
			// the NVLink domains and the fabric's groups give (the job's
			// without them).
			ord := pairing.Arrange(started, pairing.Layout{Groups: opt.Groups, Domains: opt.Domains})
			pairs := make([]pairing.Pair, len(r.Pairs))
			for i, p := range r.Pairs {
				pairs[i] = pairing.Pair{Server: at[ord[p.Server]], Client: at[ord[p.Client]]}
			}
			r.Pairs = pairs
		}
		return r, false
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
