//go:build gpu

package emugpu_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
)

// The VMM path (cuMemCreate, NCCL's allocator) through harness/cuda on the
// emulated GPU: the buffer the suite registers, its teardown, and the
// driver's answers to misuse, which the emulator copies from a real driver
// (H200, 580.159.04; see "VMM" in src/libcuda.c and TestVMMOnGPU in
// harness/cuda, which checks the same answers on a GPU).

const mib = 1 << 20

func fakeContext(t *testing.T, cflags ...string) (*cuda.Driver, *cuda.Context) {
	t.Helper()
	useFake(t, cflags...)
	d, err := cuda.Load()
	require.NoError(t, err)
	devs, err := d.Devices()
	require.NoError(t, err)
	return d, cuda.Primary(t, devs[0])
}

func TestFakeVMM(t *testing.T) {
	d, c := fakeContext(t)
	before := vmmFDs(t)
	assert.True(t, d.HasVMM())
	v, err := c.Dev.Attr(cuda.AttrGPUDirectRDMAWithVMM)
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	assert.Empty(t, cuda.VMMAbsence(d, c.Dev), "the emulated GPU registers cuMemCreate memory")
	for _, rec := range []bool{false, true} {
		g, err := c.Granularity(true, rec)
		require.NoError(t, err)
		assert.Equal(t, 2*mib, g, "recommended=%v", rec)
	}

	m, err := c.AllocVMM(1000, true)
	require.NoError(t, err)
	assert.Equal(t, cuda.CuMemCreate, m.Allocator())
	assert.Equal(t, "cuMemCreate", membuf.GPUAlloc(m))
	assert.Equal(t, membuf.GPU, m.Kind())
	assert.Equal(t, "gpu-emulated", membuf.Label(m))
	assert.Zero(t, m.Addr()%(2*mib), "aligned to the granularity")
	assert.Equal(t, 1000, m.Len())
	assert.Equal(t, 2*mib, m.Span(), "rounded up to the granularity")
	rec, min := m.Granularity()
	assert.Equal(t, [2]int{2 * mib, 2 * mib}, [2]int{rec, min})
	assert.True(t, m.RDMARequested())
	assert.True(t, mapped(t, m.Addr()), "the range is mapped")

	mt, err := c.PointerType(m.Addr())
	require.NoError(t, err)
	assert.Equal(t, cuda.MemDevice, mt, "cuMemCreate memory is device memory")
	ok, err := c.GPUDirectRDMACapable(m.Addr())
	require.NoError(t, err)
	assert.True(t, ok, "created with gpuDirectRDMACapable")

	want := bytes.Repeat([]byte("vmm!"), 250)
	require.NoError(t, m.Fill(want))
	got := make([]byte, len(want))
	require.NoError(t, m.ReadBack(got))
	assert.Equal(t, want, got)
	assert.ErrorContains(t, m.Fill(make([]byte, 1001)), "1001 bytes into a 1000-byte GPU buffer")

	err = c.SetSyncMemops(m.Addr())
	require.Error(t, err, "the driver refuses SYNC_MEMOPS on VMM memory")
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err))

	// dma-buf export goes the cuMemAlloc way, which the emulator refuses.
	_, _, _, err = m.DmabufFD()
	require.Error(t, err)
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err))
	assert.Contains(t, err.Error(), "rxe has no dma-buf MRs")
	_, err = m.DmabufRange(64<<10, 64<<10)
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err), "a sub-range reaches the driver too")
	_, err = m.DmabufRange(2*mib-4096, 8192)
	assert.ErrorContains(t, err, "outside the 2097152-byte GPU buffer")

	// Without the flag the pointer attribute says so.
	plain, err := c.AllocVMM(2*mib, false)
	require.NoError(t, err)
	ok, err = c.GPUDirectRDMACapable(plain.Addr())
	require.NoError(t, err)
	assert.False(t, ok, "created without gpuDirectRDMACapable")
	require.NoError(t, plain.Close())

	// cuMemAlloc memory reads 1, as on an H200.
	am := cuda.Alloc(t, c, 4096)
	ok, err = c.GPUDirectRDMACapable(am.Addr())
	require.NoError(t, err)
	assert.True(t, ok)

	addr := m.Addr()
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "a second Close is a no-op")
	assert.ErrorContains(t, m.Fill([]byte{1}), "freed GPU buffer")
	mt, err = c.PointerType(addr)
	require.NoError(t, err)
	assert.Equal(t, cuda.MemUnknown, mt, "unmapped")
	assert.False(t, mapped(t, addr), "the reservation is gone")
	assert.Equal(t, before, vmmFDs(t), "every physical allocation released")
}

func TestFakeVMMTestingHelpers(t *testing.T) {
	_, c := fakeContext(t)
	before := vmmFDs(t)
	var addr uintptr
	t.Run("alloc", func(t *testing.T) {
		b := cuda.AllocBy(t, c, cuda.CuMemCreate, 4096)
		addr = b.Addr()
		assert.Equal(t, cuda.CuMemCreate, b.Allocator())
		a := cuda.AllocBy(t, c, cuda.CuMemAlloc, 4096)
		assert.Equal(t, cuda.CuMemAlloc, a.Allocator())
		assert.Equal(t, "cuMemAlloc", membuf.GPUAlloc(a))
	})
	assert.False(t, mapped(t, addr), "torn down in t.Cleanup")
	assert.Equal(t, before, vmmFDs(t))
}

// The driver's answers to misuse, through the exported primitives.
func TestFakeVMMMisuse(t *testing.T) {
	_, c := fakeContext(t)
	before := vmmFDs(t)
	invalid := func(err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		assert.Equal(t, cuda.ErrInvalidValue, cuda.Code(err), "%s: %v", what, err)
	}

	_, err := c.MemCreate(4096, true)
	invalid(err, "a size below the granularity")
	_, err = c.MemCreate(2*mib+4096, true)
	invalid(err, "a size off the granularity")
	p, err := c.MemCreate(2*mib, true)
	require.NoError(t, err)
	assert.Equal(t, 2*mib, p.Size())
	p4, err := c.MemCreate(4*mib, true)
	require.NoError(t, err)

	_, err = c.AddressReserve(4096, 0)
	invalid(err, "a reservation off the granularity")
	_, err = c.AddressReserve(2*mib, 3*mib)
	invalid(err, "an alignment not a power of two")
	va, err := c.AddressReserve(4*mib, 2*mib)
	require.NoError(t, err)
	assert.Zero(t, va%(2*mib))

	invalid(c.MemMap(va+64<<30, p), "mapping an unreserved range")
	invalid(c.MemMap(va+4096, p), "mapping at an address off the granularity")
	invalid(c.MemMap(va+2*mib, p4), "a mapping running past its reservation")

	require.NoError(t, c.MemMap(va, p))
	invalid(c.MemMap(va, p), "a second mapping over the first")

	buf := []byte("before access")
	invalid(c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)), "a copy before cuMemSetAccess")
	invalid(c.SetAccess(va+2*mib, 2*mib), "access to a range not mapped")
	invalid(c.SetAccess(va, 4*mib), "access to a range half mapped")
	require.NoError(t, c.SetAccess(va, 2*mib))
	require.NoError(t, c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)))
	mt, err := c.PointerType(va + 2*mib)
	require.NoError(t, err)
	assert.Equal(t, cuda.MemUnknown, mt, "reserved but not mapped is no memory")

	// One allocation may be mapped twice.
	require.NoError(t, c.MemMap(va+2*mib, p))
	require.NoError(t, c.MemUnmap(va+2*mib, 2*mib))

	invalid(c.AddressFree(va, 4*mib), "freeing a reservation still mapped")
	invalid(c.MemUnmap(va, 4096), "unmapping part of a mapping")
	require.NoError(t, c.MemUnmap(va+2*mib, 2*mib), "unmapping a reserved range with nothing mapped succeeds, as on the driver")

	require.NoError(t, c.MemRelease(p), "release while mapped: the memory lives on in the mapping")
	require.NoError(t, c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)))
	invalid(c.MemRelease(p), "a second release")

	require.NoError(t, c.MemUnmap(va, 2*mib))
	invalid(c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)), "a copy after cuMemUnmap")
	invalid(c.AddressFree(va, 2*mib), "freeing less than was reserved")
	require.NoError(t, c.AddressFree(va, 4*mib))
	invalid(c.AddressFree(va, 4*mib), "a second free")
	assert.False(t, mapped(t, va))

	require.NoError(t, c.MemRelease(p4))
	assert.Equal(t, before, vmmFDs(t), "every physical allocation released")
	assert.ErrorContains(t, c.MemRelease(cuda.Physical{}), "no allocation", "a made-up handle never reaches the driver")
	assert.ErrorContains(t, c.MemMap(va, cuda.Physical{}), "no allocation")
}

// Unmapping a whole reservation takes the mappings inside it.
func TestFakeVMMUnmapReservation(t *testing.T) {
	_, c := fakeContext(t)
	p4, err := c.MemCreate(4*mib, true)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.MemRelease(p4)) })
	va, err := c.AddressReserve(8*mib, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.AddressFree(va, 8*mib)) })
	require.NoError(t, c.MemMap(va, p4))
	require.NoError(t, c.MemUnmap(va, 8*mib), "the whole reservation, holding one mapping")
}

// Without the VMM calls the cuMemCreate cases are absent, naming the call.
func TestFakeVMMSymbolMissing(t *testing.T) {
	d, c := fakeContext(t, "-DNO_VMM_SYMBOL")
	assert.False(t, d.HasVMM())
	assert.Contains(t, cuda.VMMAbsence(d, c.Dev), "does not export cuMemCreate")
	_, err := c.AllocVMM(4096, true)
	require.Error(t, err)
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err))
	assert.Contains(t, err.Error(), "libcuda.so.1 does not export cuMemCreate; upgrade the NVIDIA driver")
}

// GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED 0: the cases are absent, naming it.
func TestFakeVMMNotRegistrable(t *testing.T) {
	d, c := fakeContext(t)
	t.Setenv("FAKE_CUDA_VMM_RDMA", "0")
	why := cuda.VMMAbsence(d, c.Dev)
	assert.Contains(t, why, "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0")
	assert.Contains(t, why, "GPU-05 judges the attribute")
}

// vmmFDs counts the emulator's physical allocations (memfds) this process
// holds open.
func vmmFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "gdr-emulated-gpu-vmm") {
			n++
		}
	}
	return n
}

// mapped says whether /proc/self/maps has a mapping holding addr.
func mapped(t *testing.T, addr uintptr) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err == nil && addr >= lo && addr < hi {
			return true
		}
	}
	return false
}
