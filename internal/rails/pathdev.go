// Path devices: the PCI functions a rail's data crosses.

package rails

import (
	"github.com/gdrconf/gdrconf/internal/pci"
)

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
