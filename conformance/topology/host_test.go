package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// host is what the topology checks read from the host root, read once per
// test binary (the root does not change during a run).
type host struct {
	root    *hostfs.Root
	devs    []*pci.Device
	pciErr  error // scan errors (malformed entries; the rest is still usable)
	pciDir  bool  // /sys/bus/pci/devices exists
	ix      *topo.Index
	gpus    []*pci.Device // sorted by address, as nvidia-smi numbers them
	nics    []*rdmadev.Device
	nicErr  error
	nicDir  bool
	pciNICs map[string]string // RDMA device -> PCI function, hardware devices only
}

var (
	hostOnce sync.Once
	theHost  *host
)

func loadHost(t *testing.T) *host {
	t.Helper()
	root := testenv.Root(t)
	hostOnce.Do(func() {
		h := &host{root: root, pciNICs: map[string]string{}}
		h.devs, h.pciErr = pci.Scan(root)
		h.pciDir = !errors.Is(h.pciErr, fs.ErrNotExist)
		h.ix = topo.New(h.devs)
		for _, d := range h.devs {
			if d.IsGPU() {
				h.gpus = append(h.gpus, d)
			}
		}
		sort.Slice(h.gpus, func(i, j int) bool { return h.gpus[i].BDF < h.gpus[j].BDF })
		h.nics, h.nicErr = rdmadev.Scan(root)
		h.nicDir = !errors.Is(h.nicErr, fs.ErrNotExist)
		for _, n := range h.nics {
			if !n.Software {
				h.pciNICs[n.Name] = n.PCI
			}
		}
		theHost = h
	})
	return theHost
}

// scanErrors fails the test for sysfs entries that could not be parsed: a
// malformed host tree must not pass by hiding devices.
func (h *host) scanErrors(t *testing.T) {
	t.Helper()
	if h.pciErr != nil && h.pciDir {
		testenv.Errorf(t, "check the kernel's sysfs (or the recorded tree); the entries named above were left out of every check",
			"PCI devices that could not be read: %v", h.pciErr)
	}
	if h.nicErr != nil && h.nicDir {
		testenv.Errorf(t, "check the RDMA driver (dmesg) or the recorded tree; the devices named above were left out of every check",
			"RDMA devices that could not be read: %v", h.nicErr)
	}
}

// needGPUs returns the GPUs to check (GDR_GPU selects one), or ends the test
// as absent naming where it looked.
func (h *host) needGPUs(t *testing.T) []*pci.Device {
	t.Helper()
	if !h.pciDir {
		testenv.Absent(t, "no NVIDIA GPU: %s does not exist under %s (no sysfs?)", pci.DevicesDir, h.root.Dir())
	}
	if bad := pci.UnreadableGPUs(h.pciErr); len(bad) > 0 {
		// A GPU with a corrupt attribute is not "no GPU".
		testenv.Failf(t, "check the kernel's sysfs (or the recorded tree)", "%d PCI function(s) that may be NVIDIA GPUs could not be read: %v", len(bad), bad[0])
	}
	if len(h.gpus) == 0 {
		testenv.Absent(t, "no NVIDIA GPU: %s under %s lists %d PCI functions, none with vendor 0x10de and class 0x03xxxx",
			pci.DevicesDir, h.root.Dir(), len(h.devs))
	}
	sel := testenv.Config(t).GPU
	if sel == "" {
		return h.gpus
	}
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(h.gpus) {
			t.Fatalf("GDR_GPU=%s: there are %d GPUs (%s); want an index below %d", sel, len(h.gpus), bdfs(h.gpus), len(h.gpus))
		}
		return h.gpus[i : i+1]
	}
	for _, g := range h.gpus {
		if g.BDF == sel || strings.HasSuffix(g.BDF, ":"+sel) || strings.TrimPrefix(g.BDF, "0000:") == sel {
			return []*pci.Device{g}
		}
	}
	t.Fatalf("GDR_GPU=%s names no GPU; GPUs here: %s", sel, bdfs(h.gpus))
	return nil
}

func bdfs(ds []*pci.Device) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.BDF)
	}
	return strings.Join(s, ", ")
}

// rdmaModules says which RDMA kernel modules the host has, for skip messages.
func (h *host) rdmaModules() string { return kmod.RDMASummary(h.root) }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// needNICs returns the RDMA devices to pair with (GDR_RDMA_DEVICE selects
// one), or ends the test as absent naming where it looked.
func (h *host) needNICs(t *testing.T) []*rdmadev.Device {
	t.Helper()
	if len(h.nics) == 0 {
		where := rdmadev.ClassDir + " is empty"
		if !h.nicDir {
			where = rdmadev.ClassDir + " does not exist"
		}
		testenv.Absent(t, "no RDMA device: %s under %s; %s", where, h.root.Dir(), h.rdmaModules())
	}
	sel := testenv.Config(t).RDMADevice
	if sel == "" {
		return h.nics
	}
	for _, n := range h.nics {
		if n.Name == sel {
			return []*rdmadev.Device{n}
		}
	}
	t.Fatalf("GDR_RDMA_DEVICE=%s: no such device in %s (devices: %s)", sel, rdmadev.ClassDir, nicNames(h.nics))
	return nil
}

func nicNames(ns []*rdmadev.Device) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// needPCINICs is needNICs restricted to devices with a PCI function: software
// devices (rxe, siw) have no PCIe path to check.
func (h *host) needPCINICs(t *testing.T) map[string]string {
	t.Helper()
	nics := h.needNICs(t)
	out := map[string]string{}
	var soft []string
	for _, n := range nics {
		if n.Software {
			soft = append(soft, fmt.Sprintf("%s (on %s)", n.Name, n.Parent))
			continue
		}
		out[n.Name] = n.PCI
	}
	if len(out) == 0 {
		testenv.Absent(t, "no PCI RDMA device: %s is a software device with no PCIe path (Soft-RoCE/siw); GPUDirect RDMA needs a hardware NIC", strings.Join(soft, ", "))
	}
	return out
}

// nearest returns a GPU's nearest PCI NIC, failing the test if a NIC's PCI
// function is missing from the PCI scan.
func (h *host) nearest(t *testing.T, g *pci.Device, nics map[string]string) topo.Candidate {
	t.Helper()
	cs, err := h.ix.Nearest(g.BDF, nics)
	if err != nil {
		testenv.Failf(t, "check that the NIC's PCI function appears in "+pci.DevicesDir, "GPU %s: cannot classify the path to its NICs: %v", g.BDF, err)
	}
	return cs[0]
}
