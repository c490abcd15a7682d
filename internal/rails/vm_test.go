package rails

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/virt"
)

func TestVMVerdict(t *testing.T) {
	s := sel(t, discover(t, "cloud-vm"))
	require.NotEmpty(t, s.Rails)
	r := s.Rails[0]
	require.NotNil(t, r.NIC)
	require.True(t, r.Path.Class.FartherThan(topo.PIX), "the fixture's rail crosses more than a switch")
	az := virt.Guest{VM: true, Hypervisor: "Microsoft Hyper-V", Cloud: "Azure"}

	v := s.VMVerdict(r, topo.PIX, az, nccltopo.Env{})
	assert.Contains(t, v.Msg, "in the PCI tree this VM shows, farther than GDR_MAX_PATH=PIX")
	assert.Contains(t, v.Msg, "NCCL's default NCCL_NET_GDR_LEVEL stops below PHB")
	assert.Contains(t, v.Remedy, "/opt/microsoft/ndv5-topo.xml", "the cloud's own file is named")
	assert.Empty(t, v.GDRSetting)
	require.NoError(t, v.GDRErr)

	v = s.VMVerdict(r, topo.PIX, virt.Guest{VM: true}, nccltopo.Env{GDRLevel: "SYS"})
	assert.Equal(t, `NCCL_NET_GDR_LEVEL="SYS" in the environment`, v.GDRSetting)
	assert.Contains(t, v.Msg, "makes NCCL use GPUDirect RDMA on this path anyway")
	assert.Contains(t, v.Remedy, "the cloud provider publishes one per GPU VM size")

	v = s.VMVerdict(r, topo.PIX, az, nccltopo.Env{GDRLevel: "PIX"})
	assert.Contains(t, v.Msg, "is nearer than this path, so NCCL will not use GPUDirect RDMA on it")
}
