package nvml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/internal/verdict"
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
	// Fabric is the GPU's place in a multi-node NVLink domain (GB200/GB300
	// NVL72: 72 GPUs over NVLink switch trays), nil where NVML reports no
	// fabric (PCIe boards, HGX baseboards whose NVSwitches are local, and
	// drivers before the call): absent, never a zero clique.
	Fabric *Fabric
}

// Fabric is NVML's GPU fabric info (nvmlDeviceGetGpuFabricInfo): the fabric
// manager registers each GPU of an NVLink domain with the domain's cluster
// UUID and a clique ID (GPUs of one clique reach each other over NVLink;
// the domain's partition). The cluster planner pairs RDMA across domains,
// where the network, not NVLink, carries the traffic.
type Fabric struct {
	State       string // "not started", "in progress", "completed"
	ClusterUUID string // canonical 8-4-4-4-12 form; "" until registered
	CliqueID    uint32
	// Err is the registration's result when State is "completed" and it
	// failed (the GPU is not in the domain), else nil.
	Err error
}

// Domain names the NVLink domain for pairing and reports:
// "<cluster UUID>/<clique>", "" when the GPU is not registered in one.
func (f *Fabric) Domain() string {
	if f == nil || f.State != "completed" || f.Err != nil || f.ClusterUUID == "" {
		return ""
	}
	return fmt.Sprintf("%s/%d", f.ClusterUUID, f.CliqueID)
}

// fabricOf reads dev's fabric info; nil when the GPU has none or NVML
// cannot say. The versioned call (GetGpuFabricInfoV) adds only health
// bits and its handler reaches the C library directly, so the suite reads
// the first version, which every driver with NVLink domains has (R525+).
func fabricOf(dev gonvml.Device, i int) (*Fabric, error) {
	info, ret := dev.GetGpuFabricInfo()
	switch ret {
	case gonvml.SUCCESS:
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_FUNCTION_NOT_FOUND, gonvml.ERROR_NOT_FOUND, gonvml.ERROR_NO_PERMISSION:
		return nil, nil
	default:
		return nil, check(fmt.Sprintf("DeviceGetGpuFabricInfo(%d)", i), ret)
	}
	f := &Fabric{CliqueID: info.CliqueId}
	switch info.State {
	case gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED:
		return nil, nil
	case gonvml.GPU_FABRIC_STATE_NOT_STARTED:
		f.State = "not started"
	case gonvml.GPU_FABRIC_STATE_IN_PROGRESS:
		f.State = "in progress"
	case gonvml.GPU_FABRIC_STATE_COMPLETED:
		f.State = "completed"
		if r := gonvml.Return(info.Status); r != gonvml.SUCCESS {
			f.Err = check("GPU fabric registration", r)
		}
	default:
		return nil, fmt.Errorf("DeviceGetGpuFabricInfo(%d): fabric state %d, which NVML does not define", i, info.State)
	}
	var zero [16]uint8
	if info.ClusterUuid != zero {
		u := info.ClusterUuid
		f.ClusterUUID = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	}
	return f, nil
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
	fab, err := fabricOf(dev, i)
	if err != nil {
		errs = append(errs, err)
	}
	id.Fabric = fab
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

// orNone is s, "(none)" when NVML gave nothing.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Summary is GPU busID's identity in one log line (name: its NVML name).
func (id Identity) Summary(busID, name string) string {
	return fmt.Sprintf("GPU %s %s: UUID %s, serial %s, part number %s, VBIOS %s, InfoROM %s (OEM %s), module %d",
		busID, name, orNone(id.UUID), orNone(id.Serial), orNone(id.PartNumber), orNone(id.VBIOS), orNone(id.InfoROMImage), orNone(id.InfoROMOEM), id.ModuleID)
}

// InfoROMState is what GPU-16 records of an InfoROM (gdr.inforom_valid).
type InfoROMState string

const (
	InfoROMValid        InfoROMState = "yes"
	InfoROMNotSupported InfoROMState = "not supported" // NVML cannot validate here
	InfoROMCorrupt      InfoROMState = "corrupt"
	InfoROMError        InfoROMState = "error"
)

// JudgeInfoROM is GPU-16's judgement of GPU busID's InfoROM: its state and,
// corrupt or unreadable, the finding. A corrupt one names the board's
// serial and part number for the RMA.
func (id Identity) JudgeInfoROM(busID string) (InfoROMState, *verdict.Finding) {
	switch {
	case !id.InfoROMChecked:
		return InfoROMNotSupported, nil
	case errors.Is(id.InfoROMErr, gonvml.ERROR_CORRUPTED_INFOROM):
		return InfoROMCorrupt, verdict.Failf(fmt.Sprintf("the GPU's InfoROM is corrupt: ECC, retired-page and power settings it holds are not trusted; return the board (serial %s, part number %s) under RMA", orNone(id.Serial), orNone(id.PartNumber)),
			"GPU %s: %v", busID, id.InfoROMErr)
	case id.InfoROMErr != nil:
		return InfoROMError, verdict.Failf(Remedy(id.InfoROMErr), "GPU %s: %v", busID, id.InfoROMErr)
	}
	return InfoROMValid, nil
}
