package install

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// A stand-in CUDA for INST-14's probe: the three calls it makes, and
// cuInit answering CUDA_ERROR_NO_DEVICE as a host without a usable GPU.
const (
	fakeCudaH = "typedef int CUresult;\n#define CUDA_SUCCESS 0\nCUresult cuInit(unsigned);\nCUresult cuGetErrorName(CUresult, const char **);\nCUresult cuDeviceGetCount(int *);\nCUresult cuDriverGetVersion(int *);\n"
	fakeCudaC = "typedef int CUresult;\nCUresult cuInit(unsigned f) { return 100; }\nCUresult cuGetErrorName(CUresult r, const char **s) { *s = \"CUDA_ERROR_NO_DEVICE\"; return 0; }\nCUresult cuDeviceGetCount(int *n) { *n = 0; return 0; }\nCUresult cuDriverGetVersion(int *v) { *v = 0; return 0; }\n"
)

// INST-14 end to end with this machine's compiler and verbs headers and a
// stand-in libcuda: the probe builds, runs, and its failure gets the
// remedy its output calls for.
func TestDevEnv(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc in PATH: INST-14's build is not exercised here")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		t.Skip("no /usr/include/infiniband/verbs.h (libibverbs-dev): INST-14's build is not exercised here")
	}
	cuda := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(cuda, "include"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(cuda, "lib64"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cuda, "include", "cuda.h"), []byte(fakeCudaH), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cuda, "cuda.c"), []byte(fakeCudaC), 0o644))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(cuda, "lib64", "libcuda.so"), filepath.Join(cuda, "cuda.c")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Setenv("CUDA_HOME", cuda)
	t.Setenv("LD_LIBRARY_PATH", filepath.Join(cuda, "lib64"))

	j := Tools{Timeout: time.Minute}.DevEnv(t.TempDir())
	assert.Contains(t, attrs(j)["cc"], "-I"+filepath.Join(cuda, "include"))
	f := one(t, j, verdict.FellShort)
	assert.Contains(t, f.Cause, "the GDR probe program built but failed")
	// With RDMA devices the program reaches cuInit; without, libibverbs
	// gives no list. Either way the remedy is the one its output calls for.
	assert.Contains(t, []string{ProbeRemedy(errExit, "ibv_get_device_list failed"), ProbeRemedy(errExit, "CUDA_ERROR_NO_DEVICE")}, f.Remedy)

	// Without cuda.h the headers are named with their packages.
	if findHeader("cuda.h", cudaIncludeDirs) != "" {
		return
	}
	t.Setenv("CUDA_HOME", t.TempDir())
	f = one(t, Tools{Timeout: time.Minute}.DevEnv(t.TempDir()), verdict.FellShort)
	assert.True(t, strings.HasPrefix(f.Cause, "GDR headers missing: cuda.h not in "), f.Cause)
	assert.Contains(t, f.Cause, "install the CUDA toolkit")
}

var errExit = errors.New("exit status 2")
