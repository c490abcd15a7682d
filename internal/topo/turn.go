package topo

import "github.com/gdrconf/gdrconf/internal/pci"

// TurnPorts splits the switch ports (upstream and downstream ports) of path
// p into those at the switch where the path turns and those it only passes
// through.
//
// Peer-to-peer traffic between the two ends turns at their lowest common
// ancestor. ACS Request/Completion Redirect and Egress Control act on a
// switch's downstream ports for traffic towards another port of the same
// switch (PCIe Base Specification 6.0, 6.12 Access Control Services), so only
// the ports of the switch where the path turns (the common ancestor and its
// ports on the path) can send it to the root complex. A port the path only
// passes through, such as a BlueField DPU's internal switch between the turn
// and the NIC functions or a second switch in front of a GPU, routes the
// traffic up or down by address and cannot redirect it. When the ends share
// no PCI bridge the path turns in the root complex and no switch port decides
// (root ports are not switch ports).
func (ix *Index) TurnPorts(p Path) (turn, through []string) {
	isSwitchPort := func(b string) bool {
		t := ix.PortType(b)
		return t == pci.TypeUpstream || t == pci.TypeDownstream
	}
	for _, b := range p.Bridges {
		if !isSwitchPort(b) {
			continue
		}
		atTurn := false
		if p.LCA != "" {
			d := ix.devs[b]
			atTurn = b == p.LCA || (d != nil && d.Parent() == p.LCA)
		}
		if atTurn {
			turn = append(turn, b)
		} else {
			through = append(through, b)
		}
	}
	return turn, through
}
