// Host reading: what the host has (PCI, GPUs, RDMA devices, VM), by Discover.

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

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/virt"
)

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
	// GPUs on NVLink-C2C reach a NIC on their own Grace as NCCL's P2C;
	// what the driver directory does not say (unreadable) leaves the PCIe
	// classes, which judge such a host more strictly, never more leniently.
	if c2c, err := nvdriver.C2CGPUs(r); err == nil {
		h.Index.MarkC2C(c2c)
	}
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
