package reqs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var idRe = regexp.MustCompile(`"((?:INST|TOPO|GPU|MREG|PP)-\d{2})"`)

// idsUsedIn scans the conformance tree for requirement IDs in Go sources.
func idsUsedIn(t *testing.T, dir string) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range idRe.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = append(used[m[1]], p)
		}
		return nil
	})
	require.NoError(t, err)
	return used
}

// Every ID a conformance test names is catalogued, and every catalogued ID
// is checked by some test: the README promises both.
func TestCatalogueMatchesConformanceTests(t *testing.T) {
	used := idsUsedIn(t, "../../conformance")
	for id, files := range used {
		_, ok := Lookup(id)
		assert.True(t, ok, "%s is used in %v but not registered in internal/reqs", id, files)
	}
	for _, r := range All() {
		assert.Contains(t, used, r.ID, "%s (%s) is registered but no conformance test checks it", r.ID, r.Title)
		assert.True(t, strings.HasPrefix(r.ID, prefix[r.Area]+"-"), "%s has area %s", r.ID, r.Area)
	}
}

var prefix = map[string]string{"install": "INST", "topology": "TOPO", "gpu": "GPU", "memreg": "MREG", "pingpong": "PP"}

const (
	beginMark = "<!-- requirements:begin (generated: UPDATE_README=1 go test ./internal/reqs) -->"
	endMark   = "<!-- requirements:end -->"
)

// The README's requirement table is the catalogue. UPDATE_README=1 rewrites it.
func TestReadmeListsEveryRequirement(t *testing.T) {
	const readme = "../../README.md"
	b, err := os.ReadFile(readme)
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	require.True(t, i >= 0 && j > i, "README.md lacks the requirement table markers")
	want := s[:i+len(beginMark)] + "\n" + Markdown() + s[j:]
	if os.Getenv("UPDATE_README") == "1" {
		require.NoError(t, os.WriteFile(readme, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, s, "README.md's requirement table is stale: run UPDATE_README=1 go test ./internal/reqs")
}

func TestAllIsOrdered(t *testing.T) {
	all := All()
	for i := 1; i < len(all); i++ {
		if all[i].Area == all[i-1].Area {
			assert.Less(t, all[i-1].ID, all[i].ID)
		}
	}
}
