//go:build gpu

package cuda

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests below load testdata/fakecuda.c, compiled now, in place of
// libcuda.so.1, so the dlopen/dlsym plumbing and error texts are checked on
// machines without a GPU. Where the real driver is present they skip: it
// cannot be unloaded safely under a live context.

func useFake(t *testing.T, cflags ...string) {
	t.Helper()
	if _, err := Load(); err == nil {
		t.Skip("the real libcuda.so.1 is loaded here; fake-driver tests run where it is absent")
	} else if le := (*LoadError)(nil); !errors.As(err, &le) || !le.Missing {
		t.Skipf("libcuda.so.1 is present but unusable here (%v); fake-driver tests run where it is absent", err)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build the fake driver")
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	args := append([]string{"-shared", "-fPIC", "-o", lib, "testdata/fakecuda.c"}, cflags...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	unloadForTest()
	libraryPath = lib
	t.Cleanup(func() {
		unloadForTest()
		libraryPath = Library
	})
}

func TestFakeDriver(t *testing.T) {
	useFake(t)
	d, err := Load()
	require.NoError(t, err)
	assert.Equal(t, 12040, d.Version())
	assert.False(t, d.HasDmabufExport(), "the fake predates cuMemGetHandleForAddressRange")
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 1)
	assert.Equal(t, "0000:3b:00.0", devs[0].PCI, "CUDA's upper-case bus id normalised")
	assert.Equal(t, "Fake GPU", devs[0].Name)
	maj, min, err := devs[0].ComputeCapability()
	require.NoError(t, err)
	assert.Equal(t, [2]int{9, 0}, [2]int{maj, min})

	_, err = devs[0].Attr(999)
	require.Error(t, err)
	assert.Equal(t, "cuDeviceGetAttribute(attribute 999, gpu 0): CUDA_ERROR_INVALID_VALUE (invalid argument)", err.Error())

	c := Primary(t, devs[0])
	m := Alloc(t, c, 1000) // the fake aligns to 512 only: Alloc must re-align
	assert.Zero(t, m.Addr()%4096)
	want := []byte("through the fake driver")
	require.NoError(t, m.Fill(want))
	got := make([]byte, len(want))
	require.NoError(t, m.ReadBack(got))
	assert.True(t, bytes.Equal(want, got))

	_, err = c.Alloc(2 << 30)
	require.Error(t, err)
	assert.Equal(t, "cuMemAlloc(2 GiB): CUDA_ERROR_OUT_OF_MEMORY (out of memory)", err.Error())

	_, _, _, err = m.DmabufFD()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "11.7")

	mt, err := c.PointerType(m.Addr())
	require.NoError(t, err)
	assert.Equal(t, MemUnknown, mt, "INVALID_VALUE from cuPointerGetAttribute: not CUDA memory")

	require.NoError(t, c.Synchronize(), "Synchronize runs with the context current")
}

func TestFakeDriverNoDevice(t *testing.T) {
	useFake(t)
	t.Setenv("FAKE_CUDA_INIT", "100")
	_, err := Load()
	require.Error(t, err)
	assert.Equal(t, "cuInit(0): CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", err.Error())
	assert.Equal(t, ErrNoDevice, Code(err))
	assert.Contains(t, InitRemedy(err), "nvidia-smi")
}

func TestFakeDriverUnknownCode(t *testing.T) {
	useFake(t)
	t.Setenv("FAKE_CUDA_INIT", "4242")
	_, err := Load()
	require.Error(t, err)
	assert.Equal(t, "cuInit(0): CUresult 4242", err.Error(), "no name from cuGetErrorName: the number is kept")
}

func TestFakeDriverMissingSymbol(t *testing.T) {
	useFake(t, "-DOMIT_MANAGED")
	_, err := Load()
	var le *LoadError
	require.True(t, errors.As(err, &le), "%v", err)
	assert.False(t, le.Missing)
	assert.True(t, strings.Contains(err.Error(), "has no symbol cuMemAllocManaged"), err.Error())
}
