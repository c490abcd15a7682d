package rails

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// What the topology checks (conformance/topology) pick from the selection:
// the NICs to pair with, the NIC whose PCIe path a rail's checks read, the
// rails' own NICs. A missing one is an absent *verdict.Finding naming where
// the suite looked; the test stops on it (testenv.Stop).

// ScanFindings are the sysfs entries the selection could not parse: a
// malformed host tree must not pass by hiding devices.
func (s *Selection) ScanFindings() []verdict.Finding {
	var out []verdict.Finding
	if s.PCIErr != nil && s.PCIDir {
		out = append(out, *verdict.Failf("check the kernel's sysfs (or the recorded tree); the entries named above were left out of every check",
			"PCI devices that could not be read: %v", s.PCIErr))
	}
	if s.NICErr != nil {
		out = append(out, *verdict.Failf("check the RDMA driver (dmesg) or the recorded tree; the devices named above were left out of every check",
			"RDMA devices that could not be read: %v", s.NICErr))
	}
	return out
}

// SysfsGPUs are every GPU in sysfs, in PCI bus order (nvidia-smi's
// numbering), whatever GDR_GPU selects.
func (s *Selection) SysfsGPUs() []*GPU {
	var out []*GPU
	for _, g := range s.GPUs {
		if g.Dev != nil {
			out = append(out, g)
		}
	}
	return out
}

// SelectedGPUs are the GPUs of rs.
func SelectedGPUs(rs []*Rail) []*GPU {
	var out []*GPU
	for _, r := range rs {
		out = append(out, r.GPU)
	}
	return out
}

// GPUList is gs' PCI addresses, for attributes and messages.
func GPUList(gs []*GPU) string {
	var s []string
	for _, g := range gs {
		s = append(s, g.PCI)
	}
	return strings.Join(s, ", ")
}

// NICNames is ns' device names, for attributes and messages.
func NICNames(ns []*NIC) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// NeedNICs are the RDMA devices to pair with (GDR_RDMA_DEVICE selects
// one); none is absent, naming the class directory and the RDMA modules.
func (s *Selection) NeedNICs() ([]*NIC, error) {
	if len(s.NICs) == 0 {
		where := rdmadev.ClassDir + " is empty"
		if !s.NICDir {
			where = rdmadev.ClassDir + " does not exist"
		}
		return nil, verdict.Absentf(reqs.RemedyNoRDMADevice, "no RDMA device: %s under %s; %s", where, s.Root.Dir(), kmod.RDMASummary(s.Root))
	}
	if s.Forced != nil {
		return []*NIC{s.Forced}, nil
	}
	return s.NICs, nil
}

// NeedPCINICs is absent when no NIC of NeedNICs has a PCI function:
// software devices (rxe, siw) have no PCIe path to check.
func (s *Selection) NeedPCINICs() error {
	ns, err := s.NeedNICs()
	if err != nil {
		return err
	}
	var soft []string
	for _, n := range ns {
		if !n.Software {
			return nil
		}
		soft = append(soft, fmt.Sprintf("%s (on %s)", n.Name, n.Parent))
	}
	return verdict.Absentf(reqs.RemedyHardwareNIC, "no PCI RDMA device: %s is a software device with no PCIe path (Soft-RoCE/siw); GPUDirect RDMA needs a hardware NIC", strings.Join(soft, ", "))
}

// PathChoice is the NIC whose PCIe path to a rail's GPU the fabric checks
// (ACS, link training, settings) look at.
type PathChoice struct {
	NIC  *NIC
	Path topo.Path
	// Nearest: the rail has no NIC with a PCIe path, and this is the
	// nearest hardware NIC; Why says so for the log.
	Nearest bool
	Why     string
}

// PathNIC is the rail's NIC; when the rail has none with a PCIe path (no
// candidate NIC), the nearest hardware NIC (GDR_RDMA_DEVICE's, when set),
// because a port that is down today still sends over that path tomorrow.
// ok is false when there is no hardware NIC with a path.
func (s *Selection) PathNIC(r *Rail) (c PathChoice, ok bool) {
	if r.NIC != nil && r.HasPath {
		return PathChoice{NIC: r.NIC, Path: r.Path}, true
	}
	for _, n := range s.Ranked(r.GPU) {
		if n.HasPath && (s.Forced == nil || n.NIC == s.Forced) {
			return PathChoice{NIC: n.NIC, Path: n.Path, Nearest: true,
				Why: fmt.Sprintf("%s has no rail NIC with a PCIe path (%s); checking the path to its nearest RDMA NIC %s (%s): %s",
					r.GPU, r.Reason, n.NIC.Name, n.Path.Class, n.NIC.Why)}, true
		}
	}
	return PathChoice{}, false
}

// NoPathNIC is the absence of any hardware NIC with a PCIe path to r's GPU.
func NoPathNIC(r *Rail) *verdict.Finding {
	return verdict.Absentf(reqs.RemedyHardwareNIC, "%s: no hardware RDMA NIC with a PCIe path to it (%s)", r.GPU, r.Reason)
}

// RailNICs are rs' hardware NICs, each once in rail order, and a line per
// software NIC left out (rxe and siw have no firmware and no transceiver),
// for the checks that read a NIC's own parts.
func RailNICs(rs []*Rail) (hw []*NIC, other []string) {
	seen := map[string]bool{}
	for _, r := range rs {
		n := r.NIC
		if n == nil || seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		if n.Software {
			other = append(other, fmt.Sprintf("%s is a software device (on %s) without firmware or transceiver", n.Name, n.Parent))
			continue
		}
		hw = append(hw, n)
	}
	return hw, other
}

// NoNIC is the absence of a rail NIC whose part what can be read, saying
// why for each one left out.
func NoNIC(what string, other []string) *verdict.Finding {
	if len(other) == 0 {
		other = []string{"no rail has an RDMA NIC"}
	}
	return verdict.Absentf("", "no NIC whose %s can be read: %s", what, strings.Join(other, "; "))
}

// PortRemedy is what to do about a NIC that is not a rail candidate: its
// own remedy where the selection knows one, else by why it is not.
func (n *NIC) PortRemedy() string {
	if n.Remedy != "" {
		return n.Remedy
	}
	switch n.Unfit {
	case UnfitNoPort:
		return "set GDR_IB_PORT to a port the NIC has"
	case UnfitNoUverbs:
		return "modprobe ib_uverbs (INST-10/INST-11 say more)"
	case UnfitPortDown:
		return "bring the port up: check the cable/transceiver and the switch port; InfiniBand ports in INIT need a subnet manager (opensm); RoCE needs the netdev up (INST-12 says more)"
	}
	return "check the NIC's driver and dmesg"
}

// GPURails are rs with a GPU (a NIC-only primary has none).
func GPURails(rs []*Rail) []*Rail {
	var out []*Rail
	for _, r := range rs {
		if r.GPU != nil {
			out = append(out, r)
		}
	}
	return out
}

// RailOf is the rail of rs whose GPU is at PCI address pci, or nil.
func RailOf(rs []*Rail, pci string) *Rail {
	for _, r := range rs {
		if r.GPU != nil && r.GPU.PCI == pci {
			return r
		}
	}
	return nil
}

// NICDevice is hardware NIC n's PCI function in the tree, or a finding
// when n's device link names a function the tree does not have (a driver
// bound to a function sysfs no longer lists).
func (s *Selection) NICDevice(n *NIC) (*pci.Device, error) {
	if d := s.Index.Device(n.PCI); d != nil {
		return d, nil
	}
	return nil, verdict.Failf("check the driver of "+n.Name+" and "+pci.DevicesDir,
		"%s/%s/device points to PCI function %s, which is not in %s", rdmadev.ClassDir, n.Name, n.PCI, pci.DevicesDir)
}
