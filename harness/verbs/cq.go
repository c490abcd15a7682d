//go:build rdma

// Completion queues, work completions and polling them (pyverbs cq.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// CQ is a completion queue.
type CQ struct {
	cq  *C.struct_ibv_cq
	buf []C.gdr_wc
}

// CreateCQ creates a CQ with at least cqe entries.
func (c *Context) CreateCQ(cqe int) (*CQ, error) {
	provMu.Lock()
	defer provMu.Unlock()
	var e C.int
	cq := C.gdr_create_cq(c.ctx, C.int(cqe), &e)
	if cq == nil {
		return nil, verr(fmt.Sprintf("ibv_create_cq(%d)", cqe), e, fmt.Sprintf("the device allows at most %d entries", c.attr.MaxCQE))
	}
	return &CQ{cq: cq}, nil
}

// Close destroys the CQ; safe to call twice.
func (q *CQ) Close() error {
	if q == nil || q.cq == nil {
		return nil
	}
	rc := C.gdr_destroy_cq(q.cq)
	q.cq = nil
	if rc != 0 {
		return verr("ibv_destroy_cq", rc, "a QP using it is still open")
	}
	return nil
}

// WC is one work completion.
type WC struct {
	ID        uint64
	Status    int
	Opcode    int
	ByteLen   uint32
	Imm       uint32
	HasImm    bool
	VendorErr uint32
	QPNum     uint32
}

// OK reports a successful completion.
func (w WC) OK() bool { return w.Status == 0 }

// StatusString is libibverbs' text for Status.
func StatusString(status int) string { return C.GoString(C.gdr_wc_status_str(C.int(status))) }

// WCError is a completion with an error status.
type WCError struct {
	WC   WC
	What string
	// Evidence, when a caller sets it (harness/rc: the NIC's counters since
	// the connection and the port state), replaces the status's generic
	// hint: what happened, instead of what may have.
	Evidence string
}

func (e *WCError) Error() string {
	hint := wcHint(e.WC.Status)
	if e.Evidence != "" {
		hint = "; " + e.Evidence
	}
	return fmt.Sprintf("%s: work completion error: wr_id %d status %d (%s), vendor error 0x%x%s",
		e.What, e.WC.ID, e.WC.Status, StatusString(e.WC.Status), e.WC.VendorErr, hint)
}

// Hint is the status's generic guess at a cause, "" when it has none: what
// may have happened, for a caller whose evidence does not say what did.
func (e *WCError) Hint() string { return strings.TrimPrefix(wcHint(e.WC.Status), ": ") }

func wcHint(status int) string {
	switch status {
	case C.IBV_WC_REM_ACCESS_ERR:
		return ": the peer's MR rejected the access (rkey, address range or access flags)"
	case C.IBV_WC_RETRY_EXC_ERR:
		return ": the peer did not acknowledge (unreachable GID/LID, wrong QPN, or the peer's QP is gone)"
	case C.IBV_WC_RNR_RETRY_EXC_ERR:
		return ": the peer had no receive posted"
	case C.IBV_WC_LOC_PROT_ERR:
		return ": local lkey/address mismatch"
	case C.IBV_WC_LOC_QP_OP_ERR:
		return ": local QP operation error (bad WR or routing problem)"
	case C.IBV_WC_WR_FLUSH_ERR:
		return ": flushed because the QP went to the error state after an earlier failure"
	}
	return ""
}

// TimeoutError is a poll or wait that passed its deadline.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	Got     int
	Want    int
	// Evidence, when a caller sets it, replaces the generic guess at a cause
	// (as WCError.Evidence).
	Evidence string
}

func (e *TimeoutError) Error() string {
	why := "the peer stopped, the fabric drops packets, or GDR_TIMEOUT is too short for this link"
	if e.Evidence != "" {
		why = e.Evidence
	}
	return fmt.Sprintf("%s: no completion within %v (got %d of %d): %s", e.What, e.Timeout, e.Got, e.Want, why)
}

// Poll collects completions into out until it holds at least min of them
// (min <= len(out)) or timeout passes; one cgo call for the whole wait.
// Completions with an error status are returned as well; use Check.
func (q *CQ) Poll(out []WC, min int, timeout time.Duration) (int, error) {
	if len(out) == 0 {
		return 0, nil
	}
	if cap(q.buf) < len(out) {
		q.buf = make([]C.gdr_wc, len(out))
	}
	b := q.buf[:len(out)]
	n := int(C.gdr_poll(q.cq, &b[0], C.int(len(out)), C.int(min), C.int64_t(timeout)))
	if n < 0 {
		return 0, verr("ibv_poll_cq", C.int(-n), "")
	}
	for i := 0; i < n; i++ {
		w := b[i]
		out[i] = WC{ID: uint64(w.wr_id), Status: int(w.status), Opcode: int(w.opcode), ByteLen: uint32(w.byte_len),
			Imm: uint32(w.imm), HasImm: w.wc_flags&C.IBV_WC_WITH_IMM != 0, VendorErr: uint32(w.vendor_err), QPNum: uint32(w.qp_num)}
	}
	if n < min {
		return n, &TimeoutError{What: "ibv_poll_cq", Timeout: timeout, Got: n, Want: min}
	}
	return n, nil
}

// Wait polls for exactly n completions and fails on the first error status.
func (q *CQ) Wait(n int, what string, timeout time.Duration) ([]WC, error) {
	out := make([]WC, n)
	got := 0
	deadline := time.Now().Add(timeout)
	for got < n {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		k, err := q.Poll(out[got:], n-got, left)
		for _, w := range out[got : got+k] {
			if !w.OK() {
				return out[:got+k], &WCError{WC: w, What: what}
			}
		}
		got += k
		if err != nil {
			var te *TimeoutError
			if errors.As(err, &te) {
				te.What, te.Got, te.Want = what, got, n
			}
			return out[:got], err
		}
	}
	return out, nil
}

// WaitByte spins until the byte at addr (host memory) equals want.
func WaitByte(addr uintptr, want byte, timeout time.Duration) error {
	if C.gdr_wait_u8(C.uintptr_t(addr), C.uint8_t(want), C.int64_t(timeout)) != 0 {
		return &TimeoutError{What: fmt.Sprintf("waiting for byte 0x%02x at 0x%x", want, addr), Timeout: timeout, Want: 1}
	}
	return nil
}
