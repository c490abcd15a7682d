package junitcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A schema folder counts only with both files as pinned: an edited or
// other version is named with its digest, a missing one as missing.
func TestPinned(t *testing.T) {
	dir := t.TempDir()
	assert.ErrorIs(t, pinned(dir), os.ErrNotExist)
	for _, s := range Schemas {
		require.NoError(t, os.WriteFile(filepath.Join(dir, s.File), []byte("<xs:schema/>"), 0o644))
	}
	err := pinned(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not the pinned "+JUnit10.SHA256)
	assert.Contains(t, err.Error(), JUnit10.Source)
}

// fakeTB records how Need ended a test.
type fakeTB struct{ fatal, skip string }

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Fatal(args ...any) { f.fatal = fmt.Sprint(args...) }
func (f *fakeTB) Skip(args ...any)  { f.skip = fmt.Sprint(args...) }

// Without xmllint a test that validates skips naming it, and fails under
// CI; so does one without the schemas, naming where it looked.
func TestNeedSkipsLocallyFailsInCI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(DirEnv, t.TempDir())
	t.Setenv("CI", "")
	var local fakeTB
	Need(&local)
	assert.Empty(t, local.fatal)
	assert.Contains(t, local.skip, "xmllint is not in PATH")
	assert.Contains(t, local.skip, "make deps-unit")
	assert.Contains(t, local.skip, os.Getenv(DirEnv), "where the schemas were looked for")
	assert.Contains(t, local.skip, "junit-xsd")

	t.Setenv("CI", "true")
	var ci fakeTB
	Need(&ci)
	assert.Empty(t, ci.skip)
	assert.Contains(t, ci.fatal, "xmllint is not in PATH")

	// Without them a file is still checked, by the re-stated rules.
	problems, err := Check([]byte(`<testsuites><testsuite name="h/a" tests="1" failures="0" errors="0"><testcase name="x"><skipped type="t"/></testcase></testsuite></testsuites>`))
	require.NoError(t, err)
	assert.NotEmpty(t, problems)
	assert.Contains(t, Method(), "re-stated")
	assert.Contains(t, Method(), "xmllint is not in PATH")
}

// The re-stated rules, what a machine without the XSD files checks with,
// catch what the schemas reject in the files the report writes, each by the
// schema that forbids it.
func TestRestatedCatches(t *testing.T) {
	good := `<testsuites><testsuite name="h/a" timestamp="2026-12-04T10:00:00" hostname="h" tests="2" failures="1" errors="0" skipped="0" time="0.010" package="a" id="0"><properties><property name="p" value="v"></property></properties>` +
		`<testcase name="x" classname="h.a" time="0.010"><failure type="fell_short" message="m">body</failure></testcase>` +
		`<testcase name="y" classname="h.a" time="0.000"><skipped message="s"></skipped></testcase>` +
		`<system-out></system-out><system-err></system-err></testsuite></testsuites>`
	assert.Empty(t, restatedJUnit10([]byte(good)))
	assert.Empty(t, restatedAnt([]byte(good)))
	for _, c := range []struct {
		name, old, new string
		junit10, ant   bool // rejected by each
	}{
		{"a type on skipped (Ant allows message only)", `<skipped message="s">`, `<skipped type="report_only_not_met" message="s">`, false, true},
		{"properties inside a case", `<testcase name="x" classname="h.a" time="0.010">`, `<testcase name="x" classname="h.a" time="0.010"><properties></properties>`, true, true},
		{"no timestamp (Ant requires it)", ` timestamp="2026-12-04T10:00:00"`, ``, false, true},
		{"skipped on testsuites", `<testsuites>`, `<testsuites skipped="3">`, true, true},
		{"a zoned timestamp", `10:00:00"`, `10:00:00Z"`, false, true},
		{"a failure without type", ` type="fell_short"`, ``, false, true},
		{"output inside a case", `<failure type`, `<system-out>x</system-out><failure type`, false, true},
	} {
		if !strings.Contains(good, c.old) {
			t.Fatalf("%s: %q not in the file", c.name, c.old)
		}
		b := []byte(strings.Replace(good, c.old, c.new, 1))
		assert.Equal(t, c.junit10, len(restatedJUnit10(b)) > 0, "%s: junit-10 %q", c.name, restatedJUnit10(b))
		assert.Equal(t, c.ant, len(restatedAnt(b)) > 0, "%s: Ant %q", c.name, restatedAnt(b))
		if c.junit10 || c.ant {
			// The XSDs agree, where they are at hand.
			if Ready() == nil {
				for _, s := range Schemas {
					p, err := Against(s, b)
					require.NoError(t, err)
					want := map[string]bool{JUnit10.Name: c.junit10, Ant.Name: c.ant}[s.Name]
					assert.Equal(t, want, len(p) > 0, "%s: %s %q", c.name, s.Name, p)
				}
			}
		}
	}
}

// What no schema expresses: keys GitLab would collapse, counts that do not
// match the cases, suite ids out of order.
func TestBeyond(t *testing.T) {
	good := `<testsuites>
<testsuite name="h/a" tests="2" failures="1" errors="0" skipped="0" id="0"><testcase name="x" classname="h.a"/><testcase name="y" classname="h.a"><failure type="t"/></testcase></testsuite>
<testsuite name="h/a" tests="1" failures="0" errors="0" skipped="1" id="1"><testcase name="z" classname="h.a"><skipped/></testcase></testsuite>
</testsuites>`
	assert.Empty(t, Beyond([]byte(good)))
	bad := `<testsuites>
<testsuite name="h/a" tests="3" failures="0" errors="0" id="0"><testcase name="x" classname="h.a"/><testcase name="x" classname="h.a"><failure type="t"/></testcase></testsuite>
<testsuite name="h/a" tests="1" failures="0" errors="0" id="2"><testcase name="x" classname="h.b"><skipped/></testcase></testsuite>
</testsuites>`
	got := Beyond([]byte(bad))
	assert.Len(t, got, 5, "%q", got)
	for _, want := range []string{
		`a second case classname="h.a" name="x"`,
		`tests="3" but it holds 2`,
		`failures="0" but it holds 1`,
		`skipped="" but it holds 1`,
		`id="2" where the Ant schema numbers suites 0, 1, ... in order (1)`,
	} {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, want)
		}
		assert.True(t, found, "%s in %q", want, got)
	}
}
