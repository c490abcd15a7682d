package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/topo"
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

// cloudTopoFiles are the topology files clouds publish, by cloud, for the
// remedy (Azure/azhpc-images topology/*.xml, installed to /opt/microsoft by
// components/setup_sku_customizations.sh and named in /etc/nccl.conf by
// components/customizations/nd*.sh).
var cloudTopoFiles = map[string]string{
	"Azure": "Azure's HPC images ship them: /opt/microsoft/ndv5-topo.xml for ND H100/H200 v5 and /opt/microsoft/ndv4-topo.xml for ND A100 v4, linked as /opt/microsoft/<family>/topo.xml and named in /etc/nccl.conf as NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml",
}

// vmVerdict is TOPO-02's message and remedy for a rail farther than limit
// in a VM: the guest cannot move cards, so the remedy is the cloud's
// topology file (or, with one in use, the right one).
func (h *host) vmVerdict(t *testing.T, r *rails.Rail, limit topo.Class) (msg, remedy string) {
	t.Helper()
	vm := h.guest.String()
	hint := cloudTopoFiles[h.guest.Cloud]
	if hint == "" {
		hint = "the cloud provider publishes one per GPU VM size"
	}
	flat := ""
	if r.Path.Switches == 0 {
		flat = "; the hypervisor shows no PCIe switch between them (a flattened tree)"
	}
	head := fmt.Sprintf("GPU %d %s (NUMA node %d): rail NIC %s (%s, NUMA node %d) is %s", r.GPU.Index, r.GPU.PCI, r.GPU.NUMA, r.NIC.Name, r.NIC.PCI, r.NIC.NUMA, r.Path.Class)
	nccl := "NCCL's default NCCL_NET_GDR_LEVEL stops below PHB (PXB, or P2C where the GPU reaches the CPU over C2C: src/graph/paths.cc ncclTopoCheckGdr), so NCCL will not use GPUDirect RDMA on this path"
	switch lvl, setting, ok, err := nccltopo.GDRLevel(h.root, rails.NCCLEnv(testenv.Config(t))); {
	case err != nil:
		t.Logf("NCCL_NET_GDR_LEVEL not read: %v", err)
	case ok && !r.Path.Class.FartherThan(lvl):
		testenv.Attr(t, "nccl_gdr_level", setting)
		nccl = setting + " makes NCCL use GPUDirect RDMA on this path anyway, judged by a tree that does not show the real one"
	case ok:
		testenv.Attr(t, "nccl_gdr_level", setting)
		nccl = setting + " is nearer than this path, so NCCL will not use GPUDirect RDMA on it"
	}
	if f := h.sel.NCCL; r.Path.From != "" && f != nil {
		msg = fmt.Sprintf("%s in the NCCL topology file %s (%s), farther than GDR_MAX_PATH=%s; this host is a %s; %s",
			head, r.Path.From, r.Path.Via, limit, vm, nccl)
		remedy = fmt.Sprintf("use the topology file made for this VM size, with the guest's PCI bus ids (lspci -D): %s; or set GDR_MAX_PATH=%s if this path is intended", hint, r.Path.Class)
		return msg, remedy
	}
	file := "no NCCL topology file is set (NCCL_TOPO_FILE unset in the environment, in $HOME/.nccl.conf or NCCL_CONF_FILE and in " + nccltopo.EtcConf + ", no " + nccltopo.DefaultFile + ")"
	switch f := h.sel.NCCL; {
	case f != nil:
		file = fmt.Sprintf("the NCCL topology file %s (%s) does not list GPU %s and NIC %s, so NCCL takes them from the guest's tree", f.Path, f.From, r.GPU.PCI, r.NIC.PCI)
	case h.sel.NCCLErr != nil:
		file = h.sel.NCCLErr.Error()
	}
	msg = fmt.Sprintf("%s in the PCI tree this VM shows, farther than GDR_MAX_PATH=%s (%s)%s; this host is a %s and %s; NCCL builds its topology from the same tree: %s",
		head, limit, r.Reason, flat, vm, file, nccl)
	remedy = fmt.Sprintf("install the cloud's NCCL topology file for this VM size and name it in NCCL_TOPO_FILE or %s (%s); the suite then judges the path from that file; or set GDR_MAX_PATH=%s if NCCL is not used", nccltopo.EtcConf, hint, r.Path.Class)
	return msg, remedy
}
