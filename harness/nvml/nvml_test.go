package nvml

import (
	"errors"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalizeBusID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"00000000:00:06.0", "0000:00:06.0"},
		{"00000000:3B:00.0", "0000:3b:00.0"},
		{"0000:3b:00.0", "0000:3b:00.0"},
		{"3B:00.1", "0000:3b:00.1"},
		{" 00000001:C1:1F.7\n", "0001:c1:1f.7"},
	} {
		got, err := NormalizeBusID(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, bad := range []string{"", "garbage", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8",
		"0000:100:00.0", "000000001:3b:00.0", "00010000:3b:00.0", "0000:3b:00.0.1", ":3b:00.0",
		"0000::00.0", "0000:3b:.0", "0000:3b:00.", "x:3b:00.0", "-1:3b:00.0", "0000:+3:00.0"} {
		_, err := NormalizeBusID(bad)
		assert.Error(t, err, "%q", bad)
		if err != nil {
			assert.Contains(t, err.Error(), "dddd:bb:dd.f", bad)
		}
	}
}

func FuzzNormalizeBusID(f *testing.F) {
	for _, s := range []string{"00000000:00:06.0", "3b:00.0", "", "::.", "0000:3b:00.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeBusID(s)
		if err != nil {
			return
		}
		// A normalised id is a fixed point and has the sysfs shape.
		again, err := NormalizeBusID(got)
		if err != nil || again != got || len(got) != 12 {
			t.Fatalf("NormalizeBusID(%q) = %q, again %q, %v", s, got, again, err)
		}
	})
}

func TestFormatCUDAVersion(t *testing.T) {
	assert.Equal(t, "13.0", FormatCUDAVersion(13000))
	assert.Equal(t, "12.4", FormatCUDAVersion(12040))
	assert.Equal(t, "11.8", FormatCUDAVersion(11080))
}

func busID(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s) && i < 31; i++ {
		b[i] = int8(s[i])
	}
	return b
}

func h200(id string) *mock.Device {
	return &mock.Device{
		GetPciInfoFunc: func() (gonvml.PciInfo, gonvml.Return) {
			return gonvml.PciInfo{BusId: busID(id)}, gonvml.SUCCESS
		},
		GetNameFunc:                  func() (string, gonvml.Return) { return "NVIDIA H200", gonvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, gonvml.Return) { return 9, 0, gonvml.SUCCESS },
		GetBAR1MemoryInfoFunc: func() (gonvml.BAR1Memory, gonvml.Return) {
			return gonvml.BAR1Memory{Bar1Total: 256 << 30, Bar1Free: 255 << 30}, gonvml.SUCCESS
		},
		// A PCIe H200 is in no NVLink domain (nvml.h: NOT_SUPPORTED where
		// the GPU has no fabric; by reading, the H200 has not run it yet).
		GetGpuFabricInfoFunc: func() (gonvml.GpuFabricInfo, gonvml.Return) {
			return gonvml.GpuFabricInfo{}, gonvml.ERROR_NOT_SUPPORTED
		},
	}
}

func TestHandleOverMock(t *testing.T) {
	devs := []*mock.Device{h200("00000000:00:06.0"), h200("00000000:3B:00.0")}
	devs[1].GetBAR1MemoryInfoFunc = func() (gonvml.BAR1Memory, gonvml.Return) {
		return gonvml.BAR1Memory{}, gonvml.ERROR_NOT_SUPPORTED
	}
	h := Wrap(&mock.Interface{
		SystemGetDriverVersionFunc:     func() (string, gonvml.Return) { return "580.159.04", gonvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, gonvml.Return) { return 13000, gonvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, gonvml.Return) { return len(devs), gonvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (gonvml.Device, gonvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, gonvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], gonvml.SUCCESS
		},
	})
	v, err := h.DriverVersion()
	require.NoError(t, err)
	assert.Equal(t, "580.159.04", v)
	cv, err := h.CUDADriverVersion()
	require.NoError(t, err)
	assert.Equal(t, "13.0", FormatCUDAVersion(cv))

	ds, err := h.Devices()
	require.NoError(t, err)
	require.Len(t, ds, 2)
	assert.Equal(t, Device{Index: 0, BusID: "0000:00:06.0", Name: "NVIDIA H200", CCMajor: 9, BAR1Total: 256 << 30, BAR1Free: 255 << 30}, ds[0])
	assert.Equal(t, "0000:3b:00.0", ds[1].BusID)
	assert.Zero(t, ds[1].BAR1Total, "NOT_SUPPORTED leaves BAR1 unknown")
	assert.Equal(t, "9.0", ds[0].CC())

	_, err = h.Device(5)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DeviceGetHandleByIndex(5)")
	assert.True(t, errors.Is(err, gonvml.ERROR_INVALID_ARGUMENT))
}

func TestHandleErrors(t *testing.T) {
	bad := h200("garbage")
	h := Wrap(&mock.Interface{
		SystemGetDriverVersionFunc: func() (string, gonvml.Return) { return "", gonvml.ERROR_DRIVER_NOT_LOADED },
		DeviceGetCountFunc:         func() (int, gonvml.Return) { return 1, gonvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (gonvml.Device, gonvml.Return) { return bad, gonvml.SUCCESS },
	})
	_, err := h.DriverVersion()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SystemGetDriverVersion")
	assert.Contains(t, Remedy(err), "modprobe nvidia")

	_, err = h.Devices()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"garbage"`)

	bad.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) { return gonvml.PciInfo{}, gonvml.ERROR_GPU_IS_LOST }
	_, err = h.Devices()
	require.Error(t, err)
	assert.Contains(t, Remedy(err), "Xid 79")
}

// TestOpen runs against whatever this machine has: without libnvidia-ml it
// must skip naming the library (the Absent path), with it Init must work.
func TestOpen(t *testing.T) {
	h := Open(t)
	n, err := h.DeviceCount()
	require.NoError(t, err)
	t.Logf("NVML sees %d GPU(s)", n)
}

// Identity over go-nvml's mock: values kept, NOT_SUPPORTED fields absent,
// a corrupt InfoROM reported as such, a lost GPU an error naming the call.
func TestIdentity(t *testing.T) {
	dev := h200("00000000:19:00.0")
	ok := func(s string) func() (string, gonvml.Return) {
		return func() (string, gonvml.Return) { return s, gonvml.SUCCESS }
	}
	dev.GetUUIDFunc = ok("GPU-5e2b1a7c-0d3f-4c1e-9a8b-7f6e5d4c3b2a")
	dev.GetSerialFunc = ok("1654024199838")
	dev.GetBoardPartNumberFunc = ok("692-2G520-0280-000 ")
	dev.GetVbiosVersionFunc = ok("96.00.A5.00.1A")
	dev.GetInforomImageVersionFunc = ok("G520.0280.00.05")
	dev.GetInforomVersionFunc = func(gonvml.InforomObject) (string, gonvml.Return) { return "", gonvml.ERROR_NOT_SUPPORTED }
	dev.GetModuleIdFunc = func() (int, gonvml.Return) { return 3, gonvml.SUCCESS }
	dev.ValidateInforomFunc = func() gonvml.Return { return gonvml.SUCCESS }
	h := Wrap(&mock.Interface{DeviceGetHandleByIndexFunc: func(int) (gonvml.Device, gonvml.Return) { return dev, gonvml.SUCCESS }})
	id, err := h.Identity(0)
	require.NoError(t, err)
	assert.Equal(t, Identity{UUID: "GPU-5e2b1a7c-0d3f-4c1e-9a8b-7f6e5d4c3b2a", Serial: "1654024199838", PartNumber: "692-2G520-0280-000",
		VBIOS: "96.00.A5.00.1A", InfoROMImage: "G520.0280.00.05", ModuleID: 3, InfoROMChecked: true}, id)

	dev.GetSerialFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_NOT_SUPPORTED }
	dev.ValidateInforomFunc = func() gonvml.Return { return gonvml.ERROR_CORRUPTED_INFOROM }
	dev.GetModuleIdFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_FUNCTION_NOT_FOUND }
	id, err = h.Identity(0)
	require.NoError(t, err)
	assert.Empty(t, id.Serial)
	assert.Zero(t, id.ModuleID)
	assert.True(t, id.InfoROMChecked)
	require.Error(t, id.InfoROMErr)
	assert.ErrorIs(t, id.InfoROMErr, gonvml.ERROR_CORRUPTED_INFOROM)

	dev.GetUUIDFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_GPU_IS_LOST }
	_, err = h.Identity(0)
	assert.ErrorContains(t, err, "DeviceGetUUID(0)")
}

// The GPU fabric info of an NVL72 tray's GPU names its NVLink domain; a
// PCIe GPU (the H200 here: NOT_SUPPORTED) has none, and a registration
// that failed is not a domain. Values in NVML's layout (nvml.h
// nvmlGpuFabricInfo_t: clusterUuid, status, cliqueId, state).
func TestIdentityFabric(t *testing.T) {
	dev := h200("00000008:01:00.0")
	h := Wrap(&mock.Interface{DeviceGetHandleByIndexFunc: func(int) (gonvml.Device, gonvml.Return) { return dev, gonvml.SUCCESS }})
	none := func() (string, gonvml.Return) { return "", gonvml.ERROR_NOT_SUPPORTED }
	dev.GetUUIDFunc, dev.GetSerialFunc, dev.GetBoardPartNumberFunc, dev.GetVbiosVersionFunc, dev.GetInforomImageVersionFunc = none, none, none, none, none
	dev.GetInforomVersionFunc = func(gonvml.InforomObject) (string, gonvml.Return) { return "", gonvml.ERROR_NOT_SUPPORTED }
	dev.GetModuleIdFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	dev.ValidateInforomFunc = func() gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }
	uuid := [16]uint8{0x6f, 0x1c, 0x2a, 0x90, 0x3b, 0x4d, 0x4e, 0x5f, 0x80, 0x71, 0x62, 0x53, 0x44, 0x35, 0x26, 0x17}
	for _, tc := range []struct {
		name   string
		info   gonvml.GpuFabricInfo
		ret    gonvml.Return
		want   *Fabric
		domain string
		err    string
	}{
		{"registered", gonvml.GpuFabricInfo{ClusterUuid: uuid, CliqueId: 32766, State: gonvml.GPU_FABRIC_STATE_COMPLETED}, gonvml.SUCCESS,
			&Fabric{State: "completed", ClusterUUID: "6f1c2a90-3b4d-4e5f-8071-625344352617", CliqueID: 32766}, "6f1c2a90-3b4d-4e5f-8071-625344352617/32766", ""},
		{"fabric manager still registering", gonvml.GpuFabricInfo{State: gonvml.GPU_FABRIC_STATE_IN_PROGRESS}, gonvml.SUCCESS,
			&Fabric{State: "in progress"}, "", ""},
		{"PCIe GPU", gonvml.GpuFabricInfo{}, gonvml.ERROR_NOT_SUPPORTED, nil, "", ""},
		{"state not supported", gonvml.GpuFabricInfo{State: gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED}, gonvml.SUCCESS, nil, "", ""},
		{"old driver", gonvml.GpuFabricInfo{}, gonvml.ERROR_FUNCTION_NOT_FOUND, nil, "", ""},
		{"state from a newer NVML", gonvml.GpuFabricInfo{State: 9}, gonvml.SUCCESS, nil, "", "fabric state 9"},
		{"GPU lost", gonvml.GpuFabricInfo{}, gonvml.ERROR_GPU_IS_LOST, nil, "", "DeviceGetGpuFabricInfo(0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) { return tc.info, tc.ret }
			id, err := h.Identity(0)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				assert.Nil(t, id.Fabric)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, id.Fabric)
			assert.Equal(t, tc.domain, id.Fabric.Domain())
		})
	}

	dev.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
		return gonvml.GpuFabricInfo{ClusterUuid: uuid, CliqueId: 1, State: gonvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(gonvml.ERROR_INSUFFICIENT_RESOURCES)}, gonvml.SUCCESS
	}
	id, err := h.Identity(0)
	require.NoError(t, err)
	require.NotNil(t, id.Fabric)
	assert.ErrorIs(t, id.Fabric.Err, gonvml.ERROR_INSUFFICIENT_RESOURCES)
	assert.Empty(t, id.Fabric.Domain(), "a failed registration is no domain")
}

// GPU-16: a corrupt InfoROM fails naming the board for the RMA; one NVML
// cannot validate is reported; any other validation error fails.
func TestJudgeInfoROM(t *testing.T) {
	s, f := Identity{InfoROMChecked: true}.JudgeInfoROM("0000:19:00.0")
	assert.Equal(t, InfoROMValid, s)
	assert.Nil(t, f)
	s, f = Identity{}.JudgeInfoROM("0000:19:00.0")
	assert.Equal(t, InfoROMNotSupported, s)
	assert.Nil(t, f)
	id := Identity{InfoROMChecked: true, InfoROMErr: check("ValidateInforom", gonvml.ERROR_CORRUPTED_INFOROM), PartNumber: "692-2G520"}
	s, f = id.JudgeInfoROM("0000:19:00.0")
	assert.Equal(t, InfoROMCorrupt, s)
	require.NotNil(t, f)
	assert.Equal(t, "GPU 0000:19:00.0: "+id.InfoROMErr.Error(), f.Cause)
	assert.Contains(t, f.Remedy, "return the board (serial (none), part number 692-2G520) under RMA")
	id.InfoROMErr = check("ValidateInforom", gonvml.ERROR_UNKNOWN)
	s, f = id.JudgeInfoROM("0000:19:00.0")
	assert.Equal(t, InfoROMError, s)
	require.NotNil(t, f)
	assert.Equal(t, Remedy(id.InfoROMErr), f.Remedy)
	assert.Equal(t, "GPU b H200: UUID (none), serial 1, part number (none), VBIOS (none), InfoROM (none) (OEM (none)), module 2",
		Identity{Serial: "1", ModuleID: 2}.Summary("b", "H200"))
}
