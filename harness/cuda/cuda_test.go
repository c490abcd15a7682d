//go:build gpu

package cuda

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
)

// Tests without a GPU: formatting and selection.

func TestErrorText(t *testing.T) {
	e := &Error{Op: "cuMemAlloc(2 MiB)", Code: ErrOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	assert.Equal(t, "cuMemAlloc(2 MiB): CUDA_ERROR_OUT_OF_MEMORY (out of memory)", e.Error())
	assert.Equal(t, ErrOutOfMemory, Code(e))
	assert.Equal(t, -1, Code(errors.New("x")))
	assert.Equal(t, "cuInit(0): CUresult 999", (&Error{Op: "cuInit(0)", Code: 999}).Error())
}

// A CUDA_ERROR_NO_DEVICE in a Slurm step given no GPU names the missing
// request and its remedy; other errors, and steps with GPUs, stay as CUDA
// said them.
func TestExplainNoDevice(t *testing.T) {
	noDev := &Error{Op: "cuInit(0)", Code: ErrNoDevice, Name: "CUDA_ERROR_NO_DEVICE", Desc: "no CUDA-capable device is detected"}
	step := config.Slurm{JobID: "4242", StepID: "0", JobGPUs: "0,1"}
	err := explainNoDevice(noDev, step)
	assert.Equal(t, "cuInit(0): CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected); the Slurm step was given no GPUs "+
		"(job 4242 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES unset)", err.Error(), "the remedy is a field, not text")
	assert.Equal(t, ErrNoDevice, Code(err))
	assert.Equal(t, config.SlurmNoGPUsRemedy, InitRemedy(err))
	assert.Empty(t, noDev.Why, "the driver's own error is not changed")

	withGPUs := step
	withGPUs.StepGPUs = "0,1"
	assert.Same(t, noDev, explainNoDevice(noDev, withGPUs), "Slurm gave the step GPUs: something else hides them")
	assert.Same(t, noDev, explainNoDevice(noDev, config.Slurm{}), "not under Slurm")
	assert.Contains(t, InitRemedy(noDev), "nvidia-smi")
	other := &Error{Op: "cuInit(0)", Code: ErrDriverMismatch}
	assert.Same(t, other, explainNoDevice(other, step), "only a missing device is Slurm's to explain")
}

func TestFormatting(t *testing.T) {
	assert.Equal(t, "13.0", VersionString(13000))
	assert.Equal(t, "11.7", VersionString(11070))
	assert.Equal(t, "12.4", VersionString(12040))
	assert.Equal(t, "2 MiB", Size(2<<20))
	assert.Equal(t, "256 MiB", Size(256<<20))
	assert.Equal(t, "1 GiB", Size(1<<30))
	assert.Equal(t, "4 KiB", Size(4096))
	assert.Equal(t, "100 B", Size(100))
	assert.Equal(t, "OWNER", WritesOrderingName(100))
	assert.Equal(t, "ALL_DEVICES", WritesOrderingName(200))
	assert.Equal(t, "NONE", WritesOrderingName(0))
	assert.Equal(t, "unknown(7)", WritesOrderingName(7))
	assert.Equal(t, "DMA_BUF_SUPPORTED", AttrDMABufSupported.String())
	assert.Equal(t, 8192, roundUp(4097, 4096))
	assert.Equal(t, 4096, roundUp(4096, 4096))
	assert.InDelta(t, 1.0, GBps(1e9, time.Second), 1e-9)
	assert.Equal(t, 0.0, GBps(1, 0))
}

// TestLoadWithoutDriver runs where libcuda.so.1 is missing (CI, the lab): the
// error names the library and the package.
func TestLoadWithoutDriver(t *testing.T) {
	_, err := Load()
	var le *LoadError
	if !errors.As(err, &le) || !le.Missing {
		t.Skipf("libcuda.so.1 is present here (Load: %v); this test is for hosts without it", err)
	}
	assert.Contains(t, err.Error(), "libcuda.so.1")
	assert.Contains(t, err.Error(), "libnvidia-compute")
	assert.Contains(t, err.Error(), "nvidia-driver-cuda")
}

// Tests on a GPU (skip, naming libcuda.so.1, elsewhere).

func firstGPU(t *testing.T) *Context {
	d := Open(t)
	devs := GPUs(t, d)
	return Primary(t, devs[0])
}

func TestDevices(t *testing.T) {
	d := Open(t)
	assert.GreaterOrEqual(t, d.Version(), 11000)
	devs := GPUs(t, d)
	for _, dev := range devs {
		assert.Regexp(t, `^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`, dev.PCI)
		assert.NotEmpty(t, dev.Name)
		assert.NotZero(t, dev.TotalMem)
		maj, _, err := dev.ComputeCapability()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, maj, 3)
		t.Logf("gpu %d %s %s cc %d, %d MiB, CUDA %s", dev.Ordinal, dev.PCI, dev.Name, maj, dev.TotalMem>>20, VersionString(d.Version()))
	}
}

func TestFillReadBack(t *testing.T) {
	c := firstGPU(t)
	m := Alloc(t, c, 1<<20+123) // odd size: rounded to pages inside
	assert.Zero(t, m.Addr()%uintptr(os.Getpagesize()))
	assert.Equal(t, 1<<20+123, m.Len())
	assert.Zero(t, m.Span()%os.Getpagesize())
	want := make([]byte, m.Len())
	_, _ = rand.Read(want)
	require.NoError(t, m.Fill(want))
	got := make([]byte, m.Len())
	require.NoError(t, m.ReadBack(got))
	assert.True(t, bytes.Equal(want, got), "device memory returned what was written")

	require.Error(t, m.Fill(make([]byte, m.Len()+1)), "overflow refused")
	sync, err := c.SyncMemops(m.Addr())
	require.NoError(t, err)
	assert.True(t, sync, "Alloc sets SYNC_MEMOPS")
}

func TestSmallAllocIsPageAligned(t *testing.T) {
	c := firstGPU(t)
	// Several small allocations: the driver sub-allocates these at 512-byte
	// alignment, which Alloc must correct.
	for i := 0; i < 4; i++ {
		m := Alloc(t, c, 1000)
		assert.Zero(t, m.Addr()%uintptr(os.Getpagesize()), "allocation %d at %#x", i, m.Addr())
		require.NoError(t, m.Fill([]byte{1, 2, 3}))
	}
}

func TestPointerTypes(t *testing.T) {
	c := firstGPU(t)
	dev := Alloc(t, c, 2<<20)
	mt, err := c.PointerType(dev.Addr())
	require.NoError(t, err)
	assert.Equal(t, MemDevice, mt)

	man := AllocManaged(t, c, 2<<20)
	mt, err = c.PointerType(man.Addr())
	require.NoError(t, err)
	assert.Equal(t, MemManaged, mt, "managed memory is not device memory")

	h := HostAlloc(t, c, 1<<20)
	mt, err = c.PointerType(h.Addr())
	require.NoError(t, err)
	assert.Equal(t, MemHost, mt)

	plain := make([]byte, 4096)
	mt, err = c.PointerType(uintptr(unsafe.Pointer(&plain[0])))
	require.NoError(t, err)
	assert.Equal(t, MemUnknown, mt)
}

func TestOutOfMemoryErrorNamed(t *testing.T) {
	c := firstGPU(t)
	_, err := c.Alloc(1 << 50) // 1 PiB
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cuMemAlloc(1048576 GiB): CUDA_ERROR_OUT_OF_MEMORY")
	assert.Equal(t, ErrOutOfMemory, Code(err))
}

func TestDmabufExport(t *testing.T) {
	d := Open(t)
	c := firstGPU(t)
	if ok, err := c.Dev.Attr(AttrDMABufSupported); err != nil || ok == 0 || !d.HasDmabufExport() {
		t.Skipf("GPU %s: DMA_BUF_SUPPORTED=%d (%v), driver export symbol %v", c.Dev.PCI, ok, err, d.HasDmabufExport())
	}
	m := Alloc(t, c, 2<<20)
	fd, off, ok, err := m.DmabufFD()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, off)
	defer unix.Close(fd)
	info, err := InspectFD(fd)
	require.NoError(t, err)
	assert.True(t, info.IsDmabuf, "%+v", info)
	t.Logf("dma-buf fd %d: %+v", fd, info)

	_, err = c.dmabufFD(m.Addr()+1, 4096, 0)
	assert.Error(t, err, "unaligned range refused before the driver sees it")
}

// The PCIe mapping type of a dma-buf export, as NCCL asks a GPU on
// NVLink-C2C for it (nvdriver.ChooseDmabufMapping): a driver that refuses
// it (the PCIe H200 with driver 580: 801, measured) still gives a dma-buf
// with flags 0, and Refused says why; one that takes it gives a dma-buf
// with the flag.
func TestDmabufExportPCIeMapping(t *testing.T) {
	d := Open(t)
	c := firstGPU(t)
	if ok, err := c.Dev.Attr(AttrDMABufSupported); err != nil || ok == 0 || !d.HasDmabufExport() {
		t.Skipf("GPU %s: DMA_BUF_SUPPORTED=%d (%v), driver export symbol %v", c.Dev.PCI, ok, err, d.HasDmabufExport())
	}
	live, err := hostfs.New("/")
	require.NoError(t, err)
	c2c, c2cErr := nvdriver.IsC2C(live, c.Dev.PCI)
	m := Alloc(t, c, 2<<20)
	x, err := m.DmabufExport(nvdriver.DmabufFlagPCIe)
	require.NoError(t, err, "a refused PCIe mapping falls back to flags 0")
	defer unix.Close(x.FD)
	info, err := InspectFD(x.FD)
	require.NoError(t, err)
	assert.True(t, info.IsDmabuf, "%+v", info)
	if x.Refused != nil {
		assert.Equal(t, 0, x.Flags)
		assert.Contains(t, []int{ErrNotSupported, ErrInvalidValue}, Code(x.Refused), "%v", x.Refused)
		t.Logf("GPU %s (C2C %v %v, driver CUDA %s): PCIe mapping refused: %v; exported with flags 0 as fd %d: %+v",
			c.Dev.PCI, c2c, c2cErr, VersionString(d.Version()), x.Refused, x.FD, info)
		return
	}
	assert.Equal(t, nvdriver.DmabufFlagPCIe, x.Flags)
	t.Logf("GPU %s (C2C %v %v, driver CUDA %s): PCIe mapping accepted: fd %d: %+v", c.Dev.PCI, c2c, c2cErr, VersionString(d.Version()), x.FD, info)
}

func TestNestedDo(t *testing.T) {
	c := firstGPU(t)
	m := Alloc(t, c, 4096)
	err := c.Do(func() error {
		if err := m.Fill([]byte{9}); err != nil { // nested Do
			return err
		}
		b := make([]byte, 1)
		if err := m.ReadBack(b); err != nil {
			return err
		}
		if b[0] != 9 {
			return errors.New("readback after nested Do")
		}
		return nil
	})
	require.NoError(t, err)
}

func TestCopyBandwidth(t *testing.T) {
	c := firstGPU(t)
	const n = 64 << 20
	dev := Alloc(t, c, n)
	host := HostAlloc(t, c, n)
	for _, dir := range []Direction{HtoD, DtoH} {
		ds, err := c.Copy(dir, dev, host, n, 3)
		require.NoError(t, err)
		require.Len(t, ds, 3)
		best := ds[0]
		for _, d := range ds {
			best = min(best, d)
		}
		t.Logf("%s %d MiB: %.1f GB/s", dir, n>>20, GBps(n, best))
		assert.Greater(t, GBps(n, best), 1.0, "%s pinned copy", dir)
	}
	stop := make(chan struct{})
	close(stop)
	k, err := c.CopyUntil(HtoD, dev, host, n, stop, time.Second)
	require.NoError(t, err)
	assert.Zero(t, k)
	k, err = c.CopyUntil(HtoD, dev, host, n, make(chan struct{}), 50*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, k)
}

func TestReleasedObjects(t *testing.T) {
	c := firstGPU(t)
	m, err := c.Alloc(4096)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "second Close is a no-op")
	assert.Error(t, m.Fill([]byte{1}))
	dev := GPUs(t, Open(t))[0]
	c2, err := dev.Retain()
	require.NoError(t, err)
	require.NoError(t, c2.Release())
	require.NoError(t, c2.Release())
	assert.Error(t, c2.Do(func() error { return nil }))
}
