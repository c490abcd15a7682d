package nvdriver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

// The layout of nv-procfs.c's information file (tabs and all), values ours.
const h200Information = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 316\nGPU UUID: \t GPU-5e2b1a7c-0d3f-4c1e-9a8b-7f6e5d4c3b2a\n" +
	"Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n" +
	"Bus Location: \t 0000:19:00.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n"

func TestParseGPUInformation(t *testing.T) {
	g, err := ParseGPUInformation([]byte(h200Information))
	require.NoError(t, err)
	assert.Equal(t, GPUInfo{BDF: "0000:19:00.0", Model: "NVIDIA H200", UUID: "GPU-5e2b1a7c-0d3f-4c1e-9a8b-7f6e5d4c3b2a",
		VBIOS: "96.00.A5.00.1A", Firmware: "580.159.04", Minor: "0"}, g)

	g, err = ParseGPUInformation([]byte("Model: \t\t NVIDIA A100\nVideo BIOS: \t ??.??.??.??.??\nGPU Excluded:\t Yes\n"))
	require.NoError(t, err)
	assert.Empty(t, g.VBIOS, "unread VBIOS is absent, not ??")
	assert.True(t, g.Excluded)

	_, err = ParseGPUInformation([]byte("garbage\x00"))
	assert.ErrorContains(t, err, "no Model")
	_, err = ParseGPUInformation([]byte("Model: X\nBus Location: \t ../../x\n"))
	assert.ErrorContains(t, err, "not a PCI address")
}

func TestReadGPUs(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{
		GPUsDir + "/0000:19:00.0/information": h200Information,
		GPUsDir + "/0000:0a:00.0/information": "Model: \t\t NVIDIA H200\nBus Location: \t 0000:0a:00.0\n",
		GPUsDir + "/0000:ff:00.0/information": "junk",
	})
	gs, err := ReadGPUs(root)
	assert.ErrorContains(t, err, "0000:ff:00.0/information")
	require.Len(t, gs, 2)
	assert.Equal(t, "0000:0a:00.0", gs[0].BDF, "PCI order")

	gs, err = ReadGPUs(hostfstest.Tree(t, map[string]string{"/proc/": ""}))
	assert.NoError(t, err)
	assert.Empty(t, gs)
}

// numa_status beside a GPU's information file marks it as coherently
// attached over NVLink-C2C (nv-procfs.c creates it only then); PCIe GPUs
// have none, and no driver directory is no GPUs.
func TestC2CGPUs(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{
		GPUsDir + "/0009:01:00.0/information": "Model: NVIDIA GH200 480GB\nBus Location: 0009:01:00.0\n",
		GPUsDir + "/0009:01:00.0/numa_status": "Node: 1\nStatus: online\n",
		GPUsDir + "/0000:18:00.0/information": "Model: NVIDIA H200\nBus Location: 0000:18:00.0\n",
	})
	got, err := C2CGPUs(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"0009:01:00.0"}, got)
	got, err = C2CGPUs(hostfstest.Tree(t, map[string]string{"/proc/": ""}))
	require.NoError(t, err)
	assert.Empty(t, got)

	// CUDA names the GPU in upper case with an 8-digit domain.
	c2c, err := IsC2C(root, "00000009:01:00.0")
	require.NoError(t, err)
	assert.True(t, c2c)
	c2c, err = IsC2C(root, "0000:18:00.0")
	require.NoError(t, err)
	assert.False(t, c2c)
	_, err = IsC2C(root, "gpu0")
	assert.ErrorContains(t, err, `"gpu0"`)
}
