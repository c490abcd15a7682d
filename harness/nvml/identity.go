package nvml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Identity is what NVML says a GPU board is: the values an RMA names
// (nvidia-smi -q prints the same: Serial Number, GPU Part Number, VBIOS
// Version, InfoROM Version). A value NVML does not support on this GPU (GeForce
// boards have no serial; vGPU hides the InfoROM) is "", never a placeholder.
type Identity struct {
	UUID         string
	Serial       string
	PartNumber   string // board part number
	VBIOS        string
	InfoROMImage string
	InfoROMOEM   string
	// ModuleID is the GPU's position on an HGX baseboard (NVML module id,
	// the number printed on the tray), 0 when NVML has none.
	ModuleID int
	// InfoROMValid: nvmlDeviceValidateInforom's answer. Checked is false
	// when NVML cannot validate on this GPU (NOT_SUPPORTED); Err is the
	// failure when validation ran and the InfoROM is corrupt or unreadable.
	InfoROMChecked bool
	InfoROMErr     error
}

// Identity reads GPU i's identity. Only an error that says the GPU itself
// is broken or gone (lost, unknown) is returned; a field NVML does not
// support is left empty.
func (h *Handle) Identity(i int) (Identity, error) {
	var id Identity
	dev, ret := h.nv.DeviceGetHandleByIndex(i)
	if err := check(fmt.Sprintf("DeviceGetHandleByIndex(%d)", i), ret); err != nil {
		return id, err
	}
	var errs []error
	str := func(op string, dst *string, f func() (string, gonvml.Return)) {
		v, ret := f()
		switch ret {
		case gonvml.SUCCESS:
			*dst = clean(v)
		case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_NOT_FOUND, gonvml.ERROR_FUNCTION_NOT_FOUND, gonvml.ERROR_NO_PERMISSION:
		default:
			errs = append(errs, check(fmt.Sprintf("%s(%d)", op, i), ret))
		}
	}
	str("DeviceGetUUID", &id.UUID, dev.GetUUID)
	str("DeviceGetSerial", &id.Serial, dev.GetSerial)
	str("DeviceGetBoardPartNumber", &id.PartNumber, dev.GetBoardPartNumber)
	str("DeviceGetVbiosVersion", &id.VBIOS, dev.GetVbiosVersion)
	str("DeviceGetInforomImageVersion", &id.InfoROMImage, dev.GetInforomImageVersion)
	str("DeviceGetInforomVersion(OEM)", &id.InfoROMOEM, func() (string, gonvml.Return) { return dev.GetInforomVersion(gonvml.INFOROM_OEM) })
	var mod string
	str("DeviceGetModuleId", &mod, func() (string, gonvml.Return) {
		n, ret := dev.GetModuleId()
		return strconv.Itoa(n), ret
	})
	if n, err := strconv.Atoi(mod); err == nil && n > 0 {
		id.ModuleID = n
	}
	switch ret := dev.ValidateInforom(); ret {
	case gonvml.SUCCESS:
		id.InfoROMChecked = true
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_FUNCTION_NOT_FOUND, gonvml.ERROR_NO_PERMISSION:
	default:
		id.InfoROMChecked = true
		id.InfoROMErr = check(fmt.Sprintf("DeviceValidateInforom(%d)", i), ret)
	}
	return id, errors.Join(errs...)
}

// clean drops what NVML returns for "none" on some boards.
func clean(s string) string {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "", "n/a", "[n/a]", "not available", "0", "00000000000000":
		return ""
	}
	return s
}
