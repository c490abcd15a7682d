package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// host is the run's selection (testenv.Selection: GPUs, NICs, rails, the PCI
// index), as the topology checks use it.
type host struct {
	root *hostfs.Root
	sel  *rails.Selection
	ix   *topo.Index
	gpus []*rails.GPU // every GPU in sysfs, PCI bus order (nvidia-smi's numbering)
	// guest says whether the host is a VM (internal/virt).
	guest    virt.Guest
	guestErr error
}

func loadHost(t *testing.T) *host {
	t.Helper()
	sel := testenv.Selection(t)
	h := &host{root: sel.Root, sel: sel, ix: sel.Index}
	h.guest, h.guestErr = sel.Guest, sel.GuestErr // the selection's, which decides VFs' rails too
	for _, g := range sel.GPUs {
		if g.Dev != nil {
			h.gpus = append(h.gpus, g)
		}
	}
	return h
}

// scanErrors fails the test for sysfs entries that could not be parsed: a
// malformed host tree must not pass by hiding devices.
func (h *host) scanErrors(t *testing.T) {
	t.Helper()
	if h.sel.PCIErr != nil && h.sel.PCIDir {
		testenv.Errorf(t, "check the kernel's sysfs (or the recorded tree); the entries named above were left out of every check",
			"PCI devices that could not be read: %v", h.sel.PCIErr)
	}
	if h.sel.NICErr != nil {
		testenv.Errorf(t, "check the RDMA driver (dmesg) or the recorded tree; the devices named above were left out of every check",
			"RDMA devices that could not be read: %v", h.sel.NICErr)
	}
}

// needRails returns the selected rails (GDR_GPU, GDR_RAILS) whose GPU is in
// sysfs (rails.Selection.SysfsRails), or ends the test as absent naming where
// it looked.
func (h *host) needRails(t *testing.T) []*rails.Rail {
	t.Helper()
	out, err := h.sel.SysfsRails()
	testenv.Stop(t, err)
	return out
}

// selectedGPUs are the GPUs of needRails.
func (h *host) selectedGPUs(t *testing.T) []*rails.GPU {
	t.Helper()
	var out []*rails.GPU
	for _, r := range h.needRails(t) {
		out = append(out, r.GPU)
	}
	return out
}

func gpuList(gs []*rails.GPU) string {
	var s []string
	for _, g := range gs {
		s = append(s, g.PCI)
	}
	return strings.Join(s, ", ")
}

// rdmaModules says which RDMA kernel modules the host has, for skip messages.
func (h *host) rdmaModules() string { return kmod.RDMASummary(h.root) }

// needNICs returns the RDMA devices to pair with (GDR_RDMA_DEVICE selects
// one), or ends the test as absent naming where it looked.
func (h *host) needNICs(t *testing.T) []*rails.NIC {
	t.Helper()
	if len(h.sel.NICs) == 0 {
		where := rdmadev.ClassDir + " is empty"
		if !h.sel.NICDir {
			where = rdmadev.ClassDir + " does not exist"
		}
		testenv.Absent(t, reqs.RemedyNoRDMADevice, "no RDMA device: %s under %s; %s", where, h.root.Dir(), h.rdmaModules())
	}
	if h.sel.Forced != nil {
		return []*rails.NIC{h.sel.Forced}
	}
	return h.sel.NICs
}

func nicNames(ns []*rails.NIC) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// needPCINICs ends the test as absent when no NIC (of needNICs) has a PCI
// function: software devices (rxe, siw) have no PCIe path to check.
func (h *host) needPCINICs(t *testing.T) {
	t.Helper()
	var soft []string
	for _, n := range h.needNICs(t) {
		if !n.Software {
			return
		}
		soft = append(soft, fmt.Sprintf("%s (on %s)", n.Name, n.Parent))
	}
	testenv.Absent(t, reqs.RemedyHardwareNIC, "no PCI RDMA device: %s is a software device with no PCIe path (Soft-RoCE/siw); GPUDirect RDMA needs a hardware NIC", strings.Join(soft, ", "))
}

// pathNIC is the NIC whose PCIe path to r's GPU the fabric checks (ACS, link
// training) look at: the rail's NIC; when the rail has none with a PCIe path
// (no candidate NIC), the nearest hardware NIC, which is said in the log and
// as gdr.path_nic, because a port that is down today still sends over that
// path tomorrow. ok is false when there is no hardware NIC with a path.
func (h *host) pathNIC(t *testing.T, r *rails.Rail) (n *rails.NIC, p topo.Path, ok bool) {
	t.Helper()
	if r.NIC != nil && r.HasPath {
		return r.NIC, r.Path, true
	}
	for _, c := range h.sel.Ranked(r.GPU) {
		if c.HasPath && (h.sel.Forced == nil || c.NIC == h.sel.Forced) {
			testenv.Attr(t, "path_nic", c.NIC.Name)
			t.Logf("%s has no rail NIC with a PCIe path (%s); checking the path to its nearest RDMA NIC %s (%s): %s",
				r.GPU, r.Reason, c.NIC.Name, c.Path.Class, c.NIC.Why)
			return c.NIC, c.Path, true
		}
	}
	return nil, topo.Path{}, false
}

// railNICs are the selected rails' hardware NICs, each once in rail order,
// and a line per software NIC left out (rxe and siw have no firmware and no
// transceiver), for the checks that read a NIC's own parts.
func (h *host) railNICs(t *testing.T) (hw []*rails.NIC, other []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range h.needRails(t) {
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

// noNIC ends the test as absent: no rail NIC the check can read, saying why.
func noNIC(t *testing.T, what string, other []string) {
	t.Helper()
	if len(other) == 0 {
		other = []string{"no rail has an RDMA NIC"}
	}
	testenv.Absent(t, "", "no NIC whose %s can be read: %s", what, strings.Join(other, "; "))
}
