package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/junit"

	"github.com/gdrconf/gdrconf/internal/reqs"
)

// JUnit types. go-junit-report v2.1.0's junit.Testcase has no properties
// (its Testsuite has), so Testcase embeds theirs and adds them; Testsuite and
// Testsuites embed theirs for every attribute and the suite properties, and
// hold our testcases in their place (a field of the outer struct shadows the
// embedded one of the same XML name).
type (
	Testcase struct {
		XMLName    xml.Name          `xml:"testcase"`
		Properties *[]junit.Property `xml:"properties>property,omitempty"`
		junit.Testcase
	}
	Testsuite struct {
		XMLName xml.Name `xml:"testsuite"`
		junit.Testsuite
		Testcases []Testcase    `xml:"testcase,omitempty"`
		SystemOut *junit.Output `xml:"system-out,omitempty"`
	}
	Testsuites struct {
		XMLName xml.Name `xml:"testsuites"`
		junit.Testsuites
		Suites []Testsuite `xml:"testsuite,omitempty"`
	}
)

// JUnit is a JUnit file as its readers see it: ReadJUnit (gotestsum's
// files, or this package's) and the tests that check what CI systems read.
// The types above write; these read, with every result kind gotestsum uses.
type JUnit struct {
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one testsuite read back.
type JUnitSuite struct {
	Name     string          `xml:"name,attr"`
	Hostname string          `xml:"hostname,attr"`
	Tests    int             `xml:"tests,attr"`
	Failures int             `xml:"failures,attr"`
	Skipped  int             `xml:"skipped,attr"`
	Props    []JUnitProperty `xml:"properties>property"`
	Cases    []JUnitCase     `xml:"testcase"`
}

// JUnitCase is one testcase read back; at most one of Failure, Error and
// Skipped is set (none: it passed).
type JUnitCase struct {
	Name      string          `xml:"name,attr"`
	Classname string          `xml:"classname,attr"`
	Time      string          `xml:"time,attr"`
	Props     []JUnitProperty `xml:"properties>property"`
	Failure   *JUnitResult    `xml:"failure"`
	Error     *JUnitResult    `xml:"error"`
	Skipped   *JUnitResult    `xml:"skipped"`
	Out       string          `xml:"system-out"`
}

// JUnitProperty is a suite's or a case's property.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitResult is a failure, error or skip: its one-line message and its body.
type JUnitResult struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// ParseJUnit reads a JUnit file.
func ParseJUnit(r io.Reader) (JUnit, error) {
	var doc JUnit
	err := xml.NewDecoder(r).Decode(&doc)
	return doc, err
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
	add("gdr.suite_version", id.Suite)
	add("gdr.strict", strconv.FormatBool(id.Strict))
	add("gdr.role", id.Role)
	add("gdr.peer", id.Peer)
	add("gdr.verdict", h.Verdict.Line)
	return p
}

func duration(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// JUnit builds the JUnit document: one suite per host and area, one case per
// counted test (one per requirement and device), requirements that did not
// run at all as skipped cases, failures outside any test as failed cases.
func (r *Report) JUnit() Testsuites {
	var doc Testsuites
	id := 0
	for _, h := range r.Hosts {
		host := h.Identity.Host
		areas := map[string]*Testsuite{}
		var order []string
		suite := func(area, pkg string) *Testsuite {
			s := areas[area]
			if s == nil {
				s = &Testsuite{Testsuite: junit.Testsuite{Name: SuiteName(host, area), Hostname: host, ID: id, Package: pkg}}
				id++
				for _, p := range hostProperties(h) {
					s.AddProperty(p.Name, p.Value)
				}
				if pkg != "" {
					s.AddProperty("gdr.package", pkg)
				}
				areas[area] = s
				order = append(order, area)
			}
			return s
		}
		total := map[string]time.Duration{}
		for _, p := range h.pkgs {
			s := suite(p.Area, p.Name)
			if len(p.Output) > 0 {
				s.SystemOut = &junit.Output{Data: clean(strings.Join(p.Output, "\n"))}
			}
			for _, c := range p.Cases {
				if c.Parent == nil {
					total[p.Area] += c.Duration
				}
				if c.Counted {
					s.add(caseOf(c))
				}
			}
			if p.Failure != "" {
				s.add(Testcase{Testcase: junit.Testcase{Name: CaseName("(package)", host), Classname: ClassName(host, p.Area), Time: "0.000",
					Failure: &junit.Result{Message: p.Name + " " + p.Failure, Data: clean(strings.Join(append(p.BuildError.Output, p.Output...), "\n"))}}})
			}
		}
		for _, rq := range h.Reqs {
			if rq.Status != NotRun {
				continue
			}
			s := suite(rq.Area, "")
			props := []junit.Property{{Name: "gdr.req", Value: rq.ID}, {Name: "gdr.level", Value: rq.Level}}
			s.add(Testcase{Properties: &props, Testcase: junit.Testcase{Name: CaseName(rq.ID+" (not run)", host), Classname: ClassName(host, rq.Area),
				Time: "0.000", Skipped: &junit.Result{Message: rq.Reason}}})
		}
		for i, e := range h.runErrs {
			s := suite("run", "")
			name := "(run)"
			if i > 0 {
				name = fmt.Sprintf("(run %d)", i+1)
			}
			s.add(Testcase{Testcase: junit.Testcase{Name: CaseName(name, host), Classname: ClassName(host, "run"), Time: "0.000",
				Failure: &junit.Result{Message: firstOf(e), Data: e}}})
		}
		for _, a := range order {
			s := areas[a]
			s.Time = duration(total[a])
			doc.add(*s)
		}
	}
	r.appendClusterSuites(&doc)
	return doc
}

func (s *Testsuite) add(tc Testcase) {
	s.Testcases = append(s.Testcases, tc)
	s.Tests++
	switch {
	case tc.Failure != nil:
		s.Failures++
	case tc.Error != nil:
		s.Errors++
	case tc.Skipped != nil:
		s.Skipped++
	}
}

func (d *Testsuites) add(s Testsuite) {
	d.Suites = append(d.Suites, s)
	d.Tests += s.Tests
	d.Failures += s.Failures
	d.Errors += s.Errors
	d.Skipped += s.Skipped
}

func caseOf(c *Case) Testcase {
	name := c.Name
	if rd := roundOf(c.Package); rd != "" {
		name += " (" + rd + ")" // a cluster run: the same test once per round
	}
	tc := Testcase{Testcase: junit.Testcase{Name: CaseName(name, c.Host), Classname: ClassName(c.Host, c.Area), Time: duration(c.Duration)}}
	keys := make([]string, 0, len(c.Attrs))
	for k := range c.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	props := make([]junit.Property, 0, len(keys)+1)
	for _, k := range keys {
		props = append(props, junit.Property{Name: k, Value: c.Attrs[k]})
	}
	if rq, ok := reqs.Lookup(c.Req); ok {
		props = append(props, junit.Property{Name: "gdr.level", Value: string(rq.Level)})
	}
	if len(props) > 0 {
		tc.Properties = &props
	}
	out := clean(strings.Join(c.Output, "\n"))
	switch c.Status() {
	case Pass:
		if out != "" {
			tc.SystemOut = &junit.Output{Data: out}
		}
	case Skip:
		tc.Skipped = &junit.Result{Message: c.Message, Data: out}
	default:
		tc.Failure = &junit.Result{Message: c.Message, Data: out}
	}
	return tc
}

// clean replaces characters XML 1.0 cannot carry.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF {
			return r
		}
		return '\uFFFD'
	}, s)
}

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
