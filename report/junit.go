package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/junit"

	"github.com/gdrconf/gdrconf/internal/attrkey"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// JUnit is a JUnit file as ParseJUnit reads it: this package's files,
// older or newer, and gotestsum's. It is go-junit-report's junit types
// (what JUnit() writes), with the one thing they lack for reading: a case's
// <properties>, which gotestsum writes and junit.Testcase has no field for
// (go-junit-report v2.1.0 junit/junit.go). Suites and Cases hold the read
// forms; the embedded Testsuites.Suites and Testsuite.Testcases stay empty.
type JUnit struct {
	junit.Testsuites
	Suites []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one testsuite as read.
type JUnitSuite struct {
	junit.Testsuite
	Cases []JUnitCase `xml:"testcase"`
}

// JUnitCase is one testcase as read; Props only from files with properties
// inside cases (gotestsum's; this package's before the case blocks).
type JUnitCase struct {
	junit.Testcase
	Props []junit.Property `xml:"properties>property"`
}

// Cases are the cases of every suite named suite, in file order: this
// package writes one suite per case (see JUnit()), so a name repeats.
func (d JUnit) Cases(suite string) []JUnitCase {
	var out []JUnitCase
	for _, s := range d.Suites {
		if s.Name == suite {
			out = append(out, s.Cases...)
		}
	}
	return out
}

// Result types of <failure> and <error> (the Ant schema requires one):
// the contract's outcomes (gdr.outcome).
const (
	typeFellShort    = OutcomeFellShort
	typeAbsent       = OutcomeAbsent
	typeNotJudged    = OutcomeNotJudged
	typeDidNotFinish = OutcomeDidNotFinish
	// typeReportOnly was the type of a report-only requirement's skip in
	// files written before the case blocks said "=== RESULT fail": the Ant
	// schema allows no type on <skipped>, so it is only read.
	typeReportOnly = "report_only_not_met"
)

// ParseJUnit reads a JUnit file.
func ParseJUnit(r io.Reader) (JUnit, error) {
	var doc JUnit
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return doc, err
	}
	if doc.Tests == 0 && doc.Failures == 0 {
		for _, s := range doc.Suites {
			doc.Tests += s.Tests
			doc.Failures += s.Failures
		}
	}
	return doc, nil
}

// SuiteName is a JUnit suite's name: <host>/<area>.
func SuiteName(host, area string) string { return host + "/" + area }

// ClassName is a case's classname: <host>.<area>, with the host's own dots
// made underscores, because Jenkins splits a classname at its last dot into
// package (the host) and class (the area).
func ClassName(host, area string) string { return strings.ReplaceAll(host, ".", "_") + "." + area }

// CaseName is a case's name: the test's name and the host in brackets.
// GitLab keeps one case per name, so without the host a merged report (or
// the lab's three hosts) would keep one host's result of each test.
func CaseName(test, host string) string { return test + " [" + host + "]" }

// Case blocks: a case's facts and output in the system-out of the suite
// that holds it, one suite per case (JUnit()). A block opens with caseMark
// and the case's name, then resultMark and the go test result it records
// (pass, fail or skip, which a report-only failure's JUnit skip is not),
// with the judged value against its threshold when there is one; then its
// properties, one propMark line each, the facts first (factKeys); then its
// output. The first suite of a host's area holds the package's own output
// after its block, under pkgMark. Files written before the one suite per
// case hold many blocks in one suite; ReadJUnit reads both.
const (
	caseMark   = "=== CASE "
	resultMark = "=== RESULT "
	pkgMark    = "=== PACKAGE "
	propMark   = "[[PROPERTY|"
)

func propLine(k, v string) string { return propMark + k + "=" + v + "]]" }

// hostProperties are the host's identity as suite properties.
func hostProperties(h *HostResult) []junit.Property {
	id := h.Identity
	p := []junit.Property{{Name: "gdr.host", Value: id.Host}}
	add := func(k, v string) {
		if v != "" {
			p = append(p, junit.Property{Name: k, Value: v})
		}
	}
	add("gdr.kind", id.Kind)
	add("gdr.kernel", id.Kernel)
	add("gdr.os", id.OS)
	add("gdr.nvidia_driver", id.NvidiaDriver)
	add("gdr.cuda_driver", id.CUDADriver)
	add("gdr.gpus", strings.Join(id.GPUs, ", "))
	add("gdr.nics", strings.Join(id.NICs, ", "))
	add("gdr.suite_version", orUnknown(id.Suite))
	add("gdr.strict", strconv.FormatBool(id.Strict))
	add("gdr.role", id.Role)
	add("gdr.peer", id.Peer)
	add("gdr.verdict", h.Verdict.Line)
	return p
}

func duration(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// junitTime is the form Ant's timestamp pattern takes: UTC, seconds, no zone.
const junitTime = "2006-01-02T15:04:05"

// hostStart is when the host's run started and where that comes from: the
// earliest event's time, else host.json's time (when its report was made),
// else the report's build time, else now.
func hostStart(h *HostResult, built string) (string, string) {
	var first time.Time
	for _, p := range h.pkgs {
		if !p.Timestamp.IsZero() && (first.IsZero() || p.Timestamp.Before(first)) {
			first = p.Timestamp
		}
	}
	if !first.IsZero() {
		return first.UTC().Format(junitTime), "events"
	}
	for _, c := range []struct{ v, src string }{{h.Identity.Time, "host.json"}, {built, "report build time"}} {
		if t, err := time.Parse(time.RFC3339, c.v); err == nil {
			return t.UTC().Format(junitTime), c.src
		}
	}
	return time.Now().UTC().Format(junitTime), "report build time"
}

// JUnit builds the JUnit document, in go-junit-report's junit types: one
// case per counted test (one per requirement and device), requirements that
// did not run at all as skipped cases, failures outside any test as error
// cases; each case in a suite of its own, named <host>/<area> like every
// case of its area, whose system-out is the case's block (caseMark).
//
// Why a suite per case: the Ant schema allows nothing inside a passed case
// (no system-out, no properties), and Jenkins shows a case without output
// of its own its suite's system-out (jenkinsci/junit-plugin CaseResult
// getStdout), trimmed to its first and last 500 characters when no case of
// the suite failed unless the job keeps long output (possiblyTrimStdio):
// with one suite per area a passed case's facts were cut from view. Jenkins
// merges suites of one name only when their ids are equal too
// (TestResult.add), so each keeps its own output; GitLab keys cases by
// suite name, classname and name (lib/gitlab/ci/reports/test_case.rb), all
// unchanged. The first suite of each host's area carries the host's
// identity as properties, the area's time and the package's output.
func (r *Report) JUnit() junit.Testsuites {
	w := &junitWriter{}
	_ = r.junitSuites(w) // no emit: no error
	return w.doc
}

// junitSuites builds the document's suites into w one host at a time (the
// cluster suites last), handing each host's to w.emit when it is set.
func (r *Report) junitSuites(w *junitWriter) error {
	fleet := r.Fleet()
	for _, h := range r.Hosts {
		w.host(h, fleet, r.Time)
		if err := w.flush(); err != nil {
			return err
		}
	}
	r.appendClusterSuites(w)
	return w.flush()
}

// junitWriter builds the document a suite at a time. Suites are appended
// directly, never with Testsuites.AddSuite, which would total them into
// attributes of <testsuites>: the Ant schema declares none there and
// junit-10 no skipped. With emit set, flush hands the suites built so far
// to it and drops them: a fleet's document is never held whole.
type junitWriter struct {
	doc  junit.Testsuites
	ids  int // suites made so far: the next one's id
	emit func(*junit.Testsuite) error
}

// flush hands the suites built so far to emit and drops them (none
// without emit).
func (w *junitWriter) flush() error {
	if w.emit == nil {
		return nil
	}
	for i := range w.doc.Suites {
		if err := w.emit(&w.doc.Suites[i]); err != nil {
			return err
		}
	}
	clear(w.doc.Suites)
	w.doc.Suites = w.doc.Suites[:0]
	return nil
}

// add appends a suite holding tc (none when tc is nil) with block as its
// system-out, and returns its index. Properties, system-out and system-err
// are always written: the Ant schema requires all three.
func (w *junitWriter) add(name, host, pkg, stamp string, tc *junit.Testcase, block []string) int {
	props := []junit.Property{}
	s := junit.Testsuite{Name: clean(name), ID: w.ids, Hostname: clean(host), Package: clean(pkg), Time: "0.000", Timestamp: stamp,
		Properties: &props, SystemOut: &junit.Output{Data: clean(strings.Join(block, "\n"))}, SystemErr: &junit.Output{}}
	if tc != nil {
		s.AddTestcase(*tc)
	}
	w.doc.Suites = append(w.doc.Suites, s)
	w.ids++
	return len(w.doc.Suites) - 1
}

// junitArea is what a host's area gathers while its cases are written.
type junitArea struct {
	first int    // index of its first suite, -1 before it has one
	pkg   string // the Go package, else the area
	total time.Duration
	out   []string // the package's own output
}

func (w *junitWriter) host(h *HostResult, fleet bool, built string) {
	host := h.Identity.Host
	if strings.TrimSpace(host) == "" {
		host = "localhost" // what Ant's schema asks for when the name is unknown
	}
	stamp, stampSrc := hostStart(h, built)
	from := len(w.doc.Suites)
	areas := map[string]*junitArea{}
	var order []string
	area := func(name, pkg string) *junitArea {
		a := areas[name]
		if a == nil {
			a = &junitArea{first: -1, pkg: name}
			areas[name] = a
			order = append(order, name)
		}
		if pkg != "" && a.pkg == name {
			a.pkg = pkg
		}
		return a
	}
	add := func(areaName string, tc junit.Testcase, block []string) {
		a := area(areaName, "")
		i := w.add(SuiteName(host, areaName), host, a.pkg, stamp, &tc, block)
		if a.first < 0 {
			a.first = i
		}
	}
	for _, p := range h.pkgs {
		a := area(p.Area, p.Name)
		a.out = append(a.out, p.Output...)
		for _, c := range p.Cases {
			if c.Parent == nil {
				a.total += c.Duration
			}
			if !c.Counted {
				continue
			}
			tc, props, result, inBody := caseOf(c, host, fleet)
			switch {
			case inBody:
				add(p.Area, tc, caseBlock(tc.Name, result, nil, nil)) // its result's body holds its facts and log: written once
			case fleet && c.Status() == Pass:
				add(p.Area, tc, caseBlock(tc.Name, result, props, nil)) // a fleet's passed cases keep their facts, not their log
			default:
				add(p.Area, tc, caseBlock(tc.Name, result, props, junitLog(c.Output)))
			}
		}
		if p.Failure != "" && !tookDown(h, p.Area) {
			out := append(append([]string{}, p.BuildError.Output...), p.Output...)
			m := p.Name + " " + p.Failure
			tc := junit.Testcase{Name: clean(CaseName("(package)", host)), Classname: clean(ClassName(host, p.Area)), Time: "0.000",
				Error: &junit.Result{Message: clean(m), Type: typeNotJudged, Data: body(m, "", "", nil, out)}}
			add(p.Area, tc, caseBlock(tc.Name, string(Fail), nil, nil))
		}
	}
	for _, rq := range h.Reqs {
		level := propLines(nil, "gdr.req", rq.ID, "gdr.level", rq.Level)
		if rq.takenDown() {
			// Its package failed before any test of it ran (a build
			// error): one case per requirement, as summary counts it.
			var out []string
			for _, p := range h.pkgs {
				if p.Area == rq.Area {
					out = append(append(out, p.BuildError.Output...), p.Output...)
				}
			}
			m := rq.ID + " " + rq.Level + " on " + host + ": " + rq.Reason
			tc := junit.Testcase{Name: clean(CaseName(rq.ID+" (package failed)", host)), Classname: clean(ClassName(host, rq.Area)), Time: "0.000",
				Error: &junit.Result{Message: clean(m), Type: typeNotJudged, Data: body(m, "", "", nil, out)}}
			add(rq.Area, tc, caseBlock(tc.Name, string(Fail), level, nil))
			continue
		}
		if rq.Status != NotRun {
			continue
		}
		m := rq.ID + " " + rq.Level + " on " + host + ": " + rq.Reason
		if !strings.HasPrefix(rq.Reason, "not run") && !strings.HasPrefix(rq.Reason, notInSuite) {
			m = rq.ID + " " + rq.Level + " on " + host + ": not run: " + rq.Reason
		}
		tc := junit.Testcase{Name: clean(CaseName(rq.ID+" (not run)", host)), Classname: clean(ClassName(host, rq.Area)), Time: "0.000",
			Skipped: &junit.Result{Message: clean(m), Data: body(m, "", "", nil, nil)}}
		add(rq.Area, tc, caseBlock(tc.Name, string(Skip), level, nil))
	}
	for i, e := range h.runErrs {
		name := "(run)"
		if i > 0 {
			name = fmt.Sprintf("(run %d)", i+1)
		}
		tc := junit.Testcase{Name: clean(CaseName(name, host)), Classname: clean(ClassName(host, "run")), Time: "0.000",
			Error: &junit.Result{Message: clean(firstOf(e)), Type: typeNotJudged, Data: body(firstOf(e), "", "", nil, splitLines(e))}}
		add("run", tc, caseBlock(tc.Name, string(Fail), nil, nil))
	}
	props := hostProperties(h)
	for _, name := range order {
		a := areas[name]
		if a.first < 0 {
			if len(a.out) == 0 {
				continue
			}
			a.first = w.add(SuiteName(host, name), host, a.pkg, stamp, nil, nil) // output with no case: kept, as before
		}
		s := &w.doc.Suites[a.first]
		p := append(append([]junit.Property{}, props...), junit.Property{Name: "gdr.timestamp_source", Value: stampSrc}, junit.Property{Name: "gdr.package", Value: a.pkg})
		for i := range p {
			p[i].Value = clean(p[i].Value)
		}
		s.Properties = &p
		s.Time = duration(a.total)
		if len(a.out) > 0 {
			lines := append([]string{pkgMark + a.pkg}, a.out...)
			if s.SystemOut.Data != "" {
				lines = append([]string{s.SystemOut.Data}, lines...)
			}
			s.SystemOut.Data = clean(strings.Join(lines, "\n"))
		}
	}
	if h.Earlier {
		for i := from; i < len(w.doc.Suites); i++ {
			supersede(&w.doc.Suites[i])
		}
	}
}

// supersede makes an earlier run's failures and errors skips: a later run
// of the host judges (MergeRuns), and CI must not turn red for a run that
// was repeated. The skip's message says so (the Ant schema allows no type
// on <skipped>).
func supersede(s *junit.Testsuite) {
	for i := range s.Testcases {
		c := &s.Testcases[i]
		r := c.Failure
		if r == nil {
			r = c.Error
		}
		if r == nil {
			continue
		}
		c.Failure, c.Error = nil, nil
		c.Skipped = &junit.Result{Message: "superseded by a later run of this host: " + r.Message, Data: r.Data}
	}
	s.Failures, s.Errors, s.Skipped = 0, 0, 0
	for _, c := range s.Testcases {
		if c.Skipped != nil {
			s.Skipped++
		}
	}
}

// caseBlock is a case's block (caseMark): its name, its result, its
// properties (the facts first) and its output.
func caseBlock(name, result string, props, output []string) []string {
	lines := append([]string{caseMark + name, resultMark + result}, props...)
	return append(lines, output...)
}

// factKeys are the attributes a reader looks for first, in this order,
// after the judged value and its bound (gdr.measured and gdr.threshold
// name their keys): where Jenkins trims a passed suite's output to its
// first 500 characters, these are what stays.
var factKeys = []string{"gdr.threshold_source", "gdr.part", "gdr.remedy", "gdr.cause", "gdr.outcome", "gdr.req", "gdr.level"}

// propLines are attrs, with the key and value pairs of more set over them
// (a case's level, the part a failure names: the attribute maps a merge's
// cases share are never copied), as propMark lines: the judged value and
// its bound, the facts (factKeys), then the rest by key.
func propLines(attrs map[string]string, more ...string) []string {
	val := func(k string) (string, bool) {
		for i := len(more) - 2; i >= 0; i -= 2 {
			if more[i] == k {
				return more[i+1], true
			}
		}
		v, ok := attrs[k]
		return v, ok
	}
	var first []string
	for _, m := range []string{"gdr.measured", "gdr.threshold"} {
		k, _ := val(m)
		if v, _ := val(k); strings.HasPrefix(k, attrkey.Prefix) && v != "" {
			first = append(first, k)
		}
	}
	for _, k := range factKeys {
		if _, ok := val(k); ok && !slices.Contains(first, k) {
			first = append(first, k)
		}
	}
	rest := make([]string, 0, len(attrs)+len(more)/2)
	for k := range attrs {
		if !slices.Contains(first, k) {
			rest = append(rest, k)
		}
	}
	for i := 0; i+1 < len(more); i += 2 {
		if _, ok := attrs[more[i]]; !ok && !slices.Contains(first, more[i]) && !slices.Contains(rest, more[i]) {
			rest = append(rest, more[i])
		}
	}
	sort.Strings(rest)
	out := make([]string, 0, len(first)+len(rest))
	for _, k := range append(first, rest...) {
		v, _ := val(k)
		out = append(out, propLine(k, v))
	}
	return out
}

// junitLog is a case's output as JUnit keeps it: less the "=== ATTR"
// lines test2json echoes for each t.Attr, which its property lines
// already carry (a third of a fleet's junit.xml). A merge's reading
// already left them out (readEvents): then out itself, not a copy.
func junitLog(out []string) []string {
	i := slices.IndexFunc(out, func(l string) bool { return strings.HasPrefix(l, "=== ATTR ") })
	if i < 0 {
		return out
	}
	keep := append(make([]string, 0, len(out)), out[:i]...)
	for _, l := range out[i:] {
		if !strings.HasPrefix(l, "=== ATTR ") {
			keep = append(keep, l)
		}
	}
	return keep
}

// body is a result's text: the message, then the remedy and the part at
// fault, first, because GitLab shows the body and drops the message; a
// blank line; then the evidence: the case's properties and its output
// (ReadJUnit reads them back from there when the case's block holds only
// its name and result: caseEvidence).
func body(msg, remedy, part string, props, output []string) string {
	lines := []string{msg}
	if remedy != "" {
		lines = append(lines, "remedy: "+remedy)
	}
	if part != "" {
		lines = append(lines, "part: "+part)
	}
	ev := append(slices.Clip(props), junitLog(output)...)
	if len(ev) > 0 {
		lines = append(append(lines, ""), ev...)
	}
	return clean(strings.Join(lines, "\n")) + "\n"
}

// caseOf is a counted case's JUnit case, its attributes with its level
// (and part) added, and its block's result (resultMark). Its message names
// requirement, level, host, the measured value against its threshold, and
// the cause; a report-only requirement's failure is a skip; a failure the
// suite could not judge (gdr.outcome=not_judged) or that did not finish an
// error. inBody says that its result (a failure or an error) carries its
// attributes and output in its body, where every CI view shows them, so
// that its block need not again.
func caseOf(c *Case, host string, fleet bool) (tc junit.Testcase, props []string, result string, inBody bool) {
	name := c.Name
	if rd := roundOf(c.Package); rd != "" {
		name += " (" + rd + ")" // a cluster run: the same test once per round
	}
	tc = junit.Testcase{Name: clean(CaseName(name, host)), Classname: clean(ClassName(host, c.Area)), Time: duration(c.Duration)}
	subject := name + " on " + host
	level := ""
	if rq, ok := reqs.Lookup(c.Req); ok {
		level = string(rq.Level)
		subject = rq.ID + " " + level + " on " + host
	}
	var more []string
	if level != "" && c.Attrs["gdr.level"] == "" {
		more = append(more, "gdr.level", level)
	}
	if c.Part != nil && c.Status() != Pass && c.Status() != Skip {
		more = append(more, "gdr.part", c.Part.String())
	}
	props = propLines(c.Attrs, more...)
	value := measured(c)
	result = string(c.Status())
	if value != "" {
		result += ": " + value
	}
	switch c.Status() {
	case Pass:
	case Skip:
		m := subject + ": " + c.Message
		ev, out := props, c.Output
		if fleet {
			ev, out = nil, nil // a fleet's skips: the reason; the evidence is in the case's block
		}
		tc.Skipped = &junit.Result{Message: clean(m), Data: body(m, "", "", ev, out)}
	default:
		cause, remedy := c.CauseAndRemedy()
		part := ""
		if c.Part != nil {
			part = c.Part.String()
		}
		what := cause
		if value != "" {
			what = value + ": " + cause
		}
		m := subject + ": " + what
		res := &junit.Result{Message: clean(m), Data: body(m, remedy, part, props, c.Output)}
		switch {
		case level == string(reqs.ReportOnly):
			// A skip, so that it never turns a build unstable; its block
			// says it failed.
			res.Message = clean("report-only, not met: " + c.Req + " on " + host + ": " + what)
			res.Data = body(res.Message, remedy, part, props, c.Output)
			tc.Skipped = res
		case c.Outcome == OutcomeNotJudged:
			res.Type, tc.Error = typeNotJudged, res
		case c.Outcome == OutcomeDidNotFinish:
			res.Type, tc.Error = typeDidNotFinish, res
		case c.Outcome == OutcomeAbsent:
			res.Type, tc.Failure = typeAbsent, res
		default:
			res.Type, tc.Failure = typeFellShort, res
		}
		// Jenkins shows a failure's or error's body (errorStackTrace) but
		// of a skip only its message: a skip's block keeps its evidence.
		inBody = tc.Skipped == nil
	}
	return tc, props, result, inBody
}

// measured is "bw 12.1 Gbit/s < floor 75.000 Gbit/s (75% of port rate)":
// the judged value against its threshold, as numbers() reads them (the
// test names both with gdr.measured and gdr.threshold; a recording made
// before those names gives the first number with a threshold beside it).
func measured(c *Case) string {
	nums := numbers(c)
	var pick *Number
	for i := range nums {
		if nums[i].Threshold != "" && (pick == nil || nums[i].Judged && !pick.Judged) {
			pick = &nums[i]
		}
	}
	if pick == nil {
		return ""
	}
	s := valueWithUnit(pick.Key, pick.Value) + " " + compareOp(pick.Value, pick.Threshold) + " " + pick.Threshold
	if t := thresholdSource(c.Attrs); t != "" && !strings.Contains(pick.Threshold, t) {
		s += " (" + t + ")"
	}
	return s
}

// compareOp is the operator that holds between a value and its threshold
// ("floor 75 Gbit/s ...", "ceiling 3.5 us ..."), found by comparing the two
// numbers: "<" or ">=" for a floor, ">" or "<=" for a ceiling, and "vs"
// when either is not a number. A case the suite could not judge may well
// have met its threshold; the message must not say otherwise.
func compareOp(value, threshold string) string {
	v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	kind, rest, _ := strings.Cut(threshold, " ")
	f := strings.Fields(rest)
	if err != nil || len(f) == 0 {
		return "vs"
	}
	t, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "vs"
	}
	switch {
	case kind == "floor" && v < t:
		return "<"
	case kind == "floor":
		return ">="
	case kind == "ceiling" && v > t:
		return ">"
	case kind == "ceiling":
		return "<="
	}
	return "vs"
}

// valueWithUnit is "bw 12.1 Gbit/s" for gdr.bw_gbit_s=12.1: the key less
// its prefix and unit words, the value, the unit.
func valueWithUnit(key, v string) string {
	name := strings.TrimPrefix(key, attrkey.Prefix)
	if word, unit, ok := attrkey.UnitOf(key); ok {
		name = strings.Replace(name, "_"+word, "", 1)
		return name + " " + v + " " + unit
	}
	return name + " " + v
}

// clean makes s fit XML 1.0: a character it cannot carry (control
// characters, U+FFFE/FFFF, bytes that are not UTF-8) is written visibly as
// \xNN or \uNNNN, never as U+FFFD (xunit-viewer crashed on that): visible
// escapes a superset of what XML cannot carry.
func clean(s string) string { return visible(s) }

// WriteJUnit writes the report as JUnit XML, a host's suites at a time:
// the bytes junit.Testsuites.WriteXML writes for the whole document
// (TestJUnitStreamedIsTheDocument), which a fleet's merge never holds.
func (r *Report) WriteJUnit(w io.Writer) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "\t")
	start := xml.StartElement{Name: xml.Name{Local: "testsuites"}}
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	suite := xml.StartElement{Name: xml.Name{Local: "testsuite"}}
	jw := &junitWriter{emit: func(s *junit.Testsuite) error { return enc.EncodeElement(s, suite) }}
	if err := r.junitSuites(jw); err != nil {
		return err
	}
	if err := enc.EncodeToken(start.End()); err != nil {
		return err
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// firstOf is the first line of s.
func firstOf(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// takenDown: the requirement failed with no test of it run, its package
// having failed outside its tests (reqResult).
func (r *ReqResult) takenDown() bool { return r.Status == Fail && r.Cases == 0 }

// tookDown says whether a failure of area's package took a requirement
// down, which then carries it as its own case.
func tookDown(h *HostResult, area string) bool {
	for _, r := range h.Reqs {
		if r.Area == area && r.takenDown() {
			return true
		}
	}
	return false
}
