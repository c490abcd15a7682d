//go:build rdma

// dma-buf memory regions and the kernel's dma-buf probe (pyverbs mr.pyx DMABufMR, dmabuf.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/gdrconf/gdrconf/harness/membuf"
)

// ErrNoDmabufSymbol: the loaded libibverbs predates ibv_reg_dmabuf_mr (rdma-core 34).
var ErrNoDmabufSymbol = errors.New("ibv_reg_dmabuf_mr is not supported by this libibverbs (rdma-core older than v34): upgrade rdma-core / MLNX_OFED")

// RegDmabufMR registers length bytes at offset of dma-buf fd, addressed by
// work requests as iova. The memory is taken to be device memory: an iova is
// no CPU address, so nothing on a dma-buf MR is ever copied by the CPU.
func (p *PD) RegDmabufMR(offset uint64, n int, iova uint64, fd int, access int) (*MR, error) {
	if C.gdr_has_dmabuf() == 0 {
		return nil, ErrNoDmabufSymbol
	}
	var e C.int
	mr := C.gdr_reg_dmabuf_mr(p.pd, C.uint64_t(offset), C.size_t(n), C.uint64_t(iova), C.int(fd), C.int(access), &e)
	if mr == nil {
		hint := ""
		switch syscall.Errno(e) {
		case syscall.EOPNOTSUPP, syscall.EPROTONOSUPPORT:
			hint = "the kernel or the NIC driver does not support dma-buf MRs (needs Linux 5.12+ and a driver with dma-buf support, e.g. mlx5)"
		case syscall.EBADF:
			hint = "the fd is not a dma-buf"
		}
		return nil, verr(fmt.Sprintf("ibv_reg_dmabuf_mr(fd %d, offset %d, %d bytes)", fd, offset, n), e, hint)
	}
	return &MR{mr: mr, Addr: iova, Len: n, LKey: uint32(C.gdr_mr_lkey(mr)), RKey: uint32(C.gdr_mr_rkey(mr)), Mem: membuf.GPU, Path: PathDmabuf}, nil
}

// DmabufSupport is the kernel probe's answer.
type DmabufSupport struct {
	Supported bool
	// Inconclusive: the probe could not tell (EINVAL: some kernels and
	// drivers check arguments before they look up the fd); only a real
	// registration of an exported buffer decides.
	Inconclusive bool
	Errno        syscall.Errno // what the probe returned
	Reason       string
}

// ProbeDmabuf calls ibv_reg_dmabuf_mr with fd -1: EBADF means the kernel
// and driver implement dma-buf MRs (they got as far as looking up the fd);
// EOPNOTSUPP/EPROTONOSUPPORT means they do not.
func (p *PD) ProbeDmabuf() (DmabufSupport, error) {
	if C.gdr_has_dmabuf() == 0 {
		return DmabufSupport{Reason: ErrNoDmabufSymbol.Error()}, nil
	}
	var e C.int
	mr := C.gdr_reg_dmabuf_mr(p.pd, 0, 4096, 0, -1, C.int(AccessLocalWrite), &e)
	if mr != nil { // cannot happen with fd -1; do not leak it if it does
		C.gdr_dereg_mr(mr)
		return DmabufSupport{}, errors.New("ibv_reg_dmabuf_mr accepted fd -1: the driver is broken")
	}
	return dmabufProbeAnswer(syscall.Errno(e), p.ctx.Name)
}

// dmabufProbeAnswer reads the errno of ibv_reg_dmabuf_mr(fd=-1) on dev as
// NCCL does (src/transport/net_ib/gdr.cc, ibDmaBufSupportInitOnce): EBADF
// means the kernel and driver got as far as the fd, EOPNOTSUPP or
// EPROTONOSUPPORT that they have no dma-buf MRs.
func dmabufProbeAnswer(en syscall.Errno, dev string) (DmabufSupport, error) {
	switch en {
	case syscall.EBADF:
		return DmabufSupport{Supported: true, Errno: en, Reason: "ibv_reg_dmabuf_mr(fd=-1) returned EBADF: dma-buf MRs are supported"}, nil
	case syscall.EOPNOTSUPP, syscall.EPROTONOSUPPORT, syscall.ENOSYS:
		return DmabufSupport{Errno: en, Reason: fmt.Sprintf("ibv_reg_dmabuf_mr(fd=-1) returned %s: the kernel or %s's driver does not support dma-buf MRs", errnoName(en), dev)}, nil
	case syscall.EINVAL:
		return DmabufSupport{Inconclusive: true, Errno: en, Reason: fmt.Sprintf("ibv_reg_dmabuf_mr(fd=-1) returned EINVAL on %s: inconclusive (the arguments were checked before the fd), a registration of a real dma-buf decides", dev)}, nil
	default:
		return DmabufSupport{Errno: en}, verr("ibv_reg_dmabuf_mr(fd=-1) probe", C.int(en), "unexpected answer; expected EBADF (supported) or EOPNOTSUPP (not)")
	}
}
