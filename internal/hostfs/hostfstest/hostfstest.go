// Package hostfstest builds small host trees for unit tests: the one
// helper behind the tests that need a few sysfs, /proc or /etc files under
// a hostfs.Root (fixtures/ holds the full recorded and generated trees), and
// the copy of such a tree a test may change.
package hostfstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Tree writes files (host path -> content; a path ending in "/" is an
// empty directory) under a temporary directory and returns a Root on it.
func Tree(t testing.TB, files map[string]string) *hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, "/") {
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
