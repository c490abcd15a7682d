//go:build gpu

package cuda

import (
	"bytes"
	"crypto/rand"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Tests on a GPU (skip, naming libcuda.so.1, elsewhere): VMM memory as NCCL
// allocates it. No NIC is needed, so they run on a GPU machine without one:
//
//	go test -c -tags gpu -o cuda.test ./harness/cuda && ./cuda.test -test.run 'TestVMM' -test.v

// vmmGPU is the first GPU when it can register cuMemCreate memory.
func vmmGPU(t *testing.T) (*Driver, *Context) {
	t.Helper()
	c := firstGPU(t)
	d, _ := Load()
	if why := VMMAbsence(d, c.Dev); why != "" {
		t.Skip(why)
	}
	return d, c
}

// TestVMMOnGPU allocates RDMA-capable VMM memory, checks what the driver
// says about the pointer, exports it and a sub-range as dma-bufs, moves a
// pattern in and out, and tears it down.
func TestVMMOnGPU(t *testing.T) {
	d, c := vmmGPU(t)
	gmin, err := c.Granularity(true, false)
	require.NoError(t, err)
	grec, err := c.Granularity(true, true)
	require.NoError(t, err)
	t.Logf("GPU %s (%s), CUDA %s: granularity with gpuDirectRDMACapable: minimum %s, recommended %s",
		c.Dev.PCI, c.Dev.Name, VersionString(d.Version()), Size(gmin), Size(grec))
	require.Positive(t, gmin)
	assert.Zero(t, grec%gmin, "the recommended granularity is a multiple of the minimum")

	const size = 3 << 20 // not a multiple of 2 MiB: AllocVMM rounds it up
	m := AllocVMM(t, c, size)
	assert.Equal(t, size, m.Len())
	assert.Equal(t, roundUp(size, grec), m.Span())
	assert.Zero(t, m.Addr()%uintptr(grec), "aligned to the granularity")
	assert.Equal(t, CuMemCreate, m.Allocator())

	mt, err := c.PointerType(m.Addr())
	require.NoError(t, err)
	assert.Equal(t, MemDevice, mt, "cuMemCreate memory is device memory")
	ok, err := c.GPUDirectRDMACapable(m.Addr())
	require.NoError(t, err)
	assert.True(t, ok, "created with gpuDirectRDMACapable=1: IS_GPU_DIRECT_RDMA_CAPABLE must read 1")
	ok, err = c.GPUDirectRDMACapable(m.Addr() + uintptr(m.Span()) - 4096)
	require.NoError(t, err)
	assert.True(t, ok, "the whole range, its last page too")

	err = c.SetSyncMemops(m.Addr())
	t.Logf("SYNC_MEMOPS on VMM memory: %v", err)
	assert.True(t, err == nil || Code(err) == ErrNotSupported, "refused (driver 580) or taken, not another error: %v", err)

	want := make([]byte, size)
	_, _ = rand.Read(want)
	require.NoError(t, m.Fill(want))
	got := make([]byte, size)
	require.NoError(t, m.ReadBack(got))
	assert.True(t, bytes.Equal(want, got), "VMM memory returned what was written")

	if sup, err := c.Dev.Attr(AttrDMABufSupported); err != nil || sup != 1 || !d.HasDmabufExport() {
		t.Logf("dma-buf export not checked: DMA_BUF_SUPPORTED=%d (%v), export symbol %v", sup, err, d.HasDmabufExport())
	} else {
		fd, off, ok, err := m.DmabufFD()
		require.NoError(t, err, "dma-buf export of VMM memory through cuMemGetHandleForAddressRange")
		require.True(t, ok)
		assert.Zero(t, off)
		checkDmabuf(t, fd, m.Span())
		fd, err = m.DmabufRange(64<<10, 64<<10)
		require.NoError(t, err, "a 64 KiB sub-range")
		checkDmabuf(t, fd, 64<<10)
		pg := pageSize() // 64 KiB on arm64 kernels with 64K pages
		fd, err = m.DmabufRange(m.Span()-pg, pg)
		require.NoError(t, err, "the last page")
		checkDmabuf(t, fd, pg)
		_, err = m.DmabufRange(m.Span()-pg, 2*pg)
		assert.ErrorContains(t, err, "outside the", "past the end: refused before the driver sees it")
	}

	// Without the flag the attribute reads 0, yet the export still works:
	// only the attribute tells RDMA-capable memory apart.
	plain, err := c.AllocVMM(grec, false)
	require.NoError(t, err)
	ok, err = c.GPUDirectRDMACapable(plain.Addr())
	require.NoError(t, err)
	assert.False(t, ok, "created without gpuDirectRDMACapable")
	if d.HasDmabufExport() {
		fd, _, _, err := plain.DmabufFD()
		t.Logf("dma-buf export of VMM memory without gpuDirectRDMACapable: %v", err)
		if err == nil {
			_ = unix.Close(fd)
		}
	}
	require.NoError(t, plain.Close())

	addr := m.Addr()
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "a second Close is a no-op")
	mt, err = c.PointerType(addr)
	require.NoError(t, err)
	assert.Equal(t, MemUnknown, mt, "unmapped and freed")
}

func checkDmabuf(t *testing.T, fd, n int) {
	t.Helper()
	defer unix.Close(fd)
	info, err := InspectFD(fd)
	require.NoError(t, err)
	assert.True(t, info.IsDmabuf, "%+v", info)
	if info.Size != 0 {
		assert.Equal(t, int64(n), info.Size, "exported size")
	}
	t.Logf("dma-buf of %s: %+v", Size(n), info)
}

// TestVMMMisuseOnGPU pins the driver's answers to misuse that the emulated
// GPU copies (lab/emugpu TestFakeVMMMisuse): only the ones a driver answers
// without crashing (it dereferences made-up handles).
func TestVMMMisuseOnGPU(t *testing.T) {
	_, c := vmmGPU(t)
	g, err := c.Granularity(true, true)
	require.NoError(t, err)
	invalid := func(err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		assert.Equal(t, ErrInvalidValue, Code(err), "%s: %v", what, err)
	}
	_, err = c.MemCreate(4096, true)
	invalid(err, "a size below the granularity")
	_, err = c.MemCreate(g+4096, true)
	invalid(err, "a size off the granularity")
	p, err := c.MemCreate(g, true)
	require.NoError(t, err)
	_, err = c.AddressReserve(4096, 0)
	invalid(err, "a reservation off the granularity")
	_, err = c.AddressReserve(g, 3<<20)
	invalid(err, "an alignment not a power of two")
	va, err := c.AddressReserve(2*g, g)
	require.NoError(t, err)

	invalid(c.MemMap(va+64<<30, p), "mapping an unreserved range")
	invalid(c.MemMap(va+4096, p), "mapping at an address off the granularity")
	require.NoError(t, c.MemMap(va, p))
	invalid(c.MemMap(va, p), "a second mapping over the first")

	buf := []byte("before access")
	invalid(c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)), "a copy before cuMemSetAccess")
	invalid(c.SetAccess(va+uintptr(g), g), "access to a range not mapped")
	invalid(c.SetAccess(va, 2*g), "access to a range half mapped")
	require.NoError(t, c.SetAccess(va, g))
	require.NoError(t, c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)))

	require.NoError(t, c.MemMap(va+uintptr(g), p), "one allocation mapped twice")
	require.NoError(t, c.MemUnmap(va+uintptr(g), g))
	invalid(c.AddressFree(va, 2*g), "freeing a reservation still mapped")
	require.NoError(t, c.MemUnmap(va+uintptr(g), g), "unmapping a reserved range with nothing mapped")

	require.NoError(t, c.MemRelease(p), "release while mapped")
	require.NoError(t, c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)), "the mapping outlives the release")
	require.NoError(t, c.MemUnmap(va, g))
	invalid(c.HtoD(va, unsafe.Pointer(&buf[0]), len(buf)), "a copy after cuMemUnmap")
	invalid(c.AddressFree(va, g), "freeing less than was reserved")
	require.NoError(t, c.AddressFree(va, 2*g))
	invalid(c.AddressFree(va, 2*g), "a second free")
}
