package pcipath

import (
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// AboveGPU is the path to judge without a hardware NIC: the GPU g and the
// ports above it (its host traffic crosses them, and the MaxPayload rule
// is the same).
func AboveGPU(ix *topo.Index, g *pci.Device) Path {
	p := Path{{Dev: g, Role: GPU}}
	for i := len(g.Chain) - 2; i >= 0; i-- {
		if d := ix.Device(g.Chain[i]); d != nil {
			p = append(p, Member{Dev: d, Role: Bridge})
		}
	}
	return p
}

// ToNIC is the path to judge from GPU g across bridges (topo.Path.Bridges)
// to the NIC nic (RDMA device name) at PCI function nicPCI. A VF NIC is
// judged by its PF where that is visible (RuleVF): pf is then the PF, nil
// otherwise. A bridge or NIC missing from ix is a *verdict.Finding (fell short).
func ToNIC(ix *topo.Index, g *pci.Device, bridges []string, nic, nicPCI string) (p Path, pf *pci.Device, err error) {
	p = Path{{Dev: g, Role: GPU}}
	for _, b := range bridges {
		d := ix.Device(b)
		if d == nil {
			return nil, nil, verdict.Failf("check "+pci.DevicesDir, "bridge %s on the path %s <-> %s is not in %s", b, g.BDF, nic, pci.DevicesDir)
		}
		p = append(p, Member{Dev: d, Role: Bridge})
	}
	n := ix.Device(nicPCI)
	if n == nil {
		return nil, nil, verdict.Failf("check the driver of "+nic, "NIC %s's PCI function %s is not in %s", nic, nicPCI, pci.DevicesDir)
	}
	if pf = ix.Device(n.PhysFn); n.IsVF() && pf != nil {
		// A VF's MaxPayload and enables are reserved and its PF's govern.
		return append(p, Member{Dev: pf, Role: NIC}), pf, nil
	}
	return append(p, Member{Dev: n, Role: NIC}), nil, nil
}
