package build

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crossLibc is where Debian's libc6-arm64-cross puts the arm64 loader and C
// library: qemu-aarch64 finds the cgo test binaries' interpreter there.
const crossLibc = "/usr/aarch64-linux-gnu"

// make dist ARCH=arm64 (Grace hosts) builds every program of the amd64
// dist for aarch64 under the same glibc floor, records its architecture,
// and its binaries run: each test binary lists its requirement tests under
// qemu-aarch64 (user-mode emulation on this host's kernel; a Grace host
// itself never ran them here).
func TestDistArm64(t *testing.T) {
	if runtime.GOARCH == "arm64" {
		t.Skip("this host is arm64: TestDistGlibc builds the arm64 dist")
	}
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		t.Skip("no aarch64-linux-gnu-gcc in PATH (Debian's gcc-aarch64-linux-gnu; make deps-unit installs it as root)")
	}
	out := buildDist(t, "arm64")
	checkDist(t, out, elf.EM_AARCH64)
	b, err := os.ReadFile(filepath.Join(out, "ARCH"))
	require.NoError(t, err)
	assert.Equal(t, "arm64\n", string(b))

	// run.sh refuses a copy built for another architecture, naming both,
	// before it runs anything (exit 2, no reports).
	run := exec.Command("bash", filepath.Join(out, "run.sh"))
	run.Dir = t.TempDir()
	o, err := run.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "run.sh on amd64 with an arm64 dist: %s", o)
	assert.Equal(t, 2, ee.ExitCode(), "%s", o)
	assert.Contains(t, string(o), "built for arm64; this host is amd64")
	assert.Contains(t, string(o), "make dist ARCH=amd64")
	assert.NoDirExists(t, filepath.Join(run.Dir, "reports"))

	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("no qemu-aarch64 in PATH (Debian's qemu-user; make deps-unit installs it as root): the arm64 binaries were built but not run")
	}
	if _, err := os.Stat(filepath.Join(crossLibc, "lib", "ld-linux-aarch64.so.1")); err != nil {
		t.Skipf("no arm64 loader under %s (libc6-arm64-cross): %v", crossLibc, err)
	}
	req := regexp.MustCompile(`^Test[A-Z]+\d+[A-Za-z0-9]+$`)
	bins, err := filepath.Glob(filepath.Join(out, "bin", "*.test"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(bins), 5)
	for _, bin := range bins {
		cmd := exec.Command(qemu, bin, "-test.list", "^Test")
		cmd.Env = append(os.Environ(), "QEMU_LD_PREFIX="+crossLibc)
		o, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s under qemu-aarch64: %s", filepath.Base(bin), o)
		names := strings.Fields(string(o))
		assert.NotEmpty(t, names, filepath.Base(bin))
		for _, n := range names {
			assert.Regexp(t, req, n, "%s lists %q", filepath.Base(bin), n)
		}
	}
	// The GPU tests open libcuda.so.1 at run time (dlopen through cgo): on
	// a host without it GPU-01 is absent, and its remedy names the arm64
	// installer, not the x86_64 one a Grace host cannot run.
	cmd := exec.Command(qemu, filepath.Join(out, "bin", "gpu.test"), "-test.run", "^TestGPU01", "-test.v")
	cmd.Env = append(os.Environ(), "QEMU_LD_PREFIX="+crossLibc, "LD_LIBRARY_PATH=/nonexistent")
	o, err = cmd.CombinedOutput()
	require.NoError(t, err, "gpu.test under qemu-aarch64: %s", o)
	assert.Regexp(t, `(?m)^--- SKIP: TestGPU01`, string(o))
	assert.Contains(t, string(o), "gdr.remedy install the NVIDIA driver's CUDA library")
	assert.Contains(t, string(o), "NVIDIA-Linux-aarch64-<version>.run")
	assert.NotContains(t, string(o), "x86_64")

	for _, prog := range []string{filepath.Join(out, "bin", "gdrreport"), filepath.Join(out, "gdrcluster")} {
		cmd := exec.Command(qemu, prog, "-h")
		o, _ := cmd.CombinedOutput() // -h exits 0 or 2 by flag package; the usage text shows it ran
		assert.Contains(t, strings.ToLower(string(o)), "usage", "%s under qemu-aarch64: %s", filepath.Base(prog), o)
	}
}

// ARCH takes Go's names and the kernel's (uname -m, and ARCH=x86/arm64
// as kernel builds export it); any other is refused naming it.
func TestArchNames(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for name, want := range map[string]string{
		"amd64": "amd64 x86_64-linux-gnu", "x86_64": "amd64 x86_64-linux-gnu", "x86": "amd64 x86_64-linux-gnu",
		"arm64": "arm64 aarch64-linux-gnu", "aarch64": "arm64 aarch64-linux-gnu",
	} {
		o, err := exec.Command("bash", "-c", `source arch.sh && echo "$(arch_goarch "$1") $(arch_triplet "$1")"`, "-", name).CombinedOutput()
		require.NoError(t, err, "%s: %s", name, o)
		assert.Equal(t, want, strings.TrimSpace(string(o)), name)
	}
	o, err := exec.Command("bash", "-c", `source arch.sh && arch_triplet riscv64`).CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(o), "ARCH=riscv64: the dist is built for amd64 or arm64")
}
