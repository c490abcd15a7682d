package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/dmi"
)

func host(nicFW, vbios, drv string) *Host {
	return &Host{
		DMI:      &dmi.Info{SysVendor: "NVIDIA", Product: "DGXH200", BIOSVersion: "1.6.7"},
		GPUs:     []GPU{{BDF: "0000:19:00.0", Model: "NVIDIA H200", VBIOS: vbios}},
		NICs:     []NIC{{Name: "mlx5_0", BoardID: "MT_0000000838", Firmware: nicFW}, {Name: "rxe0", Software: true, Firmware: "x"}},
		Software: Software{NvidiaDriver: drv, Kernel: "6.8.0-49-generic", Modules: map[string]string{"mlx5_core": "24.10-1.1.4", "ib_core": "loaded"}},
	}
}

func TestVersions(t *testing.T) {
	v := Versions(host("28.43.1014", "96.00.A5.00.1A", "580.159.04"))
	assert.Equal(t, map[string]string{
		"NIC firmware (MT_0000000838)": "28.43.1014", "VBIOS (NVIDIA H200)": "96.00.A5.00.1A",
		"BIOS (NVIDIA DGXH200)": "1.6.7", "NVIDIA driver": "580.159.04", "kernel": "6.8.0-49-generic",
		"module mlx5_core": "24.10-1.1.4",
	}, v, "software NICs and version-less modules are not compared")
	h := host("28.43.1014", "96.00.A5.00.1A", "580.159.04")
	h.NICs = append(h.NICs, NIC{Name: "mlx5_1", BoardID: "MT_0000000838", Firmware: "28.39.1002"})
	assert.Equal(t, "28.39.1002, 28.43.1014", Versions(h)["NIC firmware (MT_0000000838)"], "one host's cards disagree")
	assert.Nil(t, Versions(nil))
}

func TestDrift(t *testing.T) {
	hosts := map[string]map[string]string{
		"gpu01": Versions(host("28.43.1014", "96.00.A5.00.1A", "580.159.04")),
		"gpu02": Versions(host("28.43.1014", "96.00.A5.00.1A", "580.159.04")),
		"gpu03": Versions(host("28.39.1002", "96.00.A5.00.1A", "580.159.04")),
		"gpu04": Versions(host("28.43.1014", "96.00.A5.00.1A", "570.86.15")),
	}
	ds := Drift(hosts)
	require.Len(t, ds, 2)
	assert.Equal(t, "NIC firmware (MT_0000000838)", ds[0].What)
	assert.Equal(t, map[string]string{"gpu03": "28.39.1002"}, ds[0].Odd)
	assert.Equal(t, "NIC firmware (MT_0000000838): gpu03 has 28.39.1002 where 3 of 4 hosts (most) have 28.43.1014", ds[0].String())
	assert.Equal(t, "NVIDIA driver", ds[1].What)
	assert.False(t, ds[1].Tie)

	tie := Drift(map[string]map[string]string{"a": {"kernel": "6.8"}, "b": {"kernel": "6.1"}})
	require.Len(t, tie, 1)
	assert.True(t, tie[0].Tie)
	assert.Contains(t, tie[0].String(), "(as many)")
	assert.Empty(t, Drift(map[string]map[string]string{"a": {"kernel": "6.8"}}), "one host: nothing to compare")
}
