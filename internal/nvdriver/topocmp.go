package nvdriver

import (
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// What TOPO-07 finds when `nvidia-smi topo -m` and the sysfs PCI tree
// disagree; each finding carries what to do, so no test writes a remedy.

// ParseTopoAt is ParseTopo of the output src names ("nvidia-smi topo -m"
// or a tree's recording), its error a finding that says to run the tool
// by hand.
func ParseTopoAt(out, src string) (*TopoMatrix, error) {
	m, err := ParseTopo(out)
	if err != nil {
		return nil, verdict.Failf("run nvidia-smi topo -m by hand and check the driver", "%s: %v", src, err)
	}
	return m, nil
}

// CompareGPUs is a finding when m lists another number of GPUs than the
// n the PCI tree has (list: their addresses, for the cause); nil when
// both agree. The driver numbers only the GPUs it binds and sees.
func (m *TopoMatrix) CompareGPUs(src string, n int, list string) error {
	if got := len(m.GPUs()); got != n {
		return verdict.Failf("check for GPUs the driver does not bind (dmesg NVRM) or GPUs hidden with CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES",
			"%s lists %d GPUs, %s lists %d (%s)", src, got, pci.DevicesDir, n, list)
	}
	return nil
}

// NICNotPCI is the finding for NIC label (RDMA device name) that src
// lists but that is not a PCI RDMA device in sysfs.
func NICNotPCI(src, label, name string) verdict.Finding {
	return *verdict.Failf("check the RDMA driver", "%s lists NIC %s (%s), which %s does not have as a PCI RDMA device", src, label, name, rdmadev.ClassDir)
}

// CompareClass is a finding when pair p's PCIe class is not tree, the
// class the PCIe tree gives between a and b (p.A's and p.B's PCI
// addresses); nil when they agree or p's cell names no PCIe class (the
// diagonal, NVLink, a cell that does not parse).
func (p TopoPair) CompareClass(a, b string, tree topo.Class) *verdict.Finding {
	lk, err := ParseTopoLink(p.Link)
	if err != nil || lk.Self || lk.NVLinks > 0 || lk.Class == tree {
		return nil
	}
	return verdict.Failf("compare lspci -tv with nvidia-smi topo -m; a hypervisor may hide PCIe switches from the guest",
		"%s (%s) <-> %s (%s): sysfs path says %s, nvidia-smi topo -m says %s", p.A, a, p.B, b, tree, p.Link)
}
