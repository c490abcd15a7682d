//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gdrconf/gdrconf/harness/membuf"
)

// Allocator names the driver call behind a GPU buffer (gdr.gpu_alloc).
//
// cuMemAlloc is what most GPUDirect RDMA examples register. NCCL allocates
// its buffers with the virtual memory management API instead whenever the
// driver offers it (NCCL_CUMEM_ENABLE defaults to -2, auto: on with CUDA
// 12.0+ and VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED; NVIDIA/nccl
// src/misc/cudawrap.cc ncclIsCuMemSupported, ncclCuMemEnable): cuMemCreate
// with gpuDirectRDMACapable set where GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
// is 1, then cuMemAddressReserve, cuMemMap and cuMemSetAccess
// (src/include/alloc.h ncclCuMemAlloc, src/allocator.cc ncclMemAlloc). A
// host whose peer memory or dma-buf path takes cuMemAlloc memory but not
// that memory passes a cuMemAlloc-only check and fails under NCCL, so the
// registrations and data checks run on both.
type Allocator string

const (
	CuMemAlloc  Allocator = "cuMemAlloc"
	CuMemCreate Allocator = "cuMemCreate"
)

// Allocators lists every allocator the suite registers, cuMemAlloc first.
func Allocators() []Allocator { return []Allocator{CuMemAlloc, CuMemCreate} }

// Buffer is device memory of either allocator.
type Buffer interface {
	membuf.Buffer
	// Span is the length the allocation covers from Addr.
	Span() int
	// Allocator is the call that allocated it.
	Allocator() Allocator
	// Context is the context the memory belongs to.
	Context() *Context
}

var (
	_ Buffer = (*Mem)(nil)
	_ Buffer = (*VMM)(nil)
)

// Physical is a physical allocation from cuMemCreate, not yet or no longer
// mapped anywhere. Only this package makes one: the driver dereferences a
// handle it did not hand out (driver 580 crashed on a made-up one).
type Physical struct {
	h    uint64
	size int
	rdma bool
}

// Size is the allocation's size.
func (p Physical) Size() int { return p.size }

// none refuses the zero Physical before the driver sees it.
func (p Physical) none(op string) error {
	if p.h == 0 {
		return fmt.Errorf("%s: no allocation (a Physical not from MemCreate)", op)
	}
	return nil
}

// Granularity is what cuMemGetAllocationGranularity says for pinned memory
// of this device created RDMA-capable or not: MINIMUM (every size and
// address must be a multiple of it) or RECOMMENDED (for performance). Both
// were 2 MiB on an H200 with driver 580, with and without the flag.
func (c *Context) Granularity(rdma, recommended bool) (int, error) {
	var g int
	err := c.Do(func() (err error) {
		g, err = memGranularity(c.Dev, rdma, recommended)
		return err
	})
	return g, err
}

// MemCreate allocates size bytes of physical device memory (cuMemCreate,
// pinned on this context's device, gpuDirectRDMACapable as rdma says).
// size must be a multiple of the granularity: the driver refuses any other
// with CUDA_ERROR_INVALID_VALUE.
func (c *Context) MemCreate(size int, rdma bool) (Physical, error) {
	p := Physical{size: size, rdma: rdma}
	err := c.Do(func() (err error) {
		p.h, err = memCreate(c.Dev, size, rdma)
		return err
	})
	return p, err
}

// MemRelease releases a physical allocation (cuMemRelease). Mappings of it
// stay usable until they are unmapped; the memory goes with the last one.
func (c *Context) MemRelease(p Physical) error {
	if err := p.none("cuMemRelease"); err != nil {
		return err
	}
	return c.Do(func() error { return memRelease(p.h, p.size) })
}

// AddressReserve reserves size bytes of device address space aligned to
// align (cuMemAddressReserve). Both must be multiples of the granularity.
func (c *Context) AddressReserve(size, align int) (uintptr, error) {
	var a uintptr
	err := c.Do(func() (err error) {
		a, err = memAddressReserve(size, align)
		return err
	})
	return a, err
}

// AddressFree gives back a reservation, exactly as reserved and with
// nothing mapped in it (cuMemAddressFree).
func (c *Context) AddressFree(addr uintptr, size int) error {
	return c.Do(func() error { return memAddressFree(addr, size) })
}

// MemMap maps all of p at addr, inside a reservation (cuMemMap, offset 0:
// the driver maps whole allocations only, CUDA_ERROR_NOT_SUPPORTED
// otherwise).
func (c *Context) MemMap(addr uintptr, p Physical) error {
	if err := p.none("cuMemMap"); err != nil {
		return err
	}
	return c.Do(func() error { return memMap(addr, p.size, p.h) })
}

// MemUnmap unmaps [addr, addr+size), whole mappings only (cuMemUnmap).
func (c *Context) MemUnmap(addr uintptr, size int) error {
	return c.Do(func() error { return memUnmap(addr, size) })
}

// SetAccess lets this context's device read and write the mapped range
// (cuMemSetAccess, CU_MEM_ACCESS_FLAGS_PROT_READWRITE). Until then a copy
// into the mapping fails.
func (c *Context) SetAccess(addr uintptr, size int) error {
	return c.Do(func() error { return memSetAccess(addr, size, c.Dev) })
}

// GPUDirectRDMACapable reads CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE
// for addr. cuMemAlloc memory reads 1 on GPUs with GPUDirect RDMA;
// cuMemCreate memory reads 1 only when created with gpuDirectRDMACapable,
// yet its dma-buf export succeeds either way (H200, driver 580): the export
// alone proves nothing about RDMA.
func (c *Context) GPUDirectRDMACapable(addr uintptr) (bool, error) {
	var ok bool
	err := c.Do(func() (err error) {
		ok, err = gdrCapable(addr)
		return err
	})
	return ok, err
}

// VMM is device memory from the virtual memory management API, allocated
// as NCCL allocates: cuMemCreate, cuMemAddressReserve, cuMemMap and
// cuMemSetAccess, the size rounded up to the granularity (see Allocator).
// It implements membuf.Buffer. Close tears it down in reverse order:
// cuMemUnmap, cuMemAddressFree, cuMemRelease.
type VMM struct {
	devMem
	phys    Physical
	gran    int  // what size was rounded to (RECOMMENDED)
	granMin int  // MINIMUM
	rdma    bool // created with gpuDirectRDMACapable
}

// AllocVMM allocates size bytes of VMM device memory, gpuDirectRDMACapable
// as rdma says (false only for negative controls). The allocation and the
// reservation are rounded up to the RECOMMENDED granularity and the address
// aligned to it, as NCCL's ncclMemAlloc does. On a failure half-way, what
// was done is undone.
func (c *Context) AllocVMM(size int, rdma bool) (*VMM, error) {
	if size <= 0 {
		return nil, fmt.Errorf("GPU buffer of %d bytes: size must be positive", size)
	}
	m := &VMM{rdma: rdma}
	err := c.Do(func() error {
		var err error
		if m.granMin, err = memGranularity(c.Dev, rdma, false); err != nil {
			return err
		}
		if m.gran, err = memGranularity(c.Dev, rdma, true); err != nil {
			return err
		}
		if err := checkGranularity(m.granMin, m.gran, pageSize()); err != nil {
			return fmt.Errorf("cuMemGetAllocationGranularity(gpu %d): %w", c.Dev.Ordinal, err)
		}
		span := roundUp(size, m.gran)
		h, err := memCreate(c.Dev, span, rdma)
		if err != nil {
			return err
		}
		m.phys = Physical{h: h, size: span, rdma: rdma}
		addr, err := memAddressReserve(span, m.gran)
		if err != nil {
			return errors.Join(err, memRelease(h, span))
		}
		if err := memMap(addr, span, h); err != nil {
			return errors.Join(err, memAddressFree(addr, span), memRelease(h, span))
		}
		if err := memSetAccess(addr, span, c.Dev); err != nil {
			return errors.Join(err, memUnmap(addr, span), memAddressFree(addr, span), memRelease(h, span))
		}
		m.devMem = devMem{ctx: c, addr: addr, size: size, span: span}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Allocator is CuMemCreate (gdr.gpu_alloc).
func (m *VMM) Allocator() Allocator { return CuMemCreate }

// GPUAlloc names the allocator for membuf.GPUAlloc.
func (m *VMM) GPUAlloc() string { return string(CuMemCreate) }

// Granularity is the granularity the size was rounded to (RECOMMENDED) and
// the MINIMUM one.
func (m *VMM) Granularity() (recommended, minimum int) { return m.gran, m.granMin }

// RDMARequested says whether it was created with gpuDirectRDMACapable.
func (m *VMM) RDMARequested() bool { return m.rdma }

// Fill copies p to the start of the buffer (host to device) and waits for
// the context: the driver refuses SYNC_MEMOPS on VMM memory
// (CUDA_ERROR_NOT_SUPPORTED, H200 with driver 580), and a copy from
// pageable memory may return before its DMA has landed (the driver API's
// "API synchronization behavior"), where a NIC would read stale bytes.
func (m *VMM) Fill(p []byte) error {
	if err := m.live("Fill", len(p)); err != nil || len(p) == 0 {
		return err
	}
	return m.ctx.Do(func() error {
		if err := m.ctx.htod(m.addr, unsafe.Pointer(&p[0]), len(p)); err != nil {
			return err
		}
		return ctxSynchronize()
	})
}

// Close unmaps the memory, frees the address range and releases the
// physical allocation, trying each step whatever the one before said; safe
// to call twice.
func (m *VMM) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.ctx.Do(func() error {
		return errors.Join(memUnmap(m.addr, m.span), memAddressFree(m.addr, m.span), memRelease(m.phys.h, m.span))
	})
}

// VMMAbsence says why GPU dev cannot register cuMemCreate memory ("" when it
// can): the driver lacks a VMM call, or GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
// is unreadable or 0. It is the precondition of every cuMemCreate case, which
// is then absent, not failed: GPU-05 judges the attribute itself.
func VMMAbsence(d *Driver, dev Device) string {
	if m := missingVMM(""); m != nil {
		var ce *Error
		errors.As(m, &ce)
		return fmt.Sprintf("GPU %s: no cuMemCreate case: %s", dev.PCI, ce.Desc)
	}
	v, err := dev.Attr(AttrGPUDirectRDMAWithVMM)
	switch {
	case err != nil:
		return fmt.Sprintf("GPU %s: %s is unreadable (%v, driver CUDA %s): cuMemCreate memory cannot be registered; GPU-05 judges the attribute", dev.PCI, AttrGPUDirectRDMAWithVMM, err, VersionString(d.Version()))
	case v != 1:
		return fmt.Sprintf("GPU %s: %s is %d: the driver does not let a NIC register cuMemCreate memory; GPU-05 judges the attribute", dev.PCI, AttrGPUDirectRDMAWithVMM, v)
	}
	return ""
}

// checkGranularity accepts a VMM granularity pair (minimum, recommended)
// whose recommended one, which sizes and aligns the suite's allocations,
// covers whole host pages of page bytes (4 KiB, or 64 KiB on arm64 kernels
// with 64K pages) and is a multiple of the minimum (2 MiB and 2 MiB on the
// H200).
func checkGranularity(min, rec, page int) error {
	if min <= 0 || rec <= 0 || rec%min != 0 || rec%page != 0 {
		return fmt.Errorf("minimum %d, recommended %d bytes: want positive multiples of the %d-byte host page, the recommended one of the minimum", min, rec, page)
	}
	return nil
}
