//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// Placement is a chosen GPU-NIC pairing and how it was chosen.
type Placement struct {
	GPU    Device
	NIC    string
	Path   string // PIX..SYS, "" when not classified
	Reason string // for the gdr.*_choice attributes
}

// index reads the host's PCI functions; a partly unreadable tree still
// gives an index of what could be read.
func index(root *hostfs.Root) (*topo.Index, error) {
	devs, err := pci.Scan(root)
	if len(devs) == 0 {
		if err == nil {
			err = errors.New("no PCI functions in /sys/bus/pci/devices")
		}
		return nil, err
	}
	return topo.New(devs), nil
}

// NearestNIC picks, among RDMA devices names, the one with the best PCIe path
// to gpu (class first, then fewer bridges, then name), like
// `nvidia-smi topo -m`. Software devices (rxe, siw) have no path and are
// chosen only when nothing else is there, first by name.
func NearestNIC(root *hostfs.Root, gpu Device, names []string) (Placement, error) {
	if len(names) == 0 {
		return Placement{}, errors.New("no RDMA device")
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	first := Placement{GPU: gpu, NIC: sorted[0], Reason: "first RDMA device"}
	if len(sorted) == 1 {
		first.Reason = "the only RDMA device"
	}
	nics := map[string]string{}
	for _, n := range sorted {
		if d, err := rdmadev.Load(root, n); err == nil && !d.Software && d.PCI != "" {
			nics[n] = d.PCI
		}
	}
	if len(nics) == 0 {
		first.Reason += " (no RDMA device has a PCI function)"
		return first, nil
	}
	ix, err := index(root)
	if err != nil {
		return first, fmt.Errorf("PCI topology unreadable, taking the %s: %w", first.Reason, err)
	}
	cands, err := ix.Nearest(gpu.PCI, nics)
	if err != nil || len(cands) == 0 {
		return first, fmt.Errorf("classifying GPU %s against the NICs, taking the %s: %v", gpu.PCI, first.Reason, err)
	}
	c := cands[0]
	return Placement{GPU: gpu, NIC: c.NIC, Path: c.Path.Class.String(),
		Reason: fmt.Sprintf("nearest RDMA device to GPU %s (%s, %d bridges)", gpu.PCI, c.Path.Class, len(c.Path.Bridges))}, nil
}

// NearestGPU picks, among gpus, the one with the best PCIe path to RDMA device
// nic; the first GPU when nic has no PCI function or the tree is unreadable.
func NearestGPU(root *hostfs.Root, gpus []Device, nic string) (Placement, error) {
	if len(gpus) == 0 {
		return Placement{}, errors.New("no GPU")
	}
	first := Placement{GPU: gpus[0], NIC: nic, Reason: "first GPU"}
	if len(gpus) == 1 {
		first.Reason = "the only GPU"
		return first, nil
	}
	d, err := rdmadev.Load(root, nic)
	if err != nil {
		return first, fmt.Errorf("RDMA device %s: %w", nic, err)
	}
	if d.Software || d.PCI == "" {
		first.Reason += " (" + nic + " is a software device without a PCI function)"
		return first, nil
	}
	ix, err := index(root)
	if err != nil {
		return first, fmt.Errorf("PCI topology unreadable, taking the first GPU: %w", err)
	}
	best := -1
	var bestPath topo.Path
	for i, g := range gpus {
		p, err := ix.Classify(g.PCI, d.PCI)
		if err != nil {
			return first, fmt.Errorf("classifying GPU %s against %s: %w", g.PCI, nic, err)
		}
		if best < 0 || p.Class < bestPath.Class || (p.Class == bestPath.Class && len(p.Bridges) < len(bestPath.Bridges)) {
			best, bestPath = i, p
		}
	}
	return Placement{GPU: gpus[best], NIC: nic, Path: bestPath.Class.String(),
		Reason: fmt.Sprintf("nearest GPU to %s (%s, %d bridges)", nic, bestPath.Class, len(bestPath.Bridges))}, nil
}
