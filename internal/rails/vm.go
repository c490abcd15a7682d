package rails

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// cloudTopoFiles are the topology files clouds publish, by cloud, for the
// remedy (Azure/azhpc-images topology/*.xml, installed to /opt/microsoft by
// components/setup_sku_customizations.sh and named in /etc/nccl.conf by
// components/customizations/nd*.sh).
var cloudTopoFiles = map[string]string{
	"Azure": "Azure's HPC images ship them: /opt/microsoft/ndv5-topo.xml for ND H100/H200 v5 and /opt/microsoft/ndv4-topo.xml for ND A100 v4, linked as /opt/microsoft/<family>/topo.xml and named in /etc/nccl.conf as NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml",
}

// VMJudged is TOPO-02's judgement of a rail farther than the limit in a VM.
type VMJudged struct {
	// Finding is the rail's shortfall: its cause, and its remedy, the
	// cloud's topology file.
	Finding verdict.Finding
	// GDRSetting is the NCCL_NET_GDR_LEVEL setting the cause judged by
	// ("" when none is set); GDRErr says why it could not be read.
	GDRSetting string
	GDRErr     error
}

// JudgeVM is TOPO-02's finding for rail r, farther than limit, on the
// guest g: the guest cannot move cards, so the remedy is the cloud's
// topology file (or, with one in use, the right one).
func (s *Selection) JudgeVM(r *Rail, limit topo.Class, g virt.Guest, env nccltopo.Env) (v VMJudged) {
	v.Finding.Device, v.Finding.Part = r.GPU.PCI, "host configuration"
	vm := g.String()
	hint := cloudTopoFiles[g.Cloud]
	if hint == "" {
		hint = "the cloud provider publishes one per GPU VM size"
	}
	flat := ""
	if r.Path.Switches == 0 {
		flat = "; the hypervisor shows no PCIe switch between them (a flattened tree)"
	}
	head := fmt.Sprintf("GPU %d %s (NUMA node %d): rail NIC %s (%s, NUMA node %d) is %s", r.GPU.Index, r.GPU.PCI, r.GPU.NUMA, r.NIC.Name, r.NIC.PCI, r.NIC.NUMA, r.Path.Class)
	nccl := "NCCL's default NCCL_NET_GDR_LEVEL stops below PHB (PXB, or P2C where the GPU reaches the CPU over C2C: src/graph/paths.cc ncclTopoCheckGdr), so NCCL will not use GPUDirect RDMA on this path"
	switch lvl, setting, ok, err := nccltopo.GDRLevel(s.Root, env); {
	case err != nil:
		v.GDRErr = err
	case ok && !r.Path.Class.FartherThan(lvl):
		v.GDRSetting = setting
		nccl = setting + " makes NCCL use GPUDirect RDMA on this path anyway, judged by a tree that does not show the real one"
	case ok:
		v.GDRSetting = setting
		nccl = setting + " is nearer than this path, so NCCL will not use GPUDirect RDMA on it"
	}
	if f := s.NCCL; r.Path.From != "" && f != nil {
		v.Finding.Cause = fmt.Sprintf("%s in the NCCL topology file %s (%s), farther than GDR_MAX_PATH=%s; this host is a %s; %s",
			head, r.Path.From, r.Path.Via, limit, vm, nccl)
		v.Finding.Remedy = fmt.Sprintf("use the topology file made for this VM size, with the guest's PCI bus ids (lspci -D): %s; or set GDR_MAX_PATH=%s if this path is intended", hint, r.Path.Class)
		return v
	}
	file := "no NCCL topology file is set (NCCL_TOPO_FILE unset in the environment, in $HOME/.nccl.conf or NCCL_CONF_FILE and in " + nccltopo.EtcConf + ", no " + nccltopo.DefaultFile + ")"
	switch f := s.NCCL; {
	case f != nil:
		file = fmt.Sprintf("the NCCL topology file %s (%s) does not list GPU %s and NIC %s, so NCCL takes them from the guest's tree", f.Path, f.From, r.GPU.PCI, r.NIC.PCI)
	case s.NCCLErr != nil:
		file = s.NCCLErr.Error()
	}
	v.Finding.Cause = fmt.Sprintf("%s in the PCI tree this VM shows, farther than GDR_MAX_PATH=%s (%s)%s; this host is a %s and %s; NCCL builds its topology from the same tree: %s",
		head, limit, r.Reason, flat, vm, file, nccl)
	v.Finding.Remedy = fmt.Sprintf("install the cloud's NCCL topology file for this VM size and name it in NCCL_TOPO_FILE or %s (%s); the suite then judges the path from that file; or set GDR_MAX_PATH=%s if NCCL is not used", nccltopo.EtcConf, hint, r.Path.Class)
	return v
}
