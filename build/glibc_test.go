package build

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxGlibc is the newest glibc symbol version the dist's test binaries may
// need: what Debian 12's toolchain links them against (the symbols glibc
// 2.34 moved into libc: pthread_create, dlopen, __libc_start_main).
// docs/developing.md states it; a new build host that raises it fails
// here instead of on a customer's RHEL node.
const maxGlibc = "2.34"

// Every program of make dist runs on a node with glibc maxGlibc or newer:
// the Go-only ones are static, the cgo test binaries need at most maxGlibc.
func TestDistGlibc(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dist (-short)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command("bash", "build/dist/build.sh", "gpu,rdma", out)
	cmd.Dir = ".."
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build.sh: %s", b)

	static := map[string]bool{"gdrreport": true, "test2json": true, "gotestsum": true, "gdrcluster": true}
	files, err := filepath.Glob(filepath.Join(out, "bin", "*"))
	require.NoError(t, err)
	files = append(files, filepath.Join(out, "gdrcluster"))
	tests := 0
	for _, f := range files {
		v, isELF, err := glibcNeeded(f)
		require.NoError(t, err, f)
		if !isELF {
			continue
		}
		name := filepath.Base(f)
		if static[name] {
			assert.Empty(t, v, "%s should need no glibc (CGO_ENABLED=0): it needs %s", name, v)
			continue
		}
		tests++
		assert.True(t, versionLE(v, maxGlibc), "%s needs glibc %s, above the documented %s: docs/developing.md and maxGlibc must say so, or the build host changed", name, v, maxGlibc)
	}
	assert.GreaterOrEqual(t, tests, 5, "the conformance test binaries")

	doc, err := os.ReadFile("../docs/developing.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "glibc "+maxGlibc+" or newer", "the docs name the floor")
}

// glibcNeeded is the newest GLIBC_x.y version an ELF file's dynamic
// symbols need ("" for none: static, or no libc); isELF is false for
// scripts and other files.
func glibcNeeded(path string) (v string, isELF bool, err error) {
	f, err := elf.Open(path)
	if err != nil {
		// Scripts, and files shorter than an ELF header (the empty
		// <pkg>.paired markers build.sh writes), are not programs.
		if _, ok := err.(*elf.FormatError); ok || errors.Is(err, io.EOF) {
			return "", false, nil
		}
		return "", false, err
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil && err != elf.ErrNoSymbols {
		return "", true, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range syms {
		if x, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && (v == "" || !versionLE(x, v)) {
			v = x
		}
	}
	return v, true, nil
}

// versionLE compares dotted versions numerically ("2.17" <= "2.34").
func versionLE(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return true
}

func TestVersionLE(t *testing.T) {
	assert.True(t, versionLE("2.17", "2.34"))
	assert.True(t, versionLE("2.3.2", "2.28"))
	assert.True(t, versionLE("2.34", "2.34"))
	assert.False(t, versionLE("2.38", "2.34"))
	assert.False(t, versionLE("3.0", "2.99"))
}
