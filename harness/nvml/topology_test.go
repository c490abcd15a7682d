package nvml

import (
	"fmt"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
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

// TOPO-06 compares NVML's level with the sysfs class: each level maps to
// the class nvidia-smi topo -m prints for it; a mismatch or an unknown
// level is a finding.
func TestJudgeLevel(t *testing.T) {
	for lvl, c := range map[gonvml.GpuTopologyLevel]topo.Class{
		gonvml.TOPOLOGY_INTERNAL: topo.PIX, gonvml.TOPOLOGY_SINGLE: topo.PIX, gonvml.TOPOLOGY_MULTIPLE: topo.PXB,
		gonvml.TOPOLOGY_HOSTBRIDGE: topo.PHB, gonvml.TOPOLOGY_NODE: topo.NODE, gonvml.TOPOLOGY_SYSTEM: topo.SYS,
	} {
		assert.Nil(t, JudgeLevel("a", "b", c, lvl), "level %d is %s", lvl, c)
		for _, other := range []topo.Class{topo.PIX, topo.PXB, topo.PHB, topo.NODE, topo.SYS} {
			if other != c {
				f := JudgeLevel("a", "b", other, lvl)
				require.NotNil(t, f, "level %d is not %s", lvl, other)
				assert.Equal(t, "GPU a <-> GPU b: sysfs path says "+other.String()+", NVML GetTopologyCommonAncestor says "+c.String()+fmt.Sprintf(" (level %d)", int(lvl)), f.Cause)
			}
		}
	}
	f := JudgeLevel("a", "b", topo.PIX, 7)
	require.NotNil(t, f)
	assert.Equal(t, "NVML topology level 7 for a <-> b is not one this suite knows", f.Cause)
	assert.Equal(t, verdict.FellShort, f.Kind())
}
