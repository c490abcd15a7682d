package nvml

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCommonAncestor(t *testing.T) {
	gpus := map[string]*mock.Device{"0000:3b:00.0": {}, "0000:5e:00.0": {}}
	nv := &mock.Interface{
		DeviceGetHandleByPciBusIdFunc: func(id string) (gonvml.Device, gonvml.Return) {
			if d, ok := gpus[id]; ok {
				return d, gonvml.SUCCESS
			}
			return nil, gonvml.ERROR_NOT_FOUND
		},
		DeviceGetTopologyCommonAncestorFunc: func(a, b gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
			return gonvml.TOPOLOGY_HOSTBRIDGE, gonvml.SUCCESS
		},
	}
	h := Wrap(nv)
	lvl, err := h.CommonAncestor("0000:3b:00.0", "0000:5e:00.0")
	require.NoError(t, err)
	assert.Equal(t, gonvml.TOPOLOGY_HOSTBRIDGE, lvl)
	_, err = h.CommonAncestor("0000:3b:00.0", "0000:99:00.0")
	assert.ErrorContains(t, err, "DeviceGetHandleByPciBusId(0000:99:00.0)")
	assert.ErrorIs(t, err, gonvml.ERROR_NOT_FOUND)
}
