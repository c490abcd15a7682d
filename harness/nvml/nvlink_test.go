package nvml

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nvlinkGPU is a mock GPU with the given active links; remote[i] is link i's
// far end ("switch" for an NVSwitch), version the NVML version of each.
func nvlinkGPU(id string, version uint32, remote ...string) *mock.Device {
	d := h200(id)
	d.GetNvLinkStateFunc = func(l int) (gonvml.EnableState, gonvml.Return) {
		switch {
		case l < len(remote):
			return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		case l < 18:
			return gonvml.FEATURE_DISABLED, gonvml.SUCCESS
		}
		return 0, gonvml.ERROR_INVALID_ARGUMENT
	}
	d.GetNvLinkVersionFunc = func(int) (uint32, gonvml.Return) { return version, gonvml.SUCCESS }
	d.GetNvLinkRemoteDeviceTypeFunc = func(l int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
		if remote[l] == "switch" {
			return gonvml.NVLINK_DEVICE_TYPE_SWITCH, gonvml.SUCCESS
		}
		return gonvml.NVLINK_DEVICE_TYPE_GPU, gonvml.SUCCESS
	}
	d.GetNvLinkRemotePciInfoFunc = func(l int) (gonvml.PciInfo, gonvml.Return) {
		return gonvml.PciInfo{BusId: busID(remote[l])}, gonvml.SUCCESS
	}
	d.GetP2PStatusFunc = func(gonvml.Device, gonvml.GpuP2PCapsIndex) (gonvml.GpuP2PStatus, gonvml.Return) {
		return gonvml.P2P_STATUS_OK, gonvml.SUCCESS
	}
	return d
}

func byBus(devs map[string]*mock.Device) *Handle {
	return Wrap(&mock.Interface{
		DeviceGetHandleByPciBusIdFunc: func(id string) (gonvml.Device, gonvml.Return) {
			if d, ok := devs[id]; ok {
				return d, gonvml.SUCCESS
			}
			return nil, gonvml.ERROR_NOT_FOUND
		},
	})
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestNVLinkDirect(t *testing.T) {
	// Two H200s with all 18 links to each other (NV18), version 6 (4.0).
	a := nvlinkGPU("00000000:00:06.0", 6, repeat("00000000:00:07.0", 18)...)
	b := nvlinkGPU("00000000:00:07.0", 6, repeat("00000000:00:06.0", 18)...)
	h := byBus(map[string]*mock.Device{"0000:00:06.0": a, "0000:00:07.0": b})
	n, err := h.NVLinkBetween("0000:00:06.0", "0000:00:07.0")
	require.NoError(t, err)
	assert.Equal(t, 18, n.Links())
	assert.Equal(t, 18, n.Direct)
	assert.Equal(t, 18, n.Active)
	assert.Equal(t, 6, n.Version)
	assert.Equal(t, "OK", n.P2P)
	assert.Contains(t, n.String(), "18 links (18 direct, 0 via NVSwitch")
}

func TestNVLinkSwitchAndMesh(t *testing.T) {
	// HGX: every link goes to an NVSwitch.
	a := nvlinkGPU("00000000:18:00.0", 6, repeat("switch", 18)...)
	b := nvlinkGPU("00000000:2a:00.0", 6, repeat("switch", 16)...)
	// A mesh GPU: 2 links to a, 2 to another GPU.
	c := nvlinkGPU("00000000:3b:00.0", 4, "00000000:18:00.0", "00000000:18:00.0", "00000000:4c:00.0", "00000000:4c:00.0")
	h := byBus(map[string]*mock.Device{"0000:18:00.0": a, "0000:2a:00.0": b, "0000:3b:00.0": c})
	n, err := h.NVLinkBetween("0000:18:00.0", "0000:2a:00.0")
	require.NoError(t, err)
	assert.Equal(t, 16, n.Links(), "through the switches: the fewer of the two GPUs' switch links")
	assert.Equal(t, 18, n.Switch)
	assert.Equal(t, 16, n.PeerSwitch)
	assert.Equal(t, 6, n.Version)

	n, err = h.NVLinkBetween("0000:3b:00.0", "0000:18:00.0")
	require.NoError(t, err)
	assert.Equal(t, 2, n.Links())
	assert.Equal(t, 2, n.Other, "links to another GPU do not count for this pair")
	assert.Equal(t, 4, n.Version)
}

func TestNVLinkNone(t *testing.T) {
	// A PCIe-only GPU answers NOT_SUPPORTED for every link.
	pcie := func(id string) *mock.Device {
		d := h200(id)
		d.GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
		d.GetP2PStatusFunc = func(gonvml.Device, gonvml.GpuP2PCapsIndex) (gonvml.GpuP2PStatus, gonvml.Return) {
			return gonvml.P2P_STATUS_NOT_SUPPORTED, gonvml.SUCCESS
		}
		return d
	}
	h := byBus(map[string]*mock.Device{"0000:01:00.0": pcie("00000000:01:00.0"), "0000:02:00.0": pcie("00000000:02:00.0")})
	n, err := h.NVLinkBetween("0000:01:00.0", "0000:02:00.0")
	require.NoError(t, err)
	assert.Zero(t, n.Links())
	assert.Zero(t, n.Active)
	assert.Equal(t, "NOT_SUPPORTED", n.P2P)
	st, err := h.P2PStatus("0000:01:00.0", "0000:02:00.0", gonvml.P2P_CAPS_INDEX_READ)
	require.NoError(t, err)
	assert.Equal(t, "NOT_SUPPORTED", st)

	_, err = h.NVLinkBetween("0000:01:00.0", "0000:09:00.0")
	require.ErrorContains(t, err, "DeviceGetHandleByPciBusId(0000:09:00.0)")
	st, err = h.P2PStatus("0000:09:00.0", "0000:01:00.0", gonvml.P2P_CAPS_INDEX_READ)
	require.Error(t, err)
	assert.Contains(t, st, "unknown (NVML DeviceGetHandleByPciBusId(0000:09:00.0)")

	broken := pcie("00000000:03:00.0")
	broken.GetNvLinkStateFunc = func(int) (gonvml.EnableState, gonvml.Return) { return 0, gonvml.ERROR_GPU_IS_LOST }
	h = byBus(map[string]*mock.Device{"0000:01:00.0": pcie("00000000:01:00.0"), "0000:03:00.0": broken})
	_, err = h.NVLinkBetween("0000:03:00.0", "0000:01:00.0")
	require.ErrorContains(t, err, "DeviceGetNvLinkState(0000:03:00.0, link 0)")
	assert.Contains(t, Remedy(err), "Xid 79")
}

func TestP2PStatusName(t *testing.T) {
	assert.Equal(t, "OK", P2PStatusName(gonvml.P2P_STATUS_OK))
	assert.Equal(t, "IOH_TOPOLOGY_NOT_SUPPORTED", P2PStatusName(gonvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED))
	assert.Equal(t, "DISABLED_BY_REGKEY", P2PStatusName(gonvml.P2P_STATUS_DISABLED_BY_REGKEY))
	assert.Equal(t, "UNKNOWN(42)", P2PStatusName(42))
}
