package membuf

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// HostMemoryRemedy is what a host buffer the kernel would not map asks for.
const HostMemoryRemedy = "free host memory"

// mmapFailed is the finding of an mmap of n bytes that failed with err:
// the host is short of memory (ENOMEM) or limits this process's.
func mmapFailed(n int, err error) error {
	return verdict.Failf(HostMemoryRemedy, "membuf: mmap %d bytes of host memory: %v", n, err)
}

// HostBuffer is page-aligned anonymous host memory from mmap: outside the Go
// heap, so its address is stable for the NIC and may be handed to C.
type HostBuffer struct {
	mu  sync.Mutex
	mem []byte
}

// NewHostOn maps size bytes (rounded up to whole pages), zeroed, preferring
// NUMA node (the NIC's, so the NIC's DMA stays on its socket); node < 0 is
// NewHost. place says what placement the kernel took.
func NewHostOn(size, node int) (b *HostBuffer, place string, err error) {
	if node < 0 {
		b, err = NewHost(size)
		return b, "no NUMA placement (node unknown)", err
	}
	if size <= 0 {
		return nil, "", fmt.Errorf("membuf: host buffer size %d must be positive", size)
	}
	pg := os.Getpagesize()
	n := pageRound(size, pg)
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, "", mmapFailed(n, err)
	}
	place, err = numa.Bind(mem, node)
	if err != nil {
		place = "no NUMA placement (" + err.Error() + ")"
	}
	for i := 0; i < n; i += pg {
		mem[i] = 0 // first touch: the pages are allocated under the policy
	}
	return &HostBuffer{mem: mem[:size:n]}, place, nil
}

// pageRound is size rounded up to whole pages of page bytes (the running
// kernel's: 4 KiB on x86, 64 KiB on arm64 kernels with 64K pages), what a
// mapping and its registration cover.
func pageRound(size, page int) int { return (size + page - 1) / page * page }

// NewHost maps size bytes (rounded up to whole pages), zeroed.
func NewHost(size int) (*HostBuffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("membuf: host buffer size %d must be positive", size)
	}
	n := pageRound(size, os.Getpagesize())
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, mmapFailed(n, err)
	}
	return &HostBuffer{mem: mem[:size:n]}, nil
}

func (b *HostBuffer) Kind() Kind { return Host }

func (b *HostBuffer) Addr() uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b.mem)))
}

func (b *HostBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mem)
}

// Bytes is the memory itself (host buffers only); nil after Close.
func (b *HostBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mem
}

func (b *HostBuffer) Fill(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return fmt.Errorf("membuf: Fill on a closed host buffer")
	}
	if len(p) > len(b.mem) {
		return fmt.Errorf("membuf: Fill of %d bytes into a %d-byte host buffer", len(p), len(b.mem))
	}
	copy(b.mem, p)
	return nil
}

func (b *HostBuffer) ReadBack(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return fmt.Errorf("membuf: ReadBack on a closed host buffer")
	}
	if len(p) > len(b.mem) {
		return fmt.Errorf("membuf: ReadBack of %d bytes from a %d-byte host buffer", len(p), len(b.mem))
	}
	copy(p, b.mem)
	return nil
}

// DmabufFD: host memory has no dma-buf exporter here.
func (b *HostBuffer) DmabufFD() (int, uint64, bool, error) { return -1, 0, false, nil }

func (b *HostBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	err := unix.Munmap(b.mem[:cap(b.mem)])
	b.mem = nil
	return err
}

var _ Buffer = (*HostBuffer)(nil)
