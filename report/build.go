// Build: from the runs' recordings to hosts, their requirements and numbers.

package report

import (
	"fmt"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gdrconf/gdrconf/internal/attrkey"
	"github.com/gdrconf/gdrconf/internal/inventory"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// Build makes the report of runs (one per host).
func Build(runs []Run) *Report {
	r := &Report{Suite: SuiteVersion(), Hosts: make([]*HostResult, len(runs))}
	// Hosts are independent: a fleet's are built on every CPU.
	shared := newMapTable()
	keep := soakKeepFor(len(runs))
	parallel(len(runs), func(i int) {
		h := buildHost(runs[i], shared, keep)
		h.Earlier, h.Latest = runs[i].Earlier, runs[i].Latest
		r.Hosts[i] = h
	})
	var judged []*HostResult
	for _, h := range r.Hosts {
		if !h.Earlier {
			judged = append(judged, h)
		}
	}
	r.Verdict = overall(judged)
	r.Causes = hostsCauses(r.hostsFailuresFirst())
	// Every version shown is listed; only the judging runs can mix.
	r.Versions, _ = suiteVersions(r.Hosts)
	_, r.Verdict.Flags = suiteVersions(judged)
	r.Drift = drift(judged)
	for _, d := range r.Drift {
		r.Verdict.Flags = append(r.Verdict.Flags, "versions differ from the majority: "+d.String())
	}
	if f := unauthenticated(judged); f != "" {
		r.Verdict.Flags = append(r.Verdict.Flags, f)
	}
	return r
}

// unauthenticated flags two-host tests that ran without GDR_TOKEN: any
// host that reached the out-of-band port could have been the peer whose
// half of the data check the test took (gdr.oob_auth, harness/rc). "" when
// every two-host test authenticated its peer, or none ran.
func unauthenticated(hs []*HostResult) string {
	var hosts []string
	for _, h := range hs {
		for _, c := range h.AllCases() {
			if a := c.Own["gdr.oob_auth"]; a != "" && strings.HasPrefix(a, "none") {
				hosts = append(hosts, h.Identity.Host)
				break
			}
		}
	}
	if len(hosts) == 0 {
		return ""
	}
	return fmt.Sprintf("peers not authenticated: %s ran two-host tests without GDR_TOKEN, so any host that reached the out-of-band port could have been the peer; set GDR_TOKEN on both hosts (a cluster run derives one per round)", nameHosts(hosts))
}

// drift compares the firmware and software versions of the judged hosts'
// inventories: a host that runs other firmware than its peers is the first
// suspect when only it fails, and a fleet is qualified on one set.
func drift(hs []*HostResult) []inventory.Difference {
	if len(hs) < 2 {
		return nil
	}
	vs := map[string]map[string]string{}
	for _, h := range hs {
		if v := inventory.Versions(h.Identity.Inventory); len(v) > 0 {
			vs[h.Identity.Host] = v
		}
	}
	return inventory.Drift(vs)
}

// suiteVersions lists the suite versions hosts ran, and flags a mix: a
// requirement's test (and so its verdict) can differ between versions.
func suiteVersions(hs []*HostResult) (versions, flags []string) {
	count := map[string]int{}
	for _, h := range hs {
		v := orUnknown(h.Identity.Suite)
		if count[v] == 0 {
			versions = append(versions, v)
		}
		count[v]++
	}
	if len(versions) > 1 {
		var parts []string
		for _, v := range versions {
			n := fmt.Sprintf("%d hosts", count[v])
			if count[v] == 1 {
				n = "1 host"
			}
			parts = append(parts, v+" ("+n+")")
		}
		flags = append(flags, fmt.Sprintf("mixed suite versions: %s; hosts were judged by different tests: run one version everywhere", strings.Join(parts, ", ")))
	}
	return versions, flags
}

// parallel runs f(0) .. f(n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

func buildHost(run Run, shared *mapTable, keep int) *HostResult {
	h := &HostResult{Identity: run.Host}
	evs, notes, err := run.events()
	runErrs := append([]string(nil), run.Errs...)
	if err != nil {
		// A merge of many hosts goes on: the one whose events could not be
		// read fails outside any test, naming the file and why.
		runErrs = append(runErrs, "its events could not be read: "+err.Error())
	}
	series := run.Soak
	if series == nil && run.soakDir != "" {
		// Like a damaged test.json: the host fails outside any test, named
		// with the file and what is wrong in it; the merge goes on.
		if series, err = readSoak(run.soakDir); err != nil {
			runErrs = append(runErrs, "its soak series could not be read, so its charts are not shown: "+err.Error())
		}
	}
	if series != nil {
		h.Soak = soakOf(series, keep)
	}
	runErrs = append(runErrs, notes...)
	h.pkgs = buildPackages(run.Host.Host, evs, shared, run.Host.Stopped)
	areaPkg := map[string]*pkgRun{}
	for _, p := range h.pkgs {
		h.cases = append(h.cases, p.Cases...)
		if p.Area != "" {
			areaPkg[p.Area] = p
		}
		if p.Failure != "" {
			h.Errors = append(h.Errors, fmt.Sprintf("%s %s", p.Name, p.Failure))
		}
	}
	h.Identity.fillFrom(h.cases)
	h.runErrs = append(h.runErrs, runErrs...)
	for _, o := range Overlaps(evs) {
		h.runErrs = append(h.runErrs, o.String()+": "+overlapRemedy)
	}
	byReq := map[string][]*Case{}
	failedCases := 0
	for _, c := range h.Cases() {
		if c.Status() == Fail {
			failedCases++
		}
		if c.Req == "" {
			h.Other = append(h.Other, OtherCase{Name: c.Name, Area: c.Area, Status: c.Status(), Message: c.Message})
			continue
		}
		byReq[c.Req] = append(byReq[c.Req], c)
	}
	if ex := run.Host.GoTestExit; ex != nil && *ex != 0 && failedCases == 0 && len(h.Errors) == 0 && len(h.runErrs) == 0 && run.Host.Stopped == "" {
		h.runErrs = append(h.runErrs, fmt.Sprintf("go test exited %d with no failed test (a crash, a bad flag, or a timeout outside any test)", *ex))
	}
	h.Errors = append(h.Errors, h.runErrs...)
	seen := map[string]bool{}
	all := reqs.All()
	for _, rq := range all {
		seen[rq.ID] = true
		r := reqResult(rq, byReq[rq.ID], areaPkg[rq.Area])
		if rq.OptIn != "" && notAsked(r, areaPkg[rq.Area]) {
			continue // a run that did not ask for it (GDR_SOAK): no part of its verdict
		}
		h.Reqs = append(h.Reqs, r)
	}
	var unknown []string
	for id := range byReq {
		if !seen[id] {
			unknown = append(unknown, id)
		}
	}
	sort.Strings(unknown)
	for _, id := range unknown {
		// A recording from another version of the suite: shown, judged as must.
		h.Reqs = append(h.Reqs, reqResult(reqs.Req{ID: id, Area: byReq[id][0].Area, Title: "(not in this suite's catalogue)", Level: reqs.Must}, byReq[id], nil))
	}
	olderSuite(h.Reqs, suiteBuilt(run))
	notJudgedFor(h.Reqs)
	h.attribute()
	h.Causes = groupCauses(h.Reqs)
	h.Verdict = hostVerdict(h)
	return h
}

// notAsked reports whether an opt-in requirement's result says the run did
// not ask for it: its package was not in the run (or had no test of it in
// the build, or a -run filter left it out), or every test of it skipped as
// not asked (gdr.not_asked). A package that failed to build or stopped
// before reaching it, or a test that ran, still counts.
func notAsked(r *ReqResult, pkg *pkgRun) bool {
	switch r.Status {
	case NotRun:
		return pkg == nil || pkg.StoppedAt == ""
	case Skip:
		for _, c := range r.cases {
			if c.Own["gdr.not_asked"] == "" {
				return false
			}
		}
		return true
	}
	return false
}

func reqResult(rq reqs.Req, cases []*Case, pkg *pkgRun) *ReqResult {
	r := &ReqResult{ID: rq.ID, Area: rq.Area, Title: rq.Title, Level: string(rq.Level), cases: cases, Cases: len(cases)}
	var firstFail, firstSkip string
	var failed, skipped, cut *Case // the first failed, skipped and cut short (stopped) cases
	hostOnly := 0                  // skipped cases that said the requirement is host only
	rule, _ := reqs.Container(rq.ID)
	for _, c := range cases {
		r.Tests = append(r.Tests, c.Name)
		switch c.Status() {
		case Pass:
			r.Passed++
		case NotRun:
			if cut == nil {
				cut = c // the run was stopped while it ran: not judged
			}
		case Skip:
			r.Skip++
			if skipped == nil {
				skipped, firstSkip = c, c.Message
			}
			if c.Own["gdr.host_only"] != "" && rule.HostOnly != "" {
				hostOnly++
			}
		default:
			r.Failed++
			if failed == nil {
				failed, firstFail = c, c.Message
			}
		}
		c.nums, c.numbered = numbers(c), true // read again by the writers (JUnit, DCGM)
		r.Nums = append(r.Nums, c.nums...)
	}
	// What the requirement judges leads, on every device, before the facts beside it.
	sort.SliceStable(r.Nums, func(i, j int) bool { return r.Nums[i].Judged && !r.Nums[j].Judged })
	switch {
	case r.Failed > 0:
		r.Status = Fail
		r.Reason = firstFail
		r.Outcome = failed.Outcome
	case cut != nil:
		// Some of it may have passed before the stop: not all of it was judged.
		r.Status = NotRun
		r.Reason = cut.Message
		if r.Passed > 0 {
			r.Reason = fmt.Sprintf("%d of %d passed, then %s", r.Passed, len(cases), cut.Message)
		}
	case r.Passed > 0:
		r.Status = Pass
		if r.Skip > 0 {
			r.Reason = fmt.Sprintf("%d of %d skipped: %s", r.Skip, len(cases), firstSkip)
		}
	case r.Skip > 0 && hostOnly == r.Skip:
		// Only a requirement the catalogue calls host only, and only when
		// every case said so: a test cannot excuse itself.
		r.Status = HostOnly
		r.Reason = firstSkip
	case r.Skip > 0:
		r.Status = Skip
		r.Reason = firstSkip
	default:
		r.Status = NotRun
		switch {
		case pkg == nil:
			r.Reason = "not run: conformance/" + rq.Area + " is not in this run"
		case pkg.Failure != "":
			r.Status = Fail
			r.Reason = "conformance/" + rq.Area + " " + pkg.Failure
			r.Outcome = OutcomeNotJudged // no test of it ran: a build or run failure of the suite
		case pkg.StoppedAt != "" && pkg.stoppedBy != "":
			r.Reason = "not reached: the run was stopped by " + pkg.stoppedBy + " while conformance/" + rq.Area + " ran " + pkg.StoppedAt
		case pkg.StoppedAt != "":
			r.Reason = "not reached: conformance/" + rq.Area + " stopped at " + pkg.StoppedAt + ", which did not finish"
		case pkg.NoTests:
			r.Reason = "not run: conformance/" + rq.Area + " has no tests in this build (build tags?)"
		default:
			r.Reason = "not run: no test of " + rq.ID + " ran (-run filter?)"
		}
	}
	// The reason and remedy are the recorded finding's: a failed case's
	// cause and remedy, a skipped one's reason and the remedy its absence
	// carried. Only a recording made before absences carried a remedy gets
	// the catalogue's remedy of its shared cause.
	by := skipped
	if r.Status == Fail && failed != nil {
		r.Reason, r.Remedy = failed.CauseAndRemedy()
		by = failed
	} else if skipped != nil {
		r.Remedy = skipped.Finding.Remedy
	}
	if r.Status == NotRun && cut != nil {
		r.Remedy = stoppedRemedy
	}
	if r.Remedy == "" && r.Status != Pass && (by == nil || by.legacy()) {
		r.Remedy = reqs.CauseRemedy(causeKey(r.Reason))
	}
	return r
}

// notInSuite starts the reason of a requirement newer than the suite a
// host ran (olderSuite).
const notInSuite = "not in this suite version"

// olderSuite gives each requirement that did not run and entered the
// catalogue after built (reqs.Added) its true reason: the suite the host ran
// did not have it, which a -run filter or a missing package would not
// explain (recordings made before the requirement existed).
func olderSuite(rs []*ReqResult, built time.Time) {
	if built.IsZero() {
		return
	}
	for _, r := range rs {
		at, ok := reqs.Added(r.ID)
		if r.Status != NotRun || !ok || !at.After(built) {
			continue
		}
		r.Reason = fmt.Sprintf("%s: the suite this host ran was built by %s, before the requirement was added", notInSuite, built.UTC().Format(time.RFC3339))
		r.Remedy = "run the current suite on this host to judge it"
	}
}

// suiteBuilt is the latest time the suite a run ran can have been built:
// the commit time its version names ("v0.0.0-2026... (2026-12-01T13:28:04Z)",
// SuiteVersion) or when the run started, whichever is earlier; zero when
// neither is known, or when the suite was built from uncommitted changes
// (a requirement there may be older than its commit).
func suiteBuilt(run Run) time.Time {
	v := run.Host.Suite
	if strings.Contains(v, "+modified") || strings.Contains(v, "dirty") {
		return time.Time{}
	}
	var t time.Time
	if m := vcsTime.FindStringSubmatch(v); m != nil {
		t, _ = time.Parse(time.RFC3339, m[1])
	}
	if start, _ := run.Span(); !start.IsZero() && (t.IsZero() || start.Before(t)) {
		t = start
	}
	return t
}

// vcsTime is the commit time SuiteVersion appends in brackets.
var vcsTime = regexp.MustCompile(`\((\d{4}-\d\d-\d\dT[^)]*)\)\s*$`)

// judgesOthers is the health tests' skip when none of the traffic tests
// they judge ran (harness/health), which blames a -run filter.
var judgesOthers = regexp.MustCompile(`none of .* ran before this test in this binary`)

// notJudgedFor rewrites the skip of a requirement that judges other tests'
// traffic (HLTH-01, HLTH-02) when those tests skipped for one cause (a host
// with no GPU, no NIC): the cause is that, not a -run filter, and it joins
// that cause's group with its remedy.
func notJudgedFor(rs []*ReqResult) {
	for _, r := range rs {
		if r.Status != Skip || !judgesOthers.MatchString(r.Reason) {
			continue
		}
		count := map[string]int{}
		example := map[string]*ReqResult{}
		var best string
		for _, o := range rs {
			if o == r || o.Area != r.Area || o.Status != Skip {
				continue
			}
			k := causeKey(o.Reason)
			count[k]++
			if example[k] == nil {
				example[k] = o
			}
			if count[k] > count[best] {
				best = k
			}
		}
		if best == "" {
			continue
		}
		o := example[best]
		r.Reason = fmt.Sprintf("not judged: the tests whose traffic it judges skipped on this host: %s", o.Reason)
		r.Remedy = o.Remedy
	}
}

// caseNumbers is numbers(c), read once when the host was built.
func caseNumbers(c *Case) []Number {
	if c.numbered {
		return c.nums
	}
	return numbers(c)
}

// numbers lists the unit-bearing attributes of a counted case, each with the
// threshold that applies to it when the test recorded one.
func numbers(c *Case) []Number {
	var out []Number
	thr := thresholdSource(c.Attrs)
	measured, bound := c.Own["gdr.measured"], c.Own["gdr.threshold"]
	keys := make([]string, 0, len(c.Attrs))
	for k := range c.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	dev := c.Device()
	if measured == "" {
		measured = judgedKey[c.Req]
	}
	for _, k := range keys {
		_, unit, ok := attrkey.UnitOf(k)
		if k != measured && !ok && !strings.HasSuffix(k, "_fraction") && !strings.HasSuffix(k, "_ratio") {
			continue
		}
		words := strings.Split(strings.TrimPrefix(k, "gdr."), "_")
		if words[0] == "min" || words[0] == "max" {
			continue // thresholds go beside what they bound
		}
		n := Number{Device: dev, Key: k, Value: c.Attrs[k], Unit: unit}
		if k == measured && c.Attrs[bound] != "" {
			// The failure named its value and bound (testenv): no pairing by name.
			n.Judged, n.Threshold = true, boundOf(c.Attrs, bound)
			if thr != "" {
				n.Threshold += " (" + thr + ")"
			}
		} else if t := threshold(c.Attrs, words); t != "" {
			n.Threshold = t
		} else if thr != "" && (words[0] == "bw" || words[0] == "lat") && !strings.HasPrefix(thr, "reported only") {
			if words[0] == "bw" && len(words) == 3 || words[0] == "lat" && strings.HasSuffix(k, "_p50") {
				n.Threshold = thr
			}
		}
		n.Judged = n.Judged || k == measured
		out = append(out, n)
	}
	return out
}

// judgedKey names the attribute a requirement judges, for recordings made
// before tests recorded it as gdr.measured, where it has no unit and would
// not be shown (INST-06 judges the compute capability, not BAR1's size).
var judgedKey = map[string]string{"INST-06": "gdr.compute_capability"}

// thresholdSource is the words for where a case's thresholds come from:
// gdr.threshold_source, or in recordings made before it gdr.threshold
// (which now names the bound's attribute, a gdr. key).
func thresholdSource(a map[string]string) string {
	if s := a["gdr.threshold_source"]; s != "" {
		return s
	}
	if s := a["gdr.threshold"]; !strings.HasPrefix(s, "gdr.") {
		return s
	}
	return ""
}

// boundOf prints the bound in attribute key: "floor 75.000 Gbit/s" for a
// min_ key, "ceiling ..." for a max_ key, "threshold ..." otherwise.
func boundOf(a map[string]string, key string) string {
	v := a[key]
	if _, unit, ok := attrkey.UnitOf(key); ok {
		v += " " + unit
	}
	switch name := strings.TrimPrefix(key, attrkey.Prefix); {
	case strings.HasPrefix(name, "min_"):
		return "floor " + v
	case strings.HasPrefix(name, "max_"):
		return "ceiling " + v
	}
	return "threshold " + v
}

// threshold finds min_<name> / max_<name> beside <name>: bw_gbit_s gets
// min_bw_gbit_s, copy_fraction gets min_copy_fraction, lat_us_p50 gets
// max_lat_us.
func threshold(a map[string]string, words []string) string {
	name := strings.Join(words, "_")
	for _, cand := range []string{name, strings.Join(words[:len(words)-1], "_")} {
		if cand == "" {
			continue
		}
		for _, p := range []string{"min_", "max_"} {
			if k := "gdr." + p + cand; a[k] != "" {
				return boundOf(a, k)
			}
		}
	}
	return ""
}
