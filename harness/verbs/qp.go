//go:build rdma

// RC queue pairs: creation (scatter-to-CQE handled), posting (pyverbs qp.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/gdrconf/gdrconf/harness/membuf"
)

// QP is an RC queue pair.
type QP struct {
	qp        *C.struct_ibv_qp
	pd        *PD
	Num       uint32
	MaxInline int
	SQDepth   int
	RQDepth   int
	port      int
	// RecvMem is the memory its receives land in; ScatterToCQE how
	// libmlx5's scatter-to-CQE was handled for it (Scatter*, reported as
	// gdr.scatter_to_cqe), ScatterWhy the detail.
	RecvMem      membuf.Kind
	ScatterToCQE string
	ScatterWhy   string
}

// QPCaps sizes a QP.
type QPCaps struct {
	SendWR, RecvWR int
	MaxInline      int // requested; QP.MaxInline is what the device granted
}

var (
	// provMu serialises the verbs that run provider setup code (open,
	// CQ and QP creation: libmlx5 reads its environment there) with the
	// one change of that environment (scatterEnv.force), the mlx5 probe
	// and dvRefused. C code on threads the suite does not own (a CUDA
	// driver's) could still call getenv during that one setenv.
	provMu sync.Mutex
	// dvRefused: mlx5dv_create_qp refused DISABLE_SCATTER_TO_CQE once
	// (libmlx5 older than rdma-core 21); later QPs go to the environment.
	dvRefused bool
)

// CreateRCQP creates an RC QP on pd whose receive buffers are recv memory.
// A QP receiving into GPU memory on an mlx5 device never keeps libmlx5's
// scatter-to-CQE (see scatter.go): it is created through mlx5dv with
// MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE, else after MLX5_SCATTER_TO_CQE=0
// is forced; shim.c refuses any other way (EPERM). A device that refuses the
// inline size gets a second try without inline data.
func (p *PD) CreateRCQP(scq, rcq *CQ, caps QPCaps, recv membuf.Kind) (*QP, error) {
	provMu.Lock()
	defer provMu.Unlock()
	dev := mlx5Kind(C.gdr_mlx5_probe(p.ctx.ctx))
	plan, err := prepareScatter(recv, dev, dvRefused, C.gdr_scatter_env_off() != 0)
	if err != nil {
		return nil, err
	}
	devmem := C.int(0)
	if recv != membuf.Host {
		devmem = 1
	}
	create := func(dv bool) (*C.struct_ibv_qp, C.uint32_t, C.int) {
		var e C.int
		var got C.uint32_t
		cdv := C.int(0)
		if dv {
			cdv = 1
		}
		qp := C.gdr_create_rc_qp(p.pd, scq.cq, rcq.cq, C.uint32_t(caps.SendWR), C.uint32_t(caps.RecvWR), C.uint32_t(caps.MaxInline), devmem, cdv, &got, &e)
		if qp == nil && caps.MaxInline > 0 && syscall.Errno(e) != syscall.EPERM {
			qp = C.gdr_create_rc_qp(p.pd, scq.cq, rcq.cq, C.uint32_t(caps.SendWR), C.uint32_t(caps.RecvWR), 0, devmem, cdv, &got, &e)
		}
		return qp, got, e
	}
	qp, got, e := create(plan.DV)
	if qp == nil && plan.DV && (syscall.Errno(e) == syscall.EINVAL || syscall.Errno(e) == syscall.EOPNOTSUPP) {
		// libmlx5 older than rdma-core 21 refuses the unknown flag
		// (EINVAL), a context without dv ops refuses mlx5dv_create_qp
		// (EOPNOTSUPP): the environment is the other way.
		dvErr := e
		if plan, err = prepareScatter(recv, dev, true, C.gdr_scatter_env_off() != 0); err != nil {
			return nil, err
		}
		qp, got, e = create(false)
		// Only a refusal that the plain verb then overcomes was about
		// mlx5dv; the same error from both is the caps'.
		dvRefused = qp != nil
		if qp != nil {
			plan.Why += fmt.Sprintf(" (mlx5dv_create_qp: %s)", errnoName(syscall.Errno(dvErr)))
		}
	}
	if qp == nil {
		verb := fmt.Sprintf("ibv_create_qp(RC, send %d, recv %d)", caps.SendWR, caps.RecvWR)
		if plan.DV {
			verb = "mlx5dv_create_qp(RC, DISABLE_SCATTER_TO_CQE, " + verb[len("ibv_create_qp(RC, "):]
		}
		if syscall.Errno(e) == syscall.EPERM && scatterGuard(recv != membuf.Host, dev, plan.DV) != nil { // not the kernel's EPERM
			return nil, verr(verb, e, fmt.Sprintf("refused by the suite: receives in %s memory on %s (%s) need scatter-to-CQE off, and neither mlx5dv nor %s=0 is in effect", recv, p.ctx.Name, dev, ScatterEnvVar))
		}
		return nil, verr(verb, e, fmt.Sprintf("the device allows at most %d WRs per queue", p.ctx.attr.MaxQPWR))
	}
	return &QP{qp: qp, pd: p, Num: uint32(C.gdr_qp_num(qp)), MaxInline: int(got), SQDepth: caps.SendWR, RQDepth: caps.RecvWR,
		RecvMem: recv, ScatterToCQE: plan.Attr, ScatterWhy: plan.Why}, nil
}

// Close destroys the QP; safe to call twice.
func (q *QP) Close() error {
	if q == nil || q.qp == nil {
		return nil
	}
	rc := C.gdr_destroy_qp(q.qp)
	q.qp = nil
	if rc != 0 {
		return verr("ibv_destroy_qp", rc, "")
	}
	return nil
}

// PostSend posts a chained list of send WRs in one ibv_post_send.
func (q *QP) PostSend(ws ...SendWR) error {
	if len(ws) == 0 {
		return nil
	}
	cw, err := toC(ws, q.MaxInline)
	if err != nil {
		return err
	}
	var bad C.int
	if rc := C.gdr_post_send(q.qp, &cw[0], C.int(len(cw)), &bad); rc != 0 {
		return verr(fmt.Sprintf("ibv_post_send(%v, %d WRs, first bad %d)", ws[0].Op, len(ws), int(bad)), rc,
			"send queue full (too many unsignaled WRs), QP not in RTS, or inline data larger than the QP allows")
	}
	return nil
}

// PostRecv posts a chained list of receive WRs in one ibv_post_recv.
func (q *QP) PostRecv(ws ...RecvWR) error {
	if len(ws) == 0 {
		return nil
	}
	cw := make([]C.gdr_wr, len(ws))
	for i, w := range ws {
		lkey, err := sge(fmt.Sprintf("receive WR %d", i), w.Local, w.LocalAddr, w.Len)
		if err != nil {
			return err
		}
		cw[i] = C.gdr_wr{wr_id: C.uint64_t(w.ID), laddr: C.uint64_t(w.LocalAddr), len: C.uint32_t(w.Len), lkey: C.uint32_t(lkey)}
	}
	var bad C.int
	if rc := C.gdr_post_recv(q.qp, &cw[0], C.int(len(cw)), &bad); rc != 0 {
		return verr(fmt.Sprintf("ibv_post_recv(%d WRs, first bad %d)", len(ws), int(bad)), rc, "receive queue full")
	}
	return nil
}
