//go:build rdma

package verbs

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// Library is the soname opened at run time.
const Library = "libibverbs.so.1"

// LoadError is libibverbs.so.1 missing or unusable; tests turn it into an absence.
type LoadError struct{ Msg string }

func (e *LoadError) Error() string {
	return fmt.Sprintf("%s does not load (%s): %s", Library, e.Msg, LoadRemedy)
}

// LoadRemedy is what to do when libibverbs.so.1 does not load.
const LoadRemedy = "install rdma-core's verbs library (Debian/Ubuntu: libibverbs1 and ibverbs-providers; RHEL: libibverbs / rdma-core; or MLNX_OFED)"

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens libibverbs.so.1 once; later calls return the first result.
func Load() error {
	loadOnce.Do(func() {
		cs := C.CString(Library)
		defer C.free(unsafe.Pointer(cs))
		if e := C.gdr_load(cs); e != nil {
			loadErr = &LoadError{Msg: C.GoString(e)}
		}
	})
	return loadErr
}

// HasDmabuf reports whether the loaded libibverbs exports ibv_reg_dmabuf_mr.
func HasDmabuf() bool { return Load() == nil && C.gdr_has_dmabuf() != 0 }

// Error is a failed verb: its name, errno and errno's symbolic name.
type Error struct {
	Verb  string // e.g. "ibv_modify_qp(RTR)"
	Errno syscall.Errno
	Hint  string // what usually causes this errno for this verb, if known
}

func (e *Error) Error() string {
	name := errnoName(e.Errno)
	s := fmt.Sprintf("%s: errno %d (%s)", e.Verb, int(e.Errno), name)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

func (e *Error) Unwrap() error { return e.Errno }

func verr(verb string, errno C.int, hint string) error {
	if errno == 0 {
		errno = C.int(syscall.EIO)
	}
	return &Error{Verb: verb, Errno: syscall.Errno(errno), Hint: hint}
}

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
			return nil, verr("ibv_open_device("+dn+")", e, NodeAccess(root, "/dev/infiniband/"+C.GoString(C.gdr_dev_node(d)), en))
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
		hint := ""
		switch en := syscall.Errno(e); {
		case en == syscall.EFAULT:
			hint = "the address range is not mapped, or is GPU memory without peer memory support (load nvidia-peermem, or use dma-buf)"
		case (en == syscall.ENOMEM || en == syscall.EPERM) && mem == membuf.Host:
			hint = "the NIC is out of MR resources, or " + memlockHint(span)
		case en == syscall.ENOMEM:
			hint = "the NIC is out of MR resources, or the GPU's BAR1 aperture is full (nvidia-smi -q -d MEMORY shows BAR1 usage)"
		case en == syscall.EINVAL:
			hint = "bad length/alignment or access flags for this device"
		}
		return nil, verr(fmt.Sprintf("ibv_reg_mr(0x%x, %d)", addr, n), e, hint)
	}
	path := PathHost
	if mem == membuf.GPU {
		path = PathPeermem
	}
	pinnedHost += span
	return &MR{mr: mr, Addr: uint64(addr), Len: n, LKey: uint32(C.gdr_mr_lkey(mr)), RKey: uint32(C.gdr_mr_rkey(mr)), Mem: mem, Path: path, pinned: span}, nil
}

// memlockHint explains a failed host registration of span bytes by the
// locked-memory limit when the limit is the reason. The caller holds
// memlockMu.
func memlockHint(span uint64) string {
	l, err := readMemlock()
	if err != nil {
		return "the locked-memory limit (" + err.Error() + "); remedy: " + MemlockRemedy
	}
	cause, why := memlockCause(l, pinnedHost, span)
	if cause {
		return why
	}
	return "(" + why + ")"
}

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

// LatArgs drive a perftest-style WRITE latency ping-pong run in C.
type LatArgs struct {
	SendCQ, RecvCQ *CQ
	Local          *MR
	SendAddr       uint64 // what we write from; its last byte carries the tag
	PollAddr       uint64 // host byte the peer's write tags (ignored with UseImm)
	RemoteAddr     uint64
	RKey           uint32
	Size           int
	Iters          int
	First          bool // this side posts first (client)
	UseImm         bool // wait on RECV_RDMA_WITH_IMM completions (non-host memory)
	// Preposted (UseImm) is how many zero-length receives the caller posted
	// before the barrier it passes with the peer: min(2, Iters) (LatRecvs)
	// closes the race where the peer's first write arrives before this
	// side's loop posts its receives (an RNR NAK the NIC counts). 0: the
	// loop posts them itself.
	Preposted int
	Timeout   time.Duration
}

// LatRecvs is how many receives a WRITE_WITH_IMM latency run of iters
// keeps posted (LatArgs.Preposted).
func LatRecvs(iters int) int { return min(2, iters) }

// Latency runs the ping-pong; it returns the post timestamps (ns), so
// consecutive differences are round trips.
func (q *QP) Latency(a LatArgs) ([]int64, error) {
	ca, err := q.latArgs(a)
	if err != nil {
		return nil, err
	}
	stamps := make([]int64, a.Iters)
	var st, done C.int
	rc := C.gdr_lat(&ca, (*C.int64_t)(unsafe.Pointer(&stamps[0])), &st, &done)
	return stamps, q.runErr("latency ping-pong", rc, st, int(done), a.Iters, a.Timeout)
}

// latArgs checks a and builds the C loop's arguments, inline_ok included:
// the loop posts IBV_SEND_INLINE exactly when inline_ok is set.
func (q *QP) latArgs(a LatArgs) (C.gdr_lat_args, error) {
	var ca C.gdr_lat_args
	if a.Iters < 1 || a.Size < 1 {
		return ca, fmt.Errorf("latency: iters %d and size %d must be >= 1", a.Iters, a.Size)
	}
	if a.Local == nil {
		return ca, fmt.Errorf("latency: no local MR")
	}
	if _, err := sge("latency send buffer", a.Local, a.SendAddr, uint32(a.Size)); err != nil {
		return ca, err
	}
	// Polling mode tags the send buffer's last byte and spins on PollAddr
	// from the CPU: host memory only.
	if !a.UseImm && !a.Local.CPUReadable() {
		return ca, fmt.Errorf("latency: polling mode needs CPU-readable host memory, the MR is %s memory (%s): use WRITE_WITH_IMM completions (UseImm)", a.Local.Mem, a.Local.Path)
	}
	ca = C.gdr_lat_args{qp: q.qp, laddr: C.uint64_t(a.SendAddr), lkey: C.uint32_t(a.Local.LKey),
		poll_addr: C.uint64_t(a.PollAddr), raddr: C.uint64_t(a.RemoteAddr), rkey: C.uint32_t(a.RKey), size: C.uint32_t(a.Size),
		iters: C.int32_t(a.Iters), sq_depth: C.int32_t(q.SQDepth), timeout_ns: C.int64_t(a.Timeout)}
	if a.SendCQ == nil || (a.UseImm && a.RecvCQ == nil) {
		return ca, fmt.Errorf("latency: no send CQ, or WRITE_WITH_IMM completions without a receive CQ")
	}
	ca.scq = a.SendCQ.cq
	if a.RecvCQ != nil {
		ca.rcq = a.RecvCQ.cq
	}
	if a.First {
		ca.first = 1
	}
	if a.UseImm {
		ca.use_imm = 1
		if a.Preposted < 0 || a.Preposted > LatRecvs(a.Iters) {
			return ca, fmt.Errorf("latency: %d receives preposted, want 0..%d", a.Preposted, LatRecvs(a.Iters))
		}
		ca.preposted = C.int32_t(a.Preposted)
	}
	if inline(OpWrite, a.Local, uint32(a.Size), q.MaxInline) {
		ca.inline_ok = 1
	}
	return ca, nil
}

// latInline is whether Latency would post inline (for tests).
func (q *QP) latInline(a LatArgs) (bool, error) {
	ca, err := q.latArgs(a)
	return ca.inline_ok != 0, err
}

func (q *QP) runErr(what string, rc, st C.int, done, iters int, to time.Duration) error {
	switch {
	case rc == 0:
		return nil
	case syscall.Errno(rc) == syscall.ETIMEDOUT:
		return &TimeoutError{What: fmt.Sprintf("%s (after %d of %d iterations)", what, done, iters), Timeout: to, Got: done, Want: iters}
	case st >= 0:
		return &WCError{WC: WC{Status: int(st)}, What: fmt.Sprintf("%s (after %d of %d iterations)", what, done, iters)}
	}
	return verr(what, rc, "")
}

// BWArgs drive a perftest-style bandwidth run in C.
type BWArgs struct {
	CQ         *CQ
	Op         Opcode
	Local      *MR
	LocalAddr  uint64
	RemoteAddr uint64
	RKey       uint32
	Size       int
	Iters      int
	TxDepth    int
	CQMod      int
	Warmup     int           // untimed WRs posted (and completed) first
	Timeout    time.Duration // longest time without progress
	// YieldAfter is how long a wait for a completion spins before it
	// yields the CPU (0: 20 us, the software-device setting); harness/rc
	// sets it from the device and the port rate (rc.YieldAfter).
	YieldAfter time.Duration
	// Gate, when set, holds the timed run until every loop of the gate has
	// finished its warm-up (one clock for several queue pairs).
	Gate *StartGate
}

// Bandwidth posts Iters WRs as ib_write_bw does and returns the time from
// the first post to the last completion.
func (q *QP) Bandwidth(a BWArgs) (time.Duration, error) {
	iv, err := q.BandwidthSpan(a)
	return iv.Duration(), err
}

// BandwidthSpan is Bandwidth returning the run's first post and last
// completion on CLOCK_MONOTONIC, so runs on several threads can be put on
// one clock (stats.Union).
func (q *QP) BandwidthSpan(a BWArgs) (stats.Interval, error) {
	if a.Iters < 1 || a.Size < 1 || a.TxDepth < 1 || a.TxDepth > q.SQDepth {
		return stats.Interval{}, fmt.Errorf("bandwidth: iters %d, size %d, tx depth %d (send queue %d) out of range", a.Iters, a.Size, a.TxDepth, q.SQDepth)
	}
	if _, err := sge("bandwidth buffer", a.Local, a.LocalAddr, uint32(a.Size)); err != nil {
		return stats.Interval{}, err
	}
	ca := C.gdr_bw_args{qp: q.qp, scq: a.CQ.cq, opcode: C.int32_t(a.Op), laddr: C.uint64_t(a.LocalAddr), lkey: C.uint32_t(a.Local.LKey),
		raddr: C.uint64_t(a.RemoteAddr), rkey: C.uint32_t(a.RKey), size: C.uint32_t(a.Size), iters: C.int32_t(a.Iters),
		tx_depth: C.int32_t(a.TxDepth), cq_mod: C.int32_t(a.CQMod), warmup: C.int32_t(max(a.Warmup, 0)), timeout_ns: C.int64_t(a.Timeout),
		yield_after_ns: C.int64_t(max(a.YieldAfter, 0))}
	if a.Gate != nil {
		ca.gate, ca.gate_n = a.Gate.p, C.int32_t(a.Gate.n)
	}
	var start, end C.int64_t
	var st, done C.int
	rc := C.gdr_bw(&ca, &start, &end, &st, &done)
	what := fmt.Sprintf("%v bandwidth", a.Op)
	if a.Gate != nil && syscall.Errno(rc) == syscall.ETIME {
		return stats.Interval{}, a.Gate.timeout(what, a.Timeout)
	}
	return stats.Interval{Start: int64(start), End: int64(end)}, q.runErr(what, rc, st, int(done), a.Iters, a.Timeout)
}

// MonotonicNS is the C side's clock (CLOCK_MONOTONIC, ns): the one
// BandwidthSpan's stamps are on.
func MonotonicNS() int64 { return int64(C.gdr_now_ns()) }

// StartGate lets the bandwidth loops of n queue pairs (one thread each)
// begin their timed runs together, after every warm-up: perftest -q posts
// all its QPs from one loop, so they start at once. Its counter is C
// memory (cgo may not keep a Go pointer inside the argument struct).
type StartGate struct {
	p *C.int32_t
	n int
}

// NewStartGate makes a gate for n loops; Close frees it after they return.
func NewStartGate(n int) (*StartGate, error) {
	if n < 1 || n > 1024 {
		return nil, fmt.Errorf("start gate for %d loops: want 1..1024", n)
	}
	p := (*C.int32_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int32_t(0)))))
	if p == nil {
		return nil, errors.New("start gate: calloc failed")
	}
	return &StartGate{p: p, n: n}, nil
}

// Close frees the gate; safe to call twice, not while a loop waits on it.
func (g *StartGate) Close() {
	if g != nil && g.p != nil {
		C.free(unsafe.Pointer(g.p))
		g.p = nil
	}
}

// arrived is how many loops have reached the gate.
func (g *StartGate) arrived() int {
	return int(C.gdr_gate_count(g.p))
}

// wait arrives at the gate from Go (tests); nil or a timeout naming the
// loops that came.
func (g *StartGate) wait(timeout time.Duration) error {
	if C.gdr_gate_wait(g.p, C.int32_t(g.n), C.int64_t(timeout)) != 0 {
		return g.timeout("start gate", timeout)
	}
	return nil
}

func (g *StartGate) timeout(what string, to time.Duration) error {
	return fmt.Errorf("%s: only %d of %d queue pairs reached the start gate within %v (a warm-up stalled on another queue pair; see its error)",
		what, g.arrived(), g.n, to)
}

// scatterGuard is shim.c's check at every QP creation (for tests: cgo has
// no place in _test.go files).
func scatterGuard(recvDevmem bool, dev mlx5Kind, dv bool) error {
	b := func(v bool) C.int {
		if v {
			return 1
		}
		return 0
	}
	if rc := C.gdr_scatter_guard(b(recvDevmem), C.int(dev), b(dv)); rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}

// scatterEnvOffC reports whether the C environment libmlx5 reads has
// MLX5_SCATTER_TO_CQE=0.
func scatterEnvOffC() bool { return C.gdr_scatter_env_off() != 0 }

// shimMLX5Kinds are shim.h's GDR_MLX5_* values in mlx5Kind order, and
// shimSQSigAll its sq_sig_all (for tests).
func shimMLX5Kinds() []mlx5Kind {
	return []mlx5Kind{C.GDR_MLX5_ABSENT, C.GDR_MLX5_NOT, C.GDR_MLX5_DV, C.GDR_MLX5_NODV, C.GDR_MLX5_UNKNOWN}
}

func shimSQSigAll() int { return int(C.gdr_sq_sig_all()) }

// regMRUsesIova2 is whether RegMR with access goes through
// ibv_reg_mr_iova2 (for tests).
func regMRUsesIova2(access int) bool { return C.gdr_reg_mr_uses_iova2(C.int(access)) != 0 }

// hasIova2 reports whether the loaded libibverbs exports ibv_reg_mr_iova2.
func hasIova2() bool { return C.gdr_has_iova2() != 0 }

// accessOptionalRange are the access flags a device may ignore.
const accessOptionalRange = C.IBV_ACCESS_OPTIONAL_RANGE

// probeStandin runs the mlx5 probe on a stand-in device called name; for
// tests (cgo has no place in _test.go files).
func probeStandin(name string) mlx5Kind {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	provMu.Lock()
	defer provMu.Unlock()
	return mlx5Kind(C.gdr_probe_standin(cs))
}

func mlx5Loaded() bool { return C.gdr_mlx5_loaded() != 0 }
func loadMLX5() bool   { return C.gdr_load_mlx5() != 0 }
func mlx5HasDV() bool  { return C.gdr_mlx5_has_dv() != 0 }
