// Package configtest holds the checks that every parser of GDR_* variables
// (internal/config's for the suite, cluster's for N-host runs) must pass, so
// both are held to the same rules.
package configtest

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Env is a lookup over the given name, value pairs.
func Env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Malformed is one bad value of a variable: Kind says what is wrong with it
// (garbage, out of range, wrong unit, huge), Want what the error must say.
type Malformed struct{ Name, Kind, Val, Want string }

// CheckMalformed parses each case's value alone: no panic, an error naming
// the variable and saying Want, under 600 bytes whatever the value, quoting
// the value or a short prefix of it (a secret's: none of it). Every variable
// of vars has a huge case and at least one other, except the secrets (only
// their length is capped: the huge case alone) and those in unchecked.
func CheckMalformed(t *testing.T, parse func(lookup func(string) (string, bool)) error, cases []Malformed, vars, secrets, unchecked []string) {
	t.Helper()
	covered := map[string]map[string]bool{}
	for _, tc := range cases {
		if covered[tc.Name] == nil {
			covered[tc.Name] = map[string]bool{}
		}
		covered[tc.Name][tc.Kind] = true
		t.Run(tc.Name+" "+tc.Kind+" "+clip.Quote(tc.Val), func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = parse(Env(tc.Name, tc.Val)) })
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, tc.Name)
			assert.Contains(t, msg, tc.Want)
			assert.Less(t, len(msg), 600, "a short message, whatever the value: %s", msg)
			if slices.Contains(secrets, tc.Name) {
				assert.NotContains(t, msg, tc.Val[:8], "a secret is never quoted")
			} else {
				assert.Contains(t, msg, clip.Quote(strings.TrimSpace(tc.Val)), "the value, or a short prefix of it")
			}
		})
	}
	for _, v := range vars {
		if slices.Contains(unchecked, v) {
			continue
		}
		assert.True(t, covered[v]["huge"], "%s has no huge-value case", v)
		if !slices.Contains(secrets, v) {
			assert.GreaterOrEqual(t, len(covered[v]), 2, "%s needs more malformed cases", v)
		}
	}
}

// DocsDocument checks that the configuration table of the manual page at
// path (between <!-- config:begin --> and <!-- config:end -->, in
// docs/configuration.md) names every one of vars.
func DocsDocument(t *testing.T, path string, vars []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, "<!-- config:begin -->"), strings.Index(s, "<!-- config:end -->")
	require.True(t, i >= 0 && j > i, "%s lacks the configuration table markers", path)
	for _, v := range vars {
		assert.Contains(t, s[i:j], "`"+v+"`", "%s's configuration table does not document %s", path, v)
	}
}
