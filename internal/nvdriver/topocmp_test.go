package nvdriver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Each disagreement TOPO-07 can find is a finding with its remedy.
func TestTopoFindings(t *testing.T) {
	_, err := ParseTopoAt("no matrix here", "nvidia-smi topo -m")
	f, ok := verdict.As(err)
	require.True(t, ok)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Regexp(t, `^nvidia-smi topo -m: `, f.Cause)
	assert.Equal(t, "run nvidia-smi topo -m by hand and check the driver", f.Remedy)

	m, err := ParseTopoAt(sample(t, "old-style-2gpu.txt"), "rec")
	require.NoError(t, err)
	require.NoError(t, m.CompareGPUs("rec", 2, "0000:05:00.0, 0000:06:00.0"))
	f, ok = verdict.As(m.CompareGPUs("rec", 3, "a, b, c"))
	require.True(t, ok)
	assert.Equal(t, "rec lists 2 GPUs, /sys/bus/pci/devices lists 3 (a, b, c)", f.Cause)
	assert.Equal(t, "check for GPUs the driver does not bind (dmesg NVRM) or GPUs hidden with CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES", f.Remedy)

	n := NICNotPCI("rec", "NIC0", "mlx5_0")
	assert.Equal(t, "rec lists NIC NIC0 (mlx5_0), which /sys/class/infiniband does not have as a PCI RDMA device", n.Cause)
	assert.Equal(t, "check the RDMA driver", n.Remedy)

	p := TopoPair{A: "GPU0", B: "mlx5_0", Link: "PIX"}
	assert.Nil(t, p.CompareClass("0000:05:00.0", "0000:06:00.0", topo.PIX))
	c := p.CompareClass("0000:05:00.0", "0000:06:00.0", topo.PHB)
	require.NotNil(t, c)
	assert.Equal(t, "GPU0 (0000:05:00.0) <-> mlx5_0 (0000:06:00.0): sysfs path says PHB, nvidia-smi topo -m says PIX", c.Cause)
	assert.Equal(t, "compare lspci -tv with nvidia-smi topo -m; a hypervisor may hide PCIe switches from the guest", c.Remedy)
	assert.Nil(t, TopoPair{A: "GPU0", B: "GPU1", Link: "NV18"}.CompareClass("a", "b", topo.PHB), "NVLink has no PCIe class")
}
