package rails

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/pathclass"
)

// crossedTopo pairs GPU 1 (0002) with NIC 0103 and GPU 2 (0003) with 0102,
// against the PCI address order the tie-break would use, and leaves GPUs 4-7
// out, so that the test tells the file's rails from the tree's.
const crossedTopo = `<system version="1">
  <cpu numaid="0" affinity="00000000,0000ffff,ffffffff">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0101:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0002:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0103:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:03.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0003:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0102:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:04.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0008:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0104:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
</system>
`

// vmTree copies the cloud-vm fixture (no topology file) and adds files.
func vmTree(t *testing.T, files map[string]string) *Host {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	require.NoError(t, hostfstest.Copy(filepath.Join("..", "..", "fixtures", "hosts", "cloud-vm"), dir))
	for p, c := range files {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	h := Discover(r)
	require.NoError(t, h.PCIErr)
	return h
}

func TestRailsFromNCCLTopologyFile(t *testing.T) {
	h := vmTree(t, map[string]string{"/opt/cloud/topo.xml": crossedTopo})
	s := sel(t, h, "NCCL_TOPO_FILE", "/opt/cloud/topo.xml")
	require.NoError(t, h.NCCLErr)
	require.NotNil(t, h.NCCL)
	want := []railExpect{
		{0, "0001:00:00.0", "mlx5_ib0", "PIX", 0},
		{1, "0002:00:00.0", "mlx5_ib2", "PIX", 0}, // the file's pairing, not address order
		{2, "0003:00:00.0", "mlx5_ib1", "PIX", 0},
		{3, "0008:00:00.0", "mlx5_ib3", "PIX", 0},
		// Not in the file: NCCL takes these from the guest's tree, and so
		// does the selection.
		{4, "0009:00:00.0", "mlx5_ib4", "NODE", 0},
		{5, "000a:00:00.0", "mlx5_ib5", "NODE", 0},
		{6, "000b:00:00.0", "mlx5_ib6", "NODE", 0},
		{7, "000c:00:00.0", "mlx5_ib7", "NODE", 0},
	}
	var got []railExpect
	for _, r := range s.All {
		got = append(got, asExpect(r))
	}
	assert.Equal(t, want, got, s.Summary())
	r1 := s.All[1]
	assert.Equal(t, pathclass.NODE, r1.Path.SysfsClass)
	assert.Contains(t, r1.Path.From, "/opt/cloud/topo.xml (NCCL_TOPO_FILE in the environment)")
	assert.Equal(t, "PCI switch ffff:ff:02.0", r1.Path.Via)
	assert.Contains(t, r1.Reason, "by the NCCL topology file /opt/cloud/topo.xml")
	assert.Empty(t, s.All[4].Path.From, "a GPU the file does not list keeps the tree's class")

	// Without the variable the tree alone decides (address order).
	plain := sel(t, vmTree(t, map[string]string{"/opt/cloud/topo.xml": crossedTopo}))
	assert.Equal(t, "mlx5_ib1", plain.All[1].NIC.Name)
	assert.Equal(t, pathclass.NODE, plain.All[1].Class())
}

func TestUnusableNCCLTopologyFile(t *testing.T) {
	for name, c := range map[string]struct {
		files map[string]string
		kv    []string
		is    error
		say   string
	}{
		"missing":   {nil, []string{"NCCL_TOPO_FILE", "/opt/none.xml"}, nccltopo.ErrIgnored, "NCCL ignores it"},
		"malformed": {map[string]string{"/etc/nccl.conf": "NCCL_TOPO_FILE=/opt/bad.xml\n", "/opt/bad.xml": "<system><cpu numaid=\"0\"><pci busid=\"0001:00:00\""}, nil, nccltopo.ErrUnusable, "NCCL fails"},
	} {
		t.Run(name, func(t *testing.T) {
			h := vmTree(t, c.files)
			s := sel(t, h, c.kv...)
			require.Error(t, h.NCCLErr)
			assert.ErrorIs(t, h.NCCLErr, c.is)
			assert.ErrorContains(t, h.NCCLErr, c.say)
			assert.Nil(t, h.NCCL)
			assert.Equal(t, pathclass.NODE, s.All[0].Class(), "the tree decides")
		})
	}
}
