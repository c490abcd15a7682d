package build

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	out := buildDist(t, "")
	checkDist(t, out, nativeMachine(t))

	doc, err := os.ReadFile("../docs/developing.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "glibc "+maxGlibc+" or newer", "the docs name the floor")
}

// buildDist runs build/dist/build.sh with the gpu,rdma tags for arch (a
// GOARCH; "" for this host's) into a temporary folder.
func buildDist(t *testing.T, arch string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the dist (-short)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command("bash", "build/dist/build.sh", "gpu,rdma", out)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "ARCH="+arch)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build.sh: %s", b)
	return out
}

// checkDist checks every program of a dist: built for machine, the Go-only
// ones static, the cgo test binaries needing glibc maxGlibc at most.
func checkDist(t *testing.T, out string, machine elf.Machine) {
	t.Helper()
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
		ef, err := elf.Open(f)
		require.NoError(t, err)
		assert.Equal(t, machine, ef.Machine, "%s is built for %v", name, ef.Machine)
		ef.Close()
		if static[name] {
			assert.Empty(t, v, "%s should need no glibc (CGO_ENABLED=0): it needs %s", name, v)
			continue
		}
		tests++
		assert.True(t, versionLE(v, maxGlibc), "%s needs glibc %s, above the documented %s: docs/developing.md and maxGlibc must say so, or the build host changed", name, v, maxGlibc)
	}
	assert.GreaterOrEqual(t, tests, 5, "the conformance test binaries")
}

// nativeMachine is the ELF machine of this host's Go architecture.
func nativeMachine(t *testing.T) elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	t.Skipf("the dist is built for amd64 and arm64, not %s", runtime.GOARCH)
	return 0
}

// glibcNeeded is the newest GLIBC_x.y version an ELF file's dynamic
// symbols need ("" for none: static, or no libc); isELF is false for
// scripts and other files.
func glibcNeeded(path string) (v string, isELF bool, err error) {
	head := make([]byte, 4)
	if r, err := os.Open(path); err != nil {
		return "", false, err
	} else {
		n, _ := io.ReadFull(r, head)
		r.Close()
		if n < 4 || string(head) != elf.ELFMAG {
			return "", false, nil // a script, a marker (.pkg, .paired)
		}
	}
	f, err := elf.Open(path)
	if err != nil {
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
