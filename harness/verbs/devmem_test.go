package verbs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/internal/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	devmemBegin = "<!-- devmem-table:begin (generated from harness/verbs/devmem.go: UPDATE=1 go test ./harness/verbs) -->\n"
	devmemEnd   = "<!-- devmem-table:end -->"
)

// Every row is complete; every adopted case names unit tests that exist,
// every refused one a reason; the cases the issue lists are all there.
func TestDevMemCases(t *testing.T) {
	funcRE := regexp.MustCompile(`^func (Test\w+)\(t \*testing\.T\)`)
	seen := map[string]bool{}
	for _, c := range DevMemCases {
		assert.NotEmpty(t, c.Case)
		assert.NotEmpty(t, c.Reason, c.Case)
		assert.Regexp(t, `\.(c|cc|py|go)\b`, c.Sources, "%s: sources name a file", c.Case)
		if !c.Adopted {
			assert.Empty(t, c.Tests, "%s: a refused case has no tests", c.Case)
			continue
		}
		require.NotEmpty(t, c.Tests, "%s: an adopted case needs a unit test of its code path", c.Case)
		for _, ref := range c.Tests {
			file, name, ok := strings.Cut(ref, ":")
			require.True(t, ok, "%q is path:TestName", ref)
			src := readSource(t, filepath.Join("..", "..", file))
			found := false
			for _, l := range strings.Split(string(src), "\n") {
				if m := funcRE.FindStringSubmatch(l); m != nil && m[1] == name {
					found = true
				}
			}
			assert.True(t, found, "%s: %s has no func %s", c.Case, file, name)
		}
		seen[c.Case] = true
	}
	all := ""
	for _, c := range DevMemCases {
		all += c.Case + "\n" + c.Sources + "\n"
	}
	for _, want := range []string{"Scatter-to-CQE, receive side", "requester side", "Inline sends", "cuFlushGPUDirectRDMAWrites", "iflush", "NCCL_GDR_FLUSH_DISABLE",
		"dma-buf or peermem", "RELAXED_ORDERING", "RLIMIT_MEMLOCK", "Fork safety", "Non-root", "perftest src/perftest_parameters.c", "ncclIbRegMrDmaBuf"} {
		assert.Contains(t, all, want)
	}
}

// The manual's table is DevMemTable(), so the two cannot disagree.
func TestDevMemTableInDocs(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "gpu-data-path.md")
	readSource(t, path) // skips outside the source tree (the lab's VMs)
	have, want, err := golden.Section(path, devmemBegin, devmemEnd, DevMemTable())
	require.NoError(t, err)
	assert.Equal(t, want, have, "docs/gpu-data-path.md's device-memory table differs from DevMemCases: run %s", golden.Hint("./harness/verbs"))
}

// readSource reads a file of the source tree. The lab runs this package's
// test binary in its VMs without the tree: there (no verbs_test.go beside
// the binary either) the source checks skip; in the tree a missing file
// fails.
func readSource(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat("verbs_test.go"); serr != nil {
			t.Skipf("source-tree check: %s is not here (a test binary run outside its source tree, as in the lab's VMs; make unit runs it in the tree)", path)
		}
	}
	require.NoError(t, err, path)
	return b
}
