package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// CommonAncestor asks NVML for the topology level between two GPUs given by
// PCI address (dddd:bb:dd.f), for the topology package's cross-check.
func (h *Handle) CommonAncestor(a, b string) (gonvml.GpuTopologyLevel, error) {
	da, ret := h.nv.DeviceGetHandleByPciBusId(a)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", a), ret); err != nil {
		return 0, err
	}
	db, ret := h.nv.DeviceGetHandleByPciBusId(b)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", b), ret); err != nil {
		return 0, err
	}
	lvl, ret := h.nv.DeviceGetTopologyCommonAncestor(da, db)
	return lvl, check("DeviceGetTopologyCommonAncestor", ret)
}

// Class maps NVML's topology level to the path class nvidia-smi topo -m
// names it by (nvml.h nvmlGpuTopologyLevel_t); ok is false for a level
// this suite does not know.
func Class(l gonvml.GpuTopologyLevel) (c topo.Class, ok bool) {
	switch l {
	case gonvml.TOPOLOGY_INTERNAL, gonvml.TOPOLOGY_SINGLE:
		return topo.PIX, true
	case gonvml.TOPOLOGY_MULTIPLE:
		return topo.PXB, true
	case gonvml.TOPOLOGY_HOSTBRIDGE:
		return topo.PHB, true
	case gonvml.TOPOLOGY_NODE:
		return topo.NODE, true
	case gonvml.TOPOLOGY_SYSTEM:
		return topo.SYS, true
	}
	return topo.Unknown, false
}

// JudgeLevel is TOPO-06's judgement of GPUs a and b: NVML's level lvl
// (GetTopologyCommonAncestor) names the class sysfs has; nil when it does.
func JudgeLevel(a, b string, sysfs topo.Class, lvl gonvml.GpuTopologyLevel) *verdict.Finding {
	nc, ok := Class(lvl)
	switch {
	case !ok:
		return verdict.Failf("upgrade the NVIDIA driver or report the level", "NVML topology level %d for %s <-> %s is not one this suite knows", int(lvl), a, b)
	case nc != sysfs:
		return verdict.Failf("compare lspci -tv with nvidia-smi topo -m; a hypervisor may hide switches from the guest, or sysfs and the driver disagree about the tree",
			"GPU %s <-> GPU %s: sysfs path says %s, NVML GetTopologyCommonAncestor says %s (level %d)", a, b, sysfs, nc, int(lvl))
	}
	return nil
}
