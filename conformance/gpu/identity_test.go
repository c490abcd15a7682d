//go:build gpu

package gpu

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
)

// GPU-16: each GPU's identity, for the report's inventory (an RMA names the
// serial and part number), and its InfoROM validates. Every GPU NVML sees is
// listed, not only the selected rails: the inventory is the host's.
func TestGPU16Identity(t *testing.T) {
	testenv.Req(t, "GPU-16")
	h := nvml.Open(t)
	devs, err := h.Devices()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	if len(devs) == 0 {
		testenv.Absent(t, "", "NVML sees no GPU (nvmlDeviceGetCount is 0)")
	}
	for _, d := range devs {
		t.Run(d.BusID, func(t *testing.T) {
			testenv.Req(t, "GPU-16")
			testenv.Attr(t, "gpu", d.BusID)
			testenv.Attr(t, "gpu_name", d.Name)
			id, err := h.Identity(d.Index)
			testenv.AttrIf(t, "gpu_uuid", id.UUID) // absent stays absent
			testenv.AttrIf(t, "gpu_serial", id.Serial)
			testenv.AttrIf(t, "gpu_part_number", id.PartNumber)
			testenv.AttrIf(t, "vbios", id.VBIOS)
			testenv.AttrIf(t, "inforom_image", id.InfoROMImage)
			testenv.AttrIf(t, "inforom_oem", id.InfoROMOEM)
			if id.ModuleID > 0 {
				testenv.Attr(t, "gpu_module_id", id.ModuleID)
			}
			if id.Fabric != nil { // NVL72: the multi-node NVLink domain
				testenv.Attr(t, "fabric_state", id.Fabric.State)
				testenv.AttrIf(t, "nvlink_domain", id.Fabric.Domain())
				if id.Fabric.Err != nil {
					t.Logf("GPU %s: NVLink fabric registration: %v", d.BusID, id.Fabric.Err)
				}
			}
			t.Logf("%s", id.Summary(d.BusID, d.Name))
			if err != nil {
				testenv.Failf(t, nvml.Remedy(err), "GPU %s: %v", d.BusID, err)
			}
			state, f := id.JudgeInfoROM(d.BusID)
			testenv.Attr(t, "inforom_valid", string(state))
			if state == nvml.InfoROMNotSupported {
				t.Logf("GPU %s: NVML cannot validate the InfoROM here (NOT_SUPPORTED: vGPU or a board without one)", d.BusID)
			}
			if f != nil {
				testenv.Fail(t, *f)
			}
		})
	}
}
