package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/attrkey"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// JUnit is a JUnit file: what JUnit() writes and ParseJUnit reads (this
// package's files, older or newer, and gotestsum's). It is written in the
// shape that both Jenkins xUnit's junit-10.xsd and the Ant JUnit schema
// accept (junitschema_test.go checks both): no attributes on <testsuites>
// (Ant declares none), every suite with timestamp, hostname, id and
// package and its properties, system-out and system-err in that order, and
// a case holding at most one result and nothing else (Ant allows neither
// properties nor output inside a case, junit-10 no properties). A case's
// facts and output therefore live in its suite's system-out (caseMark),
// and the evidence of a failure or skip in the result's body as well.
type JUnit struct {
	XMLName  xml.Name     // testsuites
	Tests    int          `xml:"tests,attr,omitempty"`    // read from older files; else the sum over suites
	Failures int          `xml:"failures,attr,omitempty"` // likewise
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one testsuite.
type JUnitSuite struct {
	Name      string          `xml:"name,attr"`
	Tests     int             `xml:"tests,attr"`
	Failures  int             `xml:"failures,attr"`
	Errors    int             `xml:"errors,attr"`
	Skipped   int             `xml:"skipped,attr"`
	Time      string          `xml:"time,attr"`
	Timestamp string          `xml:"timestamp,attr"` // UTC, no zone: Ant's pattern forbids one
	Hostname  string          `xml:"hostname,attr"`
	ID        int             `xml:"id,attr"`
	Package   string          `xml:"package,attr"`
	Props     []JUnitProperty `xml:"properties>property"`
	Cases     []JUnitCase     `xml:"testcase"`
	Out       cdata           `xml:"system-out"`
	Err       cdata           `xml:"system-err"`
}

// JUnitCase is one testcase; at most one of Failure, Error and Skipped is
// set (none: it passed). Props and Out are only read, from files written
// before the case blocks (gotestsum's, and this package's older ones).
type JUnitCase struct {
	Name      string           `xml:"name,attr"`
	Classname string           `xml:"classname,attr"`
	Time      string           `xml:"time,attr"`
	Props     *[]JUnitProperty `xml:"properties>property,omitempty"` // a pointer: nil writes no <properties>
	Failure   *JUnitResult     `xml:"failure,omitempty"`
	Error     *JUnitResult     `xml:"error,omitempty"`
	Skipped   *JUnitResult     `xml:"skipped,omitempty"`
	Out       cdata            `xml:"system-out,omitempty"`
}

// JUnitProperty is a suite's property (or, in older files, a case's).
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitResult is a failure, error or skip: its one-line message and its
// body. Ant requires type on failure and error; GitLab shows the body when
// it is not blank, the message otherwise.
type JUnitResult struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",cdata"` // CDATA keeps the lines readable in the file
}

// cdata is element text written as CDATA.
type cdata string

func (c cdata) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return e.EncodeElement(struct {
		S string `xml:",cdata"`
	}{string(c)}, start)
}

// Result types: the contract's outcomes (gdr.outcome), and a report-only
// requirement that was not met (a skip: it never turns a build unstable).
const (
	typeFellShort    = OutcomeFellShort
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

// Case blocks: a case's properties and output in its suite's system-out,
// where both schemas allow them. A block opens with caseMark and the
// case's name, then resultMark and the go test result it records (pass,
// fail or skip: a report-only requirement's failure is a JUnit skip); each
// property is a propMark line.
const (
	caseMark   = "=== CASE "
	resultMark = "=== RESULT "
	propMark   = "[[PROPERTY|"
)

func propLine(k, v string) string { return propMark + k + "=" + v + "]]" }

// hostProperties are the host's identity as suite properties.
func hostProperties(h *HostResult) []JUnitProperty {
	id := h.Identity
	p := []JUnitProperty{{Name: "gdr.host", Value: id.Host}}
	add := func(k, v string) {
		if v != "" {
			p = append(p, JUnitProperty{Name: k, Value: v})
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

// JUnit builds the JUnit document: one suite per host and area, one case per
// counted test (one per requirement and device), requirements that did not
// run at all as skipped cases, failures outside any test as error cases.
func (r *Report) JUnit() JUnit {
	doc := JUnit{XMLName: xml.Name{Local: "testsuites"}}
	fleet := r.Fleet()
	id := 0
	for _, h := range r.Hosts {
		host := h.Identity.Host
		if strings.TrimSpace(host) == "" {
			host = "localhost" // what Ant's schema asks for when the name is unknown
		}
		stamp, stampSrc := hostStart(h, r.Time)
		areas := map[string]*junitSuite{}
		var order []string
		suite := func(area, pkg string) *junitSuite {
			s := areas[area]
			if s == nil {
				if pkg == "" {
					pkg = area
				}
				s = &junitSuite{JUnitSuite: JUnitSuite{Name: SuiteName(host, area), Hostname: host, ID: id, Package: pkg, Timestamp: stamp}}
				id++
				s.Props = append(hostProperties(h), JUnitProperty{Name: "gdr.timestamp_source", Value: stampSrc}, JUnitProperty{Name: "gdr.package", Value: pkg})
				areas[area] = s
				order = append(order, area)
			}
			return s
		}
		total := map[string]time.Duration{}
		for _, p := range h.pkgs {
			s := suite(p.Area, p.Name)
			s.out = append(s.out, p.Output...)
			for _, c := range p.Cases {
				if c.Parent == nil {
					total[p.Area] += c.Duration
				}
				if c.Counted {
					tc, attrs := caseOf(c, host, fleet)
					out := c.Output
					if fleet && c.Status() == Pass {
						out = nil // a fleet's passed cases keep their facts, not their log
					}
					s.add(tc, string(c.Status()), attrs, out)
				}
			}
			if p.Failure != "" && !tookDown(h, p.Area) {
				out := append(append([]string{}, p.BuildError.Output...), p.Output...)
				m := p.Name + " " + p.Failure
				s.add(JUnitCase{Name: CaseName("(package)", host), Classname: ClassName(host, p.Area), Time: "0.000",
					Error: &JUnitResult{Message: m, Type: typeNotJudged, Body: body(m, "", nil, out)}}, string(Fail), nil, nil)
			}
		}
		for _, rq := range h.Reqs {
			if rq.takenDown() {
				// Its package failed before any test of it ran (a build
				// error): one case per requirement, as summary counts it.
				s := suite(rq.Area, "")
				var out []string
				for _, p := range h.pkgs {
					if p.Area == rq.Area {
						out = append(append(out, p.BuildError.Output...), p.Output...)
					}
				}
				m := rq.ID + " " + rq.Level + " on " + host + ": " + rq.Reason
				s.add(JUnitCase{Name: CaseName(rq.ID+" (package failed)", host), Classname: ClassName(host, rq.Area), Time: "0.000",
					Error: &JUnitResult{Message: clean(m), Type: typeNotJudged, Body: body(m, "", nil, out)}}, string(Fail),
					map[string]string{"gdr.req": rq.ID, "gdr.level": rq.Level}, nil)
				continue
			}
			if rq.Status != NotRun {
				continue
			}
			s := suite(rq.Area, "")
			m := rq.ID + " " + rq.Level + " on " + host + ": " + rq.Reason
			if !strings.HasPrefix(rq.Reason, "not run") && !strings.HasPrefix(rq.Reason, notInSuite) {
				m = rq.ID + " " + rq.Level + " on " + host + ": not run: " + rq.Reason
			}
			s.add(JUnitCase{Name: CaseName(rq.ID+" (not run)", host), Classname: ClassName(host, rq.Area), Time: "0.000",
				Skipped: &JUnitResult{Message: m, Body: body(m, "", nil, nil)}}, string(Skip),
				map[string]string{"gdr.req": rq.ID, "gdr.level": rq.Level}, nil)
		}
		for i, e := range h.runErrs {
			s := suite("run", "")
			name := "(run)"
			if i > 0 {
				name = fmt.Sprintf("(run %d)", i+1)
			}
			s.add(JUnitCase{Name: CaseName(name, host), Classname: ClassName(host, "run"), Time: "0.000",
				Error: &JUnitResult{Message: firstOf(e), Type: typeNotJudged, Body: body(firstOf(e), "", nil, splitLines(e))}}, string(Fail), nil, nil)
		}
		for _, a := range order {
			s := areas[a]
			if h.Earlier {
				supersede(s)
			}
			s.Time = duration(total[a])
			for i := range s.Props {
				s.Props[i].Value = clean(s.Props[i].Value)
			}
			s.Out = cdata(clean(strings.Join(s.out, "\n")))
			doc.Suites = append(doc.Suites, s.JUnitSuite)
		}
	}
	r.appendClusterSuites(&doc)
	return doc
}

// supersede makes an earlier run's failures and errors skips: a later run
// of the host judges (MergeRuns), and CI must not turn red for a run that
// was repeated. The skip's message says so (the Ant schema allows no type
// on <skipped>).
func supersede(s *junitSuite) {
	for i := range s.Cases {
		c := &s.Cases[i]
		r := c.Failure
		if r == nil {
			r = c.Error
		}
		if r == nil {
			continue
		}
		c.Failure, c.Error = nil, nil
		c.Skipped = &JUnitResult{Message: "superseded by a later run of this host: " + r.Message, Body: r.Body}
	}
	s.Failures, s.Errors, s.Skipped = 0, 0, len(s.Cases)-passed(s.Cases)
}

func passed(cs []JUnitCase) int {
	n := 0
	for _, c := range cs {
		if c.Failure == nil && c.Error == nil && c.Skipped == nil {
			n++
		}
	}
	return n
}

// junitSuite is a suite being built: its system-out's lines so far.
type junitSuite struct {
	JUnitSuite
	out []string
}

// add counts the case and writes its block (result, properties and
// output) into the suite's system-out.
func (s *junitSuite) add(tc JUnitCase, result string, attrs map[string]string, output []string) {
	s.Cases = append(s.Cases, tc)
	s.Tests++
	switch {
	case tc.Failure != nil:
		s.Failures++
	case tc.Error != nil:
		s.Errors++
	case tc.Skipped != nil:
		s.Skipped++
	}
	s.out = append(s.out, caseMark+tc.Name, resultMark+result)
	s.out = append(s.out, propLines(attrs)...)
	s.out = append(s.out, output...)
}

func propLines(attrs map[string]string) []string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, propLine(k, attrs[k]))
	}
	return out
}

// body is a result's text: the message, then the remedy, first, because
// GitLab shows the body and drops the message; a blank line; then the
// evidence: the case's properties and its output.
func body(msg, remedy string, attrs map[string]string, output []string) string {
	lines := []string{msg}
	if remedy != "" {
		lines = append(lines, "remedy: "+remedy)
	}
	ev := append(propLines(attrs), output...)
	if len(ev) > 0 {
		lines = append(append(lines, ""), ev...)
	}
	return clean(strings.Join(lines, "\n")) + "\n"
}

// caseOf is a counted case's JUnit case. Its message names requirement,
// level, host, the measured value against its threshold, and the cause; a
// report-only requirement's failure is a skip; a failure the suite could
// not judge (gdr.outcome=not_judged) an error. attrs are the case's with
// its level added.
func caseOf(c *Case, host string, fleet bool) (tc JUnitCase, attrs map[string]string) {
	name := c.Name
	if rd := roundOf(c.Package); rd != "" {
		name += " (" + rd + ")" // a cluster run: the same test once per round
	}
	tc = JUnitCase{Name: clean(CaseName(name, host)), Classname: clean(ClassName(host, c.Area)), Time: duration(c.Duration)}
	subject := name + " on " + host
	level := ""
	if rq, ok := reqs.Lookup(c.Req); ok {
		level = string(rq.Level)
		subject = rq.ID + " " + level + " on " + host
	}
	attrs = c.Attrs
	if level != "" && attrs["gdr.level"] == "" {
		attrs = withAttr(attrs, "gdr.level", level)
	}
	switch c.Status() {
	case Pass:
	case Skip:
		m := subject + ": " + c.Message
		ev, out := attrs, c.Output
		if fleet {
			ev, out = nil, nil // a fleet's skips: the reason; the evidence is in the suite's case block
		}
		tc.Skipped = &JUnitResult{Message: clean(m), Body: body(m, "", ev, out)}
	default:
		cause, remedy := c.CauseAndRemedy()
		if c.Part != nil {
			attrs = withAttr(attrs, "gdr.part", c.Part.String())
		}
		what := cause
		if m := measured(c); m != "" {
			what = m + ": " + cause
		}
		m := subject + ": " + what
		switch {
		case level == string(reqs.ReportOnly):
			m = "report-only, not met: " + c.Req + " on " + host + ": " + what
			tc.Skipped = &JUnitResult{Message: clean(m), Body: body(m, remedy, attrs, c.Output)} // its block says it failed
		case c.Outcome == OutcomeNotJudged:
			tc.Error = &JUnitResult{Message: clean(m), Type: typeNotJudged, Body: body(m, remedy, attrs, c.Output)}
		case c.Outcome == OutcomeDidNotFinish:
			tc.Error = &JUnitResult{Message: clean(m), Type: typeDidNotFinish, Body: body(m, remedy, attrs, c.Output)}
		default:
			tc.Failure = &JUnitResult{Message: clean(m), Type: typeFellShort, Body: body(m, remedy, attrs, c.Output)}
		}
	}
	return tc, attrs
}

func withAttr(a map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(a)+1)
	for key, val := range a {
		out[key] = val
	}
	out[k] = v
	return out
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

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	doc := r.JUnit()
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "\t")
	if err := enc.Encode(doc); err != nil {
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
