// Package topo classifies the PCIe path between two PCI functions the way
// `nvidia-smi topo -m` does (PIX, PXB, PHB, NODE, SYS), from their sysfs
// paths: the lowest common ancestor, and the PCIe switches between them.
package topo

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/pathclass"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// Index holds a host's PCI functions by address.
type Index struct {
	devs map[string]*pci.Device
}

// New indexes devs (as returned by pci.Scan).
func New(devs []*pci.Device) *Index {
	ix := &Index{devs: map[string]*pci.Device{}}
	for _, d := range devs {
		ix.devs[d.BDF] = d
	}
	return ix
}

// Device returns the function at bdf, or nil.
func (ix *Index) Device(bdf string) *pci.Device { return ix.devs[bdf] }

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
	Class pathclass.Class
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
}

// Classify returns the path between functions a and b.
func (ix *Index) Classify(a, b string) (Path, error) {
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
		if da.NUMANode >= 0 && db.NUMANode >= 0 && da.NUMANode != db.NUMANode {
			p.Class = pathclass.SYS
		} else {
			p.Class = pathclass.NODE // same node, or unknown (-1): not known to differ
		}
		return p, nil
	}
	k := 0
	for k < len(da.Chain) && k < len(db.Chain) && da.Chain[k] == db.Chain[k] {
		k++
	}
	if k == 0 {
		p.Bridges = append(reversed(ca), cb...)
		p.Switches = ix.countSwitches(p.Bridges)
		p.Class = pathclass.PHB
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
		p.Class = pathclass.PIX
	} else {
		p.Class = pathclass.PXB
	}
	return p, nil
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
// class, then fewer bridges, then name. nics maps RDMA device name to PCI
// function. Functions missing from the index are errors.
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
		return x.NIC < y.NIC
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}
