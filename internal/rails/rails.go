// Package rails is the suite's one GPU/NIC selection: which GPUs there are
// and how they are numbered, which RDMA NICs can carry a test, which NIC
// serves which GPU (a rail), and what GDR_GPU, GDR_RDMA_DEVICE and GDR_RAILS
// select. Every conformance package takes its GPU and NIC from here (through
// harness/testenv), so "GPU 5" and "its NIC" are the same devices in install,
// topology, gpu, memreg and pingpong.
//
// GPUs are the NVIDIA display-class PCI functions (pci.Device.IsGPU) in PCI
// bus order, as nvidia-smi numbers them and CUDA_DEVICE_ORDER=PCI_BUS_ID
// gives them; a GPU's index is its position in that order. GPUs that only the
// CUDA driver sees (the lab's emulated GPU, whose PCI address is fictional)
// are added with Host.AddDriverGPUs; they have no PCIe path and come after
// the sysfs ones, by address.
//
// A NIC is a candidate for a rail when its port GDR_IB_PORT exists and is
// ACTIVE, user space can open it (a uverbs node names it in sysfs and its
// /dev/infiniband/uverbsN exists where this process opens device nodes:
// rdmadev.NodeState), its node type is a channel adapter (CA or RNIC) and,
// for hardware, its PCI function is in /sys/bus/pci/devices. With
// GDR_RDMA_DEVICE unset, a NIC that NCCL_IB_HCA keeps NCCL off (at port
// GDR_IB_PORT; environment or nccl.conf, read as NCCL reads it:
// internal/config HCAFilter) is no candidate either, so the rails are among
// the NICs NCCL uses; a setting that excludes every NIC is an error. NICs
// that are not candidates keep the reason (NIC.Why), so a check can say
// "mlx5_3 is nearer but its port 1 is DOWN".
//
// An SR-IOV virtual function is no candidate while its own PF (physfn) has
// an RDMA device this process can open: VFs serve VMs and containers, and
// with SR-IOV on a PF's VFs have lower PCI addresses than the next PF on the
// same switch, so rule 4 would hand them rails while that PF idles. On bare
// metal a VF whose PF is not visible is also no candidate while an ACTIVE
// PF of its vendor and link layer is; in a VM (internal/virt) VFs are rails
// (markVFs).
// A bonded device (RoCE LAG, mlx5_bond_N) is one RDMA device over both PFs
// of a card: one NIC, one rail (its device link is the first PF).
//
// Rail rule. Rail N is GPU N with the nearest candidate NIC, GPUs taken in
// index order:
//  1. nearest = lower path class first (PIX < PXB < PHB < NODE < SYS, see
//     internal/topo), then fewer bridges on the path;
//  2. among equally near NICs, the higher port rate (a NIC without a rate
//     file last), then link layer InfiniBand before Ethernet: on a DGX the
//     compute NICs are InfiniBand and the storage NICs Ethernet, so a
//     storage NIC on the GPU's switch does not win the rail by address
//     (where both are Ethernet the link layer cannot tell them apart);
//  3. among those, one not already taken by a lower-numbered GPU, so two
//     GPUs under one switch with two equal NICs get one NIC each (a VF is
//     taken when its PF or another VF of that PF is: they share one port);
//  4. then the lower NIC PCI address, then the device name.
//
// The order in which /sys/class/infiniband lists devices never decides.
// Software NICs (rxe, siw) have no PCIe path: they are chosen only when no
// hardware NIC is a candidate, by rule 3 then name. A GPU without a sysfs
// path (driver-only) takes the first candidate by rules 2 to 4, hardware
// before software. GDR_RDMA_DEVICE overrides the rule: every rail uses that
// NIC, candidate or not (the reason says when it is not).
//
// Selection. GDR_GPU (an index or a PCI address, any case, with or without
// domain) keeps that GPU's rail; GDR_RAILS (all, or a list of rail indices)
// keeps those rails; both together keep their intersection. Primary, for
// single-rail tests: GDR_GPU's rail; else, with GDR_RDMA_DEVICE, the selected
// rail whose GPU is nearest that NIC; else the first selected rail. On a
// host with NICs but no GPU, Primary is NIC-only: GDR_RDMA_DEVICE, else the
// first hardware candidate by PCI address, else the first software
// candidate by name. On a host with GPUs but no candidate NIC the rails are
// GPU-only (NIC nil). Selectors that name nothing are errors naming the
// variable, the value and what exists.
package rails

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// GPU is one GPU.
type GPU struct {
	Index int    // position in PCI bus order (nvidia-smi, CUDA_DEVICE_ORDER=PCI_BUS_ID)
	PCI   string // dddd:bb:dd.f, lowercase
	NUMA  int    // numa_node; -1 unknown
	// Dev is the PCI function; nil for a GPU only the driver sees.
	Dev *pci.Device
	// DriverOnly: seen by the CUDA driver, not in sysfs (the lab's
	// emulated GPU). Such a GPU has no PCIe path.
	DriverOnly bool
}

func (g *GPU) String() string { return fmt.Sprintf("GPU %d (%s)", g.Index, g.PCI) }

// NIC is one RDMA device, seen at the port the suite uses.
type NIC struct {
	Name     string
	PCI      string // "" for software devices
	Software bool
	Parent   string // software devices: the netdev
	Port     int    // GDR_IB_PORT
	// PortState is the port's state name ("ACTIVE", "DOWN"), RawPortState
	// the file as written ("1: DOWN"); both "" when the port is missing.
	PortState    string
	RawPortState string
	LinkLayer    string
	RateGbps     float64 // sysfs rate; fictional on software devices
	NUMA         int     // the PCI function's numa_node; -1 unknown or software
	// LocalCPUs is the PCI function's local_cpulist (where to poll its
	// completion queue); empty for software devices.
	LocalCPUs cpulist.Set
	// Candidate: the NIC can serve a rail. Why says why not when it cannot,
	// and Remedy, where the suite knows one, what makes it a candidate.
	Candidate bool
	Why       string
	Remedy    string
	Dev       *rdmadev.Device
	// VF: the NIC's PCI function is an SR-IOV virtual function; PhysFn is
	// its PF where sysfs links it ("" in a VM); see markVFs.
	VF     bool
	PhysFn string
	// vfLeftOut: markVFs took this VF out of the candidates.
	vfLeftOut bool
	// HCAExcluded: NCCL_IB_HCA keeps NCCL off this device at Port.
	HCAExcluded bool
}

func (n *NIC) String() string {
	if n.Software {
		return n.Name + " (software, on " + n.Parent + ")"
	}
	return n.Name + " (" + n.PCI + ")"
}

// Rail is a GPU and the NIC that serves it.
type Rail struct {
	// Index is the rail's number, which is its GPU's index; -1 for a
	// NIC-only Primary on a host without GPUs.
	Index int
	GPU   *GPU // nil for a NIC-only Primary
	NIC   *NIC // nil when no NIC is a candidate (GPU only)
	// Path is the PCIe path GPU <-> NIC; HasPath is false for software
	// NICs, driver-only GPUs and GPU-only rails (Path.Class is Unknown).
	Path    topo.Path
	HasPath bool
	Forced  bool   // the NIC was set by GDR_RDMA_DEVICE
	Reason  string // one line: why this NIC
}

// Class is the path class, topo.Unknown without a PCIe path.
func (r *Rail) Class() topo.Class { return r.Path.Class }

// Name is the rail's subtest and report name: "rail<N>" (rail 0 for a
// NIC-only Primary on a host without GPUs). Rail i on one host meets rail
// i on the peer (rail-aligned fabrics), so the name is what both agree on.
func (r *Rail) Name() string { return "rail" + strconv.Itoa(max(r.Index, 0)) }

// Bridges counts the PCI bridges between GPU and NIC.
func (r *Rail) Bridges() int { return len(r.Path.Bridges) }

// Switches counts the PCIe switches between GPU and NIC.
func (r *Rail) Switches() int { return r.Path.Switches }

func (r *Rail) String() string {
	var s string
	switch {
	case r.GPU == nil && r.NIC == nil:
		return "no GPU and no NIC"
	case r.GPU == nil:
		s = "NIC only: "
	default:
		s = fmt.Sprintf("rail %d: %s", r.Index, r.GPU)
	}
	switch {
	case r.NIC == nil:
		s += " without NIC"
	case r.GPU == nil:
		s += r.NIC.String()
	default:
		s += " <-> " + r.NIC.String()
	}
	if r.HasPath {
		s += " " + r.Path.Class.String()
	}
	return s
}

// Host is what Discover read: PCI functions, GPUs, RDMA devices.
type Host struct {
	Root  *hostfs.Root
	Index *topo.Index
	GPUs  []*GPU // PCI bus order, then driver-only GPUs
	// Devices are the RDMA devices, by name.
	Devices []*rdmadev.Device
	// PCIErr and NICErr are scan errors (malformed entries left out; the
	// rest is usable). PCIDir and NICDir say whether /sys/bus/pci/devices
	// and /sys/class/infiniband exist at all.
	PCIErr, NICErr error
	PCIDir, NICDir bool
	// SourceErr is what GPU sources (the CUDA driver) reported, if anything.
	SourceErr error
	// Guest says whether the host is a VM (internal/virt), GuestErr what
	// of its signs could not be read. In a VM, VFs are rails (markVFs).
	Guest    virt.Guest
	GuestErr error
	// Process says whether this process runs in a container (its signs,
	// where the node's root is) and which capabilities it holds
	// (internal/virt); ProcessErr what of that could not be read.
	Process    virt.Process
	ProcessErr error
	// NCCL is the NCCL topology file in use (nccltopo.go), nil without one;
	// NCCLErr says why a named one cannot be used.
	NCCL      *nccltopo.File
	NCCLErr   error
	nccLoaded bool
}

// Discover reads the host root once. It does not fail: what could not be
// read is in the error fields, and a host without PCI or RDMA has none.
func Discover(r *hostfs.Root) *Host {
	h := &Host{Root: r}
	h.Index, h.PCIErr = topo.Load(r)
	h.PCIDir = r.Exists(pci.DevicesDir)
	for _, d := range h.Index.Devices() {
		if d.IsGPU() {
			h.GPUs = append(h.GPUs, &GPU{PCI: d.BDF, NUMA: d.NUMANode, Dev: d})
		}
	}
	h.sortGPUs()
	h.Devices, h.NICErr = rdmadev.Scan(r)
	h.NICDir = !errors.Is(h.NICErr, fs.ErrNotExist)
	if !h.NICDir {
		h.NICErr = nil
	}
	sort.Slice(h.Devices, func(i, j int) bool { return h.Devices[i].Name < h.Devices[j].Name })
	h.Guest, h.GuestErr = virt.Detect(r)
	h.Process, h.ProcessErr = virt.Inspect(r, os.LookupEnv)
	return h
}

// AddDriverGPUs adds GPUs a driver reports by PCI address (NVML or CUDA bus
// IDs: any case, 4- or 8-digit domain or none) that sysfs does not list as
// GPUs. Addresses already known are ignored; a malformed one is an error and
// nothing is added.
func (h *Host) AddDriverGPUs(addrs []string) error {
	var add []string
	for _, a := range addrs {
		n, err := pci.NormalizeAddr(a)
		if err != nil {
			return fmt.Errorf("GPU reported by the driver: %w", err)
		}
		if h.gpuByPCI(n) == nil && !slices.Contains(add, n) {
			add = append(add, n)
		}
	}
	for _, a := range add {
		h.GPUs = append(h.GPUs, &GPU{PCI: a, NUMA: -1, DriverOnly: true})
	}
	h.sortGPUs()
	return nil
}

func (h *Host) sortGPUs() {
	sort.SliceStable(h.GPUs, func(i, j int) bool {
		a, b := h.GPUs[i], h.GPUs[j]
		if a.DriverOnly != b.DriverOnly {
			return !a.DriverOnly
		}
		return pciLess(a.PCI, b.PCI)
	})
	for i, g := range h.GPUs {
		g.Index = i
	}
}

func (h *Host) gpuByPCI(a string) *GPU {
	for _, g := range h.GPUs {
		if g.PCI == a {
			return g
		}
	}
	return nil
}

// pciLess orders PCI addresses numerically (domain, bus, device, function).
func pciLess(a, b string) bool {
	ka, kb := pciKey(a), pciKey(b)
	if ka != kb {
		return ka < kb
	}
	return a < b
}

func pciKey(a string) uint64 {
	var k uint64
	for _, f := range strings.FieldsFunc(a, func(r rune) bool { return r == ':' || r == '.' }) {
		v, _ := strconv.ParseUint(f, 16, 32)
		k = k<<16 | v
	}
	return k
}

// Selection is the resolved GPU/NIC choice of a run.
type Selection struct {
	*Host
	Port int     // GDR_IB_PORT
	NICs []*NIC  // every RDMA device at Port, by name
	All  []*Rail // one rail per GPU, index = GPU index
	// Rails are the rails selected by GDR_GPU and GDR_RAILS (All when
	// neither is set).
	Rails []*Rail
	// Primary is the rail single-rail tests use (see the package comment);
	// nil only when there is no GPU and no candidate NIC.
	Primary *Rail
	// PrimaryWhy says how Primary was chosen.
	PrimaryWhy string
	// Forced is the NIC GDR_RDMA_DEVICE names, nil when unset.
	Forced *NIC
	// HCA is NCCL_IB_HCA as the candidates obey it (unset while
	// GDR_RDMA_DEVICE is set: config reads it only then).
	HCA config.HCAFilter
}

// Select applies the rail rule and the selectors of cfg (GDR_GPU,
// GDR_RDMA_DEVICE, GDR_RAILS, GDR_IB_PORT).
func (h *Host) Select(cfg config.Config) (*Selection, error) {
	h.loadNCCL(cfg)
	s := &Selection{Host: h, Port: cfg.IBPort, HCA: cfg.IBHCA}
	if s.Port < 1 {
		s.Port = 1
	}
	for _, d := range h.Devices {
		s.NICs = append(s.NICs, s.nicView(d))
	}
	s.markVFs()
	var errs []error
	if err := s.hcaLeavesNone(); err != nil {
		errs = append(errs, err)
	}
	if cfg.RDMADevice != "" {
		if s.Forced = s.NIC(cfg.RDMADevice); s.Forced == nil {
			errs = append(errs, fmt.Errorf("GDR_RDMA_DEVICE=%s: %s", cfg.RDMADevice, s.nicsThere()))
		}
	}
	gpuSel, err := s.resolveGPU(cfg.GPU)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.buildRails()
	if err := s.filter(cfg, gpuSel); err != nil {
		return nil, err
	}
	s.choosePrimary(gpuSel)
	return s, nil
}

// nicView is d at the suite's port, with its candidacy.
func (s *Selection) nicView(d *rdmadev.Device) *NIC {
	n := &NIC{Name: d.Name, PCI: d.PCI, Software: d.Software, Parent: d.Parent, Port: s.Port, NUMA: -1, Dev: d}
	if d.PCI != "" {
		if pd := s.Index.Device(d.PCI); pd != nil {
			n.NUMA, n.LocalCPUs = pd.NUMANode, pd.LocalCPUs
		}
	}
	p := d.Port(s.Port)
	if p != nil {
		n.PortState, n.RawPortState, n.LinkLayer, n.RateGbps = p.State, p.RawState, p.LinkLayer, p.RateGbps
	}
	nt := d.NodeTypeName()
	n.HCAExcluded = !s.HCA.Allows(d.Name, s.Port)
	switch {
	case n.HCAExcluded:
		n.Remedy = fmt.Sprintf("set GDR_RDMA_DEVICE=%s to test it anyway, or change NCCL_IB_HCA where it is set (%s)", d.Name, s.HCA.From)
		n.Why = fmt.Sprintf("excluded by %s: %s; %s", s.HCA, s.hcaWhy(d.Name), n.Remedy)
	case p == nil:
		n.Why = fmt.Sprintf("it has no port %d (GDR_IB_PORT; ports: %s)", s.Port, portList(d))
	case !p.Active():
		n.Why = fmt.Sprintf("its port %d is %s", s.Port, orRaw(p))
	case d.Uverbs == "":
		n.Why = fmt.Sprintf("no user-space verbs node names it (%s/uverbs*/ibdev): libibverbs cannot open it (ib_uverbs not loaded?)", rdmadev.VerbsClassDir)
	case d.NodeState == rdmadev.NodeMissing:
		n.Remedy = nodeRemedy(d)
		n.Why = fmt.Sprintf("its verbs device node %s does not exist where this process opens it, so libibverbs leaves it out of its device list and cannot open it (rdma-core libibverbs/init.c try_access_device); %s", d.Node, n.Remedy)
	case nt != "" && nt != "CA" && nt != "RNIC":
		n.Why = fmt.Sprintf("its node type %q is not a channel adapter (CA or RNIC)", d.NodeType)
	case !d.Software && s.Index.Device(d.PCI) == nil:
		n.Why = fmt.Sprintf("its PCI function %s is not in %s", d.PCI, pci.DevicesDir)
	default:
		n.Candidate = true
	}
	return n
}

// hcaWhy says why NCCL_IB_HCA keeps NCCL off device dev at the port.
func (s *Selection) hcaWhy(dev string) string {
	match := "by name prefix"
	if s.HCA.Exact {
		match = "by exact name"
	}
	if s.HCA.Exclude {
		return fmt.Sprintf("NCCL leaves out the devices it lists (matched %s), and it lists %s port %d", match, dev, s.Port)
	}
	return fmt.Sprintf("NCCL uses only the devices and ports it lists (matched %s), and %s port %d (GDR_IB_PORT) is not among them", match, dev, s.Port)
}

// hcaLeavesNone is an error when NCCL_IB_HCA excludes every RDMA device
// there is: NCCL would find no InfiniBand or RoCE device (and fall back to
// sockets), so the setting, not the hardware, is what to fix.
func (s *Selection) hcaLeavesNone() error {
	if !s.HCA.Set() || len(s.NICs) == 0 {
		return nil
	}
	var names []string
	for _, n := range s.NICs {
		if !n.HCAExcluded {
			return nil
		}
		names = append(names, n.Name)
	}
	return fmt.Errorf("%s excludes every RDMA device here at port %d (GDR_IB_PORT): %s; NCCL would find no InfiniBand or RoCE device and fall back to sockets: fix NCCL_IB_HCA, or set GDR_RDMA_DEVICE to choose a NIC", s.HCA, s.Port, strings.Join(names, ", "))
}

// HCAExcludedNICs lists the NICs NCCL_IB_HCA excludes (none when unset).
func (s *Selection) HCAExcludedNICs() []string {
	var out []string
	for _, n := range s.NICs {
		if n.HCAExcluded {
			out = append(out, n.Name)
		}
	}
	return out
}

// nodeRemedy is how a process gets the verbs node of d: in a container the
// node is passed in (a device plugin or --device), on a host ib_uverbs and
// udev make it.
func nodeRemedy(d *rdmadev.Device) string {
	node := rdmadev.DevDir + "/" + d.Uverbs
	return fmt.Sprintf("in a container, request this NIC: the pod's resource request for the RDMA device plugin that hands it out (resources.limits: the shared-device plugin's rdma/<resource>, or the SR-IOV device plugin's VF resource), or --device %s for docker/podman; on a host, ib_uverbs creates the node and udev names it (rdma-core's udev rules; udevadm trigger)", node)
}

func orRaw(p *rdmadev.Port) string {
	if p.State != "" {
		return p.State
	}
	return fmt.Sprintf("%q", p.RawState)
}

func portList(d *rdmadev.Device) string {
	var s []string
	for _, p := range d.Ports {
		s = append(s, strconv.Itoa(p.Num))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// NIC returns the RDMA device called name, or nil.
func (s *Selection) NIC(name string) *NIC {
	for _, n := range s.NICs {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// GPU returns GPU i, or nil.
func (s *Selection) GPU(i int) *GPU {
	if i < 0 || i >= len(s.GPUs) {
		return nil
	}
	return s.GPUs[i]
}

// Candidates are the NICs that can serve a rail, by name.
func (s *Selection) Candidates() []*NIC {
	var out []*NIC
	for _, n := range s.NICs {
		if n.Candidate {
			out = append(out, n)
		}
	}
	return out
}

// NoCandidate says why no NIC is a candidate ("mlx5_0: its port 1 is
// DOWN; ..."), or where the suite looked when there is no RDMA device.
func (s *Selection) NoCandidate() string {
	if len(s.NICs) == 0 {
		return "no RDMA device: " + s.classState()
	}
	var why []string
	for _, n := range s.NICs {
		if !n.Candidate {
			why = append(why, n.Name+": "+n.Why)
		}
	}
	return "no RDMA NIC is a candidate: " + strings.Join(why, "; ")
}

func (s *Selection) classState() string {
	if !s.NICDir {
		return rdmadev.ClassDir + " does not exist"
	}
	return rdmadev.ClassDir + " is empty"
}

func (s *Selection) nicsThere() string {
	if len(s.NICs) == 0 {
		return "there is no RDMA device (" + s.classState() + ")"
	}
	var names []string
	for _, n := range s.NICs {
		names = append(names, n.Name)
	}
	return fmt.Sprintf("no such RDMA device in %s; there are %d (%s)", rdmadev.ClassDir, len(names), strings.Join(names, ", "))
}

func (s *Selection) gpusThere() string {
	if len(s.GPUs) == 0 {
		return fmt.Sprintf("there are no GPUs (no NVIDIA display-class function in %s)", pci.DevicesDir)
	}
	var a []string
	for _, g := range s.GPUs {
		a = append(a, g.PCI)
	}
	return fmt.Sprintf("there are %d GPUs (%s)", len(a), strings.Join(a, ", "))
}

// resolveGPU reads GDR_GPU: -1 when unset.
func (s *Selection) resolveGPU(v string) (int, error) {
	if v == "" {
		return -1, nil
	}
	if i, err := strconv.Atoi(v); err == nil {
		if i < 0 || i >= len(s.GPUs) {
			return -1, fmt.Errorf("GDR_GPU=%s: %s; want an index below %d (PCI bus order) or one of those addresses", v, s.gpusThere(), len(s.GPUs))
		}
		return i, nil
	}
	a, err := pci.NormalizeAddr(v)
	if err != nil {
		return -1, fmt.Errorf("GDR_GPU=%s: %v; %s", v, err, s.gpusThere())
	}
	if g := s.gpuByPCI(a); g != nil {
		return g.Index, nil
	}
	if d := s.Index.Device(a); d != nil {
		return -1, fmt.Errorf("GDR_GPU=%s: %s is not an NVIDIA GPU (%s, class 0x%06x); %s", v, a, d, d.Class, s.gpusThere())
	}
	return -1, fmt.Errorf("GDR_GPU=%s names no GPU; %s", v, s.gpusThere())
}

// Choice is a NIC with its path from one GPU.
type Choice struct {
	NIC     *NIC
	Path    topo.Path
	HasPath bool
}

// nearer orders choices: with a path before without; class; bridges.
func nearer(a, b Choice) int {
	if a.HasPath != b.HasPath {
		if a.HasPath {
			return -1
		}
		return 1
	}
	if a.Path.Class != b.Path.Class {
		return int(a.Path.Class) - int(b.Path.Class)
	}
	return len(a.Path.Bridges) - len(b.Path.Bridges)
}

// tieBreak is rules 2 and 4: hardware before software, port rate, link
// layer, lower PCI address, name.
func tieBreak(a, b Choice) int {
	if a.NIC.Software != b.NIC.Software {
		if !a.NIC.Software {
			return -1
		}
		return 1
	}
	if c := prefer(a, b); c != 0 {
		return c
	}
	if a.NIC.PCI != b.NIC.PCI {
		if pciLess(a.NIC.PCI, b.NIC.PCI) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.NIC.Name, b.NIC.Name)
}

// Ranked lists every NIC by nearness to g: hardware NICs with a PCIe path by
// class, bridges, PCI address and name; then the rest (no path: software
// NICs, or g is driver-only) hardware first, by PCI address, then by name.
// Candidates and non-candidates alike: NIC.Candidate tells them apart.
func (s *Selection) Ranked(g *GPU) []Choice {
	var out []Choice
	for _, n := range s.NICs {
		out = append(out, s.choice(g, n))
	}
	slices.SortStableFunc(out, func(a, b Choice) int {
		if c := nearer(a, b); c != 0 {
			return c
		}
		return tieBreak(a, b)
	})
	return out
}

func (s *Selection) choice(g *GPU, n *NIC) Choice {
	c := Choice{NIC: n}
	if g == nil || g.Dev == nil || n.Software || s.Index.Device(n.PCI) == nil {
		return c
	}
	if p, err := s.Index.Classify(g.PCI, n.PCI); err == nil {
		c.Path, c.HasPath = s.ncclPath(g, n, p), true
	}
	return c
}

// Nearer lists the NICs nearer r's GPU than r's NIC (all of them with a
// PCIe path when the rail has none) that are not candidates, nearest first:
// what a check names when a rail is farther than the hardware allows.
func (s *Selection) Nearer(r *Rail) []Choice {
	if r.GPU == nil {
		return nil
	}
	var out []Choice
	cur := Choice{NIC: r.NIC, Path: r.Path, HasPath: r.HasPath}
	for _, c := range s.Ranked(r.GPU) {
		if c.NIC.Candidate || !c.HasPath {
			continue
		}
		if r.NIC == nil || !r.HasPath || nearer(c, cur) < 0 {
			out = append(out, c)
		}
	}
	return out
}

// Describe is "mlx5_3 (PIX, 3 bridges): its port 1 is DOWN" for each choice.
func Describe(cs []Choice) string {
	var s []string
	for _, c := range cs {
		d := c.NIC.Name
		if c.HasPath {
			d += fmt.Sprintf(" (%s, %d bridges)", c.Path.Class, len(c.Path.Bridges))
		}
		if !c.NIC.Candidate {
			d += ": " + c.NIC.Why
		}
		s = append(s, d)
	}
	return strings.Join(s, "; ")
}

func (s *Selection) buildRails() {
	taken := map[string]int{} // portKey -> lowest GPU index that took it
	for _, g := range s.GPUs {
		r := &Rail{Index: g.Index, GPU: g}
		s.All = append(s.All, r)
		if s.Forced != nil {
			c := s.choice(g, s.Forced)
			r.NIC, r.Path, r.HasPath, r.Forced = s.Forced, c.Path, c.HasPath, true
			r.Reason = fmt.Sprintf("GDR_RDMA_DEVICE=%s%s", s.Forced.Name, pathNote(c))
			if !s.Forced.Candidate {
				r.Reason += "; not a rail candidate: " + s.Forced.Why
			}
			continue
		}
		var cands []Choice
		for _, c := range s.Ranked(g) {
			if c.NIC.Candidate {
				cands = append(cands, c)
			}
		}
		if len(cands) == 0 {
			r.Reason = s.NoCandidate()
			continue
		}
		// Only hardware NICs with a path compete on nearness; without one
		// (software NICs, driver-only GPUs) rules 2 and 3 decide alone.
		hw := cands[:0:0]
		for _, c := range cands {
			if c.HasPath {
				hw = append(hw, c)
			}
		}
		pool := cands
		if len(hw) > 0 {
			pool = hw
		}
		_, isTaken := taken[portKey(pool[0].NIC)]
		best := pool[0]
		for _, c := range pool[1:] {
			if nearer(c, pool[0]) != 0 || prefer(c, pool[0]) != 0 {
				break // rule 3 chooses among equally near and equally preferred NICs only
			}
			if _, t := taken[portKey(c.NIC)]; isTaken && !t {
				best, isTaken = c, false
				break
			}
		}
		if _, ok := taken[portKey(best.NIC)]; !ok {
			taken[portKey(best.NIC)] = g.Index
		}
		r.NIC, r.Path, r.HasPath = best.NIC, best.Path, best.HasPath
		r.Reason = s.reason(r, pool, taken)
	}
}

func pathNote(c Choice) string {
	if !c.HasPath {
		return " (no PCIe path)"
	}
	return fmt.Sprintf(" (%s, %d bridges)", c.Path.Class, len(c.Path.Bridges))
}

func (s *Selection) reason(r *Rail, pool []Choice, taken map[string]int) string {
	var why string
	switch {
	case r.HasPath:
		why = fmt.Sprintf("nearest ACTIVE RDMA NIC to GPU %d (%s, %d bridges)", r.GPU.Index, r.Path.Class, r.Bridges())
		if r.Path.NUMAUnknown {
			why += ", NUMA unknown"
		}
		why += ncclNote(r.Path)
	case r.GPU.DriverOnly:
		why = fmt.Sprintf("GPU %d is seen by the driver only (%s is not in sysfs): no PCIe path, so the first candidate RDMA NIC", r.GPU.Index, r.GPU.PCI)
	case r.NIC.Software:
		why = fmt.Sprintf("software RDMA device on %s (no PCIe path): no hardware RDMA NIC is a candidate", r.NIC.Parent)
	default:
		why = "first candidate RDMA NIC (no PCIe path)"
	}
	var skipped []string
	for _, c := range pool {
		if c.NIC == r.NIC || nearer(c, Choice{Path: r.Path, HasPath: r.HasPath}) != 0 {
			continue
		}
		if i, t := taken[portKey(c.NIC)]; t && i < r.GPU.Index && tieBreak(c, Choice{NIC: r.NIC}) < 0 {
			if o := s.All[i].NIC; o != nil && o != c.NIC {
				skipped = append(skipped, fmt.Sprintf("%s as near, shares the PF of %s, taken by GPU %d", c.NIC.Name, o.Name, i))
				continue
			}
			skipped = append(skipped, fmt.Sprintf("%s as near, taken by GPU %d", c.NIC.Name, i))
		}
	}
	skipped = append(skipped, s.shapeNotes(r, pool)...)
	if n := s.Nearer(r); len(n) > 0 {
		skipped = append(skipped, "nearer but not candidates: "+Describe(n))
	}
	if len(skipped) > 0 {
		why += "; " + strings.Join(skipped, "; ")
	}
	return why
}

// filter applies GDR_GPU and GDR_RAILS.
func (s *Selection) filter(cfg config.Config, gpuSel int) error {
	keep := map[int]bool{}
	if cfg.Rails != nil {
		for _, i := range cfg.Rails {
			if i >= len(s.All) {
				if len(s.All) == 0 {
					return fmt.Errorf("GDR_RAILS=%s: there are no rails: %s", railList(cfg.Rails), s.gpusThere())
				}
				return fmt.Errorf("GDR_RAILS=%s: rail %d does not exist; there are %d rails (0-%d), one per GPU", railList(cfg.Rails), i, len(s.All), len(s.All)-1)
			}
			keep[i] = true
		}
	}
	for _, r := range s.All {
		if gpuSel >= 0 && r.Index != gpuSel {
			continue
		}
		if cfg.Rails != nil && !keep[r.Index] {
			continue
		}
		s.Rails = append(s.Rails, r)
	}
	if gpuSel >= 0 && len(s.Rails) == 0 {
		return fmt.Errorf("GDR_GPU=%s is rail %d, which GDR_RAILS=%s leaves out", cfg.GPU, gpuSel, railList(cfg.Rails))
	}
	return nil
}

func railList(r []int) string {
	s := make([]string, len(r))
	for i, v := range r {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (s *Selection) choosePrimary(gpuSel int) {
	switch {
	case gpuSel >= 0:
		s.Primary, s.PrimaryWhy = s.All[gpuSel], fmt.Sprintf("GDR_GPU selects GPU %d", gpuSel)
	case s.Forced != nil && len(s.Rails) > 0:
		best := s.Rails[0]
		bc := Choice{Path: best.Path, HasPath: best.HasPath}
		for _, r := range s.Rails[1:] {
			if nearer(Choice{Path: r.Path, HasPath: r.HasPath}, bc) < 0 {
				best, bc = r, Choice{Path: r.Path, HasPath: r.HasPath}
			}
		}
		s.Primary = best
		s.PrimaryWhy = fmt.Sprintf("GPU %d is the selected GPU nearest GDR_RDMA_DEVICE=%s%s", best.GPU.Index, s.Forced.Name, pathNote(bc))
	case len(s.Rails) > 0:
		s.Primary, s.PrimaryWhy = s.Rails[0], fmt.Sprintf("rail %d, the first selected", s.Rails[0].Index)
		if s.Primary.NIC == nil {
			s.PrimaryWhy += " (GPU only: " + s.NoCandidate() + ")"
		}
	case s.Forced != nil:
		s.Primary = &Rail{Index: -1, NIC: s.Forced, Forced: true, Reason: "GDR_RDMA_DEVICE=" + s.Forced.Name}
		if !s.Forced.Candidate {
			s.Primary.Reason += "; not a rail candidate: " + s.Forced.Why
		}
		s.PrimaryWhy = "no GPU: the NIC GDR_RDMA_DEVICE names"
	default:
		var cs []Choice
		for _, n := range s.Candidates() {
			cs = append(cs, Choice{NIC: n})
		}
		if len(cs) == 0 {
			s.PrimaryWhy = "no GPU and " + s.NoCandidate()
			return
		}
		slices.SortStableFunc(cs, tieBreak)
		n := cs[0].NIC
		kind := "hardware RDMA NIC by PCI address"
		if n.Software {
			kind = "software RDMA device by name (no hardware NIC is a candidate)"
		}
		s.Primary = &Rail{Index: -1, NIC: n, Reason: "no GPU: the first candidate " + kind}
		s.PrimaryWhy = s.Primary.Reason
	}
}

// Summary is one line per rail of All, for logs.
func (s *Selection) Summary() string {
	if len(s.All) == 0 {
		if s.Primary != nil {
			return s.Primary.String() + ": " + s.Primary.Reason
		}
		return "no GPU; " + s.NoCandidate()
	}
	var out []string
	for _, r := range s.All {
		out = append(out, r.String()+": "+r.Reason)
	}
	if vf := s.LeftOutVFs(); vf != "" {
		out = append(out, vf)
	}
	if s.HCA.Set() {
		out = append(out, fmt.Sprintf("%s: excluded %s", s.HCA, orNone(s.HCAExcludedNICs())))
	}
	return strings.Join(out, "\n")
}

// PathDevice is one PCI function a rail's data crosses.
type PathDevice struct {
	Role string // "GPU", "bridge" or "NIC"
	Dev  *pci.Device
}

// PathDevices returns the PCI functions of rail r's GPU<->NIC path, GPU
// first, the bridges between in order, then the NIC (and, for a NIC that is
// an SR-IOV VF, its PF as "NIC PF": the link and its errors are the PF's).
// Without that path (a NIC-only or GPU-only rail, a software NIC, a
// driver-only GPU) it is the PCI device there is with the ports above it up
// to its root port: its DMA to host memory crosses them. Functions sysfs
// does not list are left out and named in missing.
func (h *Host) PathDevices(r *Rail) (out []PathDevice, missing []string) {
	if r == nil {
		return nil, nil
	}
	add := func(role, bdf string) {
		if d := h.Index.Device(bdf); d != nil {
			out = append(out, PathDevice{Role: role, Dev: d})
		} else {
			missing = append(missing, role+" "+bdf)
		}
	}
	if r.HasPath && r.GPU != nil && r.NIC != nil {
		add("GPU", r.GPU.PCI)
		for _, b := range r.Path.Bridges {
			add("bridge", b)
		}
		add("NIC", r.NIC.PCI)
		return h.withPF(out), missing
	}
	var bdf, role string
	switch {
	case r.NIC != nil && r.NIC.PCI != "":
		bdf, role = r.NIC.PCI, "NIC"
	case r.GPU != nil && !r.GPU.DriverOnly:
		bdf, role = r.GPU.PCI, "GPU"
	default:
		return nil, nil
	}
	out, missing = h.UpstreamDevices(role, bdf)
	return h.withPF(out), missing
}

// UpstreamDevices is the function bdf (as role) and the ports above it up
// to its root port, nearest first: the path of its DMA to host memory.
func (h *Host) UpstreamDevices(role, bdf string) (out []PathDevice, missing []string) {
	d := h.Index.Device(bdf)
	if d == nil {
		return nil, []string{role + " " + bdf}
	}
	out = append(out, PathDevice{Role: role, Dev: d})
	for i := len(d.Chain) - 2; i >= 0; i-- {
		if p := h.Index.Device(d.Chain[i]); p != nil {
			out = append(out, PathDevice{Role: "bridge", Dev: p})
		} else {
			missing = append(missing, "bridge "+d.Chain[i])
		}
	}
	return out, missing
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
