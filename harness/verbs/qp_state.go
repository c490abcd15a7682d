//go:build rdma

// Queue pair state transitions RESET -> INIT -> RTR -> RTS, and ERR (pyverbs qp.pyx to_init/to_rtr/to_rts).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Init moves the QP RESET -> INIT on port with remote access flags.
func (q *QP) Init(port, access int) error {
	q.port = port
	if rc := C.gdr_qp_init(q.qp, C.uint8_t(port), C.int(access)); rc != 0 {
		return verr("ibv_modify_qp(INIT)", rc, fmt.Sprintf("check port %d exists (GDR_IB_PORT)", port))
	}
	return nil
}

// RTR moves INIT -> RTR towards r.
func (q *QP) RTR(r Remote) error {
	mtu := MTUEnum(r.MTU)
	if mtu == 0 {
		return fmt.Errorf("ibv_modify_qp(RTR): path MTU %d is not 256..4096", r.MTU)
	}
	if r.SL < 0 || r.SL > 15 {
		return fmt.Errorf("ibv_modify_qp(RTR): service level %d out of range (want 0..15, GDR_IB_SL)", r.SL)
	}
	if r.TC < 0 || r.TC > 255 {
		return fmt.Errorf("ibv_modify_qp(RTR): traffic class %d out of range (want 0..255, GDR_IB_TC)", r.TC)
	}
	global := C.int(0)
	if r.GRH.Use {
		global = 1
	}
	rc := C.gdr_qp_rtr(q.qp, C.uint8_t(q.port), C.int(mtu), C.uint32_t(r.QPN), C.uint32_t(r.PSN), C.uint16_t(r.LID),
		global, (*C.uint8_t)(unsafe.Pointer(&r.GID[0])), C.uint8_t(r.SGIDIdx), C.uint8_t(clampRd(r.RdAtom)),
		C.uint8_t(r.SL), C.uint8_t(r.TC))
	if rc != 0 {
		return verr("ibv_modify_qp(RTR)", rc, rtrHint(r, q.port, syscall.Errno(rc)))
	}
	return nil
}

// SetError moves the QP to the error state: every outstanding WR completes
// with WR_FLUSH_ERR, so a polling loop on another goroutine (Bandwidth,
// Latency, Wait) returns. The QP can only be destroyed afterwards. Safe to
// call while another goroutine polls; not after Close.
func (q *QP) SetError() error {
	if q == nil || q.qp == nil {
		return nil
	}
	if rc := C.gdr_qp_to_err(q.qp); rc != 0 {
		return verr("ibv_modify_qp(ERR)", rc, "")
	}
	return nil
}

// RTS moves RTR -> RTS with our send PSN and the local ACK timeout
// (4.096 us x 2^timeout, 1..31; 0 or out of range is 14, 67 ms); the NIC
// retransmits 7 times before the WR fails.
func (q *QP) RTS(psn uint32, rdAtom, timeout int) error {
	if timeout < 1 || timeout > 31 {
		timeout = 14
	}
	if rc := C.gdr_qp_rts(q.qp, C.uint32_t(psn), C.uint8_t(clampRd(rdAtom)), C.uint8_t(timeout), 7); rc != 0 {
		return verr("ibv_modify_qp(RTS)", rc, "")
	}
	return nil
}
