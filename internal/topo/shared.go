package topo

import (
	"fmt"
	"path"

	"github.com/gdrconf/gdrconf/internal/pci"
)

// Shared is what another function has upstream in common with one: the
// lowest PCI bridge both hang below, or only their host bridge. Traffic of
// both crosses the link above that bridge (or the root complex), which is
// where two devices copying at once can slow each other down.
type Shared struct {
	Peer string // the other function
	// Bridge is the lowest PCI bridge above both ("" when they share none:
	// different root ports of one host bridge).
	Bridge string
	// BridgeType is Bridge's PCIe port type (pci.Type*; -1 without Bridge).
	BridgeType int
	// HostBridge is the host bridge both hang under (/sys/devices/pci0000:00);
	// set whenever they share one.
	HostBridge string
}

// Where names what is shared: "switch upstream port 0000:01:00.0" or
// "host bridge pci0000:00 (no PCI bridge in common)".
func (s Shared) Where() string {
	if s.Bridge == "" {
		return fmt.Sprintf("host bridge %s (no PCI bridge in common)", path.Base(s.HostBridge))
	}
	if s.BridgeType < 0 {
		return "PCI bridge " + s.Bridge
	}
	return fmt.Sprintf("%s %s", pci.PortTypeName(s.BridgeType), s.Bridge)
}

// SharedUpstream lists, for function a, each of others that shares a PCI
// bridge or a host bridge with it, in the order given; functions under other
// host bridges share nothing and are left out, and so is a itself. A function
// the index does not have is an error naming it.
func (ix *Index) SharedUpstream(a string, others []string) ([]Shared, error) {
	da := ix.devs[a]
	if da == nil {
		return nil, fmt.Errorf("no PCI function %s", a)
	}
	var out []Shared
	for _, b := range others {
		if b == a {
			continue
		}
		db := ix.devs[b]
		if db == nil {
			return nil, fmt.Errorf("no PCI function %s", b)
		}
		if da.Root != db.Root || da.Root == "" {
			continue
		}
		s := Shared{Peer: b, BridgeType: -1, HostBridge: da.Root}
		// Ancestors only: the chains end with the functions themselves.
		ca, cb := da.Chain[:max(len(da.Chain)-1, 0)], db.Chain[:max(len(db.Chain)-1, 0)]
		for k := 0; k < len(ca) && k < len(cb) && ca[k] == cb[k]; k++ {
			s.Bridge = ca[k]
		}
		if s.Bridge != "" {
			s.BridgeType = ix.PortType(s.Bridge)
		}
		out = append(out, s)
	}
	return out, nil
}
