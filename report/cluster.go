package report

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jstemmer/go-junit-report/v2/gtr"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// A cluster run's shared folder (GDR_REPORTS of deploy/rounds.sh, see
// cluster) holds one folder per host and in it one per round:
// <root>/<host>/round-<k>/{plan.json,test.json,host.json}. Merged, each host
// is one run over all its rounds: a requirement fails on the host when it
// failed in any round. Its events keep their packages with the round in
// front (round-1/github.com/.../conformance/pingpong), so the area is still
// the last element and each round's tests stay apart.

var roundDir = regexp.MustCompile(`^round-(0|[1-9][0-9]{0,5})$`)

// IsCluster reports whether dir is a cluster run's shared folder: a host
// folder in it holds round-<k>/plan.json.
func IsCluster(dir string) bool {
	hosts, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, h := range hosts {
		if !h.IsDir() || strings.HasPrefix(h.Name(), ".") {
			continue
		}
		rounds, _ := os.ReadDir(filepath.Join(dir, h.Name()))
		for _, r := range rounds {
			if r.IsDir() && roundDir.MatchString(r.Name()) && exists(filepath.Join(dir, h.Name(), r.Name(), "plan.json")) {
				return true
			}
		}
	}
	return false
}

// roundOf returns "round-<k>" when a package name carries a cluster round.
func roundOf(pkg string) string {
	r, _, ok := strings.Cut(pkg, "/")
	if ok && roundDir.MatchString(r) {
		return r
	}
	return ""
}

// loadClusterRuns reads every host of a cluster folder, rounds merged:
// the rounds of run (run "" is the folder's only run; a folder two runs
// wrote is an error naming both, cluster.RoundDirs).
func loadClusterRuns(dir, run string) ([]Run, error) {
	hrs, err := cluster.RoundDirs(dir, run)
	if err != nil {
		return nil, err
	}
	var runs []Run
	in := newInterner()
	for i := 0; i < len(hrs); {
		j := i
		for j < len(hrs) && hrs[j].Host == hrs[i].Host {
			j++
		}
		r, err := loadHostRounds(hrs[i:j], in)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
		i = j
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no host folder with round-<k> folders", dir)
	}
	return runs, nil
}

// loadHostRounds merges one host's round folders (in round order) into one
// run named for the host, its strings interned in in.
func loadHostRounds(rounds []cluster.HostRound, in *interner) (Run, error) {
	host := rounds[0].Host
	run := Run{Host: Identity{Host: host}}
	haveID := false
	for _, r := range rounds {
		sub, name := r.Dir, filepath.Base(r.Dir)
		if !sharedfile.HasEvents(sub) && !exists(filepath.Join(sub, HostFile)) {
			// An idle round, or one whose suite never ran: the pair analysis
			// counts a scheduled pair without results as failed.
			continue
		}
		one, err := loadHost(sub, in, false)
		if err != nil {
			return Run{}, err
		}
		if !haveID && one.Host.Host != "" {
			id := one.Host
			// The job's host list names it, as in the pairs (a Kubernetes
			// pod's gdrconf-<i>); the machine's own name stays as Node.
			id.Rename(host)
			id.Role, id.Peer = "", ""
			run.Host, haveID = id, true
		}
		if ex := one.Host.GoTestExit; ex != nil && (run.Host.GoTestExit == nil || *run.Host.GoTestExit == 0) {
			v := *ex
			run.Host.GoTestExit = &v
		}
		for _, e := range one.Events {
			if e.Package != "" {
				e.Package = name + "/" + e.Package
			} else {
				e.Package = name
			}
			if e.ImportPath != "" {
				e.ImportPath = name + "/" + e.ImportPath
			}
			run.Events = append(run.Events, e)
		}
		for _, s := range one.Errs {
			run.Errs = append(run.Errs, name+": "+s)
		}
		if one.soakDir != "" {
			run.soakDir = one.soakDir // a soak round's; the last one's if several
		}
	}
	return run, nil
}

// LoadCluster reads run of a cluster folder ("" for its only one): one run
// per host (rounds merged) and the pair analysis of cluster/isolate over
// every round (pairs per rail, suspects, bad links), in the job's host
// order.
func LoadCluster(dir string, opt isolate.Options, run string) ([]Run, *isolate.Analysis, error) {
	runs, a, _, err := loadCluster(dir, opt, run)
	return runs, a, err
}

// loadCluster is LoadCluster that also says which run it read (plan.json's
// run, "" for plans from before runs had one).
func loadCluster(dir string, opt isolate.Options, run string) ([]Run, *isolate.Analysis, string, error) {
	runs, err := loadClusterRuns(dir, run)
	if err != nil {
		return nil, nil, "", err
	}
	hosts, err := cluster.Hosts(dir, run)
	if err != nil {
		return nil, nil, "", err
	}
	results, plans, err := cluster.Load(dir, run)
	if err != nil {
		return nil, nil, "", err
	}
	if run == "" && len(plans) > 0 {
		run = plans[0].Run
	}
	// Hosts that did not start or stopped, from the run's barrier files
	// (and its hosts' done files): named, not judged.
	if opt.Live, err = cluster.Liveness(dir, run); err != nil {
		return nil, nil, "", err
	}
	// The NVLink domains the hosts published at the start, which the
	// planner paired across: each host's is named beside its fabric state.
	if opt.Domains, err = cluster.StartDomains(dir, run); err != nil {
		return nil, nil, "", err
	}
	a := isolate.Analyze(hosts, results, opt)
	order := map[string]int{}
	for i, h := range a.Hosts {
		order[h] = i
	}
	sort.SliceStable(runs, func(i, j int) bool {
		oi, iok := order[runs[i].Host.Host]
		oj, jok := order[runs[j].Host.Host]
		if iok != jok {
			return iok
		}
		return oi < oj
	})
	for i := range runs {
		runs[i].Source = filepath.Join(dir, runs[i].Host.Host)
	}
	return runs, a, run, nil
}

// SetCluster adds a cluster run's pairs and suspects to the report: the
// hosts' fabric states, the pair x rail heatmap, summary.json's pairs,
// suspects, links and cluster, and the JUnit suites cluster/links and
// cluster/isolation. Isolation's findings are verdicts: a host or rail found
// bad fails its host, a bad link fails the merged verdict, a part not yet
// isolated leaves it INCOMPLETE; a host's pair test that failed because of
// a partner (or link) found bad is not held against that host.
func (r *Report) SetCluster(a *isolate.Analysis) {
	r.setClusters([]clusterSource{{a: a}}, nil)
}

// clusterSource is one cluster run of a merge: its folder, its run and
// its analysis.
type clusterSource struct {
	Dir, Run string
	a        *isolate.Analysis
}

// Engine is the engine that ran it, from its run's identity
// (jobenv.Task.Run: "slurm/<cluster>/<id>", "kubernetes/<ns>/<uid>").
func (c clusterSource) Engine() string {
	e, _, _ := strings.Cut(c.Run, "/")
	return e
}

// setClusters is SetCluster over one or more cluster runs, oldest first
// (a first run and the reruns of its failed nodes, gdrreport -latest).
// Each host is judged by the analysis of the run its latest run is from
// (owner; a host that left no run anywhere, by the last run that lists
// it): its rail and host findings, its liveness, its excused pairs. A
// link found bad or suspect in one run stands unless a later run paired
// the same two hosts on that rail again, whose analysis then says. Every
// run's pairs are kept, each named by its run when there are several.
func (r *Report) setClusters(parts []clusterSource, owner map[string]int) {
	owns := map[string]int{}
	for i, p := range parts {
		for _, h := range p.a.Hosts {
			owns[h] = i
		}
	}
	for h, i := range owner {
		owns[h] = i
	}
	retested := func(i int, a, b string, rail int) bool {
		for _, later := range parts[i+1:] {
			for _, p := range later.a.Pairs {
				if p.Rail == rail && (p.A == a && p.B == b || p.A == b && p.B == a) {
					return true
				}
			}
		}
		return false
	}
	f := &ClusterFindings{Suspects: []ClusterFinding{}, Cleared: []ClusterClearance{}, Flaky: []ClusterFinding{}, Unfinished: []ClusterUnfinished{}}
	s := isolate.Summary{Hosts: []isolate.Host{}, Pairs: []isolate.Pair{}, Suspects: []isolate.Suspect{}, Links: []isolate.Link{},
		LinkSuspects: []isolate.Link{}, Flaky: []isolate.Link{}}
	rails := map[int]bool{}
	keepLinks := func(i int, ls []isolate.Link) []isolate.Link {
		var out []isolate.Link
		for _, l := range ls {
			if !retested(i, l.A, l.B, l.Rail) {
				out = append(out, l)
			}
		}
		return out
	}
	for i, p := range parts {
		fi := findingsOf(p.a)
		for _, x := range fi.Suspects {
			if x.Part == PartLink && !retested(i, x.Host, x.Peer, x.Rail) || x.Part != PartLink && owns[x.Host] == i {
				f.Suspects = append(f.Suspects, x)
			}
		}
		for _, x := range fi.Flaky {
			if !retested(i, x.Host, x.Peer, x.Rail) {
				f.Flaky = append(f.Flaky, x)
			}
		}
		for _, x := range fi.Cleared {
			if owns[x.Host] == i {
				f.Cleared = append(f.Cleared, x)
			}
		}
		for _, x := range fi.Unfinished {
			if owns[x.Host] == i {
				f.Unfinished = append(f.Unfinished, x)
			}
		}
		si := p.a.Summary(nil)
		for _, h := range si.Hosts {
			if owns[h.Host] == i {
				s.Hosts = append(s.Hosts, h)
			}
		}
		for _, x := range si.Pairs {
			if len(parts) > 1 {
				x.Run = p.Run
			}
			s.Pairs = append(s.Pairs, x)
		}
		for _, x := range si.Suspects {
			if owns[x.Host] == i {
				s.Suspects = append(s.Suspects, x)
			}
		}
		s.Links = append(s.Links, keepLinks(i, si.Links)...)
		s.LinkSuspects = append(s.LinkSuspects, keepLinks(i, si.LinkSuspects)...)
		s.Flaky = append(s.Flaky, keepLinks(i, si.Flaky)...)
		for _, rl := range p.a.Rails {
			rails[rl] = true
		}
	}
	f.settle(len(owns), len(rails))
	for i := range f.Suspects {
		f.Suspects[i].AtFault = r.clusterPart(f.Suspects[i])
	}
	r.addUnstarted(parts, owns)
	for _, h := range r.Hosts {
		if i, ok := owns[h.Identity.Host]; ok && !h.Earlier {
			if ex := excusePairs(h, parts[i].a); len(ex) > 0 {
				f.Excused = append(f.Excused, ex...)
				h.rejudge()
			}
		}
		f.apply(h)
	}
	r.Verdict = overall(r.Hosts)
	f.applyMerged(&r.Verdict)
	for _, fl := range f.Flaky {
		r.Verdict.Flags = append(r.Verdict.Flags, fl.Name()+" flaky: "+fl.Reason)
	}
	verdicts := map[string]string{}
	for _, h := range r.Hosts {
		verdicts[h.Identity.Host] = h.Verdict.Verdict
	}
	for i := range s.Hosts {
		s.Hosts[i].Verdict = verdicts[s.Hosts[i].Host]
	}
	r.Cluster = &s
	r.Findings = f
	r.rails = slices.Sorted(maps.Keys(rails))
	r.clusters = parts
	if len(parts) > 1 {
		r.judgedBy = map[string]string{}
		for h, i := range owns {
			r.judgedBy[h] = parts[i].Run
		}
	}
}

// addUnstarted gives each host that did not start a place in the report:
// it left no folder, so no run of it was read; its verdict is set by its
// finding (apply). Only the run that owns the host says so. Hosts keep the
// runs' order (the first run's, then hosts only a later one lists).
func (r *Report) addUnstarted(parts []clusterSource, owns map[string]int) {
	have := map[string]bool{}
	for _, h := range r.Hosts {
		have[h.Identity.Host] = true
	}
	added := false
	order := map[string]int{}
	for i, p := range parts {
		for _, h := range p.a.Hosts {
			if _, ok := order[h]; !ok {
				order[h] = len(order)
			}
			if p.a.Live.NotStarted[h] && !have[h] && owns[h] == i {
				r.Hosts = append(r.Hosts, &HostResult{Identity: Identity{Host: h}, Verdict: Verdict{Verdict: Incomplete, Line: Incomplete + " (no test ran)"}})
				have[h], added = true, true
			}
		}
	}
	if !added {
		return
	}
	sort.SliceStable(r.Hosts, func(i, j int) bool {
		oi, iok := order[r.Hosts[i].Identity.Host]
		oj, jok := order[r.Hosts[j].Identity.Host]
		if iok != jok {
			return iok
		}
		return oi < oj
	})
}

// Parts that a cluster finding names.
const (
	PartHost = "host" // every rail of the host found bad
	PartRail = "rail" // one NIC (host, rail)
	PartLink = "link" // the path between two hosts on one rail
)

// ClusterFinding is a host, rail or link that isolation found bad or could
// not clear yet: summary.json's cluster.suspects.
type ClusterFinding struct {
	Part string `json:"part"`           // PartHost, PartRail, PartLink
	Host string `json:"host"`           // a link's first end
	Peer string `json:"peer,omitempty"` // a link's other end
	Rail int    `json:"rail"`           // isolate.AllRails for a host
	// Verdict: bad fails the verdict; suspect (failed, not yet explained)
	// and untested (failed only with bad partners) leave it INCOMPLETE.
	Verdict  isolate.State      `json:"verdict"`
	Reason   string             `json:"reason"`
	Evidence []isolate.Evidence `json:"evidence"`
	// AtFault is the part the finding points at, with its identity from
	// the host's inventory (clusterPart).
	AtFault *Part `json:"at_fault,omitempty"`
}

// Name is how the finding names its part: "vm3 rail 1", "host vm3"
// (every rail), "link vm1 <-> vm2 rail 0".
func (f ClusterFinding) Name() string {
	switch f.Part {
	case PartHost:
		return "host " + f.Host
	case PartLink:
		return fmt.Sprintf("link %s <-> %s rail %d", f.Host, f.Peer, f.Rail)
	}
	return fmt.Sprintf("%s rail %d", f.Host, f.Rail)
}

// ClusterClearance is a host isolation found no fault on: good (never failed)
// or cleared (its failed pairs are explained by a bad partner or link).
type ClusterClearance struct {
	Host     string        `json:"host"`
	Fabric   isolate.State `json:"fabric"`
	Partners int           `json:"partners"` // hosts it was paired with
	Fast     int           `json:"fast"`     // of them, those whose every pair with it passed or was explained
	Line     string        `json:"line"`     // "vm2 cleared: fast with 2 of 2 partners; ..."
}

// ClusterUnfinished is a host whose run did not finish: it did not start,
// or it stopped in a round (isolate.Liveness). It names no part: nothing
// is known against its hardware, and the host is not qualified, as a host
// whose run did not finish.
type ClusterUnfinished struct {
	Host     string `json:"host"`
	Liveness string `json:"liveness"` // "did not start", "stopped in round <k>"
	Reason   string `json:"reason"`
}

// ClusterFindings is isolation's verdict: summary.json's cluster.
type ClusterFindings struct {
	Verdict  string             `json:"verdict"` // NOT QUALIFIED (a part found bad, a host's run did not finish), INCOMPLETE (not isolated), QUALIFIED
	Line     string             `json:"line"`
	Suspects []ClusterFinding   `json:"suspects"`
	Cleared  []ClusterClearance `json:"cleared"`
	// Flaky: links that failed once and passed when the same two hosts met
	// again (verdict flaky). No part is found bad and the verdict stands;
	// each is a flag on the merged verdict.
	Flaky []ClusterFinding `json:"flaky"`
	// Unfinished: hosts that did not start or stopped mid-run.
	Unfinished []ClusterUnfinished `json:"unfinished"`
	// Excused: hosts' failed pair tests that are not held against the host
	// (partner or link found bad), "<host>: <test> (round-<k>)".
	Excused []string `json:"excused,omitempty"`
}

// Liveness is a cluster host's liveness where its run did not finish
// ("did not start", "stopped in round <k>"), else "" (also on a nil f: a
// report without a cluster run).
func (f *ClusterFindings) Liveness(host string) string {
	if f == nil {
		return ""
	}
	for _, u := range f.Unfinished {
		if u.Host == host {
			return u.Liveness
		}
	}
	return ""
}

func findingsOf(a *isolate.Analysis) *ClusterFindings {
	f := &ClusterFindings{Suspects: []ClusterFinding{}, Cleared: []ClusterClearance{}, Flaky: []ClusterFinding{}, Unfinished: []ClusterUnfinished{}}
	type hostRail struct {
		host string
		rail int
	}
	sus := map[hostRail]isolate.Suspect{}
	for _, s := range a.Suspects {
		sus[hostRail{s.Host, s.Rail}] = s
	}
	for _, h := range a.Hosts {
		n := len(f.Suspects)
		var bad []isolate.Suspect
		for _, rl := range a.Rails {
			if a.State(h, rl) == isolate.Bad {
				bad = append(bad, sus[hostRail{h, rl}])
			}
		}
		if len(a.Rails) > 1 && len(bad) == len(a.Rails) {
			fd := ClusterFinding{Part: PartHost, Host: h, Rail: isolate.AllRails, Verdict: isolate.Bad}
			var why []string
			for _, s := range bad {
				fd.Evidence = append(fd.Evidence, s.Evidence...)
				why = append(why, s.Reason)
			}
			fd.Reason = fmt.Sprintf("%s is bad on every rail: %s", h, strings.Join(why, "; "))
			f.Suspects = append(f.Suspects, fd)
		} else {
			for _, s := range bad {
				f.Suspects = append(f.Suspects, ClusterFinding{Part: PartRail, Host: h, Rail: s.Rail, Verdict: isolate.Bad, Reason: s.Reason, Evidence: s.Evidence})
			}
		}
		paired := false
		for _, rl := range a.Rails {
			var failed []isolate.Evidence
			var with []string
			for i := range a.Pairs {
				p := &a.Pairs[i]
				if p.Rail != rl || p.A != h && p.B != h {
					continue
				}
				paired = true
				if p.Status.Failed() {
					ev := a.Evidence(p, h)
					failed = append(failed, ev)
					with = append(with, ev.Partner)
				}
			}
			switch st := a.State(h, rl); {
			case a.Live.Of(h) != "":
				// Not settled when its run ended: its liveness says so.
			case st == isolate.Suspected:
				s := sus[hostRail{h, rl}]
				f.Suspects = append(f.Suspects, ClusterFinding{Part: PartRail, Host: h, Rail: rl, Verdict: st, Reason: s.Reason, Evidence: s.Evidence})
			case st == isolate.Untested && len(failed) > 0:
				f.Suspects = append(f.Suspects, ClusterFinding{Part: PartRail, Host: h, Rail: rl, Verdict: st, Evidence: failed,
					Reason: fmt.Sprintf("%s rail %d failed only with partners found bad (%s) and has not passed with anyone: re-pair it with a host that passed everywhere to judge it",
						h, rl, strings.Join(with, ", "))})
			}
		}
		switch l := a.Live.Of(h); {
		case l != "":
			u := ClusterUnfinished{Host: h, Liveness: l}
			if l == isolate.DidNotStart {
				u.Reason = h + " did not start: it had not reached the start barrier when the barrier closed (GDR_START_TIMEOUT), so the schedule paired the other hosts and nothing of it was tested; look at why its task started late or never (an image pull, a node that was down, a pod that was not scheduled), then qualify it on its own or in the next run"
			} else {
				u.Reason = h + " " + l + ": it had not finished the round when the round's barrier closed (GDR_ROUND_TIMEOUT, or its heartbeat stood still), so its partners' tests with it were not judged and the run went on without it; look at why its task ended (the node, the job's log, the pod's events), then run it again"
			}
			f.Unfinished = append(f.Unfinished, u)
		case len(f.Suspects) > n:
		case !paired:
			f.Suspects = append(f.Suspects, ClusterFinding{Part: PartHost, Host: h, Rail: isolate.AllRails, Verdict: isolate.Untested, Evidence: []isolate.Evidence{},
				Reason: h + " has no pair result on any rail: isolation could not judge it"})
		default:
			f.Cleared = append(f.Cleared, clearance(a, h))
		}
	}
	for _, l := range a.Links {
		f.Suspects = append(f.Suspects, ClusterFinding{Part: PartLink, Host: l.A, Peer: l.B, Rail: l.Rail, Verdict: isolate.Bad, Reason: l.Reason, Evidence: l.Evidence})
	}
	for _, l := range a.LinkSuspects {
		f.Suspects = append(f.Suspects, ClusterFinding{Part: PartLink, Host: l.A, Peer: l.B, Rail: l.Rail, Verdict: isolate.Suspected, Reason: l.Reason, Evidence: l.Evidence})
	}
	for _, l := range a.Flaky {
		f.Flaky = append(f.Flaky, ClusterFinding{Part: PartLink, Host: l.A, Peer: l.B, Rail: l.Rail, Verdict: isolate.Flaky, Reason: l.Reason, Evidence: l.Evidence})
	}
	f.settle(len(a.Hosts), len(a.Rails))
	return f
}

// settle sets the findings' verdict and line from what they hold, over
// hosts hosts on rails rails.
func (f *ClusterFindings) settle(hosts, rails int) {
	var bad, open, gone []string
	for _, s := range f.Suspects {
		if s.Verdict == isolate.Bad {
			bad = append(bad, s.Name())
		} else {
			open = append(open, s.Name()+" "+string(s.Verdict))
		}
	}
	for _, u := range f.Unfinished {
		gone = append(gone, u.Host+" "+u.Liveness)
	}
	switch {
	case len(bad) > 0:
		f.Verdict, f.Line = NotQualified, "cluster isolation found bad: "+strings.Join(bad, ", ")
		if len(open) > 0 {
			f.Line += "; not isolated yet: " + strings.Join(open, ", ")
		}
	case len(gone) > 0:
		f.Verdict, f.Line = NotQualified, "cluster isolation found no part bad, but the run of "+plural(len(gone), "host", "hosts")+" did not finish"
		if len(open) > 0 {
			f.Line += "; not isolated yet: " + strings.Join(open, ", ")
		}
	case len(open) > 0:
		f.Verdict, f.Line = Incomplete, "cluster isolation inconclusive: not isolated yet: "+strings.Join(open, ", ")
	default:
		f.Verdict, f.Line = Qualified, fmt.Sprintf("cluster isolation found no fault: %d hosts on %d rails clear", hosts, rails)
	}
	if len(gone) > 0 {
		f.Line += "; runs that did not finish (no part named): " + strings.Join(gone, ", ")
	}
	if len(f.Flaky) > 0 {
		f.Line += fmt.Sprintf("; %s failed once and passed on re-test (flaky)", plural(len(f.Flaky), "link", "links"))
	}
}

// blamed says what explains a failed pair of host h with partner on rail,
// not h itself: the partner's NIC found bad, or the link between them; ""
// when nothing (h may be at fault).
func blamed(a *isolate.Analysis, h, partner string, rail int) string {
	if a.State(h, rail) == isolate.Bad {
		return ""
	}
	if a.State(partner, rail) == isolate.Bad {
		return fmt.Sprintf("%s rail %d found bad", partner, rail)
	}
	for _, l := range a.Links {
		if l.Rail == rail && (l.A == h && l.B == partner || l.A == partner && l.B == h) {
			return fmt.Sprintf("link %s <-> %s rail %d found bad", l.A, l.B, rail)
		}
	}
	return ""
}

// clearance counts a host's partners and those it was fast with (every
// pair with it passed, or failed for a reason isolation put elsewhere).
func clearance(a *isolate.Analysis, h string) ClusterClearance {
	c := ClusterClearance{Host: h, Fabric: isolate.Good}
	partners, slow := map[string]bool{}, map[string]bool{}
	var why []string
	seen := map[string]bool{}
	for _, p := range a.Pairs {
		if p.A != h && p.B != h {
			continue
		}
		o := p.B
		if o == h {
			o = p.A
		}
		partners[o] = true
		if !p.Status.Failed() {
			continue
		}
		c.Fabric = isolate.Cleared
		if b := blamed(a, h, o, p.Rail); b != "" {
			if !seen[b] {
				seen[b] = true
				why = append(why, b)
			}
		} else {
			slow[o] = true
		}
	}
	c.Partners, c.Fast = len(partners), len(partners)-len(slow)
	c.Line = fmt.Sprintf("%s %s: fast with %d of %d partners", h, c.Fabric, c.Fast, c.Partners)
	if len(why) > 0 {
		c.Line += "; its failed pairs are explained: " + strings.Join(why, ", ")
	}
	return c
}

// excusePairs turns h's failed pair tests into skips that say why, unless
// isolation found h's own rail bad: the pair's result is the link's
// (cluster/links), never one endpoint's, and isolation's findings judge the
// hosts. A failure put on the partner or the link is not h's; one not
// isolated yet leaves h INCOMPLETE through its finding. It returns the
// cases it changed, "<host>: <test> (round-<k>)".
func excusePairs(h *HostResult, a *isolate.Analysis) []string {
	host := h.Identity.Host
	var changed []string
	for _, c := range h.Cases() {
		rail, noRail := strconv.Atoi(c.Attrs["gdr.rail"])
		rd := roundOf(c.Package)
		if c.Status() != Fail || rd == "" || noRail != nil && c.Area != reqs.PairedArea {
			continue
		}
		k, _ := strconv.Atoi(strings.TrimPrefix(rd, "round-"))
		for _, p := range a.Pairs {
			if p.Round != k || p.A != host && p.B != host {
				continue
			}
			// A test that failed before it reached a rail (the handshake,
			// agreeing the rails) is the pair's: only a partner that
			// stopped in that round excuses it.
			if noRail != nil && p.Status != isolate.Stopped || noRail == nil && p.Rail != rail {
				continue
			}
			o := p.B
			if o == host {
				o = p.A
			}
			var why string
			switch {
			case p.Status == isolate.Stopped:
				why = fmt.Sprintf("its partner %s %s", o, a.Live.Of(o))
				if a.Live.Of(o) == "" {
					why = "its partner " + o + " was idled: " + p.Detail
				}
			case a.State(host, rail) == isolate.Bad:
			default:
				why = blamed(a, host, o, rail)
				if why == "" {
					why = fmt.Sprintf("not judged yet: cluster isolation has not told %s rail %d (%s) from %s rail %d (%s)", host, rail, a.State(host, rail), o, rail, a.State(o, rail))
				} else {
					why += " by cluster isolation"
				}
			}
			if why == "" {
				break // its own fault: the failure stands
			}
			c.Result = gtr.Skip
			c.Message = fmt.Sprintf("not held against %s: %s; the pair's result is the link's (%s %s); the test said: %s",
				host, why, LinkSuite, linkCaseName(p), c.Message)
			changed = append(changed, fmt.Sprintf("%s: %s (%s)", host, c.Name, rd))
			break
		}
	}
	return changed
}

// rejudge recomputes a host's requirements, shared causes and verdict after
// some of its cases changed.
func (h *HostResult) rejudge() {
	for i, rq := range h.Reqs {
		if len(rq.cases) > 0 {
			h.Reqs[i] = reqResult(reqs.Req{ID: rq.ID, Area: rq.Area, Title: rq.Title, Level: reqs.Level(rq.Level)}, rq.cases, nil)
		}
	}
	h.Other = nil
	for _, c := range h.Cases() {
		if c.Req == "" {
			h.Other = append(h.Other, OtherCase{Name: c.Name, Area: c.Area, Status: c.Status(), Message: c.Message})
		}
	}
	h.Causes = groupCauses(h.Reqs)
	h.Verdict = hostVerdict(h)
}

// apply makes the findings on h's own parts part of its verdict: a bad rail
// or host fails it; one not isolated yet keeps it from QUALIFIED; a run
// that did not finish (did not start, stopped) fails it naming no part, as
// a test that did not finish does.
func (f *ClusterFindings) apply(h *HostResult) {
	for _, u := range f.Unfinished {
		if u.Host != h.Identity.Host {
			continue
		}
		v := &h.Verdict
		what := u.Liveness + ": its run did not finish"
		if v.Verdict == NotQualified {
			v.Line += "; " + what
		} else {
			v.Verdict, v.Line = NotQualified, NotQualified+" ("+what+")"
		}
		v.Advice = u.Reason + "; " + v.Advice
	}
	var bad, open []string
	for _, s := range f.Suspects {
		if s.Host != h.Identity.Host || s.Part == PartLink {
			continue
		}
		if s.Verdict == isolate.Bad {
			bad = append(bad, s.Name())
		} else {
			open = append(open, s.Name()+" "+string(s.Verdict))
		}
	}
	v := &h.Verdict
	if len(bad) > 0 {
		failVerdict(v, strings.Join(bad, ", ")+" bad")
	}
	if len(open) > 0 {
		inconclusive(v, strings.Join(open, ", ")+": cluster isolation could not clear it yet")
	}
}

// applyMerged makes the findings part of the merged verdict: the hosts'
// own are already in it; a bad link fails it; every finding is named.
func (f *ClusterFindings) applyMerged(v *Verdict) {
	var links []string
	for _, s := range f.Suspects {
		if s.Part == PartLink && s.Verdict == isolate.Bad {
			links = append(links, s.Name())
		}
	}
	if len(links) > 0 {
		failVerdict(v, strings.Join(links, ", ")+" bad")
	}
	switch f.Verdict {
	case NotQualified:
		if v.Verdict != NotQualified { // not reached: a bad part fails its host or is a link
			failVerdict(v, f.Line)
		} else if len(links) == 0 {
			v.Advice = f.Line + "; " + v.Advice
		}
	case Incomplete:
		if v.Verdict == Incomplete { // for other reasons: name this one too
			v.Line += "; cluster isolation inconclusive"
		}
		inconclusive(v, f.Line)
	}
}

// failVerdict fails v for what ("vm3 rail 1 bad": parts found bad).
func failVerdict(v *Verdict, what string) {
	if v.Verdict == NotQualified {
		v.Line += "; " + what
	} else {
		v.Verdict, v.Line = NotQualified, NotQualified+" ("+what+")"
	}
	v.Advice = what + ", found by cluster isolation (Cluster: the pairs that failed, against their floors); " + v.Advice
}

// inconclusive keeps v from QUALIFIED for what isolation could not judge.
func inconclusive(v *Verdict, what string) {
	if v.Verdict == Qualified {
		v.Verdict, v.Line = Incomplete, Incomplete+" ("+what+")"
		v.NotRun++
	}
	v.Advice = what + "; " + v.Advice
}

func (r *Report) fabric(host string) *isolate.Host {
	if r.Cluster == nil {
		return nil
	}
	for i := range r.Cluster.Hosts {
		if r.Cluster.Hosts[i].Host == host {
			return &r.Cluster.Hosts[i]
		}
	}
	return nil
}

// domainsLine says which NVLink domain each host published at the start
// (the planner paired across them): "NVLink domains (pairs planned across
// them): <domain>: h1, h2; <domain>: h3, h4; 2 hosts in none", "" when no
// host published one.
func domainsLine(hosts []isolate.Host) string {
	var order []string
	by := map[string][]string{}
	none := 0
	for _, h := range hosts {
		if h.NVLinkDomain == "" {
			none++
			continue
		}
		if _, ok := by[h.NVLinkDomain]; !ok {
			order = append(order, h.NVLinkDomain)
		}
		by[h.NVLinkDomain] = append(by[h.NVLinkDomain], h.Host)
	}
	if len(order) == 0 {
		return ""
	}
	parts := make([]string, 0, len(order)+1)
	for _, d := range order {
		hs := by[d]
		if len(hs) > 10 {
			hs = append(hs[:10:10], fmt.Sprintf("and %d more", len(by[d])-10))
		}
		parts = append(parts, d+": "+strings.Join(hs, ", "))
	}
	if none > 0 {
		parts = append(parts, fmt.Sprintf("%d hosts in none", none))
	}
	return "NVLink domains (pairs planned across them): " + strings.Join(parts, "; ")
}

// clusterText is summary.txt's cluster part.
func (r *Report) clusterText(b *strings.Builder) {
	c := r.Cluster
	if c == nil {
		return
	}
	rounds := map[string]bool{}
	for _, p := range c.Pairs {
		rounds[roundLabel(p)] = true
	}
	fmt.Fprintf(b, "\nCluster: %d pair results on %d rails in %d rounds; %d suspects, %d bad links\n", len(c.Pairs), len(r.rails), len(rounds), len(c.Suspects), len(c.Links))
	if line := domainsLine(c.Hosts); line != "" {
		fmt.Fprintf(b, "  %s\n", line)
	}
	if f := r.Findings; f != nil {
		fmt.Fprintf(b, "  %s (%s)\n", f.Line, f.Verdict)
		for _, s := range f.Suspects {
			fmt.Fprintf(b, "  %-8s %s (part: %s): %s\n", strings.ToUpper(string(s.Verdict)), s.Name(), s.Part, s.Reason)
			if s.AtFault != nil {
				fmt.Fprintf(b, "             at fault: %s\n", s.AtFault)
			}
			for _, e := range s.Evidence {
				fmt.Fprintf(b, "             evidence: %s\n", evidenceLine(e))
			}
		}
		for _, h := range f.Cleared {
			fmt.Fprintf(b, "  %-8s %s\n", strings.ToUpper(string(h.Fabric)), h.Line)
		}
		for _, u := range f.Unfinished {
			fmt.Fprintf(b, "  %-8s %s %s (no part named): %s\n", "LEFT", u.Host, u.Liveness, u.Reason)
		}
		for _, s := range f.Flaky {
			fmt.Fprintf(b, "  %-8s %s (part: %s): %s\n", "FLAKY", s.Name(), s.Part, s.Reason)
		}
	}
	if r.Findings == nil { // the findings above say the same, with evidence
		for _, s := range c.Suspects {
			fmt.Fprintf(b, "  %-8s %s rail %d: %s\n", strings.ToUpper(string(s.Verdict)), s.Host, s.Rail, s.Reason)
		}
		for _, l := range c.Links {
			fmt.Fprintf(b, "  %-8s %s-%s rail %d: %s\n", "LINK", l.A, l.B, l.Rail, l.Reason)
		}
	}
	for _, h := range clearedButFailed(c) {
		fmt.Fprintf(b, "  %-8s %s\n", "NOTE", h)
	}
	var bad []string
	for _, p := range c.Pairs {
		if p.Status != isolate.Pass {
			bad = append(bad, fmt.Sprintf("%s %s-%s rail %d %s %s Gbit/s", roundLabel(p), p.A, p.B, p.Rail, p.Status, fmtNum(p.BWGbitS)))
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(b, "  pairs not passed: %s\n", strings.Join(bad, "; "))
	}
}

// roundLabel is "round <k>", and "run <run> round <k>" where several
// cluster runs are merged (their rounds share numbers).
func roundLabel(p isolate.Pair) string {
	if p.Run != "" {
		return fmt.Sprintf("run %s round %d", p.Run, p.Round)
	}
	return fmt.Sprintf("round %d", p.Round)
}

// clusterMarkdown is summary.md's cluster part.
func (r *Report) clusterMarkdown(b *strings.Builder) {
	c := r.Cluster
	if c == nil {
		return
	}
	if line := domainsLine(c.Hosts); line != "" {
		fmt.Fprintf(b, "\n%s\n", mdEscape(line))
	}
	fmt.Fprintf(b, "\n## Pairs\n\n| round | server | client | rail | status | Gbit/s |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, p := range c.Pairs {
		fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s |\n", strings.TrimPrefix(roundLabel(p), "round "), mdEscape(p.A), mdEscape(p.B), p.Rail, p.Status, fmtNum(p.BWGbitS))
	}
	fmt.Fprintf(b, "\n## Suspects\n\n")
	if f := r.Findings; f != nil {
		fmt.Fprintf(b, "%s (**%s**)\n\n", mdEscape(f.Line), f.Verdict)
		for _, s := range f.Suspects {
			fmt.Fprintf(b, "- **%s** (%s, %s): %s\n", mdEscape(s.Name()), s.Part, s.Verdict, mdEscape(s.Reason))
			if s.AtFault != nil {
				fmt.Fprintf(b, "  - at fault: %s\n", mdEscape(s.AtFault.String()))
			}
			for _, e := range s.Evidence {
				fmt.Fprintf(b, "  - %s\n", mdEscape(evidenceLine(e)))
			}
		}
		for _, h := range f.Cleared {
			fmt.Fprintf(b, "- %s\n", mdEscape(h.Line))
		}
		for _, u := range f.Unfinished {
			fmt.Fprintf(b, "- **%s %s** (no part named): %s\n", mdEscape(u.Host), mdEscape(u.Liveness), mdEscape(u.Reason))
		}
		for _, s := range f.Flaky {
			fmt.Fprintf(b, "- **%s** (flaky): %s\n", mdEscape(s.Name()), mdEscape(s.Reason))
		}
	} else {
		if len(c.Suspects) == 0 {
			b.WriteString("none\n")
		}
		for _, s := range c.Suspects {
			fmt.Fprintf(b, "- **%s rail %d** (%s): %s\n", mdEscape(s.Host), s.Rail, s.Verdict, mdEscape(s.Reason))
		}
		for _, l := range c.Links {
			fmt.Fprintf(b, "- **link %s-%s rail %d**: %s\n", mdEscape(l.A), mdEscape(l.B), l.Rail, mdEscape(l.Reason))
		}
	}
	for _, h := range clearedButFailed(c) {
		fmt.Fprintf(b, "- note: %s\n", mdEscape(h))
	}
}

// clearedButFailed explains the hosts whose own verdict failed while the
// isolation cleared their fabric: their failed pair tests are not held
// against them (excusePairs), so the failure is another test's, which a bad
// partner may still have caused (a peer that stalls a non-pair test), and an
// operator must not replace that host on its verdict alone.
func clearedButFailed(c *isolate.Summary) []string {
	var out []string
	for _, h := range c.Hosts {
		if h.Fabric == isolate.Cleared && strings.HasPrefix(h.Verdict, "NOT QUALIFIED") {
			out = append(out, fmt.Sprintf("%s is %s, but its fabric was cleared: every pair it failed in is explained by a partner found bad; "+
				"its failed pair tests are not held against it; re-run the tests it still failed with a known-good partner before acting on its verdict", h.Host, h.Verdict))
		}
	}
	return out
}

// railHeat is the pair x rail heatmap: one row per pair and round, one
// column per rail, coloured against each pair's floor as the pair heatmap
// is (heatStyle: green at or above it, orange to red below); failed and slow
// pairs are outlined.
func (r *Report) railHeat() (cols []string, rows []heatRow) {
	c := r.Cluster
	if c == nil || len(c.Pairs) == 0 {
		return nil, nil
	}
	order, by := isolate.ByPair(c.Pairs)
	for _, rl := range r.rails {
		cols = append(cols, fmt.Sprintf("rail %d", rl))
	}
	for _, k := range order {
		row := heatRow{Host: fmt.Sprintf("%s – %s (round %d)", k.A, k.B, k.Round)}
		if k.Run != "" {
			row.Host = fmt.Sprintf("%s – %s (run %s round %d)", k.A, k.B, k.Run, k.Round)
		}
		for _, rl := range r.rails {
			p, ok := by[k][rl]
			if !ok {
				row.Cells = append(row.Cells, heatCell{Style: "background:#f6f8fa"})
				continue
			}
			// Coloured against the pair's own floor (heatStyle), never relative
			// to the other pairs: a pair that passed is never painted red.
			st := Pass
			if p.Status != isolate.Pass {
				st = Fail
			}
			cell := heatCell{Text: fmtNum(p.BWGbitS), Tip: fmt.Sprintf("%s-%s rail %d round %d: %s Gbit/s (%s; floor %s Gbit/s) %s", k.A, k.B, rl, k.Round, fmtNum(p.BWGbitS), p.Status, fmtNum(p.FloorGbitS), p.Detail),
				Style: heatStyle(PairBW{Gbits: p.BWGbitS, Floor: p.FloorGbitS, Status: st})}
			if p.BWGbitS == 0 {
				cell.Text = "–"
				cell.Style = "background:#f6f8fa"
				if st == Fail {
					cell.Style += ";outline:3px solid #cf222e"
				}
			}
			if st == Fail {
				cell.Text += " ✗ " + string(p.Status)
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return cols, rows
}
