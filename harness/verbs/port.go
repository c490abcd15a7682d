//go:build rdma

// Ports, GIDs and MTUs: ibv_query_port and ibv_query_gid (pyverbs device.pyx PortAttr, addr.pyx GID).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Port states and link layers, as in verbs.h.
const (
	PortActive = 4

	LinkLayerUnspecified = 0
	LinkLayerIB          = 1
	LinkLayerEthernet    = 2
)

// PortAttr is the part of ibv_port_attr the suite uses.
type PortAttr struct {
	State       int
	StateName   string
	MaxMTU      int // bytes
	ActiveMTU   int // bytes
	LID         uint16
	LinkLayer   string // InfiniBand or Ethernet
	ActiveWidth int    // lanes
	ActiveSpeed float64
	RateGbps    float64 // lanes x per-lane rate; 0 when unknown
	GIDTableLen int
	// Flags is ibv_port_attr.flags (IBV_QPF_*), FlagsRead whether this
	// build could read them (rdma-core 20 headers or later); GRHRequired is
	// IBV_QPF_GRH_REQUIRED among them (see grh.go).
	Flags       uint8
	FlagsRead   bool
	GRHRequired bool
}

var portStates = map[int]string{0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}

// MTUBytes converts an ibv_mtu enum (1..5) to bytes.
func MTUBytes(e int) int {
	if e < 1 || e > 5 {
		return 0
	}
	return 128 << e
}

// MTUEnum converts bytes to the ibv_mtu enum, or 0.
func MTUEnum(b int) int {
	for e := 1; e <= 5; e++ {
		if 128<<e == b {
			return e
		}
	}
	return 0
}

// Per-lane rates in Gbit/s of ibv_port_attr.active_speed codes (nominal, as
// sysfs's rate file prints them).
var laneGbps = map[int]float64{1: 2.5, 2: 5, 4: 10, 8: 10, 16: 14, 32: 25, 64: 50, 128: 100}
var widthLanes = map[int]int{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}

// QueryPort reads port's attributes.
func (c *Context) QueryPort(port int) (PortAttr, error) {
	if port < 1 || port > 255 {
		return PortAttr{}, fmt.Errorf("port %d out of range 1..255", port)
	}
	var a C.struct_ibv_port_attr
	if rc := C.gdr_query_port(c.ctx, C.uint8_t(port), &a); rc != 0 {
		return PortAttr{}, verr(fmt.Sprintf("ibv_query_port(%s, %d)", c.Name, port), rc, "the device may not have this port (GDR_IB_PORT)")
	}
	return portAttr(&a), nil
}

// portAttr converts what ibv_query_port filled in.
func portAttr(a *C.struct_ibv_port_attr) PortAttr {
	p := PortAttr{
		State:       int(a.state),
		StateName:   portStates[int(a.state)],
		MaxMTU:      MTUBytes(int(a.max_mtu)),
		ActiveMTU:   MTUBytes(int(a.active_mtu)),
		LID:         uint16(a.lid),
		GIDTableLen: int(a.gid_tbl_len),
	}
	if f := int(C.gdr_port_flags(a)); f >= 0 {
		p.Flags, p.FlagsRead, p.GRHRequired = uint8(f), true, f&QPFGRHRequired != 0
	}
	switch int(a.link_layer) {
	case LinkLayerEthernet:
		p.LinkLayer = "Ethernet"
	default:
		p.LinkLayer = "InfiniBand"
	}
	p.ActiveWidth = widthLanes[int(a.active_width)]
	p.ActiveSpeed = laneGbps[int(a.active_speed)]
	p.RateGbps = float64(p.ActiveWidth) * p.ActiveSpeed
	return p
}

// portAttrOf is portAttr of an ibv_port_attr that shim.c filled with
// linkLayer and flags, as a provider would (for tests: cgo has no place in
// _test.go files); qpfGRH is the headers' IBV_QPF_GRH_REQUIRED.
func portAttrOf(linkLayer, flags int) (p PortAttr, qpfGRH int) {
	var a C.struct_ibv_port_attr
	C.gdr_fake_port_attr(&a, C.int(linkLayer), C.int(flags))
	return portAttr(&a), int(C.gdr_qpf_grh_required())
}

// QueryGID reads GID index of port.
func (c *Context) QueryGID(port, index int) ([16]byte, error) {
	var g [16]byte
	if rc := C.gdr_query_gid(c.ctx, C.uint8_t(port), C.int(index), (*C.uint8_t)(unsafe.Pointer(&g[0]))); rc != 0 {
		return g, verr(fmt.Sprintf("ibv_query_gid(%s, port %d, index %d)", c.Name, port, index), rc, "")
	}
	return g, nil
}
