// Package isolate turns the pair results of an N-host run into the merged
// cluster summary's pairs, suspects and bad links, and adds the re-pairing
// rounds that tell a bad host from a bad partner.
//
// # Input
//
// One Result per (host, round, rail, test) as the host itself saw it. The
// report merge builds them from the shared folder GDR_REPORTS, one
// subfolder per host and round (gdrcluster writes plan.json there, the suite
// writes test.json):
//
//	<GDR_REPORTS>/<host>/round-<k>/plan.json   role, peer, round (gdrcluster plan)
//	<GDR_REPORTS>/<host>/round-<k>/test.json   go test -json events, attr events included
//
// A test of test.json is a pair result when it carries the attribute
// gdr.rail (the rail index, 0-based in the host's rail order); its pair is
// the host's plan.json peer, never the host's word alone: a gdr.peer (the
// peer's host name as the proven peer told it) that names another host
// makes the record a failure of the planned pair (cluster.Load), and
// gdr.role (server or client) orients it.
// Its status is the test's pass, fail or skip. Bandwidth comes from gdr.bw_gbit_s
// (Gbit/s) with gdr.size_bytes and gdr.op (WRITE, READ), inherited from parent tests: the pair's
// bandwidth is the WRITE figure at the largest size either end reported.
// A host that had a peer in a round but wrote no pair result for it gives a
// Missing result on every rail (Rail = AllRails): a failure of that pair.
//
// # Model
//
// A pair passes on a rail when both ends' tests pass; it fails when either
// end's test fails or the pair is Slow (below Options' floor). A fault is
// taken to be static: a bad NIC (host, rail) or a bad host fails with every
// partner; a bad link fails only between its two hosts. So a pass proves both
// ends good on that rail, and, per rail:
//
//   - bad: never passed, and failed with at least two different partners that
//     passed with someone else;
//   - link: a failed pair whose two ends both passed on the rail. One round
//     alone never makes it bad: it is a suspect link until a repair round
//     pairs the same two again; failed again it is a bad link (cables,
//     switch ports, path), passed it is flaky (a one-off loss, reported
//     apart and not a verdict on any part);
//   - suspect: never passed and has a failure not yet explained (a partner
//     that is not bad): re-pair it with a host that passed everywhere;
//   - cleared: passed, and its failures are explained (a bad partner or a
//     bad link);
//   - untested: never passed, every failure explained by a bad partner (it
//     needs a good partner to be judged).
//
// Requiring two partners that passed elsewhere, not just two partners, keeps
// a host squeezed between two bad ones from being called bad: it is re-paired
// instead. Either rule needs two rounds, so no host, rail or link is bad
// from one round alone.
//
// Hosts that did not start or stopped mid-run (Liveness) are planned around
// and named by their liveness, never by a part.
package isolate

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// Status of a test, one end's view of a pair, or a pair.
type Status string

const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Slow    Status = "slow"    // passed, but below the pair bandwidth floor: counts as a failure
	Skip    Status = "skip"    // not judged (absent hardware); ignored
	Missing Status = "missing" // scheduled, no result: counts as a failure
	// Stopped: an end of the pair stopped in this round or before it
	// (Liveness), or the host's plan idled it for that reason: judged
	// neither way, and the end still running is re-paired.
	Stopped Status = "stopped"
)

// Failed reports whether s counts as a failure of the pair.
func (s Status) Failed() bool { return s == Fail || s == Slow || s == Missing }

// AllRails marks a Result that applies to every rail (a round that failed
// before any rail was tried).
const AllRails = -1

// Result is one test's outcome on one rail as one host saw it.
type Result struct {
	Host    string  // the reporting host, as in the job's host list
	Round   int     // schedule round (0-based)
	Rail    int     // rail index, or AllRails
	Peer    string  // the partner host in this round
	Role    string  // "server", "client" or ""
	Test    string  // test name, for evidence
	Status  Status  // Pass, Fail, Skip, Missing or Stopped
	BWGbitS float64 // bandwidth measured, Gbit/s; 0 when none
	Size    int     // message size of BWGbitS, bytes; 0 when unknown
	Op      string  // operation of BWGbitS (WRITE, READ); "" when unknown
	Detail  string  // first line of the failure
}

// Options are the pair floors.
type Options struct {
	// MinFraction: a passing pair whose bandwidth is below this fraction of
	// the median of the pairs on its rail that share neither of its hosts is
	// Slow (GDR_PAIR_MIN_FRACTION); with no such pair, of the rail's other
	// pairs where at least two measured one.
	MinFraction float64
	// MinGbitS: an absolute floor; 0 = none.
	MinGbitS float64
	// Live says which hosts did not start and which stopped (the run's
	// barrier files); the zero value: every host ran to the end.
	Live Liveness
	// Groups are the fabric's groups (GDR_TOPOLOGY_FILE): the schedule's
	// rounds pair hosts in pairing.Order's order, across groups. nil: the
	// job's order. Analysis does not depend on them.
	Groups pairing.Groups
	// Domains are the hosts' NVLink domains as they published them at the
	// start barrier: the schedule's rounds pair hosts across domains first
	// (pairing.Arrange). nil: none known. Analysis does not judge by them;
	// it names each host's in its summary.
	Domains pairing.Domains
}

// State is a (host, rail)'s standing.
type State string

const (
	Good      State = "good"
	Cleared   State = "cleared"
	Untested  State = "untested"
	Suspected State = "suspect"
	Bad       State = "bad"
	// Flaky is a link's verdict (never a host's): the pair failed once on
	// the rail and passed when the same two hosts were paired again.
	Flaky State = "flaky"
)

// rank orders states from best to worst.
func (s State) rank() int {
	return map[State]int{Good: 0, Cleared: 1, Untested: 2, Suspected: 3, Bad: 4}[s]
}

// Pair is one pair on one rail in one round: the summary's pairs entry.
// A is the server and B the client where the roles are known.
type Pair struct {
	// Run names the cluster run of the pair where a report merges several
	// (a rerun of the failed nodes beside the first run); "" otherwise.
	Run        string  `json:"run,omitempty"`
	Round      int     `json:"round"`
	A          string  `json:"a"`
	B          string  `json:"b"`
	Rail       int     `json:"rail"`
	Status     Status  `json:"status"`
	BWGbitS    float64 `json:"bw_gbit_s,omitempty"`
	FloorGbitS float64 `json:"floor_gbit_s,omitempty"` // the floor the pair was judged against (a Slow pair fell below it)
	// FloorSource says where FloorGbitS comes from: the fraction of which
	// median, or the absolute floor.
	FloorSource string `json:"floor_source,omitempty"`
	Detail      string `json:"detail,omitempty"`
}

// Evidence is one failed pair as seen from one of its ends.
type Evidence struct {
	Round        int     `json:"round"`
	Partner      string  `json:"partner"`
	Rail         int     `json:"rail"`
	Status       Status  `json:"status"`
	BWGbitS      float64 `json:"bw_gbit_s,omitempty"`
	FloorGbitS   float64 `json:"floor_gbit_s,omitempty"`
	FloorSource  string  `json:"floor_source,omitempty"`
	PartnerState State   `json:"partner_state"`
	Detail       string  `json:"detail,omitempty"`
}

// Suspect is a (host, rail) found bad, or failing and not yet explained:
// the summary's suspects entry.
type Suspect struct {
	Host     string     `json:"host"`
	Rail     int        `json:"rail"`
	Verdict  State      `json:"verdict"` // Bad or Suspected
	Reason   string     `json:"reason"`
	Evidence []Evidence `json:"evidence"`
}

// Link is a pair that failed on a rail while both its ends passed with
// others: the cable, the switch ports or the path between exactly these two
// hosts, or a one-off loss. Verdict: Bad (it failed in two rounds: the
// schedule's and the re-test), Suspected (it failed once and has not been
// re-tested: a repair round pairs the two again) or Flaky (it failed once
// and passed on the re-test).
type Link struct {
	A        string     `json:"a"`
	B        string     `json:"b"`
	Rail     int        `json:"rail"`
	Verdict  State      `json:"verdict"`
	Reason   string     `json:"reason"`
	Evidence []Evidence `json:"evidence"`
}

// Host is the summary's hosts entry. Verdict is the report's (QUALIFIED,
// NOT QUALIFIED (n), INCOMPLETE (n not run)); Fabric is this package's: the
// worst State over the host's rails.
type Host struct {
	Host    string `json:"host"`
	Verdict string `json:"verdict"`
	Fabric  State  `json:"fabric"`
	// BadRails lists the rails found bad (all of them for a bad host).
	BadRails []int `json:"bad_rails,omitempty"`
	// Liveness: "did not start" or "stopped in round <k>" (Liveness.Of):
	// its run did not finish, which says nothing about its hardware.
	Liveness string `json:"liveness,omitempty"`
	// NVLinkDomain is the NVLink domain the host published at the start
	// barrier, which the planner paired across; absent where it had none.
	NVLinkDomain string `json:"nvlink_domain,omitempty"`
}

// Summary holds the merged cluster summary.json fields this package owns;
// the report embeds it next to its own.
type Summary struct {
	Hosts    []Host    `json:"hosts"`
	Pairs    []Pair    `json:"pairs"`
	Suspects []Suspect `json:"suspects"`
	Links    []Link    `json:"links"` // bad links
	// LinkSuspects failed once and were not re-tested; Flaky failed once
	// and passed on the re-test.
	LinkSuspects []Link `json:"link_suspects"`
	Flaky        []Link `json:"flaky"`
}

type hostRail struct {
	host string
	rail int
}

// Analysis is the outcome of Analyze.
type Analysis struct {
	Hosts        []string // every host, schedule order first
	Rails        []int
	Pairs        []Pair
	Suspects     []Suspect
	Links        []Link // bad links
	LinkSuspects []Link // links that failed once, not re-tested yet
	Flaky        []Link // links that failed once and passed on the re-test
	Live         Liveness
	Domains      pairing.Domains // the hosts' NVLink domains (Options.Domains)

	state    map[hostRail]State
	failed   map[hostRail]bool // had a failed pair on that rail
	lost     map[hostRail]bool // had a pair whose partner stopped
	anyFail  map[string]bool
	met      map[[2]string]bool
	index    map[string]int
	idleRail map[hostRail]bool // only skips on that rail: nothing to judge
}

// State is host's standing on rail; a host never seen on the rail is Untested.
func (a *Analysis) State(host string, rail int) State {
	if s, ok := a.state[hostRail{host, rail}]; ok {
		return s
	}
	return Untested
}

// HostState is the worst State over the host's rails.
func (a *Analysis) HostState(host string) State {
	worst := Good
	for _, r := range a.Rails {
		if s := a.State(host, r); s.rank() > worst.rank() {
			worst = s
		}
	}
	return worst
}

// Met reports whether two hosts were paired in any round analysed.
func (a *Analysis) Met(x, y string) bool { return a.met[key2(x, y)] }

// Summary fills the summary's fields; verdicts maps host to the report's
// verdict (missing hosts get "").
func (a *Analysis) Summary(verdicts map[string]string) Summary {
	s := Summary{Pairs: a.Pairs, Suspects: a.Suspects, Links: a.Links, LinkSuspects: a.LinkSuspects, Flaky: a.Flaky}
	for _, h := range a.Hosts {
		e := Host{Host: h, Verdict: verdicts[h], Fabric: a.HostState(h), Liveness: a.Live.Of(h), NVLinkDomain: a.Domains[h]}
		for _, r := range a.Rails {
			if a.State(h, r) == Bad {
				e.BadRails = append(e.BadRails, r)
			}
		}
		s.Hosts = append(s.Hosts, e)
	}
	if s.Pairs == nil {
		s.Pairs = []Pair{}
	}
	if s.Suspects == nil {
		s.Suspects = []Suspect{}
	}
	if s.Links == nil {
		s.Links = []Link{}
	}
	if s.LinkSuspects == nil {
		s.LinkSuspects = []Link{}
	}
	if s.Flaky == nil {
		s.Flaky = []Link{}
	}
	return s
}

func key2(x, y string) [2]string {
	if x > y {
		x, y = y, x
	}
	return [2]string{x, y}
}

// end is one host's aggregated view of one pair on one rail.
type end struct {
	status  Status
	role    string
	bw      float64
	size    int
	write   bool
	detail  string
	present bool
	stopped string // why the end's plan idled it: its partner stopped
}

func (e *end) add(r Result) {
	e.present = true
	if r.Role != "" {
		e.role = r.Role
	}
	switch {
	case r.Status == Stopped:
		e.stopped = r.Detail
		if e.stopped == "" {
			e.stopped = "the partner stopped"
		}
	case r.Status.Failed():
		if !e.status.Failed() || e.status == Missing && r.Status != Missing {
			e.status = r.Status
			e.detail = r.Detail
			if e.detail == "" && r.Test != "" {
				e.detail = r.Test + " " + string(r.Status)
			}
		}
	case r.Status == Pass && !e.status.Failed():
		e.status = Pass
	case e.status == "":
		e.status = Skip
	}
	if r.BWGbitS > 0 && !math.IsNaN(r.BWGbitS) && !math.IsInf(r.BWGbitS, 0) {
		w := r.Op == "" || strings.EqualFold(r.Op, "write")
		better := w && !e.write || w == e.write && (r.Size > e.size || r.Size == e.size && r.BWGbitS > e.bw)
		if e.bw == 0 || better {
			e.bw, e.size, e.write = r.BWGbitS, r.Size, w
		}
	}
}

// pairKey names one pair on one rail in one round by host index, lo < hi.
type pairKey struct {
	round, rail, lo, hi int
}

// Analyze judges every pair of results and every (host, rail). hosts is the
// job's host list (schedule order); hosts only seen in results are added.
func Analyze(hosts []string, results []Result, opt Options) *Analysis {
	a := &Analysis{
		state: map[hostRail]State{}, failed: map[hostRail]bool{}, lost: map[hostRail]bool{}, anyFail: map[string]bool{},
		met: map[[2]string]bool{}, index: map[string]int{}, idleRail: map[hostRail]bool{}, Live: opt.Live, Domains: opt.Domains,
	}
	for _, h := range hosts {
		if _, ok := a.index[h]; !ok {
			a.index[h] = len(a.Hosts)
			a.Hosts = append(a.Hosts, h)
		}
	}
	extra := map[string]bool{}
	rails := map[int]bool{}
	for _, r := range results {
		for _, h := range []string{r.Host, r.Peer} {
			if _, ok := a.index[h]; !ok && h != "" {
				extra[h] = true
			}
		}
		if r.Rail >= 0 {
			rails[r.Rail] = true
		}
	}
	for _, h := range slices.Sorted(maps.Keys(extra)) {
		a.index[h] = len(a.Hosts)
		a.Hosts = append(a.Hosts, h)
	}
	a.Rails = slices.Sorted(maps.Keys(rails))
	if len(a.Rails) == 0 && len(results) > 0 {
		a.Rails = []int{0}
	}

	// Each end's view of each pair: [0] the lower index, [1] the higher.
	ends := make(map[pairKey]*[2]end, len(results)/2)
	var keys []pairKey
	for _, r := range results {
		if r.Host == "" || r.Peer == "" || r.Host == r.Peer {
			continue
		}
		a.met[key2(r.Host, r.Peer)] = true
		rs := []int{r.Rail}
		if r.Rail == AllRails {
			rs = a.Rails
		}
		h, p := a.index[r.Host], a.index[r.Peer]
		side := 0
		if h > p {
			side = 1
		}
		for _, rail := range rs {
			pk := pairKey{r.Round, rail, min(h, p), max(h, p)}
			e := ends[pk]
			if e == nil {
				e = &[2]end{}
				ends[pk] = e
				keys = append(keys, pk)
			}
			e[side].add(r)
		}
	}
	slices.SortFunc(keys, func(x, y pairKey) int {
		return cmp.Or(cmp.Compare(x.round, y.round), cmp.Compare(x.lo, y.lo), cmp.Compare(x.hi, y.hi), cmp.Compare(x.rail, y.rail))
	})

	// Pairs: both ends merged.
	a.Pairs = make([]Pair, 0, len(keys))
	for _, k := range keys {
		e := ends[k]
		lo, hi := a.Hosts[k.lo], a.Hosts[k.hi]
		p := Pair{Round: k.round, A: lo, B: hi, Rail: k.rail, Status: Skip}
		if serverIs(&e[0], &e[1]) {
			p.A, p.B = hi, lo
		}
		var bwEnd *end
		for i, host := range []string{lo, hi} {
			e := &e[i]
			if !e.present {
				continue
			}
			switch {
			case e.status.Failed():
				if !p.Status.Failed() || p.Status == Missing && e.status != Missing {
					p.Status = e.status
					p.Detail = host + ": " + e.detail
				}
			case e.status == Pass && !p.Status.Failed():
				p.Status = Pass
			}
			if e.bw > 0 && (bwEnd == nil || e.write && !bwEnd.write || e.write == bwEnd.write && (e.size > bwEnd.size || e.size == bwEnd.size && e.bw > bwEnd.bw)) {
				bwEnd = e
			}
		}
		if bwEnd != nil {
			p.BWGbitS = bwEnd.bw
		}
		if why := a.stopped(k.round, lo, hi, e); why != "" {
			p.Status, p.Detail, p.BWGbitS = Stopped, why, 0
		}
		a.Pairs = append(a.Pairs, p)
	}

	applyFloors(a.Pairs, opt)
	a.judge()
	return a
}

// stopped says why a pair of round is not judged because an end stopped
// (Liveness, or an end's plan that idled it), "" when it is judged.
func (a *Analysis) stopped(round int, lo, hi string, e *[2]end) string {
	for _, h := range []string{lo, hi} {
		if a.Live.NotStarted[h] {
			return h + " did not start"
		}
		if r, ok := a.Live.Stopped[h]; ok && r <= round {
			return fmt.Sprintf("%s stopped in round %d: the pair is not judged", h, r)
		}
	}
	for i := range e {
		if e[i].stopped != "" {
			return e[i].stopped
		}
	}
	return ""
}

// serverIs reports whether the later end in schedule order (hi) is the
// server, from the roles the ends reported; unknown roles keep schedule order.
func serverIs(lo, hi *end) bool {
	return lo.role == "client" || hi.role == "server" && lo.role != "server"
}

// applyFloors marks passing pairs below the floors Slow. A pair is compared
// with the rail's pairs that share neither of its hosts: a bad end slows
// every pair it is in, and those pairs must not lower the reference of its
// other pairs (in a four-host ring, two of a rail's four pairs hold the bad
// end). Where no such pair measured one, the rail's other pairs are the
// reference. A rail with fewer than three pairs has no relative floor: two
// pairs cannot say which of them is slow.
func applyFloors(pairs []Pair, opt Options) {
	byRail := map[int][]int{}
	for i, p := range pairs {
		if p.Status == Pass && p.BWGbitS > 0 {
			byRail[p.Rail] = append(byRail[p.Rail], i)
		}
	}
	for _, idx := range byRail {
		vals := make([]float64, len(idx))
		for i, j := range idx {
			vals[i] = pairs[j].BWGbitS
		}
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		byHost := map[string][]int{} // host -> its pairs on this rail (indexes into idx)
		for i, j := range idx {
			byHost[pairs[j].A] = append(byHost[pairs[j].A], i)
			if pairs[j].B != pairs[j].A {
				byHost[pairs[j].B] = append(byHost[pairs[j].B], i)
			}
		}
		for i, j := range idx {
			floor, source := opt.MinGbitS, ""
			if floor > 0 {
				source = fmt.Sprintf("the absolute floor of %.3g Gbit/s", floor)
			}
			if opt.MinFraction > 0 && len(sorted) >= 3 {
				p := pairs[j]
				// The values of the pairs that share a host with p (p too).
				near := map[int]bool{}
				for _, k := range byHost[p.A] {
					near[k] = true
				}
				for _, k := range byHost[p.B] {
					near[k] = true
				}
				drop := make([]float64, 0, len(near))
				for k := range near {
					drop = append(drop, vals[k])
				}
				slices.Sort(drop)
				med, of := 0.0, ""
				switch {
				case len(drop) < len(sorted):
					med, of = medianApart(sorted, drop), fmt.Sprintf("rail %d's pairs without %s or %s", p.Rail, p.A, p.B)
				default:
					med, of = medianWithout(sorted, vals[i]), fmt.Sprintf("rail %d's other pairs", p.Rail)
				}
				if rel := opt.MinFraction * med; rel > floor {
					floor = rel
					source = fmt.Sprintf("GDR_PAIR_MIN_FRACTION %.3g x the median %.3g Gbit/s of %s", opt.MinFraction, med, of)
				}
			}
			if floor > 0 {
				pairs[j].FloorGbitS, pairs[j].FloorSource = floor, source
			}
			if floor > 0 && pairs[j].BWGbitS < floor {
				pairs[j].Status = Slow
				pairs[j].Detail = fmt.Sprintf("%.3g Gbit/s is below the floor of %.3g Gbit/s (%s)", pairs[j].BWGbitS, floor, source)
			}
		}
	}
}

// medianApart is the median of sorted without the values of drop (a
// sorted sub-multiset of it, shorter than it), walking sorted once.
func medianApart(sorted, drop []float64) float64 {
	n := len(sorted) - len(drop)
	at := func(want int) float64 { // the want-th value left, 0-based
		d, left := 0, 0
		for _, v := range sorted {
			if d < len(drop) && drop[d] == v {
				d++
				continue
			}
			if left == want {
				return v
			}
			left++
		}
		return sorted[len(sorted)-1] // not reached: want < n
	}
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}

// medianWithout is the median of sorted with one copy of v left out: a pair
// is compared with the others, so one slow pair of four cannot drag the
// median down to itself.
func medianWithout(sorted []float64, v float64) float64 {
	skip, _ := slices.BinarySearch(sorted, v)
	at := func(i int) float64 { // the rest, without copying it
		if i >= skip {
			i++
		}
		return sorted[i]
	}
	m := len(sorted) - 1
	if m%2 == 1 {
		return at(m / 2)
	}
	return (at(m/2-1) + at(m/2)) / 2
}

// judge applies the model to every rail.
func (a *Analysis) judge() {
	byRail := map[int][]*Pair{}
	for i := range a.Pairs {
		p := &a.Pairs[i]
		byRail[p.Rail] = append(byRail[p.Rail], p)
	}
	for _, rail := range a.Rails {
		pairs := byRail[rail]
		good := map[string]bool{}
		judged := map[string]bool{}
		for _, p := range pairs {
			if p.Status == Stopped {
				for _, h := range []string{p.A, p.B} {
					if !a.Live.Gone(h, p.Round) {
						a.lost[hostRail{h, rail}] = true
					}
				}
			}
			if p.Status == Skip || p.Status == Stopped {
				continue
			}
			judged[p.A], judged[p.B] = true, true
			if p.Status == Pass {
				good[p.A], good[p.B] = true, true
			}
		}
		goodPartners := map[string]map[string]bool{}
		linkFails := map[[2]string][]*Pair{} // failed pairs whose ends both passed on the rail
		var links [][2]string                // their keys, in order of the first failure
		passed := map[[2]string][]*Pair{}
		for _, p := range pairs {
			if p.Status == Pass {
				k := key2(p.A, p.B)
				passed[k] = append(passed[k], p)
			}
		}
		for _, p := range pairs {
			if !p.Status.Failed() {
				continue
			}
			a.failed[hostRail{p.A, rail}], a.failed[hostRail{p.B, rail}] = true, true
			a.anyFail[p.A], a.anyFail[p.B] = true, true
			if good[p.A] && good[p.B] {
				k := key2(p.A, p.B)
				if linkFails[k] == nil {
					links = append(links, k)
				}
				linkFails[k] = append(linkFails[k], p)
				continue
			}
			for _, x := range [][2]string{{p.A, p.B}, {p.B, p.A}} {
				if !good[x[0]] && good[x[1]] {
					if goodPartners[x[0]] == nil {
						goodPartners[x[0]] = map[string]bool{}
					}
					goodPartners[x[0]][x[1]] = true
				}
			}
		}
		bad := map[string]bool{}
		for h, ps := range goodPartners {
			if len(ps) >= 2 {
				bad[h] = true
			}
		}
		for _, h := range a.Hosts {
			hr := hostRail{h, rail}
			switch {
			case !judged[h]:
				a.idleRail[hr] = true
				a.state[hr] = Untested
			case good[h] && a.failed[hr]:
				a.state[hr] = Cleared
			case good[h]:
				a.state[hr] = Good
			case bad[h]:
				a.state[hr] = Bad
			default:
				a.state[hr] = Untested // every failure explained by a bad partner, unless:
				for _, p := range pairs {
					if p.Status.Failed() && (p.A == h && !bad[p.B] || p.B == h && !bad[p.A]) {
						a.state[hr] = Suspected
						break
					}
				}
			}
		}
		for _, k := range links {
			a.judgeLink(rail, linkFails[k], passed[k])
		}
	}

	for _, h := range a.Hosts {
		for _, rail := range a.Rails {
			st := a.State(h, rail)
			if st != Bad && st != Suspected || st == Suspected && a.Live.Of(h) != "" {
				continue // a host whose run did not finish: its liveness says so
			}
			s := Suspect{Host: h, Rail: rail, Verdict: st}
			var parts []string
			vouched := 0 // failures with partners that passed elsewhere
			for i := range a.Pairs {
				p := &a.Pairs[i]
				if p.Rail != rail || !p.Status.Failed() || p.A != h && p.B != h {
					continue
				}
				ev := a.Evidence(p, h)
				s.Evidence = append(s.Evidence, ev)
				part := fmt.Sprintf("%s (round %d, %s", ev.Partner, ev.Round, ev.Status)
				if ev.Status == Slow {
					part += fmt.Sprintf(" %.3g < %.3g Gbit/s", ev.BWGbitS, ev.FloorGbitS)
				}
				parts = append(parts, part+", partner "+string(ev.PartnerState)+")")
				if ev.PartnerState == Good || ev.PartnerState == Cleared {
					vouched++
				}
			}
			if st == Bad {
				s.Reason = fmt.Sprintf("%s rail %d failed with %d partners that passed with others: %s", h, rail, vouched, strings.Join(parts, "; "))
			} else {
				s.Reason = fmt.Sprintf("%s rail %d failed with %s and has not passed with anyone yet: re-pair it with a host that passed everywhere", h, rail, strings.Join(parts, "; "))
			}
			a.Suspects = append(a.Suspects, s)
		}
	}
}

// judgeLink judges one link on rail from its failed pairs (both ends
// passed on the rail, with someone) and the pairs of the same two hosts
// that passed on it: failed in two rounds is bad; failed once and passed
// on the re-test is flaky; failed once, not re-tested, is a suspect that
// the next repair round pairs again. A link with an end whose run did not
// finish cannot be re-tested: its liveness is the finding, not the link.
func (a *Analysis) judgeLink(rail int, fails, passes []*Pair) {
	f := fails[0]
	l := Link{A: f.A, B: f.B, Rail: rail}
	var rounds, how []string
	for _, p := range fails {
		l.Evidence = append(l.Evidence, a.Evidence(p, p.A), a.Evidence(p, p.B))
		rounds = append(rounds, fmt.Sprint(p.Round))
		how = append(how, string(p.Status))
	}
	switch {
	case len(fails) >= 2:
		l.Verdict = Bad
		l.Reason = fmt.Sprintf("%s and %s failed together on rail %d in rounds %s (%s) while each passed with other partners: the link between them (cables, switch ports, path)",
			l.A, l.B, rail, strings.Join(rounds, " and "), strings.Join(how, ", "))
		if len(passes) > 0 {
			l.Reason += fmt.Sprintf("; it passed in round %d as well: an intermittent fault", passes[0].Round)
		}
		a.Links = append(a.Links, l)
	case len(passes) > 0:
		p := passes[0]
		l.Verdict = Flaky
		l.Evidence = append(l.Evidence, a.Evidence(p, p.A))
		l.Reason = fmt.Sprintf("%s and %s failed together on rail %d in round %d (%s) and passed when paired again in round %d: a one-off loss on %s rail %d, %s rail %d or the path between them (flaky), not a static fault; watch their error counters",
			l.A, l.B, rail, f.Round, f.Status, p.Round, l.A, rail, l.B, rail)
		a.Flaky = append(a.Flaky, l)
	case a.Live.Of(l.A) != "" || a.Live.Of(l.B) != "":
		// Not re-tested and never will be: the stopped host's line covers it.
	default:
		l.Verdict = Suspected
		l.Reason = fmt.Sprintf("%s and %s failed together on rail %d in round %d (%s) while each passed with other partners, and have not been paired again: a re-test tells a bad link (cables, switch ports, path) from a one-off loss",
			l.A, l.B, rail, f.Round, f.Status)
		a.LinkSuspects = append(a.LinkSuspects, l)
	}
}

// Evidence is pair p as seen from its end from: the partner, the result and
// the partner's standing on that rail.
func (a *Analysis) Evidence(p *Pair, from string) Evidence {
	partner := p.B
	if p.B == from {
		partner = p.A
	}
	return Evidence{Round: p.Round, Partner: partner, Rail: p.Rail, Status: p.Status, BWGbitS: p.BWGbitS,
		FloorGbitS: p.FloorGbitS, FloorSource: p.FloorSource, PartnerState: a.State(partner, p.Rail), Detail: p.Detail}
}

// PairKey names one pair of hosts in one round (A the server, B the client).
type PairKey struct {
	Run   string
	Round int
	A, B  string
}

// ByPair groups pair results by round and hosts, in the order they first
// appear, each with its results per rail: the rows of a pair x rail table.
func ByPair(ps []Pair) ([]PairKey, map[PairKey]map[int]Pair) {
	by := map[PairKey]map[int]Pair{}
	var order []PairKey
	for _, p := range ps {
		k := PairKey{p.Run, p.Round, p.A, p.B}
		if by[k] == nil {
			by[k] = map[int]Pair{}
			order = append(order, k)
		}
		by[k][p.Rail] = p
	}
	return order, by
}

// Compact folds results into one per (host, round, peer, rail) as Analyze
// merges them into a pair's end: the worst status and its detail, the
// role, the bandwidth it would take (WRITE at the largest size). Analyze
// judges the compact results exactly as the full ones; a task planning a
// repair round reads every host's compact file (cluster: pairs.json, a few
// hundred bytes a rail) instead of every host's test.json.
func Compact(results []Result) []Result {
	type key struct {
		host, peer  string
		round, rail int
	}
	ends := map[key]*end{}
	var order []key
	for _, r := range results {
		k := key{r.Host, r.Peer, r.Round, r.Rail}
		e := ends[k]
		if e == nil {
			e = &end{}
			ends[k] = e
			order = append(order, k)
		}
		e.add(r)
	}
	out := make([]Result, 0, len(order))
	for _, k := range order {
		e := ends[k]
		r := Result{Host: k.host, Round: k.round, Rail: k.rail, Peer: k.peer, Role: e.role, Status: e.status, Detail: e.detail,
			BWGbitS: e.bw, Size: e.size}
		if e.bw > 0 && e.write {
			r.Op = "WRITE"
		} else if e.bw > 0 {
			r.Op = "READ"
		}
		if e.stopped != "" && !e.status.Failed() && e.status != Pass {
			r.Status, r.Detail = Stopped, e.stopped
		}
		out = append(out, r)
		if e.stopped != "" && (e.status.Failed() || e.status == Pass) {
			out = append(out, Result{Host: k.host, Round: k.round, Rail: k.rail, Peer: k.peer, Status: Stopped, Detail: e.stopped})
		}
	}
	return out
}
