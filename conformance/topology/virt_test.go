package topology

import (
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// virtAttrs records whether the host is a VM (gdr.virt: the hypervisor, or
// "none") and the signs that said so (gdr.virt_signs).
func (h *host) virtAttrs(t *testing.T) {
	t.Helper()
	if h.guestErr != nil {
		t.Logf("VM detection: %v", h.guestErr)
	}
	if !h.guest.VM {
		testenv.Attr(t, "virt", "none")
		return
	}
	hyp := h.guest.Hypervisor
	if hyp == "" {
		hyp = "unknown hypervisor"
	}
	testenv.Attr(t, "virt", hyp)
	testenv.Attr(t, "virt_signs", strings.Join(h.guest.Signs, "; "))
}

// containerAttrs records whether the suite runs in a container and which
// signs said so (internal/virt: DetectContainer), with the node's root.
func (h *host) containerAttrs(t *testing.T) {
	t.Helper()
	p := h.sel.Process
	if h.sel.ProcessErr != nil {
		t.Logf("container detection: %v", h.sel.ProcessErr)
	}
	if !p.Container.In {
		testenv.Attr(t, "container", "none")
		return
	}
	eng := p.Container.Runtime
	if eng == "" {
		eng = "unknown engine"
	}
	testenv.Attr(t, "container", eng)
	testenv.Attr(t, "container_signs", strings.Join(p.Container.Signs, "; "))
	if p.Container.NodeRoot != "" {
		testenv.Attr(t, "container_node_root", p.Container.NodeRoot)
	}
	t.Logf("running in a %s", p.Container)
}

// needSysAdmin is why a config space read stopped at 64 bytes, and what
// would let it through where the suite runs (internal/virt).
func (h *host) needSysAdmin() verdict.Finding {
	return h.sel.Process.Need(virt.CapSysAdmin, true, "PCIe config space past its first 64 bytes (drivers/pci/pci-sysfs.c pci_read_config)")
}

// vmFinding is TOPO-02's finding for a rail farther than limit in a VM
// (rails.JudgeVM), with the NCCL_NET_GDR_LEVEL it judged by.
func (h *host) vmFinding(t *testing.T, r *rails.Rail, limit topo.Class) verdict.Finding {
	t.Helper()
	v := h.sel.JudgeVM(r, limit, h.guest, rails.NCCLEnv(testenv.Config(t)))
	if v.GDRErr != nil {
		t.Logf("NCCL_NET_GDR_LEVEL not read: %v", v.GDRErr)
	}
	if v.GDRSetting != "" {
		testenv.Attr(t, "nccl_gdr_level", v.GDRSetting)
	}
	return v.Finding
}
