package rails

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// JudgeRailPath is TOPO-02's judgement of rail r against GDR_MAX_PATH
// limit: nil when its NIC is within it. A rail without a NIC with a PCIe
// path is absent when no hardware NIC has one, else it fails naming the
// nearest NIC that is not a candidate and what makes it one. A farther rail
// fails with a remedy that puts the GPU and a NIC under one switch; in a VM
// (vm non-nil: JudgeVM's finding, asked for only here) with the guest's.
func (s *Selection) JudgeRailPath(r *Rail, limit topo.Class, vm func() verdict.Finding) *verdict.Finding {
	nearer := s.Nearer(r)
	if r.NIC == nil || !r.HasPath {
		if len(nearer) == 0 {
			return NoPathNIC(r)
		}
		return verdict.Failf(nearer[0].NIC.PortRemedy(),
			"GPU %d %s (NUMA node %d) has no rail: no RDMA NIC is a candidate; nearest: %s", r.GPU.Index, r.GPU.PCI, r.GPU.NUMA, Describe(nearer))
	}
	if !r.Path.Class.FartherThan(limit) {
		return nil
	}
	var why []string // the rail reason already names nearer NICs that are not candidates
	if r.Path.NUMAUnknown {
		why = append(why, "SYS because the NUMA nodes are unknown: "+r.Path.NUMANote)
	}
	if vm != nil {
		f := vm()
		if len(nearer) > 0 {
			f.Remedy = "make the nearer NIC usable (" + nearer[0].NIC.PortRemedy() + "), or " + f.Remedy
		}
		f.Cause += semi(why)
		return &f
	}
	remedy := fmt.Sprintf("put the GPU and an RDMA NIC under one PCIe switch (PIX/PXB), use a NIC on the GPU's own switch or socket, or set GDR_MAX_PATH=%s if this topology is intended", r.Path.Class)
	if r.Path.C2C != "" {
		// A GPU on NVLink-C2C is soldered to its Grace: no card moves. Its
		// own Grace's NICs are P2C, which NCCL uses by default.
		remedy = fmt.Sprintf("use a NIC on the GPU's own Grace CPU (P2C, which NCCL uses for GPUDirect RDMA by default: leave GDR_MAX_PATH unset or set it to P2C), or set GDR_MAX_PATH=%s if this topology is intended", r.Path.Class)
	}
	if len(nearer) > 0 {
		remedy = "make the nearer NIC usable (" + nearer[0].NIC.PortRemedy() + "), or " + remedy
	}
	if r.Path.NUMAUnknown {
		remedy = "have the firmware report NUMA proximity (BIOS/ACPI SRAT and _PXM: numa_node is -1), or " + remedy
	}
	from := ""
	if r.Path.From != "" {
		from = fmt.Sprintf(" in the NCCL topology file %s (%s)", r.Path.From, r.Path.Via)
	}
	tail := fmt.Sprintf("GPUDirect RDMA through the %s is slow or unsupported", r.Path.Class.Through())
	if r.Path.Class == topo.P2C {
		tail = "NCCL uses GPUDirect RDMA over P2C by default (NCCL_NET_GDR_C2C); the GDR_MAX_PATH set for this run excludes it"
	}
	return verdict.Failf(remedy,
		"GPU %d %s (NUMA node %d): rail NIC %s (%s, NUMA node %d) is %s%s, farther than GDR_MAX_PATH=%s (%s)%s; %s",
		r.GPU.Index, r.GPU.PCI, r.GPU.NUMA, r.NIC.Name, r.NIC.PCI, r.NIC.NUMA, r.Path.Class, from, limit, r.Reason, semi(why), tail)
}

func semi(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return "; " + strings.Join(s, "; ")
}
