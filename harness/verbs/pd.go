//go:build rdma

// Protection domains (pyverbs pd.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

// PD is a protection domain.
type PD struct {
	pd  *C.struct_ibv_pd
	ctx *Context
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	var e C.int
	pd := C.gdr_alloc_pd(c.ctx, &e)
	if pd == nil {
		return nil, verr("ibv_alloc_pd", e, "")
	}
	return &PD{pd: pd, ctx: c}, nil
}

// Close deallocates the PD; safe to call twice.
func (p *PD) Close() error {
	if p == nil || p.pd == nil {
		return nil
	}
	rc := C.gdr_dealloc_pd(p.pd)
	p.pd = nil
	if rc != 0 {
		return verr("ibv_dealloc_pd", rc, "a QP or MR of this PD is still open")
	}
	return nil
}
