package nvml

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A throttled H200-shaped reading: every value converted (power mW -> W),
// the event mask as NVML gives it; NOT_SUPPORTED leaves a value absent and
// is no error; another error is returned with what was read.
func TestTelemetry(t *testing.T) {
	dev := &mock.Device{
		GetClockInfoFunc: func(c gonvml.ClockType) (uint32, gonvml.Return) {
			if c == gonvml.CLOCK_SM {
				return 1755, gonvml.SUCCESS
			}
			return 3201, gonvml.SUCCESS
		},
		GetTemperatureFunc: func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 71, gonvml.SUCCESS },
		GetPowerUsageFunc:  func() (uint32, gonvml.Return) { return 612345, gonvml.SUCCESS },
		GetCurrentClocksEventReasonsFunc: func() (uint64, gonvml.Return) {
			return gonvml.ClocksEventReasonSwThermalSlowdown | gonvml.ClocksEventReasonSwPowerCap, gonvml.SUCCESS
		},
	}
	h := byBus(map[string]*mock.Device{"0000:00:06.0": dev})
	got, err := h.Telemetry("0000:00:06.0")
	require.NoError(t, err)
	require.NotNil(t, got.SMClockMHz)
	assert.Equal(t, 1755.0, *got.SMClockMHz)
	assert.Equal(t, 3201.0, *got.MemClockMHz)
	assert.Equal(t, 71.0, *got.TempC)
	assert.InDelta(t, 612.345, *got.PowerW, 1e-9)
	assert.Equal(t, uint64(0x24), *got.ClockEvents)

	dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	got, err = h.Telemetry("0000:00:06.0")
	require.NoError(t, err)
	assert.Nil(t, got.PowerW, "not supported: absent, not 0 W")
	assert.Nil(t, got.ClockEvents)
	assert.NotNil(t, got.TempC)

	dev.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 0, gonvml.ERROR_GPU_IS_LOST }
	got, err = h.Telemetry("0000:00:06.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DeviceGetTemperature(0000:00:06.0)")
	assert.Nil(t, got.TempC)
	assert.NotNil(t, got.SMClockMHz, "what was read before the error is kept")

	_, err = h.Telemetry("0000:99:00.0")
	assert.Error(t, err)
}
