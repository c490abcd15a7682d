//go:build rdma

// Devices and their contexts: listing, opening, device attributes (pyverbs device.pyx).

package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// DeviceInfo is one entry of ibv_get_device_list.
type DeviceInfo struct {
	Name string
	GUID uint64
}

// Devices lists the RDMA devices libibverbs sees.
func Devices() ([]DeviceInfo, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var n, e C.int
	l := C.gdr_get_device_list(&n, &e)
	if l == nil {
		if syscall.Errno(e) == syscall.ENOSYS {
			return nil, nil // no kernel support: no devices
		}
		return nil, verr("ibv_get_device_list", e, "")
	}
	defer C.gdr_free_device_list(l)
	out := make([]DeviceInfo, 0, int(n))
	for i := 0; i < int(n); i++ {
		d := C.gdr_dev_at(l, C.int(i))
		out = append(out, DeviceInfo{Name: C.GoString(C.gdr_dev_name(d)), GUID: uint64(C.gdr_dev_guid(d))})
	}
	return out, nil
}

// Context is an open device.
type Context struct {
	Name string
	ctx  *C.struct_ibv_context
	attr DeviceAttr
}

// Open opens the device called name; "" opens the first one.
func Open(name string) (*Context, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var n, e C.int
	l := C.gdr_get_device_list(&n, &e)
	if l == nil && syscall.Errno(e) != syscall.ENOSYS {
		return nil, verr("ibv_get_device_list", e, "")
	}
	if l != nil {
		defer C.gdr_free_device_list(l)
	}
	var names []string
	for i := 0; i < int(n); i++ {
		d := C.gdr_dev_at(l, C.int(i))
		dn := C.GoString(C.gdr_dev_name(d))
		names = append(names, dn)
		if name != "" && dn != name {
			continue
		}
		provMu.Lock()
		c := C.gdr_open(d, &e)
		provMu.Unlock()
		if en := syscall.Errno(e); c == nil && (en == syscall.EACCES || en == syscall.EPERM) {
			// libibverbs opens the node in this process's own /dev, so "/"
			// whatever GDR_HOST_ROOT says.
			root, err := hostfs.New("/")
			if err != nil {
				return nil, verr("ibv_open_device("+dn+")", e, err.Error())
			}
			return nil, verrFinding("ibv_open_device("+dn+")", e, NodeAccess(root, "/dev/infiniband/"+C.GoString(C.gdr_dev_node(d)), en))
		}
		if c == nil {
			return nil, verr("ibv_open_device("+dn+")", e, "check /dev/infiniband/uverbs* exists and is accessible (ib_uverbs loaded, permissions)")
		}
		ctx := &Context{Name: dn, ctx: c}
		a, err := ctx.queryDevice()
		if err != nil {
			ctx.Close()
			return nil, err
		}
		ctx.attr = a
		return ctx, nil
	}
	listed := strings.Join(names, ", ")
	if len(names) == 0 {
		// ENOSYS from ibv_get_device_list: no uverbs in this kernel.
		listed = "none (no ib_uverbs device: load ib_uverbs and the NIC's RDMA driver)"
	}
	if name == "" {
		return nil, fmt.Errorf("ibv_get_device_list: no RDMA devices; libibverbs lists: %s", listed)
	}
	return nil, fmt.Errorf("RDMA device %q not found; libibverbs lists: %s", name, listed)
}

// Close closes the device; safe to call twice.
func (c *Context) Close() error {
	if c == nil || c.ctx == nil {
		return nil
	}
	rc := C.gdr_close(c.ctx)
	c.ctx = nil
	if rc != 0 {
		return verr("ibv_close_device", rc, "")
	}
	return nil
}

// DeviceAttr is the part of ibv_device_attr the suite uses.
type DeviceAttr struct {
	FWVer        string
	VendorID     uint32
	VendorPartID uint32
	MaxQPWR      int
	MaxCQE       int
	MaxSGE       int
	MaxQPRdAtom  int // RDMA READs this QP answers at once (responder: RTR max_dest_rd_atomic)
	// MaxQPInitRdAtom is how many RDMA READs a QP may have outstanding as
	// initiator (RTS max_rd_atomic); asking for more makes RTS fail with EINVAL.
	MaxQPInitRdAtom int
	MaxMRSize       uint64
	PhysPorts       int
}

func (c *Context) queryDevice() (DeviceAttr, error) {
	var a C.struct_ibv_device_attr
	if rc := C.gdr_query_device(c.ctx, &a); rc != 0 {
		return DeviceAttr{}, verr("ibv_query_device", rc, "")
	}
	return DeviceAttr{
		FWVer:           C.GoString(&a.fw_ver[0]),
		VendorID:        uint32(a.vendor_id),
		VendorPartID:    uint32(a.vendor_part_id),
		MaxQPWR:         int(a.max_qp_wr),
		MaxCQE:          int(a.max_cqe),
		MaxSGE:          int(a.max_sge),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
		MaxMRSize:       uint64(a.max_mr_size),
		PhysPorts:       int(a.phys_port_cnt),
	}, nil
}

// Attr returns the device attributes read at Open.
func (c *Context) Attr() DeviceAttr { return c.attr }
