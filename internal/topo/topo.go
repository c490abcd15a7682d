// Package topo classifies the PCIe path between two PCI functions the way
// `nvidia-smi topo -m` does (Class: PIX, PXB, PHB, NODE, SYS), from their
// sysfs paths: the lowest common ancestor, and the PCIe switches between
// them; a GPU on NVLink-C2C reaches its own CPU's NICs as NCCL's P2C
// (Class.ViaC2C). It also says what speed and width a link should train to
// (ExpectedLink) and judges a trained link against that (CheckLink).
//
// NUMA node -1 means unknown, not "same node". Two functions under different
// host bridges are NODE when both nodes are known and equal, SYS when both
// are known and differ. When either is unknown: NODE if the host has one NUMA
// node online, or both functions' local_cpulist are equal and not simply all
// online CPUs (which is what the kernel writes when it does not know the
// node, so it is no evidence); SYS if their local_cpulists are disjoint
// (different sockets); otherwise SYS with Path.NUMAUnknown set, because
// claiming NODE without evidence could pass a cross-socket pair.
package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// NodeDir is where the kernel lists NUMA nodes.
const NodeDir = "/sys/devices/system/node"

// CPUOnline lists the CPUs online.
const CPUOnline = "/sys/devices/system/cpu/online"

// HostInfo is what classification needs beyond the PCI functions.
type HostInfo struct {
	NUMANodes  int         // NUMA nodes online; 0 = unknown (ReadNUMANodes)
	OnlineCPUs cpulist.Set // /sys/devices/system/cpu/online; empty = unknown
}

// Index holds a host's PCI functions by address.
type Index struct {
	devs map[string]*pci.Device
	info HostInfo
	// c2c are the GPUs attached to their CPU over NVLink-C2C (MarkC2C).
	c2c map[string]bool
}

// MarkC2C records GPUs (PCI addresses) that reach their CPU over
// NVLink-C2C; Classify then gives their paths to other functions as NCCL
// does (Class.ViaC2C). internal/rails reads them from the NVIDIA driver.
func (ix *Index) MarkC2C(gpus []string) {
	for _, g := range gpus {
		if ix.c2c == nil {
			ix.c2c = map[string]bool{}
		}
		ix.c2c[g] = true
	}
}

// New indexes devs (as returned by pci.Scan) on a host whose NUMA layout is
// unknown; NewHost takes it.
func New(devs []*pci.Device) *Index { return NewHost(devs, HostInfo{}) }

// NewHost indexes devs on a host described by info.
func NewHost(devs []*pci.Device, info HostInfo) *Index {
	ix := &Index{devs: map[string]*pci.Device{}, info: info}
	for _, d := range devs {
		ix.devs[d.BDF] = d
	}
	return ix
}

// Load scans the host's PCI functions, NUMA nodes and online CPUs. Functions
// that could not be read are left out and their errors returned joined, with
// an index of the rest; a missing /sys/bus/pci/devices satisfies
// errors.Is(err, fs.ErrNotExist).
func Load(r *hostfs.Root) (*Index, error) {
	devs, err := pci.Scan(r)
	var info HostInfo
	var nerr, cerr error
	info.NUMANodes, nerr = ReadNUMANodes(r)
	if s, err := r.ReadString(CPUOnline); err == nil {
		if info.OnlineCPUs, err = cpulist.Parse(s); err != nil {
			cerr = fmt.Errorf("%s: %w", CPUOnline, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		cerr = err
	}
	return NewHost(devs, info), errors.Join(err, nerr, cerr)
}

// ReadNUMANodes counts the NUMA nodes online: /sys/devices/system/node/online,
// else the node<N> directories there. 0 with no error when the host does not
// say (no such directory: a kernel without NUMA, or a tree without it).
func ReadNUMANodes(r *hostfs.Root) (int, error) {
	s, err := r.ReadString(NodeDir + "/online")
	if err == nil {
		set, err := cpulist.Parse(s)
		if err != nil {
			return 0, fmt.Errorf("%s/online: %w", NodeDir, err)
		}
		return set.Count(), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	names, err := r.ReadDir(NodeDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, nm := range names {
		if rest, ok := strings.CutPrefix(nm, "node"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			n++
		}
	}
	return n, nil
}

// Info is the host's NUMA layout as the index knows it.
func (ix *Index) Info() HostInfo { return ix.info }

// Device returns the function at bdf, or nil.
func (ix *Index) Device(bdf string) *pci.Device { return ix.devs[bdf] }

// Devices lists every function, by address.
func (ix *Index) Devices() []*pci.Device {
	out := make([]*pci.Device, 0, len(ix.devs))
	for _, d := range ix.devs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BDF < out[j].BDF })
	return out
}

// PortType is the PCIe port type of bdf: from its config space when that was
// readable, otherwise inferred from the tree (a bridge on the root bus is a
// root port; a bridge below an upstream port is a downstream port; a bridge
// below a root or downstream port is a switch's upstream port). Inference is
// what unprivileged reads (64-byte config) rely on.
func (ix *Index) PortType(bdf string) int {
	return ix.portType(bdf, 0)
}

func (ix *Index) portType(bdf string, depth int) int {
	d := ix.devs[bdf]
	if d == nil || depth > 64 {
		return -1
	}
	if t := d.PortType(); t >= 0 {
		return t
	}
	if !d.IsBridge() {
		return pci.TypeEndpoint
	}
	parent := d.Parent()
	if parent == "" {
		return pci.TypeRootPort
	}
	if ix.portType(parent, depth+1) == pci.TypeUpstream {
		return pci.TypeDownstream
	}
	return pci.TypeUpstream
}

// Path is how two functions connect.
type Path struct {
	Class Class
	// LCA is the lowest common PCI ancestor ("" when the functions share
	// none: different root ports or different host bridges).
	LCA string
	// Bridges are the bridges traversed from A up and down to B, in order
	// (A's side first, the LCA in the middle when there is one).
	Bridges []string
	// Switches counts the PCIe switches among Bridges (an upstream port and
	// its downstream ports are one switch).
	Switches int
	NUMAA    int
	NUMAB    int
	// NUMAUnknown: the functions hang under different host bridges, a NUMA
	// node is unknown (-1) and local_cpulist does not settle it, so Class is
	// SYS as the conservative answer, not a known fact.
	NUMAUnknown bool
	// NUMANote says how an unknown NUMA node was settled ("" when both nodes
	// are known or the path stays below one host bridge).
	NUMANote string
	// From is "" when Class comes from the sysfs tree; otherwise it names
	// the NCCL topology file Class was read from (internal/rails sets it,
	// rails/nccltopo.go), SysfsClass keeps the tree's class and Via says
	// where the file's path turns. Bridges and Switches stay the tree's.
	From       string
	SysfsClass Class
	Via        string
	// C2C is the GPU end's PCI address when that GPU reaches its CPU over
	// NVLink-C2C, and PCIe the class the PCIe tree alone gives (what
	// nvidia-smi topo -m prints); Class is then ViaC2C of it.
	C2C  string
	PCIe Class
}

// TreeClass is the class the PCIe tree gives, before NVLink-C2C and any
// NCCL topology file: what nvidia-smi topo -m compares with.
func (p Path) TreeClass() Class {
	if p.From != "" {
		return p.SysfsClass
	}
	if p.C2C != "" {
		return p.PCIe
	}
	return p.Class
}

// Classify returns the path between functions a and b; from a GPU marked
// as NVLink-C2C attached (MarkC2C) to a function that is not, the class
// is Class.ViaC2C of the tree's.
func (ix *Index) Classify(a, b string) (Path, error) {
	p, err := ix.classifyTree(a, b)
	if err != nil {
		return p, err
	}
	if g := c2cEnd(ix.c2c, a, b); g != "" {
		p.C2C, p.PCIe, p.Class = g, p.Class, p.Class.ViaC2C()
	}
	return p, nil
}

// c2cEnd is the one end of a path that is a C2C-attached GPU; "" when none
// or both are (two GPUs of one Grace talk over NVLink, not this path).
func c2cEnd(c2c map[string]bool, a, b string) string {
	switch {
	case c2c[a] && !c2c[b]:
		return a
	case c2c[b] && !c2c[a]:
		return b
	}
	return ""
}

func (ix *Index) classifyTree(a, b string) (Path, error) {
	da, db := ix.devs[a], ix.devs[b]
	if da == nil {
		return Path{}, fmt.Errorf("no PCI function %s", a)
	}
	if db == nil {
		return Path{}, fmt.Errorf("no PCI function %s", b)
	}
	if a == b {
		return Path{}, fmt.Errorf("%s: a function has no path to itself", a)
	}
	if len(da.Chain) == 0 || len(db.Chain) == 0 {
		return Path{}, fmt.Errorf("%s or %s has no sysfs chain", a, b)
	}
	p := Path{NUMAA: da.NUMANode, NUMAB: db.NUMANode}
	ca, cb := da.Chain[:len(da.Chain)-1], db.Chain[:len(db.Chain)-1] // ancestors only
	if da.Root != db.Root {
		p.Bridges = append(reversed(ca), cb...)
		p.Switches = ix.countSwitches(p.Bridges)
		p.Class, p.NUMAUnknown, p.NUMANote = ix.acrossHostBridges(da, db)
		return p, nil
	}
	k := 0
	for k < len(da.Chain) && k < len(db.Chain) && da.Chain[k] == db.Chain[k] {
		k++
	}
	if k == 0 {
		p.Bridges = append(reversed(ca), cb...)
		p.Switches = ix.countSwitches(p.Bridges)
		p.Class = PHB
		return p, nil
	}
	p.LCA = da.Chain[k-1]
	var br []string
	if k < len(da.Chain) {
		br = append(br, reversed(da.Chain[k:len(da.Chain)-1])...)
	}
	if p.LCA != a && p.LCA != b {
		br = append(br, p.LCA)
	}
	if k < len(db.Chain) {
		br = append(br, db.Chain[k:len(db.Chain)-1]...)
	}
	p.Bridges = br
	p.Switches = ix.countSwitches(br)
	if p.Switches <= 1 {
		p.Class = PIX
	} else {
		p.Class = PXB
	}
	return p, nil
}

// acrossHostBridges classifies two functions under different host bridges
// (see the package comment for the rule).
func (ix *Index) acrossHostBridges(a, b *pci.Device) (Class, bool, string) {
	if a.NUMANode >= 0 && b.NUMANode >= 0 {
		if a.NUMANode == b.NUMANode {
			return NODE, false, ""
		}
		return SYS, false, ""
	}
	unknown := fmt.Sprintf("numa_node %d/%d (-1 is unknown)", a.NUMANode, b.NUMANode)
	ca, cb := a.LocalCPUs, b.LocalCPUs
	online := ix.info.OnlineCPUs
	allA := !online.Empty() && ca.Equal(online)
	allB := !online.Empty() && cb.Equal(online)
	switch {
	case ix.info.NUMANodes == 1:
		return NODE, false, unknown + "; the host has one NUMA node online: NODE"
	case !ca.Empty() && ca.Equal(cb) && !allA:
		return NODE, false, fmt.Sprintf("%s; same local_cpulist %s: one node, NODE", unknown, ca)
	case !ca.Empty() && !cb.Empty() && !ca.Intersects(cb):
		return SYS, false, fmt.Sprintf("%s; local_cpulists %s and %s are disjoint: different sockets, SYS", unknown, ca, cb)
	}
	nodes := "unknown"
	if ix.info.NUMANodes > 0 {
		nodes = fmt.Sprint(ix.info.NUMANodes)
	}
	why := ""
	switch {
	case allA && allB:
		why = " (both list every online CPU, which is what the kernel writes for an unknown node)"
	case allA || allB:
		why = fmt.Sprintf(" (%q is every online CPU, which is what the kernel writes for an unknown node)", online.String())
	}
	return SYS, true, fmt.Sprintf("%s, local_cpulist %q/%q%s and %s NUMA nodes online do not tell whether they share a socket: reported as SYS (NUMA unknown)",
		unknown, ca.String(), cb.String(), why, nodes)
}

// countSwitches counts distinct switches among bridges: an upstream port is
// its own switch; a downstream port belongs to the switch of its parent.
func (ix *Index) countSwitches(bridges []string) int {
	sw := map[string]bool{}
	for _, b := range bridges {
		switch ix.PortType(b) {
		case pci.TypeUpstream:
			sw[b] = true
		case pci.TypeDownstream:
			if d := ix.devs[b]; d != nil && d.Parent() != "" {
				sw[d.Parent()] = true
			} else {
				sw[b] = true
			}
		}
	}
	return len(sw)
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// Candidate is one NIC's path from a GPU.
type Candidate struct {
	NIC  string // RDMA device name
	PCI  string // its PCI function
	Path Path
}

// Nearest returns, for one GPU, the candidates sorted nearest first: by
// class, then fewer bridges, then lower PCI address, then name (internal/rails
// adds a rule for NICs already taken by another GPU). nics maps RDMA device
// name to PCI function. Functions missing from the index are errors.
func (ix *Index) Nearest(gpu string, nics map[string]string) ([]Candidate, error) {
	var out []Candidate
	for name, bdf := range nics {
		p, err := ix.Classify(gpu, bdf)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", name, bdf, err)
		}
		out = append(out, Candidate{NIC: name, PCI: bdf, Path: p})
	}
	less := func(x, y Candidate) bool {
		if x.Path.Class != y.Path.Class {
			return x.Path.Class < y.Path.Class
		}
		if len(x.Path.Bridges) != len(y.Path.Bridges) {
			return len(x.Path.Bridges) < len(y.Path.Bridges)
		}
		if x.PCI != y.PCI {
			return x.PCI < y.PCI
		}
		return x.NIC < y.NIC
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// Expected is what a PCIe link should train to: a target derived from two
// pci.Links (the function's and its partner's maxima), not a link state.
type Expected struct {
	// Speed (GT/s) and Width are the lower of the function's own maximum and
	// its link partner's: a Gen5 x16 GPU in a Gen4 slot should run 16 GT/s.
	Speed float64
	Width int
	// Partner is the function at the other end of the link ("" when none is
	// known: a function on the root bus, or a port with nothing below it).
	Partner      string
	PartnerSpeed float64 // the partner's max, 0 when unknown
	PartnerWidth int
	// Limited says the partner lowers speed or width below the function's
	// own maximum.
	Limited bool
}

// String is "16 GT/s x16 (limited by link partner 0000:17:01.0: max 16 GT/s x16)".
func (l Expected) String() string {
	s := fmt.Sprintf("%g GT/s x%d", l.Speed, l.Width)
	if l.Limited {
		s += fmt.Sprintf(" (limited by link partner %s: max %g GT/s x%d)", l.Partner, l.PartnerSpeed, l.PartnerWidth)
	}
	return s
}

// LinkPartner is the other end of the link whose state bdf's sysfs link files
// describe: the port above for endpoints and upstream ports; for root and
// downstream ports the lowest-addressed function directly below (the
// functions of one device share its link). nil when there is none.
func (ix *Index) LinkPartner(bdf string) *pci.Device {
	d := ix.devs[bdf]
	if d == nil {
		return nil
	}
	switch ix.PortType(bdf) {
	case pci.TypeRootPort, pci.TypeDownstream:
		var best *pci.Device
		for _, c := range ix.devs {
			if c.Parent() == bdf && (best == nil || c.BDF < best.BDF) {
				best = c
			}
		}
		return best
	}
	if p := d.Parent(); p != "" {
		return ix.devs[p]
	}
	return nil
}

// ExpectedLink says what bdf's link should train to: the lower of its own
// maximum speed and width and its link partner's (LinkPartner). A function
// without link attributes (virtual or integrated) is an error; a partner
// without them does not limit.
func (ix *Index) ExpectedLink(bdf string) (Expected, error) {
	d := ix.devs[bdf]
	if d == nil {
		return Expected{}, fmt.Errorf("no PCI function %s", bdf)
	}
	if d.MaxGTs == 0 || d.MaxWidth == 0 {
		return Expected{}, fmt.Errorf("%s has no max_link_speed/max_link_width in sysfs (a virtual or integrated function)", bdf)
	}
	l := Expected{Speed: d.MaxGTs, Width: d.MaxWidth}
	p := ix.LinkPartner(bdf)
	if p == nil {
		return l, nil
	}
	l.Partner, l.PartnerSpeed, l.PartnerWidth = p.BDF, p.MaxGTs, p.MaxWidth
	if p.MaxGTs > 0 && p.MaxGTs < l.Speed {
		l.Speed, l.Limited = p.MaxGTs, true
	}
	if p.MaxWidth > 0 && p.MaxWidth < l.Width {
		l.Width, l.Limited = p.MaxWidth, true
	}
	return l, nil
}
