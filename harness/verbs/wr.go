//go:build rdma

// Work requests and their scatter/gather entries, inline decided by memory kind (pyverbs wr.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
)

// Opcode of a send work request.
type Opcode int

const (
	OpWrite    Opcode = C.IBV_WR_RDMA_WRITE
	OpWriteImm Opcode = C.IBV_WR_RDMA_WRITE_WITH_IMM
	OpSend     Opcode = C.IBV_WR_SEND
	OpRead     Opcode = C.IBV_WR_RDMA_READ
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "RDMA_WRITE"
	case OpWriteImm:
		return "RDMA_WRITE_WITH_IMM"
	case OpSend:
		return "SEND"
	case OpRead:
		return "RDMA_READ"
	}
	return fmt.Sprintf("opcode %d", int(o))
}

// Completion opcodes (ibv_wc_opcode).
const (
	WCSend         = C.IBV_WC_SEND
	WCWrite        = C.IBV_WC_RDMA_WRITE
	WCRead         = C.IBV_WC_RDMA_READ
	WCRecv         = C.IBV_WC_RECV
	WCRecvWriteImm = C.IBV_WC_RECV_RDMA_WITH_IMM
)

// SendWR is one send work request with a single SGE (Len 0: no SGE) in
// Local. There is no inline flag to set: PostSend posts inline exactly when
// Local is CPU-readable host memory and Len fits the QP's inline size, so a
// provider is never asked to memcpy from GPU memory.
type SendWR struct {
	ID         uint64
	Op         Opcode
	Local      *MR    // the MR LocalAddr lies in (nil only with Len 0)
	LocalAddr  uint64 // within Local
	Len        uint32
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	Signaled   bool
}

// RecvWR is one receive work request (Len 0: no SGE, e.g. for WRITE_WITH_IMM).
type RecvWR struct {
	ID        uint64
	Local     *MR
	LocalAddr uint64
	Len       uint32
}

// inline decides IBV_SEND_INLINE for an op of n bytes of mr on a QP that
// takes maxInline bytes inline: host memory only, by construction, and only
// for operations that send local data (an inline RDMA READ has nowhere to
// put the response: rxe completes it with a local protection error).
func inline(op Opcode, mr *MR, n uint32, maxInline int) bool {
	switch op {
	case OpSend, OpWrite, OpWriteImm:
	default:
		return false
	}
	return n > 0 && int64(n) <= int64(maxInline) && mr.CPUReadable()
}

// sge checks that [addr, addr+n) lies inside mr and returns its lkey.
func sge(what string, mr *MR, addr uint64, n uint32) (uint32, error) {
	if n == 0 {
		if mr == nil {
			return 0, nil
		}
		return mr.LKey, nil
	}
	if mr == nil {
		return 0, fmt.Errorf("%s of %d bytes at 0x%x names no MR", what, n, addr)
	}
	if addr < mr.Addr || addr-mr.Addr+uint64(n) > uint64(mr.Len) {
		return 0, fmt.Errorf("%s of %d bytes at 0x%x is outside its MR [0x%x, +%d)", what, n, addr, mr.Addr, mr.Len)
	}
	return mr.LKey, nil
}

// toC converts send WRs for the C side, deciding the send flags.
func toC(ws []SendWR, maxInline int) ([]C.gdr_wr, error) {
	out := make([]C.gdr_wr, len(ws))
	for i, w := range ws {
		lkey, err := sge(fmt.Sprintf("send WR %d (%v)", i, w.Op), w.Local, w.LocalAddr, w.Len)
		if err != nil {
			return nil, err
		}
		f := 0
		if w.Signaled {
			f |= C.IBV_SEND_SIGNALED
		}
		if inline(w.Op, w.Local, w.Len, maxInline) {
			f |= C.IBV_SEND_INLINE
		}
		out[i] = C.gdr_wr{wr_id: C.uint64_t(w.ID), laddr: C.uint64_t(w.LocalAddr), raddr: C.uint64_t(w.RemoteAddr),
			len: C.uint32_t(w.Len), lkey: C.uint32_t(lkey), rkey: C.uint32_t(w.RKey), imm: C.uint32_t(w.Imm),
			opcode: C.int32_t(w.Op), flags: C.int32_t(f)}
	}
	return out, nil
}

// Send flags as toC sets them (named here for tests).
const (
	flagSignaled = C.IBV_SEND_SIGNALED
	flagInline   = C.IBV_SEND_INLINE
)

// sendFlags is what PostSend passes as send_flags for each of ws.
func sendFlags(ws []SendWR, maxInline int) ([]int, error) {
	cw, err := toC(ws, maxInline)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(cw))
	for i := range cw {
		out[i] = int(cw[i].flags)
	}
	return out, nil
}
