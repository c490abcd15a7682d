package rails

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestNeedNICs(t *testing.T) {
	s := sel(t, discover(t, "dgx"))
	ns, err := s.NeedNICs()
	require.NoError(t, err)
	assert.Equal(t, s.NICs, ns)
	s = sel(t, discover(t, "dgx"), "GDR_RDMA_DEVICE", "mlx5_3")
	ns, err = s.NeedNICs()
	require.NoError(t, err)
	require.Len(t, ns, 1, "GDR_RDMA_DEVICE selects one")
	assert.Equal(t, "mlx5_3", ns[0].Name)
	require.NoError(t, s.NeedPCINICs())

	empty, err := hostfs.New(t.TempDir())
	require.NoError(t, err)
	_, err = sel(t, Discover(empty)).NeedNICs()
	assert.True(t, verdict.IsAbsent(err))
	assert.ErrorContains(t, err, "no RDMA device: /sys/class/infiniband does not exist under ")

	err = sel(t, discover(t, "rxe")).NeedPCINICs()
	assert.True(t, verdict.IsAbsent(err))
	assert.ErrorContains(t, err, "no PCI RDMA device: rxe0 (on ")
}

// The NIC a rail's fabric checks read: the rail's own, else the nearest
// hardware NIC (said so), else none.
func TestPathNIC(t *testing.T) {
	s := sel(t, discover(t, "dgx"))
	c, ok := s.PathNIC(s.Rails[5])
	require.True(t, ok)
	assert.Same(t, s.Rails[5].NIC, c.NIC)
	assert.False(t, c.Nearest)

	s = sel(t, discover(t, "port-down"))
	c, ok = s.PathNIC(s.Rails[0])
	require.True(t, ok)
	assert.True(t, c.Nearest)
	assert.Equal(t, "mlx5_0", c.NIC.Name)
	assert.Contains(t, c.Why, "checking the path to its nearest RDMA NIC mlx5_0 (PIX)")

	s = sel(t, discover(t, "rxe"))
	_, ok = s.PathNIC(s.Rails[0])
	assert.False(t, ok, "a software NIC has no PCIe path")
}

func TestRailNICs(t *testing.T) {
	s := sel(t, discover(t, "bond")) // both rails use mlx5_bond_0: once
	hw, other := RailNICs(s.Rails)
	require.Len(t, hw, 1)
	assert.Empty(t, other)
	s = sel(t, discover(t, "rxe"))
	hw, other = RailNICs(s.Rails)
	assert.Empty(t, hw)
	require.Len(t, other, 1)
	assert.Contains(t, other[0], "rxe0 is a software device (on ")
	assert.Equal(t, "no NIC whose firmware settings can be read: "+other[0], NoNIC("firmware settings", other).Cause)
	assert.Equal(t, "no NIC whose optics can be read: no rail has an RDMA NIC", NoNIC("optics", nil).Cause)
}

func TestScanFindings(t *testing.T) {
	s := sel(t, discover(t, "dgx"))
	assert.Empty(t, s.ScanFindings())
	s.PCIErr, s.NICErr = errors.New("bad pci"), errors.New("bad nic")
	fs := s.ScanFindings()
	require.Len(t, fs, 2)
	assert.Equal(t, "PCI devices that could not be read: bad pci", fs[0].Cause)
	assert.Equal(t, "RDMA devices that could not be read: bad nic", fs[1].Cause)
	s.PCIDir = false
	assert.Len(t, s.ScanFindings(), 1, "no PCI directory: nothing was left out")
	assert.Len(t, s.SysfsGPUs(), 8, "every GPU of the DGX, whatever GDR_GPU selects")
	assert.Equal(t, "0000:a9:00.0", GPUList(SelectedGPUs(s.Rails[5:6])))
}

func TestRailOf(t *testing.T) {
	s := sel(t, discover(t, "dgx"), "GDR_GPU", "5")
	require.Len(t, GPURails(s.Rails), 1)
	assert.Same(t, s.Rails[0], RailOf(s.Rails, "0000:a9:00.0"))
	assert.Nil(t, RailOf(s.Rails, "0000:3a:00.0"), "not selected")
	assert.NotNil(t, RailOf(s.All, "0000:3a:00.0"), "every GPU has a rail in All")
	assert.Empty(t, GPURails([]*Rail{{Index: -1}}), "a NIC-only primary has no GPU")
}

// A NIC whose device link names a function the tree lacks is a finding
// that says which driver and which folder to check.
func TestNICDevice(t *testing.T) {
	s := sel(t, discover(t, "dgx"))
	n := s.NIC("mlx5_0")
	require.NotNil(t, n)
	d, err := s.NICDevice(n)
	require.NoError(t, err)
	assert.Equal(t, n.PCI, d.BDF)

	lost := *n
	lost.PCI = "0000:ff:1f.7"
	_, err = s.NICDevice(&lost)
	f, ok := verdict.As(err)
	require.True(t, ok)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "/sys/class/infiniband/mlx5_0/device points to PCI function 0000:ff:1f.7, which is not in /sys/bus/pci/devices", f.Cause)
	assert.Equal(t, "check the driver of mlx5_0 and /sys/bus/pci/devices", f.Remedy)
}
