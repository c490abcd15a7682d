package rails

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// Deployment shapes the rail rule must survive: SR-IOV virtual functions,
// bonded (RoCE LAG) devices, storage NICs beside compute NICs. The rule
// itself is in the package comment.

// markVFs sets VF and PhysFn on NICs whose PCI function is an SR-IOV
// virtual function, and takes out of the candidates the VFs that are no
// rails:
//   - anywhere, a VF whose own PF (its physfn link) has an RDMA device this
//     process can open and NCCL_IB_HCA does not exclude: VFs serve VMs and
//     containers, and with SR-IOV on a PF's VFs sort before the next PF of
//     the switch, so rule 4 would hand them rails while that PF idles. The
//     PF need not be ACTIVE: it is the VF's own port, so a PF that is down
//     is a PF to fix, not a reason to test a VF instead;
//   - on bare metal, a VF whose PF is not here (no physfn link, or a PF
//     without an RDMA device) while a candidate PF of the same PCI vendor
//     and link layer is: one of those may be its PF. A device of another
//     vendor or link layer, or whose port is not ACTIVE, says nothing about
//     the VFs and never takes them out.
//
// In a VM (internal/virt) VFs are otherwise rails: a guest's passed-through
// VFs have no physfn link, and functions its VF table does not know (a
// MANA or ConnectX-3 function beside eight ConnectX-7 VFs on Azure, a PF
// passed through) are no reason to leave them out.
func (s *Selection) markVFs() {
	for _, n := range s.NICs {
		if n.Software {
			continue
		}
		if d := s.Index.Device(n.PCI); d != nil && d.IsVF() {
			n.VF, n.PhysFn = true, d.PhysFn
		}
	}
	for _, n := range s.NICs {
		if !n.VF || !n.Candidate {
			continue
		}
		if pf := s.nicByPCI(n.PhysFn); pf != nil && n.PhysFn != "" && opens(pf) && !pf.HCAExcluded {
			s.leaveOut(n, "its PF "+n.PhysFn+" is "+pf.Name, "a VF is not a rail while its own PF, which this process can open, is")
			continue
		}
		if s.Guest.VM {
			continue
		}
		peers := s.peerPFs(n)
		if len(peers) == 0 {
			continue
		}
		of := "its PF " + n.PhysFn + " is not in " + pci.DevicesDir
		switch {
		case n.PhysFn == "":
			of = "no physfn link; a VF by its device ID"
		case s.Index.Device(n.PhysFn) != nil:
			of = "its PF " + n.PhysFn + " has no RDMA device this process can open"
		}
		s.leaveOut(n, of, fmt.Sprintf("physical functions with RDMA devices are visible (%s: ACTIVE, %s, of the VF's vendor) on a host that is not a VM, and a VF is not a rail while a PF is",
			nicNamesOf(peers), orUnknown(n.LinkLayer)))
	}
}

// markBlueField sets BlueField on NICs whose PCI function is a BlueField-3
// network function (pci.Device.IsBlueFieldNIC) and takes them out of the
// candidates while a hardware NIC that is no BlueField is a candidate. On
// DGX B200/B300 and GB200 trays the BlueField-3s carry storage, in-band
// management and north-south traffic (NVIDIA's DGX B200 User Guide and
// DGX BasePOD RA; the GB200 Multi-Node Tuning Guide), and rdma-core's
// kernel-boot/rdma_topo builds its GPU<->NIC complexes from ConnectX NICs
// only (pci_device_types: bf3_nic apart from cx_nic;
// __get_nvcx_numa_complex). NCCL itself has no such rule (it would use a
// BlueField-3 at the same distance; docs/grace-blackwell.md), so the rule
// yields to the site's NCCL setting: with NCCL_IB_HCA an include list
// (the site names NCCL's devices) it does not apply, and an exclude list
// that leaves no ConnectX candidate leaves the BlueFields in. A host whose
// only NICs are BlueField-3s (a converged card, BlueField-3 SuperNICs)
// keeps them as rails. GDR_RDMA_DEVICE names one on purpose.
func (s *Selection) markBlueField() {
	var cx []*NIC
	for _, n := range s.NICs {
		if n.Software {
			continue
		}
		if d := s.Index.Device(n.PCI); d != nil && d.IsBlueFieldNIC() {
			n.BlueField = true
		} else if n.Candidate {
			cx = append(cx, n)
		}
	}
	if len(cx) == 0 || (s.HCA.Set() && !s.HCA.Exclude) {
		return
	}
	for _, n := range s.NICs {
		if !n.BlueField || !n.Candidate {
			continue
		}
		n.Candidate, n.bfLeftOut, n.Unfit = false, true, UnfitBlueField
		n.Remedy = fmt.Sprintf("set GDR_RDMA_DEVICE=%s to test it, or name NCCL's devices in NCCL_IB_HCA where the site sets it", n.Name)
		n.Why = fmt.Sprintf("it is a BlueField-3 network function (15b3:a2dc), which DGX and GB200 trays use for storage, management and north-south traffic: not a rail while ConnectX NICs are candidates (%s); %s", nicNamesOf(cx), n.Remedy)
	}
}

// LeftOutBlueField is one line naming the BlueField-3 functions
// markBlueField left out, "" when none was.
func (s *Selection) LeftOutBlueField() string {
	var bf []string
	for _, n := range s.NICs {
		if n.bfLeftOut {
			bf = append(bf, n.Name+" ("+n.PCI+")")
		}
	}
	if len(bf) == 0 {
		return ""
	}
	return fmt.Sprintf("left out: %d BlueField-3 network function(s), not rails while ConnectX NICs are candidates: %s", len(bf), strings.Join(bf, ", "))
}

// leaveOut takes VF n out of the candidates: of says whose VF it is, why
// why that makes it no rail.
func (s *Selection) leaveOut(n *NIC, of, why string) {
	n.Candidate, n.vfLeftOut, n.Unfit = false, true, UnfitVF
	n.Why = fmt.Sprintf("it is an SR-IOV virtual function (%s): %s; set GDR_RDMA_DEVICE=%s to test the VF", of, why, n.Name)
}

// opens: the NIC's RDMA device is one this process can open (a verbs node
// in sysfs whose device node is not missing).
func opens(n *NIC) bool {
	return n.Dev != nil && n.Dev.Uverbs != "" && n.Dev.NodeState != rdmadev.NodeMissing
}

// peerPFs are the candidate physical functions that may be VF n's PF where
// sysfs does not say: hardware, of n's PCI vendor and link layer.
func (s *Selection) peerPFs(n *NIC) []*NIC {
	vd := s.Index.Device(n.PCI)
	var out []*NIC
	for _, p := range s.NICs {
		if p.Software || p.VF || !p.Candidate || p.LinkLayer != n.LinkLayer {
			continue
		}
		if pd := s.Index.Device(p.PCI); pd != nil && vd != nil && pd.Vendor == vd.Vendor {
			out = append(out, p)
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "link layer unknown"
	}
	return s
}

func (s *Selection) nicByPCI(bdf string) *NIC {
	for _, n := range s.NICs {
		if n.PCI == bdf && !n.Software {
			return n
		}
	}
	return nil
}

func nicNamesOf(ns []*NIC) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return strings.Join(out, ", ")
}

// LeftOutVFs is one line naming the virtual functions markVFs left out,
// "" when none was.
func (s *Selection) LeftOutVFs() string {
	var vfs []string
	for _, n := range s.NICs {
		if n.vfLeftOut {
			of := ", VF"
			if n.PhysFn != "" {
				of += " of " + n.PhysFn
			}
			vfs = append(vfs, n.Name+" ("+n.PCI+of+")")
		}
	}
	if len(vfs) == 0 {
		return ""
	}
	return fmt.Sprintf("left out: %d SR-IOV virtual function(s), not rails while their physical functions are visible: %s", len(vfs), strings.Join(vfs, ", "))
}

// linkLayerRank orders link layers for rule 2: InfiniBand, Ethernet, other.
func linkLayerRank(l string) int {
	switch l {
	case "InfiniBand":
		return 0
	case "Ethernet":
		return 1
	}
	return 2
}

// prefer is rule 2 between two hardware NICs: higher port rate first (no
// rate last), then InfiniBand before Ethernet; 0 for software NICs, whose
// rates are fictional.
func prefer(a, b Choice) int {
	if a.NIC == nil || b.NIC == nil || a.NIC.Software || b.NIC.Software {
		return 0
	}
	if a.NIC.RateGbps != b.NIC.RateGbps {
		if a.NIC.RateGbps > b.NIC.RateGbps {
			return -1
		}
		return 1
	}
	return linkLayerRank(a.NIC.LinkLayer) - linkLayerRank(b.NIC.LinkLayer)
}

// portDesc is "400 Gb/s InfiniBand" (what rule 2 compares).
func portDesc(n *NIC) string {
	rate := "no rate"
	if n.RateGbps > 0 {
		rate = strconv.FormatFloat(n.RateGbps, 'g', -1, 64) + " Gb/s"
	}
	ll := n.LinkLayer
	if ll == "" {
		ll = "link layer unknown"
	}
	return rate + " " + ll
}

// shapeNotes are the parts of r's reason that come from rule 2, bonds and
// VFs: equally near NICs it was preferred over, the bond it is, and the
// virtual functions as near that were left out.
func (s *Selection) shapeNotes(r *Rail, pool []Choice) []string {
	var out []string
	cur := Choice{NIC: r.NIC, Path: r.Path, HasPath: r.HasPath}
	var over []string
	for _, c := range pool {
		if c.NIC != r.NIC && nearer(c, cur) == 0 && prefer(cur, c) < 0 {
			over = append(over, c.NIC.Name+" ("+portDesc(c.NIC)+")")
		}
	}
	if len(over) > 0 {
		out = append(out, fmt.Sprintf("preferred by port rate and link layer (%s) over the as near %s", portDesc(r.NIC), strings.Join(over, ", ")))
	}
	if r.NIC.VF && s.Guest.VM {
		out = append(out, "an SR-IOV virtual function: in a VM, VFs are rails")
	}
	if b := r.NIC.Dev.Bond; b != nil && len(r.NIC.Dev.Functions()) > 1 {
		out = append(out, fmt.Sprintf("bonded device: one RDMA device over PCI functions %s (bond master %s)", strings.Join(r.NIC.Dev.Functions(), ", "), b.Master))
	}
	if r.HasPath && r.GPU != nil {
		var vfs []string
		for _, c := range s.Ranked(r.GPU) {
			if c.NIC.vfLeftOut && c.HasPath && nearer(c, cur) == 0 {
				vfs = append(vfs, c.NIC.Name)
			}
		}
		if len(vfs) > 0 {
			out = append(out, fmt.Sprintf("as near but SR-IOV virtual functions, left out while their PFs are visible: %s", strings.Join(vfs, ", ")))
		}
	}
	return out
}

// withPF appends the PF of a VF NIC in out, where sysfs has it: a VF's Link
// Status is reserved and link errors are logged on the PF, so link-rate
// floors and AER watches need the PF (role "NIC PF").
func (h *Host) withPF(out []PathDevice) []PathDevice {
	for _, d := range out {
		if d.Role != "NIC" || !d.Dev.IsVF() {
			continue
		}
		if pf := h.Index.Device(d.Dev.PhysFn); pf != nil {
			return append(out, PathDevice{Role: "NIC PF", Dev: pf})
		}
	}
	return out
}

// portKey is what rule 3 counts as taken: the PF's address for a VF whose
// PF sysfs links (the VFs of one PF share its port), else the NIC's name.
func portKey(n *NIC) string {
	if n.VF && n.PhysFn != "" {
		return "pf " + n.PhysFn
	}
	if !n.Software && n.PCI != "" {
		return "pf " + n.PCI
	}
	return n.Name
}
