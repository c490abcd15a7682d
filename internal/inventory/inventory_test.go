package inventory

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/pci"
)

func fixture(t *testing.T, name string) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", name))
	require.NoError(t, err)
	return r
}

// The constructed 8-GPU server: every GPU from procfs, every NIC with its
// PSID, firmware and VPD serial, the DMI product and serial, versions.
func TestCollectDGX(t *testing.T) {
	h := Collect(fixture(t, "dgx"))
	assert.Empty(t, h.Notes)
	require.NotNil(t, h.DMI)
	assert.Equal(t, "DGXH200", h.DMI.Product)
	assert.Equal(t, "1660224000123", h.DMI.ProductSerial)
	assert.Empty(t, h.DMI.BoardSerial, "placeholder left out")
	assert.Equal(t, "1.6.7", h.DMI.BIOSVersion)
	require.Len(t, h.GPUs, 8)
	g := h.GPUs[0]
	assert.Equal(t, "96.00.A5.00.1A", g.VBIOS)
	assert.Regexp(t, `^GPU-[0-9a-f]{8}-`, g.UUID)
	assert.Equal(t, "procfs", g.Source)
	assert.Empty(t, g.Serial, "only NVML knows the serial")
	require.Len(t, h.NICs, 10)
	var n NIC
	for _, x := range h.NICs {
		if x.Name == "mlx5_0" {
			n = x
		}
	}
	assert.Equal(t, "MT_0000000838", n.BoardID)
	assert.Equal(t, "28.43.1014", n.Firmware)
	assert.Equal(t, "MT4129", n.HCAType)
	assert.Equal(t, "MCX75310AAS-NEAT", n.PartNumber)
	assert.Regexp(t, `^MT2312X`, n.Serial)
	assert.Equal(t, "A7", n.EC)
	assert.Equal(t, "mlx5_core", n.Driver)
	assert.Equal(t, "580.159.04", h.Software.NvidiaDriver)
	assert.Equal(t, "open", h.Software.NvidiaModule)
	assert.NotEmpty(t, h.Software.Kernel)
	assert.Equal(t, "loaded", h.Software.Modules["mlx5_core"], "a module without version files is present, version unpublished")

	b, err := json.Marshal(h)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"serial":""`, "absent values are absent")
}

// A VM: DMI from the hypervisor, no VPD on a software NIC; nothing made up.
func TestCollectRxeVM(t *testing.T) {
	h := Collect(fixture(t, "rxe"))
	for _, n := range h.NICs {
		assert.True(t, n.Software, n.Name)
		assert.Empty(t, n.Serial)
		assert.Empty(t, n.BoardID)
	}
}

// Versions from files: module version and srcversion, the libibverbs file
// rdma-core names by its release, and a damaged VPD named in Notes.
func TestCollectVersions(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{
		"/proc/modules":                                     "mlx5_core 2445312 1 mlx5_ib, Live 0xffffffffc0700000\nib_core 479232 5 - Live 0xffffffffc09c0000\n",
		"/sys/module/mlx5_core/initstate":                   "live\n",
		"/sys/module/mlx5_core/version":                     "24.10-1.1.4\n",
		"/sys/module/ib_core/initstate":                     "live\n",
		"/sys/module/ib_core/srcversion":                    "5A3F0C8D2E1B4A6C7D8E9F0\n",
		"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0": "",
	})
	require.NoError(t, os.Symlink("libibverbs.so.1.14.44.0", filepath.Join(root.Dir(), "usr/lib/x86_64-linux-gnu/libibverbs.so.1")))
	h := Collect(root)
	assert.Equal(t, "24.10-1.1.4", h.Software.Modules["mlx5_core"])
	assert.Equal(t, "srcversion 5A3F0C8D2E1B4A6C7D8E9F0", h.Software.Modules["ib_core"])
	assert.Equal(t, "1.14.44.0", h.Software.Libibverbs)
	assert.Equal(t, "44.0", h.Software.RDMACore)
	assert.Nil(t, h.DMI)
}

func TestMergeGPU(t *testing.T) {
	h := Host{GPUs: []GPU{{BDF: "0000:19:00.0", Model: "NVIDIA H200", VBIOS: "96.00.A5.00.1A", Source: "procfs"}}}
	h.MergeGPU(GPU{BDF: "0000:19:00.0", Serial: "1654024199838", VBIOS: "ignored: procfs had one", InfoROM: "G520.0200.00.05"})
	h.MergeGPU(GPU{BDF: "0000:0a:00.0", Serial: "1654024199001"})
	require.Len(t, h.GPUs, 2)
	assert.Equal(t, "0000:0a:00.0", h.GPUs[0].BDF)
	assert.Equal(t, "nvml", h.GPUs[0].Source)
	assert.Equal(t, "1654024199838", h.GPUs[1].Serial)
	assert.Equal(t, "96.00.A5.00.1A", h.GPUs[1].VBIOS)
	assert.Equal(t, "procfs+nvml", h.GPUs[1].Source)
	h.MergeGPU(GPU{BDF: "0000:19:00.0"})
	assert.Equal(t, "procfs+nvml", h.GPUs[1].Source)
}

// A device whose VPD read hangs costs VPDTimeout, is named in Notes, and
// the rest of the inventory is there.
func TestVPDReadBounded(t *testing.T) {
	old := readVPD
	t.Cleanup(func() { readVPD = old })
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	readVPD = func(*hostfs.Root, string) (*pci.VPD, error) { <-block; return nil, nil }
	start := time.Now()
	_, err := vpdWithin(fixture(t, "dgx"), "0000:19:00.0", 50*time.Millisecond)
	assert.ErrorContains(t, err, "did not finish within 50ms")
	assert.Less(t, time.Since(start), 2*time.Second)
}
