package report

import (
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/soak"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/jstemmer/go-junit-report/v2/gtr"
)

// Run is one host's results: its identity and its go test -json events.
type Run struct {
	Host   Identity
	Events []Event
	// Errs are failures of the run outside any test (a VM that died, a
	// binary that did not start); each fails the host.
	Errs []string
	// Source is the folder the run was read from (LoadDir), for errors
	// that name it.
	Source string
	// Earlier is set by MergeRuns on a run that a later run of the same
	// host supersedes: it is kept and shown, and left out of the verdict.
	Earlier bool
	// Latest is set by MergeRuns on the run of a host that earlier runs
	// of it are beside: the one that judges.
	Latest bool
	// read reads Events when they were left on disk (FromDirs): Build
	// reads each host's when it reaches it and lets them go after.
	read func() ([]Event, []string, error)
	// Soak is the host's soak series (soak.json), nil when it ran none or
	// when it is left on disk in soakDir, which Build reads from when it
	// reaches the host (a fleet's series are never all in memory).
	Soak    *soak.Series
	soakDir string
}

// events are the run's events, read now when they were left on disk;
// notes and err say what reading them passed over or failed on.
func (r Run) events() (evs []Event, notes []string, err error) {
	if r.Events != nil || r.read == nil {
		return r.Events, nil, nil
	}
	return r.read()
}

// Case is one test or subtest of one host's run.
type Case struct {
	Host     string
	Area     string // install, topology, gpu, memreg, pingpong (last element of the package path)
	Package  string // the package as the events name it
	Name     string // TestPP08Bandwidth/WRITE/4096
	Parent   *Case
	Children []*Case
	Result   gtr.Result // gtr.Unknown: started, never finished
	Duration time.Duration
	Output   []string          // every line the test printed, framing included
	Own      map[string]string // attributes it set itself
	Attrs    map[string]string // Own over its parents' (gdr.req and facts are inherited)
	Req      string            // gdr.req, own or inherited
	Message  string            // failure: first line of cause and remedy; skip: the reason
	// Outcome of a failed case: OutcomeFellShort (the hardware or the host's
	// configuration fell short: JUnit <failure>), OutcomeNotJudged (the
	// suite could not judge: JUnit <error>), OutcomeAbsent (absent hardware
	// or software failed under GDR_STRICT=1: JUnit <failure>, no part) or
	// OutcomeDidNotFinish (the test never ended: JUnit <error>); "" unless
	// it failed. From gdr.outcome; a failure recorded without it fell short.
	Outcome string
	// Finding is what the test recorded about its failure or skip
	// (verdict.FromAttrs: gdr.cause, gdr.remedy, gdr.outcome, ...). A
	// recording made before those attributes has its message as the cause
	// and no remedy: nothing is parsed out of the text.
	Finding verdict.Finding
	Counted bool // a row of its own: carries its own verdict (see count)
	// Part is the part a failed case points at (attribute); nil when the
	// rules name none.
	Part *Part
	// nums are numbers(c), set when its requirement was built (caseNumbers).
	nums     []Number
	numbered bool
	order    int
	open     bool   // its last output line has no newline yet: the next output continues it
	how      string // a test that never ended: how its package ended (stopped)
	stopped  string // a test that never ended in a run a signal stopped: the signal
}

// Outcomes of a failed case (gdr.outcome, written by harness/testenv; the
// words are internal/verdict's).
const (
	OutcomeFellShort = string(verdict.FellShort)
	OutcomeNotJudged = string(verdict.NotJudged)
	// OutcomeAbsent: what the test needs is absent and GDR_STRICT=1 made
	// that a failure: it names no part.
	OutcomeAbsent = string(verdict.Absent)
	// OutcomeDidNotFinish: the test started and never ended (the binary
	// was killed, panicked or ran out of time): a fault of the run, which
	// names no part.
	OutcomeDidNotFinish = string(verdict.DidNotFinish)
)

// Judged says whether a failed outcome is a judgement of the host (it fell
// short), not a run that could not judge it or hardware that was absent.
func Judged(outcome string) bool { return verdict.Outcome(outcome).Judged() }

// failureKeys are the attributes harness/testenv writes when a test fails:
// they belong to the test that failed, never to its subtests.
var failureKeys = map[string]bool{"gdr.cause": true, "gdr.remedy": true, "gdr.outcome": true,
	"gdr.measured": true, "gdr.failures_count": true}

// Structured says whether the case's failure was recorded with its cause
// as an attribute (gdr.cause), not only as a log line.
func (c *Case) Structured() bool { return c.Own[verdict.KeyCause] != "" }

// CauseAndRemedy is the case's cause and remedy, as its finding holds them.
func (c *Case) CauseAndRemedy() (cause, remedy string) { return c.Finding.Cause, c.Finding.Remedy }

// strictMarker opens the line of an absence GDR_STRICT=1 failed
// (harness/testenv); recordings made before gdr.absent say so only there.
const strictMarker = "GDR_STRICT=1: "

// legacy says whether the case was recorded before absences carried their
// remedy (no gdr.outcome on it): only then may the report offer a remedy
// of its own for a shared cause (reqs.CauseRemedy).
func (c *Case) legacy() bool { return c.Own[verdict.KeyOutcome] == "" }

// findingOf is the finding c recorded, or, for a recording without one,
// its message as the cause. Its outcome is the case's (c.Outcome) when it
// failed.
func findingOf(c *Case) verdict.Finding {
	f, ok := verdict.FromAttrs(c.Own)
	if !ok || c.Result == gtr.Unknown {
		f = verdict.Finding{Cause: c.Message}
		if c.Result == gtr.Skip {
			f.Outcome = verdict.Absent
		}
	}
	if c.Outcome != "" {
		f.Outcome = verdict.Outcome(c.Outcome)
	}
	return f
}

// Device names what a counted subtest is about: the part of its name below
// the requirement's test (TestTOPO02NearestNIC/0000:3b:00.0 -> 0000:3b:00.0).
func (c *Case) Device() string {
	_, sub, ok := strings.Cut(c.Name, "/")
	if !ok {
		return ""
	}
	return sub
}

// Status is a requirement's or a case's outcome.
type Status string

const (
	Pass   Status = "pass"
	Fail   Status = "fail"
	Skip   Status = "skip"
	NotRun Status = "not run"
	// HostOnly: a requirement not judgeable from a container (its cases
	// skipped through testenv.HostOnly, gdr.host_only, and the catalogue
	// gives it a host-only rule: reqs.ContainerRule.HostOnly). It is shown
	// apart and does not hold back QUALIFIED; a case's own status stays
	// Skip (JUnit <skipped>).
	HostOnly Status = "host only"
)

func statusOf(r gtr.Result) Status {
	switch r {
	case gtr.Pass:
		return Pass
	case gtr.Skip:
		return Skip
	}
	return Fail // gtr.Fail, and gtr.Unknown: a test that never finished failed
}

// Status is the case's outcome. A test that a signal cut short (the run
// was stopped: Identity.Stopped) was not judged: NotRun, never Fail, so no
// part is blamed for a job someone stopped.
func (c *Case) Status() Status {
	if c.Result == gtr.Unknown && c.stopped != "" {
		return NotRun
	}
	return statusOf(c.Result)
}

// stoppedHow is how a test that never finished ended in a run that a
// signal stopped.
func stoppedHow(sig string) string {
	return "the run was stopped by " + sig + " while it ran (" + soak.StopSource(sig) + "), so it was not judged"
}

// stoppedRemedy is what to do about a requirement a signal cut short.
const stoppedRemedy = "run the suite again and let it end (a batch job: a time limit that covers GDR_SOAK and the suite; a pod: nothing deleting it mid-run)"

// pkgRun is one package of one host: what gtr models, plus the cases.
type pkgRun struct {
	gtr.Package
	Area  string
	Cases []*Case // every test and subtest, in start order
	// NoTests: the package built with no tests for these tags ([no test files]).
	NoTests bool
	// Failed: the package failed outside its tests (build error, panic in
	// TestMain, exit with no failed test); Failure says how.
	Failed  bool
	Failure string
	// StoppedAt is the test that was running when the package's run ended
	// (it never finished); tests after it were never reached. "" when every
	// test that started ended.
	StoppedAt string
	// stoppedBy is the signal that stopped the run (Identity.Stopped) where
	// StoppedAt's test was cut short by it; "" otherwise.
	stoppedBy string
}

// areaOf is the last element of a package path, less any host label the lab
// put in front (server/conformance/pingpong -> pingpong).
func areaOf(pkg string) string { return path.Base(pkg) }

// buildPackages folds one host's events into packages and cases, their
// attribute maps shared through shared (nil: not shared).
// stopped is the signal that stopped the run (Identity.Stopped), "" for a
// run that ended.
func buildPackages(host string, evs []Event, shared *mapTable, stopped string) []*pkgRun {
	var pkgs []*pkgRun
	byPkg := map[string]*pkgRun{}
	cases := map[string]map[string]*Case{}
	getPkg := func(name string) *pkgRun {
		p := byPkg[name]
		if p == nil {
			p = &pkgRun{Package: gtr.Package{Name: name}, Area: areaOf(name)}
			byPkg[name] = p
			pkgs = append(pkgs, p)
			cases[name] = map[string]*Case{}
		}
		return p
	}
	n := 0
	getCase := func(p *pkgRun, name string) *Case {
		c := cases[p.Name][name]
		if c == nil {
			n++
			c = &Case{Host: host, Area: p.Area, Package: p.Name, Name: name, Own: map[string]string{}, order: n}
			cases[p.Name][name] = c
			p.Cases = append(p.Cases, c)
		}
		return c
	}
	buildOut := map[string][]string{}
	for _, e := range evs {
		if e.Action == "build-output" || e.Action == "build-fail" {
			ip := strings.Fields(e.ImportPath + " ")[0]
			if e.Action == "build-output" {
				buildOut[ip] = append(buildOut[ip], splitLines(e.Output)...)
			}
			continue
		}
		p := getPkg(e.Package)
		if e.Time != nil && (p.Timestamp.IsZero() || e.Time.Before(p.Timestamp)) {
			p.Timestamp = *e.Time // the package's start: JUnit's timestamp
		}
		if e.Test == "" {
			switch e.Action {
			case "output":
				p.Output = append(p.Output, splitLines(e.Output)...)
				if strings.Contains(e.Output, "[no test files]") {
					p.NoTests = true
				}
			case "pass", "fail", "skip":
				p.Duration = secs(e.Elapsed)
				if e.Action == "fail" {
					p.Failed = true
				}
			}
			continue
		}
		c := getCase(p, e.Test)
		switch e.Action {
		case "output":
			c.Output, c.open = addOutput(c.Output, c.open, e.Output)
		case "attr":
			c.Own[e.Key] = e.Value
		case "pass":
			c.Result, c.Duration = gtr.Pass, secs(e.Elapsed)
		case "fail":
			c.Result, c.Duration = gtr.Fail, secs(e.Elapsed)
		case "skip":
			c.Result, c.Duration = gtr.Skip, secs(e.Elapsed)
		}
	}
	for _, p := range pkgs {
		link(p, shared, stopped)
		if bo := buildOut[p.Name]; len(bo) > 0 {
			p.BuildError = gtr.Error{Name: p.Name, Cause: "build failed", Output: bo}
		}
		p.Failure = p.failure()
		p.Failed = p.Failure != ""
		for _, c := range p.Cases {
			if c.Result == gtr.Unknown && c.Parent == nil {
				p.StoppedAt, p.stoppedBy = c.Name, stopped
				break
			}
		}
	}
	return pkgs
}

// failure says how a package failed outside its tests, or "".
func (p *pkgRun) failure() string {
	if len(p.BuildError.Output) > 0 {
		return "did not build: " + compilerError(p.BuildError.Output)
	}
	if !p.Failed {
		return ""
	}
	for _, c := range p.Cases {
		if c.Result == gtr.Fail || c.Result == gtr.Unknown {
			return "" // its tests say why
		}
	}
	return "failed outside its tests: " + firstUseful(p.Output)
}

// link finds each case's parent (the longest name prefix at a "/" that is a
// test of the package: t.Run names may contain "/" themselves), inherits
// attributes down, and decides which cases are counted.
func link(p *pkgRun, shared *mapTable, stopped string) {
	how := howStopped(p)
	if stopped != "" {
		how = stoppedHow(stopped)
	}
	by := map[string]*Case{}
	for _, c := range p.Cases {
		by[c.Name] = c
	}
	for _, c := range p.Cases {
		for i := strings.LastIndex(c.Name, "/"); i > 0; i = strings.LastIndex(c.Name[:i], "/") {
			if par := by[c.Name[:i]]; par != nil {
				c.Parent = par
				par.Children = append(par.Children, c)
				break
			}
		}
	}
	// Parents start before their subtests, so start order is top-down.
	sort.SliceStable(p.Cases, func(i, j int) bool { return p.Cases[i].order < p.Cases[j].order })
	var inherit func(c *Case)
	inherit = func(c *Case) {
		c.Attrs = map[string]string{}
		if c.Parent != nil {
			for k, v := range c.Parent.Attrs {
				if k != "gdr.skip" && k != "gdr.absent" && !failureKeys[k] && !(k == "gdr.threshold" && strings.HasPrefix(v, "gdr.")) {
					c.Attrs[k] = v
				}
			}
		}
		for k, v := range c.Own {
			c.Attrs[k] = v
		}
		c.Req = c.Attrs["gdr.req"]
		for _, ch := range c.Children {
			inherit(ch)
		}
	}
	for _, c := range p.Cases {
		if c.Parent == nil {
			inherit(c)
		}
	}
	for _, c := range p.Cases {
		normalizeLegacy(c.Attrs)
		c.Counted = counted(c)
		if c.Result == gtr.Unknown {
			c.how, c.stopped = how, stopped
		}
		c.Message = message(c)
		switch {
		case c.Result == gtr.Unknown:
			c.Outcome = OutcomeDidNotFinish
		case c.Result == gtr.Fail:
			c.Outcome = OutcomeFellShort
			if f, ok := verdict.FromAttrs(c.Own); ok && f.Outcome != verdict.FellShort {
				c.Outcome = string(f.Outcome) // not judged, or absent under GDR_STRICT=1
			} else if !ok && strings.HasPrefix(c.Message, strictMarker) {
				c.Outcome = OutcomeAbsent // recorded before gdr.absent: the marker testenv wrote
			}
		}
		if c.Result != gtr.Pass {
			c.Finding = findingOf(c)
		}
	}
	// Done with them: from here a case's maps are only read, and the
	// same case on other hosts of a merge shares them.
	for _, c := range p.Cases {
		c.Own, c.Attrs = shared.share(c.Own), shared.share(c.Attrs)
	}
}

// counted: a test with subtests is a row only when it carries a verdict its
// subtests do not: it failed (or never finished) while none of them did.
// Otherwise its subtests are the rows, and it would count twice.
func counted(c *Case) bool {
	if len(c.Children) == 0 {
		return true
	}
	if c.Result != gtr.Fail && c.Result != gtr.Unknown {
		return false
	}
	var anyFail func(c *Case) bool
	anyFail = func(c *Case) bool {
		for _, ch := range c.Children {
			if ch.Result == gtr.Fail || ch.Result == gtr.Unknown || anyFail(ch) {
				return true
			}
		}
		return false
	}
	return !anyFail(c)
}

var (
	logLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: (.*)$`)
	framing = regexp.MustCompile(`^\s*(=== (RUN|PAUSE|CONT|NAME|ATTR)|--- (PASS|FAIL|SKIP|BENCH):)`)
	panicRe = regexp.MustCompile(`^(panic: |fatal error: |SIGSEGV|signal: )`)
)

// logMessages are the test's t.Log/t.Error/t.Skip messages (first lines).
func logMessages(out []string) []string {
	var msgs []string
	for _, l := range out {
		if framing.MatchString(l) {
			continue
		}
		if m := logLine.FindStringSubmatch(l); m != nil {
			msgs = append(msgs, strings.TrimSpace(m[1]))
		}
	}
	return msgs
}

// message is a failed case's first line of cause and remedy, or a skipped
// case's reason. A failure recorded with gdr.cause is its line
// (verdict.Line). go test's output does not tell t.Log from t.Error, and
// no line is picked by the words in it: in a recording without gdr.cause,
// a strict-mode absence is the line, else a panic, else the last message
// before the end: testenv.Failf has ended its test with t.Fatal since the
// first release, so its line is the last; after an Errorf (which lets the
// test go on) a later log line stands in for it.
func message(c *Case) string {
	if c.Result == gtr.Pass {
		return "" // its log is not read: most cases pass
	}
	msgs := logMessages(c.Output)
	switch c.Result {
	case gtr.Skip:
		if s := c.Own["gdr.skip"]; s != "" {
			return s
		}
		if len(msgs) > 0 {
			return msgs[len(msgs)-1]
		}
		return "skipped (no reason given)"
	}
	if c.Result == gtr.Unknown {
		// Whatever it printed, it never ended: that is the fact, and how.
		m := "did not finish: " + c.how
		if len(msgs) > 0 && !strings.Contains(c.how, msgs[len(msgs)-1]) {
			m += "; its last message: " + msgs[len(msgs)-1]
		}
		return m
	}
	if cause := c.Own[verdict.KeyCause]; cause != "" && c.Result == gtr.Fail {
		// Recorded by testenv before the test failed: the line it printed.
		return verdict.Line(cause, c.Own[verdict.KeyRemedy])
	}
	for _, m := range msgs {
		if strings.HasPrefix(m, strictMarker) {
			return m
		}
	}
	for _, l := range c.Output {
		if panicRe.MatchString(strings.TrimSpace(l)) {
			return strings.TrimSpace(l)
		}
	}
	if len(msgs) > 0 {
		return msgs[len(msgs)-1]
	}
	if s := firstUseful(c.Output); s != "" {
		return s
	}
	return "failed (no message)"
}

func firstUseful(lines []string) string {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || framing.MatchString(l) || l == "FAIL" || l == "PASS" || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "ok  \t") {
			continue
		}
		return l
	}
	return ""
}

// addOutput adds an output event's text to lines. test2json cuts a long
// line into several events, only the last ending in a newline: a piece
// continues the line before it (open), so a line stays one line.
func addOutput(lines []string, open bool, s string) ([]string, bool) {
	if s == "" {
		return lines, open
	}
	more := splitLines(s)
	if open && len(lines) > 0 && len(more) > 0 {
		lines[len(lines)-1] += more[0]
		more = more[1:]
	}
	return append(lines, more...), !strings.HasSuffix(s, "\n")
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// legacy maps keys of recordings made before the unit rule (attrkey) to
// today's, so old runs render with their numbers.
var legacy = map[string]string{
	"gdr.bw_gbps": "gdr.bw_gbit_s", "gdr.bw_mbps": "gdr.bw_mib_s", "gdr.rate_gbps": "gdr.rate_gbit_s",
	"gdr.size": "gdr.size_bytes", "gdr.bw_size": "gdr.size_bytes", "gdr.link_gbps": "gdr.link_gbyte_s",
	"gdr.bw_gbps_host": "gdr.bw_gbit_s_host", "gdr.bw_gbps_gpu": "gdr.bw_gbit_s_gpu",
	"gdr.h2d_gbps": "gdr.copy_gbyte_s", "gdr.d2h_gbps": "gdr.copy_gbyte_s",
	"gdr.h2d_gbps_mean": "gdr.copy_gbyte_s_mean", "gdr.d2h_gbps_mean": "gdr.copy_gbyte_s_mean",
	"gdr.h2d_fraction": "gdr.copy_fraction", "gdr.d2h_fraction": "gdr.copy_fraction",
}

func normalizeLegacy(a map[string]string) {
	for old, now := range legacy {
		if v, ok := a[old]; ok {
			if _, has := a[now]; !has {
				a[now] = v
			}
			delete(a, old)
		}
	}
	var links []string
	for k, v := range a {
		if bdf, ok := strings.CutPrefix(k, "gdr.link_"); ok && strings.Contains(bdf, ":") {
			delete(a, k)
			links = append(links, bdf+" "+v)
		}
	}
	if len(links) > 0 && a["gdr.links"] == "" {
		sort.Strings(links)
		a["gdr.links"] = strings.Join(links, "; ")
	}
}

// Lines go test and the Go runtime print when a test binary stops early.
var (
	timedOut = regexp.MustCompile(`^panic: test timed out after (\S+)`)
	killedRe = regexp.MustCompile(`^(\*\*\* Test killed.*|signal: (killed|terminated|aborted).*|.*SIGKILL.*)$`)
)

// howStopped says how a package's run ended while a test of it had not:
// its deadline (go test -timeout), a panic or fatal runtime error, a kill,
// or an exit the output does not explain. It reads the package's output
// and its unfinished tests' (test2json gives the last words to the test
// that was running).
func howStopped(p *pkgRun) string {
	var lines []string
	for _, c := range p.Cases {
		if c.Result == gtr.Unknown {
			lines = append(lines, c.Output...)
		}
	}
	lines = append(lines, p.Output...)
	var panicLine, killed string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if m := timedOut.FindStringSubmatch(l); m != nil {
			return "the test binary's deadline ran out (go test -timeout " + m[1] + ")"
		}
		switch {
		case killed == "" && killedRe.MatchString(l):
			killed = l
		case panicLine == "" && (strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ")):
			panicLine = l
		}
	}
	switch {
	case panicLine != "":
		return "the test binary stopped on " + panicLine
	case killed != "":
		return "the test binary was killed (" + killed + ")"
	}
	return "its package ended while it ran (the test binary exited or was killed without a word)"
}

// compilerError is the first line of go build's output that is the
// compiler's own ("topology_test.go:12:2: undefined: x"), not the "# pkg"
// header go build prints above it.
func compilerError(lines []string) string {
	var rest []string
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "# ") {
			rest = append(rest, l)
		}
	}
	if s := firstUseful(rest); s != "" {
		return s
	}
	return firstUseful(lines)
}
