//go:build rdma

// Memory regions of host and GPU memory, and what pins them (pyverbs mr.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"syscall"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Access flags.
const (
	AccessLocalWrite  = C.IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite = C.IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead  = C.IBV_ACCESS_REMOTE_READ
	AccessRelaxed     = C.IBV_ACCESS_RELAXED_ORDERING
	AccessRW          = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead
)

// MR is a registered memory region. It knows what memory it covers, so a
// work request on it can never be posted inline unless the CPU may read it.
type MR struct {
	mr   *C.struct_ibv_mr
	Addr uint64 // what work requests address: the virtual address, or a dma-buf MR's iova
	Len  int
	LKey uint32
	RKey uint32
	// Mem is the memory behind the MR: membuf.Host memory the CPU can read,
	// or GPU memory it must never touch (a CPU read of cuMemAlloc memory
	// faults on current drivers).
	Mem membuf.Kind
	// Path is how it was registered: PathHost (host memory), PathPeermem
	// (ibv_reg_mr on device memory, through nvidia_peermem) or PathDmabuf.
	Path   string
	pinned uint64 // host bytes counted against RLIMIT_MEMLOCK
}

// Registration paths, as gdr.mr_path reports them.
const (
	PathHost    = "host"
	PathPeermem = "peermem"
	PathDmabuf  = "dmabuf"
)

// CPUReadable reports whether the CPU may read the MR's memory (and so the
// provider may copy it into an inline WQE).
func (m *MR) CPUReadable() bool { return m != nil && m.Mem == membuf.Host && m.Path != PathDmabuf }

// RegMR registers [addr, addr+n) of memory of kind mem with access flags.
// Device memory registered this way takes the peer-memory path
// (nvidia_peermem).
func (p *PD) RegMR(addr uintptr, n int, access int, mem membuf.Kind) (*MR, error) {
	if mem != membuf.Host && mem != membuf.GPU {
		return nil, fmt.Errorf("ibv_reg_mr(0x%x, %d): memory kind %q is neither host nor gpu", addr, n, mem)
	}
	var span uint64 // host pages the kernel pins, against RLIMIT_MEMLOCK
	if mem == membuf.Host {
		span = pageSpan(addr, n)
		memlockMu.Lock()
		defer memlockMu.Unlock()
		if err := ensureMemlock(span); err != nil {
			return nil, fmt.Errorf("ibv_reg_mr(0x%x, %d) of host memory: %w", addr, n, err)
		}
	}
	var e C.int
	mr := C.gdr_reg_mr(p.pd, C.uintptr_t(addr), C.size_t(n), C.int(access), &e)
	if mr == nil {
		hint, remedy := "", ""
		switch en := syscall.Errno(e); {
		case en == syscall.EFAULT:
			hint = "the address range is not mapped, or is GPU memory without peer memory support (load nvidia-peermem, or use dma-buf)"
		case (en == syscall.ENOMEM || en == syscall.EPERM) && mem == membuf.Host:
			why, r := memlockHint(span)
			hint, remedy = "the NIC is out of MR resources, or "+why, r
		case en == syscall.ENOMEM:
			hint = "the NIC is out of MR resources, or the GPU's BAR1 aperture is full (nvidia-smi -q -d MEMORY shows BAR1 usage)"
		case en == syscall.EINVAL:
			hint = "bad length/alignment or access flags for this device"
		}
		return nil, verrFinding(fmt.Sprintf("ibv_reg_mr(0x%x, %d)", addr, n), e, verdict.Finding{Outcome: verdict.FellShort, Cause: hint, Remedy: remedy})
	}
	path := PathHost
	if mem == membuf.GPU {
		path = PathPeermem
	}
	pinnedHost += span
	return &MR{mr: mr, Addr: uint64(addr), Len: n, LKey: uint32(C.gdr_mr_lkey(mr)), RKey: uint32(C.gdr_mr_rkey(mr)), Mem: mem, Path: path, pinned: span}, nil
}

// memlockHint explains a failed host registration of span bytes by the
// locked-memory limit when the limit is the reason, with the remedy then
// ("" when it is not). The caller holds memlockMu.
func memlockHint(span uint64) (why, remedy string) {
	l, err := readMemlock()
	if err != nil {
		return "the locked-memory limit (" + err.Error() + ")", MemlockRemedy
	}
	cause, why := memlockCause(l, pinnedHost, span)
	if cause {
		return why, MemlockRemedy
	}
	return "(" + why + ")", ""
}

// Close deregisters the MR; safe to call twice.
func (m *MR) Close() error {
	if m == nil || m.mr == nil {
		return nil
	}
	rc := C.gdr_dereg_mr(m.mr)
	m.mr = nil
	if rc != 0 {
		return verr("ibv_dereg_mr", rc, "")
	}
	if m.pinned > 0 {
		memlockMu.Lock()
		pinnedHost -= min(m.pinned, pinnedHost)
		memlockMu.Unlock()
		m.pinned = 0
	}
	return nil
}
