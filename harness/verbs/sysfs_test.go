package verbs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, root, p, s string) {
	t.Helper()
	full := filepath.Join(root, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, []byte(s), 0o644))
}

// rxeTree builds what a Debian 6.1 guest shows for rxe0 on eth0 with 198.18.0.1.
func rxeTree(t *testing.T) *hostfs.Root {
	dir := t.TempDir()
	p := "sys/class/infiniband/rxe0/ports/1/"
	write(t, dir, p+"gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3401\n")
	write(t, dir, p+"gids/1", "0000:0000:0000:0000:0000:ffff:c612:0001\n")
	write(t, dir, p+"gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n")
	write(t, dir, p+"gid_attrs/types/0", "RoCE v2\n")
	write(t, dir, p+"gid_attrs/types/1", "RoCE v2\n")
	write(t, dir, p+"gid_attrs/ndevs/0", "eth0\n")
	write(t, dir, p+"gid_attrs/ndevs/1", "eth0\n")
	write(t, dir, p+"rate", "2.5 Gb/sec (1X SDR)\n")
	write(t, dir, "sys/class/infiniband/rxe0/parent", "eth0\n")
	write(t, dir, "proc/modules", "rdma_rxe 139264 0 - Live 0x0\nib_uverbs 167936 1 rdma_rxe, Live 0x0\nib_core 434176 2 rdma_rxe,ib_uverbs, Live 0x0\nvirtio_net 61440 0 - Live 0x0\n")
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	return r
}

func TestGIDTableRxe(t *testing.T) {
	r := rxeTree(t)
	g, err := GIDTable(r, "rxe0", 1)
	require.NoError(t, err)
	require.Len(t, g, 2, "the all-zero entry is unpopulated")
	assert.Equal(t, "RoCE v2", g[1].Type)
	assert.Equal(t, "eth0", g[1].Netdev)
	ip, ok := g[1].IPv4()
	assert.True(t, ok)
	assert.Equal(t, "198.18.0.1", ip.String())
	_, ok = g[0].IPv4()
	assert.False(t, ok)

	pick, err := PickGID(g, "Ethernet")
	require.NoError(t, err)
	assert.Equal(t, 1, pick.Index, "RoCE v2 with IPv4 wins over the link-local GID")

	soft, why := IsSoftware(r, "rxe0")
	assert.True(t, soft)
	assert.Equal(t, "rxe", why)
	rate, err := PortRate(r, "rxe0", 1)
	require.NoError(t, err)
	assert.Equal(t, "2.5 Gb/sec (1X SDR)", rate)
	devs, err := SysDevices(r)
	require.NoError(t, err)
	assert.Equal(t, []string{"rxe0"}, devs)
}

func TestPickGIDIB(t *testing.T) {
	g := []GIDEntry{{Index: 0, GID: [16]byte{0xfe, 0x80}}, {Index: 3}}
	pick, err := PickGID(g, "InfiniBand")
	require.NoError(t, err)
	assert.Equal(t, 0, pick.Index)
	_, err = PickGID(nil, "Ethernet")
	assert.ErrorContains(t, err, "no populated GID")
	// RoCE without IPv4: lowest RoCE v2 entry.
	g = []GIDEntry{{Index: 0, Type: "IB/RoCE v1"}, {Index: 1, Type: "RoCE v2", GID: [16]byte{0xfe, 0x80}}}
	pick, err = PickGID(g, "Ethernet")
	require.NoError(t, err)
	assert.Equal(t, 1, pick.Index)
}

func TestHardwareDeviceAndErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "sys/devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0/ports/1/gids/0", "zzz\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/class/infiniband"), 0o755))
	require.NoError(t, os.Symlink("../../devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0", filepath.Join(dir, "sys/class/infiniband/mlx5_0")))
	require.NoError(t, os.Symlink("../../../0000:00:02.0", filepath.Join(dir, "sys/devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0/device")))
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	soft, _ := IsSoftware(r, "mlx5_0")
	assert.False(t, soft)
	_, err = GIDTable(r, "mlx5_0", 1)
	assert.ErrorContains(t, err, `"zzz" is not a GID`)
	_, err = GIDTable(r, "mlx5_0", 2)
	assert.ErrorContains(t, err, "GID table of mlx5_0 port 2")

	empty, err := hostfs.New(t.TempDir())
	require.NoError(t, err)
	devs, err := SysDevices(empty)
	require.NoError(t, err)
	assert.Empty(t, devs)
}
