//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/internal/multigpu"
)

// devMem is what the suite's two kinds of device memory share: a
// page-aligned device range of one context that data enters and leaves only
// through copies, exported as a dma-buf, read back only after the NIC's
// writes are flushed. Mem (cuMemAlloc) and VMM (cuMemCreate) embed it.
type devMem struct {
	ctx    *Context
	addr   uintptr // page-aligned start handed out
	size   int     // requested length
	span   int     // length from addr the allocation covers (what DmabufFD exports)
	mu     sync.Mutex
	closed bool
}

// Kind is membuf.GPU.
func (m *devMem) Kind() membuf.Kind { return membuf.GPU }

// Addr is the CUdeviceptr (page aligned).
func (m *devMem) Addr() uintptr { return m.addr }

// Len is the requested length.
func (m *devMem) Len() int { return m.size }

// Span is the length DmabufFD exports: Len rounded up to the host page
// (cuMemAlloc) or to the allocation granularity (cuMemCreate).
func (m *devMem) Span() int { return m.span }

// Context is the context the memory belongs to.
func (m *devMem) Context() *Context { return m.ctx }

// MemLabel is gdr.mem's value for this memory: "gpu" or "gpu-emulated".
func (m *devMem) MemLabel() string { return m.ctx.Dev.MemLabel() }

func (m *devMem) live(op string, n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%s on a freed GPU buffer", op)
	}
	if n > m.size {
		return fmt.Errorf("%s of %d bytes into a %d-byte GPU buffer", op, n, m.size)
	}
	return nil
}

// ReadBack copies the start of the buffer into p (device to host). A NIC
// may have written the buffer, so its writes are flushed first where the
// device needs it (cuFlushGPUDirectRDMAWrites; see Context.flushRemoteWrites):
// every read of GPU memory by the suite goes through here, so none can
// forget it.
func (m *devMem) ReadBack(p []byte) error {
	if err := m.live("ReadBack", len(p)); err != nil || len(p) == 0 {
		return err
	}
	return m.ctx.Do(func() error {
		if err := m.ctx.flushRemoteWrites(); err != nil {
			return err
		}
		return m.ctx.dtoh(unsafe.Pointer(&p[0]), m.addr, len(p))
	})
}

// ReadBackUnflushed is ReadBack without the flush of remote writes. The
// suite never reads so; the emulated GPU's tests (lab/emugpu) use it to show
// that the emulator refuses such a read of RDMA-written memory.
func (m *devMem) ReadBackUnflushed(p []byte) error {
	if err := m.live("ReadBackUnflushed", len(p)); err != nil || len(p) == 0 {
		return err
	}
	return m.ctx.Do(func() error { return m.ctx.dtoh(unsafe.Pointer(&p[0]), m.addr, len(p)) })
}

// DmabufFD exports the buffer's span with cuMemGetHandleForAddressRange,
// flags 0. The caller owns the fd and closes it after deregistering the MR.
func (m *devMem) DmabufFD() (int, uint64, bool, error) {
	if err := m.live("DmabufFD", 0); err != nil {
		return -1, 0, true, err
	}
	fd, err := m.ctx.dmabufFD(m.addr, m.span, 0)
	if err != nil {
		return -1, 0, true, err
	}
	return fd, 0, true, nil
}

// GPUPCI is the PCI address of the memory's GPU (membuf.DmabufMapper).
func (m *devMem) GPUPCI() string { return m.ctx.Dev.PCI }

// DmabufExport exports the buffer's span with flags (0, or
// the PCIe mapping type where nvdriver.ChooseDmabufMapping asks for
// it). A driver that refuses non-zero flags (the PCIe H200 answers 801
// NOT_SUPPORTED to the PCIe mapping; a driver older than CUDA 12.8 does
// not know it) gets the export retried with flags 0, as NCCL's
// getDmaBufFd does (src/rma/rma_proxy.cc, src/gin/gin_host_proxy.cc;
// gdakiRegMrDmaBuf in src/transport/net_ib/gdaki/gin_host_gdaki.cc), with
// the refusal in Refused. NCCL's net transport does not retry
// (src/transport/net.cc: CUCHECK), so a refusal is recorded, not hidden.
func (m *devMem) DmabufExport(flags int) (membuf.DmabufExport, error) {
	x := membuf.DmabufExport{FD: -1}
	if err := m.live("DmabufExport", 0); err != nil {
		return x, err
	}
	fd, err := m.ctx.dmabufFD(m.addr, m.span, flags)
	if err == nil || flags == 0 {
		x.FD, x.Flags = fd, flags
		if err != nil {
			x.FD = -1
		}
		return x, err
	}
	x.Refused = err
	fd, err = m.ctx.dmabufFD(m.addr, m.span, 0)
	if err != nil {
		return x, fmt.Errorf("%w; retried with flags 0: %w", x.Refused, err)
	}
	x.FD = fd
	return x, nil
}

// DmabufRange exports n bytes at offset off of the buffer's span, both
// multiples of the host page, as a dma-buf (a sub-range, as NCCL exports
// pieces of one allocation). The caller owns the fd.
func (m *devMem) DmabufRange(off, n int) (int, error) {
	if err := m.live("DmabufRange", 0); err != nil {
		return -1, err
	}
	if off < 0 || n <= 0 || off+n > m.span {
		return -1, fmt.Errorf("dma-buf of %d bytes at offset %d: outside the %d-byte GPU buffer", n, off, m.span)
	}
	return m.ctx.dmabufFD(m.addr+uintptr(off), n, 0)
}

// Mem is device memory from cuMemAlloc (or cuMemAllocManaged, for negative
// controls). It implements membuf.Buffer: Addr is host-page aligned and the
// allocation is rounded up to whole pages, so the same buffer can be exported
// as a dma-buf.
type Mem struct {
	devMem
	raw     uintptr // what cuMemAlloc returned; freed on Close
	managed bool
}

var _ membuf.Buffer = (*Mem)(nil)

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// alignUp is addr rounded up to a multiple of page (a power of two): the
// host page, 4 KiB or 64 KiB, which a dma-buf export's start must be.
func alignUp(addr uintptr, page int) uintptr { return (addr + uintptr(page) - 1) &^ uintptr(page-1) }

// Alloc allocates size bytes of device memory, page aligned.
func (c *Context) Alloc(size int) (*Mem, error) { return c.alloc(size, false) }

// AllocManaged allocates managed (unified) memory: its pointer type is
// DEVICE, yet it is not what GPUDirect RDMA registers, so checks use it to
// prove they tell the two apart.
func (c *Context) AllocManaged(size int) (*Mem, error) { return c.alloc(size, true) }

func (c *Context) alloc(size int, managed bool) (*Mem, error) {
	if size <= 0 {
		return nil, fmt.Errorf("GPU buffer of %d bytes: size must be positive", size)
	}
	page := pageSize()
	span := roundUp(size, page)
	raw, err := c.memAlloc(span, managed)
	if err != nil {
		return nil, err
	}
	addr := raw
	if raw%uintptr(page) != 0 {
		// cuMemAlloc aligns large allocations to 2 MiB but small ones only
		// to 512 bytes: take one page more and start at the next boundary.
		if err := c.memFree(raw); err != nil {
			return nil, err
		}
		if raw, err = c.memAlloc(span+page, managed); err != nil {
			return nil, err
		}
		addr = alignUp(raw, page)
	}
	return &Mem{devMem: devMem{ctx: c, addr: addr, size: size, span: span}, raw: raw, managed: managed}, nil
}

// Managed reports whether this is cuMemAllocManaged memory.
func (m *Mem) Managed() bool { return m.managed }

// Allocator is CuMemAlloc (gdr.gpu_alloc).
func (m *Mem) Allocator() Allocator { return CuMemAlloc }

// GPUAlloc names the allocator for membuf.GPUAlloc.
func (m *Mem) GPUAlloc() string {
	if m.managed {
		return "cuMemAllocManaged"
	}
	return string(CuMemAlloc)
}

// Fill copies p to the start of the buffer (host to device). SYNC_MEMOPS,
// set on every buffer RDMA touches (Alloc in testing.go), makes the copy
// complete before it returns.
func (m *Mem) Fill(p []byte) error {
	if err := m.live("Fill", len(p)); err != nil || len(p) == 0 {
		return err
	}
	return m.ctx.HtoD(m.addr, unsafe.Pointer(&p[0]), len(p))
}

// Close frees the memory; safe to call twice.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.ctx.memFree(m.raw)
}

// Pinned is page-locked host memory from cuMemHostAlloc: the copy engines
// reach it by DMA, so copies from it run at link speed.
type Pinned struct {
	ctx    *Context
	p      unsafe.Pointer
	n      int
	mu     sync.Mutex
	closed bool
}

// HostAlloc allocates n bytes of pinned host memory usable from every context.
func (c *Context) HostAlloc(n int) (*Pinned, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned host buffer of %d bytes: size must be positive", n)
	}
	p, err := c.hostAlloc(n)
	if err != nil {
		return nil, err
	}
	return &Pinned{ctx: c, p: p, n: n}, nil
}

// Bytes is the memory as a slice; invalid after Close.
func (h *Pinned) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Addr is the host address.
func (h *Pinned) Addr() uintptr { return uintptr(h.p) }

// Close frees the memory; safe to call twice.
func (h *Pinned) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	return h.ctx.hostFree(h.p, h.n)
}

// Direction of a copy.
type Direction string

const (
	HtoD Direction = "HtoD"
	DtoH Direction = "DtoH"
)

// Loop bounds a timed copy loop: it ends after Reps operations (0: no
// count), when Stop is closed, or when Limit has passed (0: no limit),
// whichever comes first. Reps or Limit must be set: every loop ends.
type Loop struct {
	Reps  int
	Stop  <-chan struct{}
	Limit time.Duration
}

// run times op back to back under l's bounds on the calling thread. This is
// the one timed loop of the package: host copies, peer copies and the loops
// that keep a link busy all go through it.
func (l Loop) run(op func() error) ([]multigpu.Span, error) {
	if l.Reps <= 0 && l.Limit <= 0 {
		return nil, errors.New("copy loop without a bound: set Reps or Limit")
	}
	var deadline time.Time
	if l.Limit > 0 {
		deadline = time.Now().Add(l.Limit)
	}
	var out []multigpu.Span
	for l.Reps <= 0 || len(out) < l.Reps {
		select {
		case <-l.Stop: // a nil Stop is never ready
			return out, nil
		default:
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return out, nil
		}
		start := time.Now()
		if err := op(); err != nil {
			return out, err
		}
		out = append(out, multigpu.Span{Start: start, End: time.Now()})
	}
	return out, nil
}

// Durations lists the spans' durations.
func Durations(spans []multigpu.Span) []time.Duration {
	out := make([]time.Duration, len(spans))
	for i, s := range spans {
		out[i] = s.Duration()
	}
	return out
}

// CopyLoop copies n bytes between dev and host in direction dir back to
// back, one synchronous copy per span, under l's bounds, on one locked
// thread with the context current.
func (c *Context) CopyLoop(dir Direction, dev *Mem, host *Pinned, n int, l Loop) ([]multigpu.Span, error) {
	if err := copyFits(dev, host, n); err != nil {
		return nil, err
	}
	var spans []multigpu.Span
	err := c.Do(func() (err error) {
		spans, err = l.run(func() error { return c.copyOnce(dir, dev, host, n) })
		return err
	})
	return spans, err
}

// Copy runs reps synchronous copies of n bytes between dev and host in
// direction dir on one locked thread and returns each copy's duration.
func (c *Context) Copy(dir Direction, dev *Mem, host *Pinned, n, reps int) ([]time.Duration, error) {
	spans, err := c.CopyLoop(dir, dev, host, n, Loop{Reps: reps})
	return Durations(spans), err
}

// copyFits checks that n bytes fit both buffers.
func copyFits(dev *Mem, host *Pinned, n int) error {
	if n > dev.span || n > host.n || n <= 0 {
		return fmt.Errorf("copy of %d bytes between a %d-byte GPU buffer and a %d-byte host buffer", n, dev.span, host.n)
	}
	return nil
}

// copyOnce copies n bytes in direction dir; the context must be current.
func (c *Context) copyOnce(dir Direction, dev *Mem, host *Pinned, n int) error {
	if dir == HtoD {
		return c.htod(dev.addr, host.p, n)
	}
	return c.dtoh(host.p, dev.addr, n)
}

// CopyUntil copies n bytes in direction dir back to back until stop is
// closed or limit has passed, keeping the link busy while someone else
// samples it. It returns the number of copies made.
func (c *Context) CopyUntil(dir Direction, dev *Mem, host *Pinned, n int, stop <-chan struct{}, limit time.Duration) (int, error) {
	spans, err := c.CopyLoop(dir, dev, host, n, Loop{Stop: stop, Limit: limit})
	return len(spans), err
}

// GBps converts bytes moved in d to GB/s (10^9 bytes per second).
func GBps(bytes int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e9
}
