package build

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/gdrconf/gdrconf/"

// mayImport is the architecture's layering (ARCHITECTURE.md, the README's
// map): each top-level folder and the others its code may import. internal/
// is the floor (readers, catalogues, no testing), harness/ the engines built
// on it, conformance/ the tests on both; report/ and cluster/ read what runs
// leave and never reach into the engines; lab/ and cmd/ sit on top.
var mayImport = map[string][]string{
	"internal":    {},
	"harness":     {"internal"},
	"conformance": {"harness", "internal"},
	"cluster":     {"internal"},
	"report":      {"cluster", "internal"},
	"fixtures":    {"internal"},
	"lab":         {"cluster", "harness", "internal", "report"},
	"cmd":         {"cluster", "harness", "internal", "lab", "report"},
	"deploy":      {"cluster", "internal"},
	"build":       {"report", "internal"},
}

// TestImportLayers fails on an import that points up the layering, in code
// and in tests alike (a test that imports upward makes the lower package's
// tests depend on the higher one's build), with both build-tag sets.
func TestImportLayers(t *testing.T) {
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var problems []string
	pkgs := 0
	for _, tags := range []string{"", "gpu,rdma"} {
		cmd := exec.Command(goBin, "list", "-tags", tags, "-f",
			"{{.ImportPath}} {{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "go list: %s", stderr.String())
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 || !strings.HasPrefix(f[0], module) {
				continue
			}
			pkgs++
			from := top(f[0])
			allowed, known := mayImport[from]
			if !known {
				problems = append(problems, f[0]+": top-level folder "+from+" has no place in the layering (add it to mayImport)")
				continue
			}
			for _, imp := range f[1:] {
				if !strings.HasPrefix(imp, module) {
					continue
				}
				to := top(imp)
				if to != from && !slices.Contains(allowed, to) {
					problems = append(problems, f[0]+" imports "+imp+" ("+from+" may import "+strings.Join(allowed, ", ")+")")
				}
			}
		}
		require.NoError(t, sc.Err())
	}
	require.Greater(t, pkgs, 40, "go list found the module's packages")
	slices.Sort(problems)
	assert.Empty(t, slices.Compact(problems))
}

func top(importPath string) string {
	p := strings.TrimPrefix(importPath, module)
	head, _, _ := strings.Cut(p, "/")
	return head
}
