// Package junitcheck validates a JUnit file against the two XSDs that CI
// systems validate JUnit with, using the schemas themselves and libxml2's
// validator (xmllint), and adds the few checks no schema can express. The
// report's tests check every file it writes; the labs check the files they
// wrote.
//
// The schema files are not part of this repository (SOURCES.md says where
// each comes from, at which commit, under which licence): they are looked
// for in $GDR_JUNIT_XSD_DIR and in shared/junit-xsd beside the checkout
// (where CI and every developer's machine have the project's shared/), and
// must be byte for byte the pinned versions (their SHA-256 below).
package junitcheck

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Schema is one XSD and where it comes from.
type Schema struct {
	Name   string // how problems name it
	File   string // its file name in the schema folder
	Source string // repository, path and commit (SOURCES.md)
	SHA256 string // of the pinned file
}

var (
	// JUnit10 is Jenkins xUnit's junit-10.xsd (MIT).
	JUnit10 = Schema{Name: "junit-10.xsd", File: "junit-10.xsd",
		Source: "github.com/jenkinsci/xunit-plugin src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd @ ae25da5089d4f94ac6c4669bf736e4d416cc4665",
		SHA256: "a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6"}
	// Ant is the Apache Ant JUnit schema as Windy Road publishes it (Apache 2.0).
	Ant = Schema{Name: "the Ant JUnit schema", File: "JUnit.xsd",
		Source: "github.com/windyroad/JUnit-Schema JUnit.xsd @ cfa434d4b8e102a8f55b8727b552a0063ee9044e",
		SHA256: "147ff89ef34a82f9a1b2951e7cad251b98c9a7a48a0e0c8e44937141791f57a8"}
	// Schemas are both, in the order problems are reported.
	Schemas = []Schema{JUnit10, Ant}
)

// DirEnv names a folder holding the schema files, ahead of the places
// looked in by default.
const DirEnv = "GDR_JUNIT_XSD_DIR"

// Find returns the folder that holds both schema files as pinned, or an
// error naming what is missing and every place looked in.
func Find() (string, error) {
	var looked, bad []string
	var places []string
	if d := os.Getenv(DirEnv); d != "" {
		places = append(places, d)
	} else {
		looked = append(looked, "$"+DirEnv+" (unset)")
	}
	if root, err := moduleRoot(); err == nil {
		places = append(places, filepath.Join(filepath.Dir(root), "shared", "junit-xsd"))
	} else {
		looked = append(looked, err.Error())
	}
	for _, d := range places {
		err := pinned(d)
		if err == nil {
			return d, nil
		}
		looked = append(looked, d)
		if !errors.Is(err, os.ErrNotExist) {
			bad = append(bad, err.Error())
		}
	}
	msg := fmt.Sprintf("the JUnit schemas %s and %s are not found: looked in %s (report/junitcheck/SOURCES.md says where each comes from)",
		JUnit10.File, Ant.File, strings.Join(looked, ", "))
	if len(bad) > 0 {
		msg += "; " + strings.Join(bad, "; ")
	}
	return "", errors.New(msg)
}

// pinned checks that dir holds both schemas as pinned.
func pinned(dir string) error {
	for _, s := range Schemas {
		b, err := os.ReadFile(filepath.Join(dir, s.File))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != s.SHA256 {
			return fmt.Errorf("%s has SHA-256 %s, not the pinned %s of %s", filepath.Join(dir, s.File), got, s.SHA256, s.Source)
		}
	}
	return nil
}

// moduleRoot is the folder of the go.mod at or above the working directory:
// tests run in their package's folder, the lab in the checkout's root.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", wd)
		}
	}
}

// xmllint is the validator's path, or an error saying how to get it.
func xmllint() (string, error) {
	p, err := exec.LookPath("xmllint")
	if err != nil {
		return "", fmt.Errorf("xmllint is not in PATH (libxml2's validator: make deps-unit installs libxml2-utils)")
	}
	return p, nil
}

// Ready says whether files can be checked here: xmllint and both schemas
// are present. Its error names what is missing and where it was looked for.
func Ready() error {
	_, lintErr := xmllint()
	_, dirErr := Find()
	return errors.Join(lintErr, dirErr)
}

// TB is what Need uses of a *testing.T.
type TB interface {
	Helper()
	Fatal(args ...any)
	Skip(args ...any)
}

// Need ends a test that needs the XSDs themselves (their own verdicts, not
// the re-stated rules): a skip naming what is missing and where it was
// looked for. Under CI (CI set) a missing xmllint fails, since the
// project's setup installs it; the schema files are data from outside the
// repository (SOURCES.md), so their absence skips there too, and Check
// falls back to the re-stated rules.
func Need(t TB) {
	t.Helper()
	if _, err := xmllint(); err != nil && os.Getenv("CI") != "" {
		t.Fatal(err)
		return
	}
	if err := Ready(); err != nil {
		t.Skip(err)
	}
}

// Method says which check Check runs here: "the XSDs through xmllint", or
// the re-stated rules and why.
func Method() string {
	if err := Ready(); err != nil {
		return "the schemas' rules as re-stated in restated.go (" + err.Error() + ")"
	}
	return "junit-10.xsd and JUnit.xsd through xmllint"
}

// Against validates b against one schema with xmllint: the schema's
// complaints, none when b is valid; an error when it could not check.
func Against(s Schema, b []byte) ([]string, error) {
	lint, err := xmllint()
	if err != nil {
		return nil, err
	}
	dir, err := Find()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(lint, "--noout", "--nonet", "--schema", filepath.Join(dir, s.File), "-")
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("xmllint: %v", err)
	}
	var out []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "- validates" || l == "- fails to validate" {
			continue
		}
		out = append(out, s.Name+": "+strings.TrimPrefix(l, "-:"))
	}
	// xmllint exits 3 for an invalid file and 1 for one that does not
	// parse (both with messages); 4 and 5 when the schema itself failed.
	switch {
	case err == nil:
		return out, nil
	case exit.ExitCode() == 4 || exit.ExitCode() == 5:
		return nil, fmt.Errorf("xmllint could not use %s (exit %d): %s", s.File, exit.ExitCode(), strings.Join(out, "; "))
	case len(out) == 0:
		out = []string{fmt.Sprintf("%s: xmllint exited %d", s.Name, exit.ExitCode())}
	}
	return out, nil
}

// Check validates b against both schemas and then the rules no schema
// can express (Beyond): every problem, prefixed with what it breaks; none
// when b is good. With xmllint and both XSDs at hand it validates with
// them; without, with the re-stated rules (Method says which). An error
// means it could not check: never read as valid.
func Check(b []byte) ([]string, error) {
	if Ready() != nil {
		out := append(restatedJUnit10(b), restatedAnt(b)...)
		return append(out, Beyond(b)...), nil
	}
	var out []string
	for _, s := range Schemas {
		p, err := Against(s, b)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return append(out, Beyond(b)...), nil
}

// Beyond checks what the schemas cannot express and CI systems rely on,
// each rule saying why:
//
//   - Case keys are unique: GitLab keys a case by its suite's name,
//     classname and name (gitlabhq lib/gitlab/ci/reports/test_case.rb,
//     hash_key) and keeps one case per key, dropping the others unseen;
//     neither schema declares a uniqueness constraint.
//   - A suite's tests, failures, errors and skipped count its cases:
//     Jenkins and GitLab count the cases themselves, but a reader that
//     shows the attributes (Ant's junitreport) would show other numbers;
//     an XSD cannot relate an attribute to the elements beside it.
//   - Suite ids are 0, 1, 2, ... in order: the Ant schema says so in the
//     annotation of id, which an XSD type cannot enforce.
func Beyond(b []byte) []string {
	type result struct {
		XMLName xml.Name
	}
	type tcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Results   []result `xml:",any"`
	}
	type suite struct {
		Name     string  `xml:"name,attr"`
		ID       *string `xml:"id,attr"`
		Tests    string  `xml:"tests,attr"`
		Failures string  `xml:"failures,attr"`
		Errors   string  `xml:"errors,attr"`
		Skipped  string  `xml:"skipped,attr"`
		Cases    []tcase `xml:"testcase"`
	}
	var doc struct {
		Suites []suite `xml:"testsuite"`
	}
	if err := xml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && err != io.EOF {
		return []string{"does not parse: " + err.Error()}
	}
	var out []string
	keys := map[string]bool{}
	for i, s := range doc.Suites {
		where := fmt.Sprintf("testsuite[%d] %q", i, s.Name)
		if s.ID != nil && *s.ID != fmt.Sprint(i) {
			out = append(out, fmt.Sprintf("%s: id=%q where the Ant schema numbers suites 0, 1, ... in order (%d)", where, *s.ID, i))
		}
		var n [4]int // tests, failures, errors, skipped
		for _, c := range s.Cases {
			k := s.Name + "\x00" + c.Classname + "\x00" + c.Name
			if keys[k] {
				out = append(out, fmt.Sprintf("%s: a second case classname=%q name=%q: GitLab keeps one case per suite, classname and name", where, c.Classname, c.Name))
			}
			keys[k] = true
			n[0]++
			for _, r := range c.Results {
				switch r.XMLName.Local {
				case "failure":
					n[1]++
				case "error":
					n[2]++
				case "skipped":
					n[3]++
				}
			}
		}
		for j, a := range []struct{ name, v string }{{"tests", s.Tests}, {"failures", s.Failures}, {"errors", s.Errors}, {"skipped", s.Skipped}} {
			if (a.v != "" || n[j] > 0) && strings.TrimSpace(a.v) != fmt.Sprint(n[j]) {
				out = append(out, fmt.Sprintf("%s: %s=%q but it holds %d such cases", where, a.name, a.v, n[j]))
			}
		}
	}
	return out
}
