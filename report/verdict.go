package report

import (
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/attrkey"
	"github.com/gdrconf/gdrconf/internal/inventory"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// Verdict values (contract: pipelines compare these strings).
const (
	Qualified    = "QUALIFIED"
	NotQualified = "NOT QUALIFIED"
	Incomplete   = "INCOMPLETE"
)

// Verdict is the one-glance outcome of a host or of many.
type Verdict struct {
	Verdict string `json:"verdict"` // QUALIFIED, NOT QUALIFIED, INCOMPLETE
	Failed  int    `json:"failed"`  // must requirements (one host) that failed, or hosts (many) not qualified
	NotRun  int    `json:"not_run"` // must requirements (one host) skipped or not run, or hosts (many) incomplete
	Line    string `json:"line"`    // "NOT QUALIFIED (2 must requirements failed)", "NOT QUALIFIED (1 of 64 hosts: gpu17)"
	Advice  string `json:"advice,omitempty"`
	// Flags are what a merged verdict's reader must know before trusting
	// it (hosts that ran different suite versions), one sentence each.
	Flags []string `json:"flags,omitempty"`
	// NoTests: no test ran at all (one host), or on some host (many): the
	// run proves nothing, and exits 3 whatever GDR_STRICT says.
	NoTests bool `json:"no_tests,omitempty"`
}

// Number is one measurement or fact with its unit, as a test recorded it.
type Number struct {
	Device    string `json:"device,omitempty"` // subtest part of the name, or GPU/NIC
	Key       string `json:"key"`              // gdr.bw_gbit_s
	Value     string `json:"value"`
	Unit      string `json:"unit"`                // Gbit/s
	Threshold string `json:"threshold,omitempty"` // "floor 75.0 Gbit/s (75% of the 100 Gb/s port rate)"
	// Judged: the value a failure judged (the case's gdr.measured names it).
	Judged bool `json:"judged,omitempty"`
}

// String prints "93.10 Gbit/s (floor ...)", with the device in front.
func (n Number) String() string {
	s := n.Value
	if n.Unit != "" {
		if n.Unit == "%" {
			s += n.Unit
		} else {
			s += " " + n.Unit
		}
	}
	s = strings.TrimPrefix(n.Key, "gdr.") + " " + s
	if n.Device != "" {
		s = n.Device + ": " + s
	}
	if n.Threshold != "" {
		s += " (" + n.Threshold + ")"
	}
	return s
}

// ReqResult is one requirement on one host.
type ReqResult struct {
	ID     string   `json:"id"`
	Area   string   `json:"area"`
	Title  string   `json:"title"`
	Level  string   `json:"level"` // must, report-only
	Status Status   `json:"status"`
	Cases  int      `json:"cases"` // counted test cases (one per device)
	Passed int      `json:"passed"`
	Failed int      `json:"failed"`
	Skip   int      `json:"skipped"`
	Nums   []Number `json:"numbers,omitempty"`
	Reason string   `json:"reason,omitempty"` // first failure's cause (its gdr.cause) or skip reason
	Remedy string   `json:"remedy,omitempty"`
	// Outcome of a failed requirement: its first failed case's
	// (OutcomeFellShort or OutcomeNotJudged); "" unless Status is Fail.
	Outcome string   `json:"outcome,omitempty"`
	Cause   string   `json:"cause,omitempty"` // the shared cause it is grouped under
	Tests   []string `json:"tests,omitempty"` // the counted cases' names
	// Part is the part the first failed case points at, with its evidence.
	Part  *Part `json:"part,omitempty"`
	cases []*Case
}

// Cause is one root cause that several requirements share.
type Cause struct {
	Key     string   `json:"key"`    // "no RDMA device"
	Status  Status   `json:"status"` // fail or skip
	Example string   `json:"example"`
	Remedy  string   `json:"remedy,omitempty"`
	Reqs    []string `json:"requirements"`
}

// HostResult is one host's report.
type HostResult struct {
	Identity Identity     `json:"host"`
	Verdict  Verdict      `json:"verdict"`
	Reqs     []*ReqResult `json:"requirements"`
	Causes   []*Cause     `json:"shared_causes,omitempty"`
	Other    []OtherCase  `json:"other_tests,omitempty"` // tests with no requirement (lab's reference tools)
	Errors   []string     `json:"errors,omitempty"`      // failures outside any test
	// Earlier: a later run of this host is in the report (MergeRuns); this
	// one is shown but does not count in the merged verdict.
	Earlier bool `json:"earlier_run,omitempty"`
	// Latest: earlier runs of this host are in the report too; this one judges.
	Latest  bool     `json:"latest_run,omitempty"`
	runErrs []string // those of Errors that are not a package's (JUnit: "(run)" cases)
	pkgs    []*pkgRun
	cases   []*Case
}

// OtherCase is a counted test without a requirement ID.
type OtherCase struct {
	Name    string `json:"name"`
	Area    string `json:"area"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
}

// Cases are the host's counted cases, in run order.
func (h *HostResult) Cases() []*Case {
	var out []*Case
	for _, c := range h.cases {
		if c.Counted {
			out = append(out, c)
		}
	}
	return out
}

// AllCases are every test and subtest of the host, counted or not.
func (h *HostResult) AllCases() []*Case { return h.cases }

// Report is the result over one host or many.
type Report struct {
	Verdict Verdict       `json:"verdict"`
	Hosts   []*HostResult `json:"hosts"`
	Suite   string        `json:"suite_version"` // the renderer's (gdrreport's) version
	// Versions are the suite versions the hosts ran (their host.json), each
	// once, in first-seen order.
	Versions []string `json:"suite_versions,omitempty"`
	Time     string   `json:"time"`
	// Drift lists the versions on which hosts part from the majority
	// (merges only; also a Flag each).
	Drift []inventory.Difference `json:"inventory_drift,omitempty"`
	// Cluster is a cluster run's pair analysis (SetCluster); nil otherwise.
	Cluster *isolate.Summary `json:"cluster,omitempty"`
	// Causes are why hosts are not QUALIFIED, each cause once with its
	// hosts (hostsCauses): what every format shows first.
	Causes []*HostsCause `json:"fleet_causes,omitempty"`
	// Findings are isolation's verdicts over Cluster (SetCluster).
	Findings *ClusterFindings `json:"-"`
	rails    []int
	// clusters are the cluster runs merged, oldest first: where the
	// rerun of the failed nodes goes (WriteActions).
	clusters []clusterSource
	// judgedBy is, where several cluster runs merge, the run whose
	// isolation judges each host.
	judgedBy map[string]string
}

// Build makes the report of runs (one per host).
func Build(runs []Run) *Report {
	r := &Report{Suite: SuiteVersion(), Hosts: make([]*HostResult, len(runs))}
	// Hosts are independent: a fleet's are built on every CPU.
	shared := newMapTable()
	parallel(len(runs), func(i int) {
		h := buildHost(runs[i], shared)
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

func buildHost(run Run, shared *mapTable) *HostResult {
	h := &HostResult{Identity: run.Host}
	evs, notes, err := run.events()
	runErrs := append([]string(nil), run.Errs...)
	if err != nil {
		// A merge of many hosts goes on: the one whose events could not be
		// read fails outside any test, naming the file and why.
		runErrs = append(runErrs, "its events could not be read: "+err.Error())
	}
	runErrs = append(runErrs, notes...)
	h.pkgs = buildPackages(run.Host.Host, evs, shared)
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
	if ex := run.Host.GoTestExit; ex != nil && *ex != 0 && failedCases == 0 && len(h.Errors) == 0 && len(h.runErrs) == 0 {
		h.runErrs = append(h.runErrs, fmt.Sprintf("go test exited %d with no failed test (a crash, a bad flag, or a timeout outside any test)", *ex))
	}
	h.Errors = append(h.Errors, h.runErrs...)
	seen := map[string]bool{}
	all := reqs.All()
	for _, rq := range all {
		seen[rq.ID] = true
		h.Reqs = append(h.Reqs, reqResult(rq, byReq[rq.ID], areaPkg[rq.Area]))
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

func reqResult(rq reqs.Req, cases []*Case, pkg *pkgRun) *ReqResult {
	r := &ReqResult{ID: rq.ID, Area: rq.Area, Title: rq.Title, Level: string(rq.Level), cases: cases, Cases: len(cases)}
	var firstFail, firstSkip string
	var failed, skipped *Case // the first failed and skipped cases
	hostOnly := 0             // skipped cases that said the requirement is host only
	rule, _ := reqs.Container(rq.ID)
	for _, c := range cases {
		r.Tests = append(r.Tests, c.Name)
		switch c.Status() {
		case Pass:
			r.Passed++
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

// causeKey names the root cause of a skip or failure message: its leading
// "no <thing>" phrase (no RDMA device, no NVIDIA GPU, no CUDA driver), else
// its first clause. Messages of one cause differ in detail (which modules,
// which folder), so their keys, not their texts, are compared.
func causeKey(msg string) string {
	m := strings.TrimPrefix(msg, "GDR_STRICT=1: ")
	head := m
	if len(head) > 160 {
		head = head[:160]
	}
	if loc := noPhrase.FindStringSubmatchIndex(head); loc != nil {
		return "no " + head[loc[2]:loc[3]]
	}
	// A clause ends at ";" or at ": " (a colon inside a PCI address such
	// as 0000:3b:00.0 or a path does not end one).
	if loc := clauseEnd.FindStringIndex(m); loc != nil && loc[0] > 0 {
		m = m[:loc[0]]
	}
	return strings.TrimSpace(m)
}

var clauseEnd = regexp.MustCompile(`;|:(\s|$)`)

var noPhrase = regexp.MustCompile(`(?:^|: |, )no ((?:[A-Za-z0-9_.-]+ ){0,2}?[A-Za-z0-9_.-]+?)(?:\s*[:;,(]| in | under | on | for | is | was | and | loaded| found| so |$)`)

// causeOf is what groups a requirement's result with others of one cause:
// a not-run requirement's reason, else its message's cause key.
func causeOf(r *ReqResult) string {
	if r.Status == NotRun {
		return r.Reason // "not run: conformance/install is not in this run"
	}
	return causeKey(r.Reason)
}

// groupCauses puts requirements that failed or skipped for one cause under
// it (two or more requirements), failures first.
func groupCauses(rs []*ReqResult) []*Cause {
	by := map[string]*Cause{}
	var order []*Cause
	key := causeOf
	for _, r := range rs {
		if r.Status == Pass || r.Reason == "" {
			continue
		}
		k := string(r.Status) + "\x00" + key(r)
		c := by[k]
		if c == nil {
			c = &Cause{Key: key(r), Status: r.Status, Example: r.Reason}
			by[k] = c
			order = append(order, c)
		}
		c.Reqs = append(c.Reqs, r.ID)
		if len(r.Reason) > len(c.Example) {
			c.Example = r.Reason // the fullest wording says most
		}
		if c.Remedy == "" {
			c.Remedy = r.Remedy
		}
	}
	var out []*Cause
	for _, c := range order {
		if len(c.Reqs) < 2 {
			continue
		}
		out = append(out, c)
		for _, r := range rs {
			if r.Status != Pass && r.Reason != "" && string(r.Status)+"\x00"+key(r) == string(c.Status)+"\x00"+c.Key {
				r.Cause = c.Key
			}
		}
	}
	rank := map[Status]int{Fail: 0, Skip: 1, NotRun: 2, HostOnly: 3}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Status != out[j].Status {
			return rank[out[i].Status] < rank[out[j].Status]
		}
		return len(out[i].Reqs) > len(out[j].Reqs)
	})
	return out
}

// HostsCause is one cause that keeps hosts of a report from QUALIFIED,
// with the hosts it holds on and what to do: the answer to "why", given
// once for all hosts it applies to, before any table (report.html's top,
// summary.txt, summary.md, summary.json's fleet_causes).
type HostsCause struct {
	// Status is fail (it fails the hosts: a must requirement failed, or
	// the run failed outside any test), skip or not run (it leaves them
	// incomplete).
	Status Status `json:"status"`
	Key    string `json:"key"` // the cause as one host's shared causes name it ("no RDMA device")
	// Example is the fullest wording on ExampleHost; Differs says that
	// other hosts worded it otherwise (their own numbers or devices).
	Example     string   `json:"example"`
	ExampleHost string   `json:"example_host"`
	Differs     bool     `json:"wording_differs,omitempty"`
	Remedy      string   `json:"remedy,omitempty"`
	Reqs        []string `json:"requirements,omitempty"` // none: a failure outside any test
	Hosts       []string `json:"hosts"`
	// HostList is Hosts as one hostlist expression (node[0003,0100-0131]),
	// the form scontrol and sinfo take.
	HostList string   `json:"hostlist"`
	words    []string // ExampleHost's wordings of it
}

// causesListed is the most causes summary.txt and summary.md list; the
// rest are in report.html and summary.json.
const causesListed = 20

// reqList names the cause's requirements, or says it failed outside any test.
func (c *HostsCause) reqList() string {
	if len(c.Reqs) == 0 {
		return "outside any test"
	}
	return nameList(c.Reqs, 6)
}

// example is the cause's wording, naming its host when others differ.
func (c *HostsCause) example() string {
	if c.Differs {
		return "e.g. on " + c.ExampleHost + ": " + c.Example
	}
	return c.Example
}

// digitRun is what differs between hosts' wordings of one cause: values,
// PCI addresses, device and host numbers.
var digitRun = regexp.MustCompile(`[0-9]+`)

// hostsCauses groups the must requirements that kept the judged hosts from
// QUALIFIED, and their failures outside any test, by cause across hosts:
// the key causeOf gives (one host's shared causes use it), its digits
// masked so that one cause worded with each host's own values or devices
// is one. Failures first, then the causes that covered most hosts.
func hostsCauses(hs []*HostResult) []*HostsCause {
	by := map[string]*HostsCause{}
	var out []*HostsCause
	add := func(h *HostResult, st Status, key, example, remedy, req string) {
		k := string(st) + "\x00" + digitRun.ReplaceAllString(key, "#")
		c := by[k]
		if c == nil {
			c = &HostsCause{Status: st, Key: key, Example: example, ExampleHost: h.Identity.Host, Remedy: remedy}
			by[k] = c
			out = append(out, c)
		}
		if c.ExampleHost == h.Identity.Host {
			c.words = append(c.words, example)
			if len(example) > len(c.Example) {
				c.Example = example // the fullest wording on that host says most
			}
		} else if !slices.Contains(c.words, example) {
			c.Differs = true
		}
		if c.Remedy == "" {
			c.Remedy = remedy
		}
		if req != "" && !slices.Contains(c.Reqs, req) {
			c.Reqs = append(c.Reqs, req)
		}
		if n := len(c.Hosts); n == 0 || c.Hosts[n-1] != h.Identity.Host {
			c.Hosts = append(c.Hosts, h.Identity.Host)
		}
	}
	for _, h := range hs {
		if h.Earlier || h.Verdict.Verdict == Qualified {
			continue
		}
		for _, e := range h.Errors {
			add(h, Fail, causeKey(firstOf(e)), e, "", "")
		}
		for _, r := range h.Reqs {
			if r.Level == string(reqs.ReportOnly) || r.Status == Pass || r.Status == HostOnly {
				continue
			}
			add(h, r.Status, causeOf(r), r.Reason, r.Remedy, r.ID)
		}
	}
	order := map[string]int{}
	for i, rq := range reqs.All() {
		order[rq.ID] = i
	}
	for _, c := range out {
		c.HostList = hostlist.Compress(c.Hosts)
		sort.SliceStable(c.Reqs, func(i, j int) bool { return order[c.Reqs[i]] < order[c.Reqs[j]] })
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Status != out[j].Status {
			return statusRank[out[i].Status] < statusRank[out[j].Status]
		}
		return len(out[i].Hosts) > len(out[j].Hosts)
	})
	return out
}

func hostVerdict(h *HostResult) Verdict {
	var v Verdict
	c := h.Counts().Must
	must := c.Passed + c.Failed + c.Skipped + c.NotRun // host-only requirements are not counted
	v.Failed, v.NotRun = c.Failed, c.Skipped+c.NotRun
	errs := len(h.Errors)
	switch {
	case v.Failed > 0 || errs > 0:
		v.Verdict = NotQualified
		var why []string
		if v.Failed > 0 || errs == 0 {
			why = append(why, plural(v.Failed, "must requirement", "must requirements")+" failed")
		}
		if errs > 0 {
			why = append(why, plural(errs, "failure", "failures")+" outside any test")
		}
		v.Line = fmt.Sprintf("%s (%s)", NotQualified, strings.Join(why, ", "))
		v.Advice = fmt.Sprintf("%d of %d must requirements failed", v.Failed, must)
		if errs > 0 {
			v.Advice += fmt.Sprintf(", and %s outside any test", plural(errs, "failure", "failures"))
		}
		v.Advice += ": fix the causes below, then run again"
	case len(h.cases) == 0:
		v.Verdict, v.NoTests = Incomplete, true
		v.Line = Incomplete + " (no test ran)"
		v.Advice = "no test ran at all, so nothing about this host is known: look at what the run printed (test.json, the packages' output) for a suite that was not built with its tags (make conformance TAGS=gpu,rdma), a -run pattern that matches nothing (RUN=), or test binaries that never started"
	case v.NotRun > 0:
		v.Verdict = Incomplete
		var why []string
		if c.Skipped > 0 {
			why = append(why, plural(c.Skipped, "must requirement", "must requirements")+" skipped")
		}
		if c.NotRun > 0 {
			n := fmt.Sprint(c.NotRun)
			if c.Skipped == 0 {
				n = plural(c.NotRun, "must requirement", "must requirements")
			}
			why = append(why, n+" not run")
		}
		v.Line = fmt.Sprintf("%s (%s)", Incomplete, strings.Join(why, ", "))
		v.Advice = fmt.Sprintf("nothing failed, but %d of %d must requirements did not pass: %d skipped (absent hardware or software), %d not run (no test of them ran): this run does not qualify the host", v.NotRun, must, c.Skipped, c.NotRun)
		if h.Identity.Strict {
			v.Advice += "; GDR_STRICT=1 was set, so these did not run for reasons other than absent hardware (build tags, -run filter)"
		} else {
			v.Advice += "; run with GDR_STRICT=1 (as qualification pipelines do) so that absent hardware fails"
		}
	default:
		v.Verdict = Qualified
		v.Line = Qualified
		v.Advice = fmt.Sprintf("all %d must requirements passed", must)
		if c.HostOnly > 0 {
			v.Advice += fmt.Sprintf("; %s not judgeable from a container (host only: the host's developer environment), judged by a run on the host", plural(c.HostOnly, "requirement is", "requirements are"))
		}
	}
	return v
}

// plural is "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func overall(hs []*HostResult) Verdict {
	if len(hs) == 1 {
		return hs[0].Verdict
	}
	var v Verdict
	var failed, notRun []string
	for _, h := range hs {
		switch h.Verdict.Verdict {
		case NotQualified:
			failed = append(failed, h.Identity.Host)
		case Incomplete:
			notRun = append(notRun, h.Identity.Host)
		}
	}
	v.Failed, v.NotRun = len(failed), len(notRun)
	for _, h := range hs {
		v.NoTests = v.NoTests || h.Verdict.NoTests && !h.Earlier
	}
	switch {
	case len(hs) == 0:
		v.Verdict, v.Line, v.Advice = Incomplete, Incomplete+" (nothing ran)", "no host's results were found"
		v.NotRun, v.NoTests = 1, true
	case v.Failed > 0:
		v.Verdict, v.Line = NotQualified, fmt.Sprintf("%s (%d of %d hosts: %s)", NotQualified, v.Failed, len(hs), nameHosts(failed))
		v.Advice = fmt.Sprintf("%d of %d hosts are not qualified (failed must requirements, or failures outside any test)", v.Failed, len(hs))
		if v.NotRun > 0 {
			v.Advice += fmt.Sprintf("; %d more did not run all must requirements", v.NotRun)
		}
	case v.NotRun > 0:
		v.Verdict, v.Line = Incomplete, fmt.Sprintf("%s (%d of %d hosts not fully run: %s)", Incomplete, v.NotRun, len(hs), nameHosts(notRun))
		v.Advice = fmt.Sprintf("%d of %d hosts have must requirements that did not run; run with GDR_STRICT=1 so that absent hardware fails", v.NotRun, len(hs))
	default:
		v.Verdict, v.Line, v.Advice = Qualified, Qualified, fmt.Sprintf("all %d hosts qualified", len(hs))
	}
	return v
}

// headlineHosts is how many hosts a merged headline names before it counts
// the rest.
const headlineHosts = 10

// nameHosts names the first headlineHosts hosts, then "and N more".
func nameHosts(hosts []string) string { return nameList(hosts, headlineHosts) }

// nameList is the first n names, then "and N more".
func nameList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// ExitCode is what a command reporting r exits with: 0 for QUALIFIED, and
// for INCOMPLETE unless strict; 1 for NOT QUALIFIED; 3 for INCOMPLETE when
// a host ran with GDR_STRICT=1 (a pipeline that asked for proof did not get it).
func (r *Report) ExitCode() int {
	switch r.Verdict.Verdict {
	case NotQualified:
		return 1
	case Incomplete:
		if r.Verdict.NoTests {
			return 3 // a run where nothing ran proves nothing, strict or not
		}
		for _, h := range r.Hosts {
			if h.Identity.Strict && !h.Earlier {
				return 3
			}
		}
	}
	return 0
}

var _ = strconv.Itoa
