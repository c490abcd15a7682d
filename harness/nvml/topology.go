package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
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
