package nvml

import (
	"errors"
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Telemetry is one GPU's clocks, temperature, power and clock event reasons
// at one moment, as the soak samples them. A value NVML does not support on
// this GPU (ERROR_NOT_SUPPORTED: a vGPU, some MIG set-ups, the emulated
// GPU) is nil: absent, never zero.
type Telemetry struct {
	SMClockMHz, MemClockMHz *float64
	TempC                   *float64
	PowerW                  *float64
	// ClockEvents is nvmlDeviceGetCurrentClocksEventReasons' bit mask
	// (nvml.h nvmlClocksEventReason*: SW power cap 0x4, HW slowdown 0x8,
	// SW thermal 0x20, HW thermal 0x40, HW power brake 0x80).
	ClockEvents *uint64
}

// Telemetry reads GPU busID's (the suite's "0000:3b:00.0") clocks (SM and
// memory, MHz: nvmlDeviceGetClockInfo), temperature (GPU sensor, C:
// nvmlDeviceGetTemperature), power (nvmlDeviceGetPowerUsage, mW to W) and
// clock event reasons. An error other than NOT_SUPPORTED on a read is
// returned with what was read before it.
func (h *Handle) Telemetry(busID string) (Telemetry, error) {
	var out Telemetry
	dev, ret := h.nv.DeviceGetHandleByPciBusId(busID)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", busID), ret); err != nil {
		return out, err
	}
	var errs []error
	f := func(op string, v uint32, ret gonvml.Return, scale float64) *float64 {
		switch ret {
		case gonvml.SUCCESS:
			x := float64(v) * scale
			return &x
		case gonvml.ERROR_NOT_SUPPORTED:
		default:
			errs = append(errs, check(op+"("+busID+")", ret))
		}
		return nil
	}
	v, ret := dev.GetClockInfo(gonvml.CLOCK_SM)
	out.SMClockMHz = f("DeviceGetClockInfo(SM)", v, ret, 1)
	v, ret = dev.GetClockInfo(gonvml.CLOCK_MEM)
	out.MemClockMHz = f("DeviceGetClockInfo(MEM)", v, ret, 1)
	v, ret = dev.GetTemperature(gonvml.TEMPERATURE_GPU)
	out.TempC = f("DeviceGetTemperature", v, ret, 1)
	v, ret = dev.GetPowerUsage()
	out.PowerW = f("DeviceGetPowerUsage", v, ret, 1e-3)
	mask, ret := dev.GetCurrentClocksEventReasons()
	switch ret {
	case gonvml.SUCCESS:
		out.ClockEvents = &mask
	case gonvml.ERROR_NOT_SUPPORTED:
	default:
		errs = append(errs, check("DeviceGetCurrentClocksEventReasons("+busID+")", ret))
	}
	return out, errors.Join(errs...)
}
