package junitcheck

// The two schemas' rules re-stated from reading them, for where the XSD
// files are not at hand: they are public material that the project may not
// commit (they live in the steering repository's shared/junit-xsd/, which
// not every machine has; SOURCES.md), so a machine without them still
// checks every file it writes, by these rules, and says which check ran
// (Method). Where both XSDs and xmllint are present, Check validates with
// them instead, and TestRestatedAgreesWithTheSchemas holds these rules to
// the schemas' verdicts on the same files.
//
//   - Jenkins xUnit's junit-10.xsd: github.com/jenkinsci/xunit-plugin,
//     src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd
//   - the Apache Ant JUnit schema: github.com/windyroad/JUnit-Schema, JUnit.xsd

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// xnode is an element of a parsed file.
type xnode struct {
	name  string
	attrs map[string]string
	order []string // attribute names as written
	kids  []*xnode
	text  string // character data directly inside
}

func parseTree(b []byte) (*xnode, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	var stack []*xnode
	var root *xnode
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &xnode{name: t.Name.Local, attrs: map[string]string{}}
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" {
					continue
				}
				n.attrs[a.Name.Local] = a.Value
				n.order = append(n.order, a.Name.Local)
			}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.kids = append(p.kids, n)
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(t)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("no root element")
	}
	return root, nil
}

// schemaCheck gathers violations, each with the element's path.
type schemaCheck struct {
	schema string
	errs   []string
}

func (c *schemaCheck) fail(path, f string, a ...any) {
	c.errs = append(c.errs, c.schema+": "+path+": "+fmt.Sprintf(f, a...))
}

// attrs checks that n has the required attributes and no others.
func (c *schemaCheck) attrs(path string, n *xnode, required, optional []string) {
	ok := map[string]bool{}
	for _, a := range append(append([]string{}, required...), optional...) {
		ok[a] = true
	}
	for _, a := range n.order {
		if !ok[a] {
			c.fail(path, "attribute %q is not allowed on <%s>", a, n.name)
		}
	}
	for _, a := range required {
		if _, has := n.attrs[a]; !has {
			c.fail(path, "<%s> lacks the required attribute %q", n.name, a)
		}
	}
}

// textOnly: an element of simple or mixed content with no element model.
func (c *schemaCheck) textOnly(path string, n *xnode) {
	for _, k := range n.kids {
		c.fail(path, "<%s> holds an element <%s>; it allows text only", n.name, k.name)
	}
}

// noText: an element of element-only content.
func (c *schemaCheck) noText(path string, n *xnode) {
	if strings.TrimSpace(n.text) != "" {
		c.fail(path, "<%s> holds text; it allows elements only", n.name)
	}
}

func (c *schemaCheck) kidsIn(path string, n *xnode, allowed ...string) {
	for _, k := range n.kids {
		if !slices.Contains(allowed, k.name) {
			c.fail(path, "<%s> is not allowed in <%s>", k.name, n.name)
		}
	}
}

func (c *schemaCheck) typed(path string, n *xnode, attr string, ok func(string) bool, what string) {
	if v, has := n.attrs[attr]; has && !ok(v) {
		c.fail(path, "%s=%q is not %s", attr, v, what)
	}
}

var (
	// junit-10.xsd's SUREFIRE_TIME pattern (XSD patterns match the whole value).
	surefireTime = regexp.MustCompile(`^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]{0,3})?$`)
	xsDecimal    = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)
	// Ant's ISO8601_DATETIME_PATTERN, a restriction of xs:dateTime.
	antDateTime = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$`)
)

func isInt(v string) bool {
	_, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32) // xs:int is 32 bits
	return err == nil
}

func isDecimal(v string) bool { return xsDecimal.MatchString(strings.TrimSpace(v)) }

func isAntTimestamp(v string) bool {
	v = strings.TrimSpace(v)
	if !antDateTime.MatchString(v) {
		return false
	}
	_, err := time.Parse("2006-01-02T15:04:05", v) // a real date and time, as xs:dateTime requires
	return err == nil
}

// nonEmptyToken: xs:token with minLength 1, measured after whitespace collapse.
func nonEmptyToken(v string) bool { return len(strings.Fields(v)) > 0 }

// restatedJUnit10 checks a file against junit-10.xsd's rules as re-stated
// here: the rules it breaks, none when it is valid.
func restatedJUnit10(b []byte) []string {
	c := &schemaCheck{schema: JUnit10.Name}
	root, err := parseTree(b)
	if err != nil {
		return []string{c.schema + ": " + err.Error()}
	}
	switch root.name {
	case "testsuites":
		// <testsuites>: a sequence of testsuite; name, time, tests,
		// failures, errors, all optional, and no others (no skipped).
		c.attrs("testsuites", root, nil, []string{"name", "time", "tests", "failures", "errors"})
		c.typed("testsuites", root, "time", surefireTime.MatchString, "SUREFIRE_TIME")
		c.noText("testsuites", root)
		c.kidsIn("testsuites", root, "testsuite")
		for i, s := range root.kids {
			if s.name == "testsuite" {
				c.junit10Suite(fmt.Sprintf("testsuite[%d]", i), s)
			}
		}
	case "testsuite":
		c.junit10Suite("testsuite", root)
	default:
		c.fail("/", "root <%s> is not declared", root.name)
	}
	return c.errs
}

func (c *schemaCheck) junit10Suite(path string, s *xnode) {
	c.attrs(path, s, []string{"name", "tests", "failures", "errors"},
		[]string{"group", "time", "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url", "version"})
	c.typed(path, s, "time", surefireTime.MatchString, "SUREFIRE_TIME")
	c.noText(path, s)
	// A choice, any order and number, of these.
	c.kidsIn(path, s, "testsuite", "properties", "testcase", "system-out", "system-err")
	for i, k := range s.kids {
		p := fmt.Sprintf("%s/%s[%d]", path, k.name, i)
		switch k.name {
		case "testsuite":
			c.junit10Suite(p, k)
		case "properties":
			c.properties(p, k, func(string) bool { return true })
		case "testcase":
			c.attrs(p, k, []string{"name"}, []string{"time", "classname", "group"})
			c.noText(p, k)
			// No properties in a case.
			c.kidsIn(p, k, "skipped", "error", "failure", "rerunFailure", "rerunError", "flakyFailure", "flakyError", "system-out", "system-err")
			for j, r := range k.kids {
				rp := fmt.Sprintf("%s/%s[%d]", p, r.name, j)
				switch r.name {
				case "skipped", "error", "failure":
					c.attrs(rp, r, nil, []string{"type", "message"})
					c.textOnly(rp, r)
				case "system-out", "system-err":
					c.attrs(rp, r, nil, nil)
					c.textOnly(rp, r)
				default: // rerunType
					c.attrs(rp, r, []string{"type"}, []string{"message"})
					c.kidsIn(rp, r, "stackTrace", "system-out", "system-err")
				}
			}
		case "system-out", "system-err":
			c.attrs(p, k, nil, nil)
			c.textOnly(p, k)
		}
	}
}

// properties: property elements only, each with name and value and nothing else.
func (c *schemaCheck) properties(path string, n *xnode, nameOK func(string) bool) {
	c.attrs(path, n, nil, nil)
	c.noText(path, n)
	c.kidsIn(path, n, "property")
	for i, p := range n.kids {
		pp := fmt.Sprintf("%s/property[%d]", path, i)
		c.attrs(pp, p, []string{"name", "value"}, nil)
		c.typed(pp, p, "name", nameOK, "a non-empty token")
		for _, k := range p.kids {
			c.fail(pp, "<property> holds <%s>", k.name)
		}
	}
}

// restatedAnt checks a file against the Ant JUnit schema's rules as
// re-stated here (an aggregated <testsuites> document, which is what the
// report writes).
func restatedAnt(b []byte) []string {
	c := &schemaCheck{schema: Ant.Name}
	root, err := parseTree(b)
	if err != nil {
		return []string{c.schema + ": " + err.Error()}
	}
	if root.name != "testsuites" {
		c.fail("/", "root is <%s>, not <testsuites>", root.name)
		return c.errs
	}
	// <testsuites> declares no attributes at all.
	c.attrs("testsuites", root, nil, nil)
	c.noText("testsuites", root)
	c.kidsIn("testsuites", root, "testsuite")
	for i, s := range root.kids {
		if s.name != "testsuite" {
			continue
		}
		p := fmt.Sprintf("testsuite[%d]", i)
		// The testsuite type, extended inside testsuites by package and id.
		c.attrs(p, s, []string{"name", "timestamp", "hostname", "tests", "failures", "errors", "time", "package", "id"}, []string{"skipped"})
		c.typed(p, s, "name", nonEmptyToken, "a non-empty token")
		c.typed(p, s, "hostname", nonEmptyToken, "a non-empty token")
		c.typed(p, s, "timestamp", isAntTimestamp, "an ISO 8601 date and time without zone (YYYY-MM-DDTHH:MM:SS)")
		for _, a := range []string{"tests", "failures", "errors", "skipped", "id"} {
			c.typed(p, s, a, isInt, "an xs:int")
		}
		c.typed(p, s, "time", isDecimal, "an xs:decimal")
		c.noText(p, s)
		// A sequence: properties once, testcase any number, system-out
		// once, system-err once, in this order.
		var seq []string
		for _, k := range s.kids {
			seq = append(seq, k.name)
		}
		if !antSuiteSeq.MatchString(strings.Join(seq, " ") + " ") {
			c.fail(p, "children %v are not: properties, testcase*, system-out, system-err", seq)
		}
		for j, k := range s.kids {
			kp := fmt.Sprintf("%s/%s[%d]", p, k.name, j)
			switch k.name {
			case "properties":
				c.properties(kp, k, nonEmptyToken)
			case "testcase":
				c.antCase(kp, k)
			case "system-out", "system-err":
				c.attrs(kp, k, nil, nil)
				c.textOnly(kp, k)
			}
		}
	}
	return c.errs
}

var antSuiteSeq = regexp.MustCompile(`^properties (testcase )*system-out system-err $`)

func (c *schemaCheck) antCase(p string, k *xnode) {
	c.attrs(p, k, []string{"name", "classname", "time"}, nil)
	c.typed(p, k, "time", isDecimal, "an xs:decimal")
	c.noText(p, k)
	// At most one of skipped, error, failure; nothing else (no
	// properties, no system-out).
	c.kidsIn(p, k, "skipped", "error", "failure")
	if len(k.kids) > 1 {
		c.fail(p, "<testcase> holds %d results; at most one", len(k.kids))
	}
	for j, r := range k.kids {
		rp := fmt.Sprintf("%s/%s[%d]", p, r.name, j)
		switch r.name {
		case "error", "failure": // simple content: text, message, type required
			c.attrs(rp, r, []string{"type"}, []string{"message"})
			c.textOnly(rp, r)
		case "skipped": // message only (the schema's skipped has no type)
			c.attrs(rp, r, nil, []string{"message"})
			c.textOnly(rp, r)
		}
	}
}
