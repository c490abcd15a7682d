package rails

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// NCCL topology files. Where a hypervisor flattens the PCIe tree (Azure's
// ND-series VMs show every GPU and NIC on a PCI domain of its own), the tree
// the guest sees says NODE or SYS for every GPU<->NIC pair, and NCCL, which
// builds its topology from the same tree, would not use GPUDirect RDMA
// (NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr: distance > PXB). Clouds
// ship a topology file (NCCL_TOPO_FILE) that puts each GPU and its NIC under
// one switch element; NCCL then uses GPUDirect RDMA. So when NCCL would load
// such a file (internal/nccltopo finds it as NCCL does), a GPU<->NIC path the
// file describes takes the file's class, and rails pick the nearest NIC by
// it: the selection is the one NCCL makes. Bridges, switches and NUMA stay
// the guest's own (the ACS, link and settings checks read real functions).

// loadNCCL finds and reads the topology file once per host.
func (h *Host) loadNCCL(cfg config.Config) {
	if h.nccLoaded {
		return
	}
	h.nccLoaded = true
	h.NCCL, h.NCCLErr = nccltopo.Load(h.Root, NCCLEnv(cfg))
}

// NCCLEnv is what of cfg decides where NCCL looks and what it does.
func NCCLEnv(cfg config.Config) nccltopo.Env {
	return nccltopo.Env{TopoFile: cfg.NCCLTopoFile, ConfFile: cfg.NCCLConfFile, Home: cfg.Home, GDRLevel: cfg.NCCLNetGDRLevel}
}

// ncclPath is p with the file's class when the file describes both ends.
func (s *Selection) ncclPath(g *GPU, n *NIC, p topo.Path) topo.Path {
	f := s.NCCL
	if f == nil {
		return p
	}
	fp, ok := f.Classify(g.PCI, n.PCI, n.Name)
	if !ok {
		return p
	}
	p.SysfsClass, p.Class = p.Class, fp.Class
	p.From, p.Via = f.Path+" ("+f.From+")", fp.Via
	return p
}

// ncclNote is ", by the NCCL topology file ..." for a class the file gave.
func ncclNote(p topo.Path) string {
	if p.From == "" {
		return ""
	}
	return fmt.Sprintf(", by the NCCL topology file %s: %s; the guest's PCI tree says %s", p.From, p.Via, p.SysfsClass)
}
