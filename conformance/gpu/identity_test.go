//go:build gpu

package gpu

import (
	"errors"
	"fmt"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

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
			attrIf(t, "gpu_uuid", id.UUID) // absent stays absent
			attrIf(t, "gpu_serial", id.Serial)
			attrIf(t, "gpu_part_number", id.PartNumber)
			attrIf(t, "vbios", id.VBIOS)
			attrIf(t, "inforom_image", id.InfoROMImage)
			attrIf(t, "inforom_oem", id.InfoROMOEM)
			if id.ModuleID > 0 {
				testenv.Attr(t, "gpu_module_id", id.ModuleID)
			}
			t.Logf("GPU %s %s: UUID %s, serial %s, part number %s, VBIOS %s, InfoROM %s (OEM %s), module %d",
				d.BusID, d.Name, or(id.UUID), or(id.Serial), or(id.PartNumber), or(id.VBIOS), or(id.InfoROMImage), or(id.InfoROMOEM), id.ModuleID)
			if err != nil {
				testenv.Failf(t, nvml.Remedy(err), "GPU %s: %v", d.BusID, err)
			}
			switch {
			case !id.InfoROMChecked:
				testenv.Attr(t, "inforom_valid", "not supported")
				t.Logf("GPU %s: NVML cannot validate the InfoROM here (NOT_SUPPORTED: vGPU or a board without one)", d.BusID)
			case errors.Is(id.InfoROMErr, gonvml.ERROR_CORRUPTED_INFOROM):
				testenv.Attr(t, "inforom_valid", "corrupt")
				testenv.Failf(t, fmt.Sprintf("the GPU's InfoROM is corrupt: ECC, retired-page and power settings it holds are not trusted; return the board (serial %s, part number %s) under RMA", or(id.Serial), or(id.PartNumber)),
					"GPU %s: %v", d.BusID, id.InfoROMErr)
			case id.InfoROMErr != nil:
				testenv.Attr(t, "inforom_valid", "error")
				testenv.Failf(t, nvml.Remedy(id.InfoROMErr), "GPU %s: %v", d.BusID, id.InfoROMErr)
			default:
				testenv.Attr(t, "inforom_valid", "yes")
			}
		})
	}
}

// attrIf records key only when the value was read: absent stays absent.
func attrIf(t *testing.T, key, v string) {
	t.Helper()
	if v != "" {
		testenv.Attr(t, key, v)
	}
}

func or(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
