package rdmadev

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

func root(t *testing.T, dir string) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	return r
}

func fixture(t *testing.T, name string) *hostfs.Root {
	return root(t, filepath.Join("..", "..", "fixtures", "hosts", name))
}

func TestParsers(t *testing.T) {
	n, s, err := ParseState("4: ACTIVE\n")
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, "ACTIVE", s)
	_, s, err = ParseState("5: LinkUp")
	require.NoError(t, err)
	assert.Equal(t, "LinkUp", s)
	for _, bad := range []string{"", "ACTIVE", "x: ACTIVE", "4:", "4: TWO WORDS", "-1: DOWN"} {
		_, _, err := ParseState(bad)
		assert.Error(t, err, "%q", bad)
	}
	for in, want := range map[string]float64{"100 Gb/sec (4X EDR)": 100, "2.5 Gb/sec (1X SDR)": 2.5, "400 Gb/sec (4X NDR)": 400, "0 Gb/sec": 0} {
		v, err := ParseRate(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, v, in)
	}
	v, err := ParseRate("2500 Mb/sec")
	require.NoError(t, err)
	assert.Equal(t, 2.5, v)
	for _, bad := range []string{"", "fast", "100 Gbps", "NaN Gb/sec", "-5 Gb/sec", "Gb/sec"} {
		_, err := ParseRate(bad)
		assert.Error(t, err, "%q", bad)
	}
	ip, err := ParseGID("0000:0000:0000:0000:0000:ffff:c612:0001")
	require.NoError(t, err)
	assert.Equal(t, "198.18.0.1", ip.String())
	for _, bad := range []string{"", "::1", "fe80::1", "zz80:0000:0000:0000:0000:0000:0000:0000", "198.18.0.1"} {
		_, err := ParseGID(bad)
		assert.Error(t, err, "%q", bad)
	}
	lid, err := ParseLID("0x1a")
	require.NoError(t, err)
	assert.EqualValues(t, 26, lid)
	_, err = ParseLID("26")
	assert.Error(t, err)
}

func TestScanMLX(t *testing.T) {
	devs, err := Scan(fixture(t, "pix"))
	require.NoError(t, err)
	require.Len(t, devs, 2)
	d := devs[0]
	assert.Equal(t, "mlx5_0", d.Name)
	assert.Equal(t, "0000:04:00.0", d.PCI)
	assert.False(t, d.Software)
	assert.Equal(t, []string{"ibp4s0"}, d.Netdevs)
	require.Len(t, d.Ports, 1)
	p := d.Ports[0]
	assert.Equal(t, "ACTIVE", p.State)
	assert.Equal(t, "LinkUp", p.PhysState)
	assert.Equal(t, 200.0, p.RateGbps)
	assert.Equal(t, "InfiniBand", p.LinkLayer)
	assert.Equal(t, "4: ACTIVE", p.RawState)
	assert.Equal(t, "5: LinkUp", p.RawPhysState)
	assert.NotZero(t, p.LID)
	assert.Equal(t, "mlx5_core", d.Driver)
	assert.False(t, d.DriverInferred)
	assert.Equal(t, "uverbs0", d.Uverbs)
	assert.Equal(t, "uverbs1", devs[1].Uverbs)
	assert.Equal(t, "CA", d.NodeTypeName())
	g, err := PickGID(d, 1, -1, "")
	require.NoError(t, err)
	assert.Equal(t, 0, g.Index)
	_, err = PickGID(d, 2, -1, "")
	assert.ErrorContains(t, err, "no port 2")
	_, err = PickGID(d, 1, 5, "")
	assert.ErrorContains(t, err, "GID index 5")
}

func TestScanRXE(t *testing.T) {
	devs, err := Scan(fixture(t, "rxe"))
	require.NoError(t, err)
	require.Len(t, devs, 1)
	d := devs[0]
	assert.True(t, d.Software)
	assert.Equal(t, "", d.PCI)
	assert.Equal(t, "eth0", d.Parent)
	p := d.Port(1)
	require.NotNil(t, p)
	assert.Equal(t, 2.5, p.RateGbps)
	assert.Equal(t, "Ethernet", p.LinkLayer)
	assert.Equal(t, "rdma_rxe", d.Driver)
	assert.True(t, d.DriverInferred)
	assert.Empty(t, d.gids, "Scan reads no GID table")
	gids, err := d.GIDs(1)
	require.NoError(t, err)
	require.Len(t, gids, 4)
	assert.Equal(t, "eth0", gids[3].Ndev)
	_, err = d.GIDs(2)
	assert.ErrorContains(t, err, "no port 2")
	g, err := PickGID(d, 1, -1, "")
	require.NoError(t, err)
	assert.Equal(t, 3, g.Index, "RoCE v2 with IPv4 on an ACTIVE port")
	assert.Equal(t, "198.18.0.1", g.Addr.String())
	assert.Equal(t, "eth0", g.Ndev)
	g, err = PickGID(d, 1, 1, "")
	require.NoError(t, err)
	assert.Equal(t, "RoCE v2", g.Type)
	_, err = PickGID(d, 1, 9, "")
	assert.ErrorContains(t, err, "GID index 9 (GDR_GID_INDEX) is empty or absent")
	// A port that is not ACTIVE falls back to index 0.
	p.State = "DOWN"
	g, err = PickGID(d, 1, -1, "")
	require.NoError(t, err)
	assert.Equal(t, 0, g.Index)
}

// The automatic pick on rxe reads entries in order and stops at the first
// RoCE v2 IPv4 GID: entries past it are never read (here: garbage that would
// fail the read).
func TestPickGIDLazy(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "sys/devices/virtual/infiniband/rxe0")
	require.NoError(t, os.MkdirAll(filepath.Join(base, "ports/1/gids"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "ports/1/gid_attrs/types"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/class/infiniband"), 0o755))
	require.NoError(t, os.Symlink("../../devices/virtual/infiniband/rxe0", filepath.Join(dir, "sys/class/infiniband/rxe0")))
	files := map[string]string{"parent": "eth0\n", "ports/1/state": "4: ACTIVE\n", "ports/1/rate": "2.5 Gb/sec (1X SDR)\n", "ports/1/link_layer": "Ethernet\n",
		"ports/1/gids/0": "fe80:0000:0000:0000:5054:00ff:fe12:3456\n", "ports/1/gid_attrs/types/0": "IB/RoCE v1\n",
		"ports/1/gids/1": "fe80:0000:0000:0000:5054:00ff:fe12:3456\n", "ports/1/gid_attrs/types/1": "RoCE v2\n",
		"ports/1/gids/2": "0000:0000:0000:0000:0000:ffff:c612:0001\n", "ports/1/gid_attrs/types/2": "RoCE v2\n"}
	for i := 3; i < 1024; i++ {
		files[fmt.Sprintf("ports/1/gids/%d", i)] = "garbage\n"
	}
	for n, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(base, n), []byte(v), 0o644))
	}
	d, err := Load(root(t, dir), "rxe0")
	require.NoError(t, err)
	g, err := PickGID(d, 1, -1, "")
	require.NoError(t, err)
	assert.Equal(t, 2, g.Index)
	assert.Len(t, d.gids[1].read, 3, "read entries 0-2 only")
	assert.Len(t, d.gids[1].indices, 1024)
	_, err = d.GIDs(1)
	assert.ErrorContains(t, err, "gids/3", "the full table does read them")
}

func TestPickGIDFrom(t *testing.T) {
	ip := func(s string) net.IP { return net.ParseIP(s) }
	ll := ip("fe80::5054:ff:fe12:3456")
	v4 := ip("::ffff:198.18.0.1")
	roce := []GID{{Index: 0, Addr: ll, Type: "IB/RoCE v1"}, {Index: 1, Addr: ll, Type: "RoCE v2"}, {Index: 2, Addr: v4, Type: "IB/RoCE v1"}, {Index: 3, Addr: v4, Type: "RoCE v2"}}
	for _, tc := range []struct {
		name         string
		gids         []GID
		state, layer string
		index, want  int
	}{
		{"RoCE v2 IPv4", roce, "ACTIVE", "Ethernet", -1, 3},
		{"RoCE v2 without IPv4", roce[:2], "ACTIVE", "Ethernet", -1, 1},
		{"v1 only", roce[:1], "ACTIVE", "Ethernet", -1, 0},
		{"port down", roce, "DOWN", "Ethernet", -1, 0},
		{"InfiniBand", []GID{{Index: 0, Addr: ll}}, "ACTIVE", "InfiniBand", -1, 0},
		{"explicit", roce, "ACTIVE", "Ethernet", 2, 2},
		{"unsorted", []GID{roce[3], roce[1], roce[0]}, "ACTIVE", "Ethernet", -1, 3},
	} {
		g, err := PickGIDFrom(tc.gids, tc.state, tc.layer, tc.index)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, g.Index, tc.name)
	}
	_, err := PickGIDFrom(roce, "ACTIVE", "Ethernet", 7)
	assert.ErrorContains(t, err, "GID index 7")
	_, err = PickGIDFrom(nil, "ACTIVE", "InfiniBand", -1)
	assert.ErrorContains(t, err, "GID index 0 is empty")
}

func TestRecordedEmpty(t *testing.T) {
	devs, err := Scan(fixture(t, "h200-1"))
	require.NoError(t, err)
	assert.Empty(t, devs)
	_, err = Scan(root(t, t.TempDir()))
	assert.ErrorContains(t, err, "/sys/class/infiniband")
}

func TestMalformed(t *testing.T) {
	mk := func(f func(base string)) *hostfs.Root {
		dir := t.TempDir()
		base := filepath.Join(dir, "sys/devices/virtual/infiniband/rxe0")
		require.NoError(t, os.MkdirAll(filepath.Join(base, "ports/1/gids"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/class/infiniband"), 0o755))
		require.NoError(t, os.Symlink("../../devices/virtual/infiniband/rxe0", filepath.Join(dir, "sys/class/infiniband/rxe0")))
		for n, v := range map[string]string{"parent": "eth0\n", "ports/1/state": "4: ACTIVE\n", "ports/1/rate": "2.5 Gb/sec (1X SDR)\n",
			"ports/1/link_layer": "Ethernet\n", "ports/1/gids/0": "fe80:0000:0000:0000:5054:00ff:fe12:3456\n"} {
			require.NoError(t, os.WriteFile(filepath.Join(base, n), []byte(v), 0o644))
		}
		f(base)
		return root(t, dir)
	}
	write := func(n, v string) func(string) {
		return func(base string) { require.NoError(t, os.WriteFile(filepath.Join(base, n), []byte(v), 0o644)) }
	}
	for name, tc := range map[string]struct {
		f    func(string)
		want []string
	}{
		"garbage state":  {write("ports/1/state", "ACTIVE\n"), []string{"ports/1/state", "ACTIVE"}},
		"empty state":    {write("ports/1/state", ""), []string{"ports/1/state"}},
		"garbage rate":   {write("ports/1/rate", "lots\n"), []string{"ports/1/rate", "lots"}},
		"empty parent":   {write("parent", ""), []string{"parent: empty"}},
		"dangling class": {func(base string) { require.NoError(t, os.RemoveAll(base)) }, []string{"rxe0", "dangling"}},
		"dangling device": {func(base string) {
			require.NoError(t, os.Symlink("../../../pci0000:00/0000:00:09.0", filepath.Join(base, "device")))
		}, []string{"device", "dangling"}},
	} {
		_, err := Scan(mk(tc.f))
		require.Error(t, err, name)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, name)
		}
	}
	// A garbage GID entry is an error when the table is read (Scan reads none).
	devs, err := Scan(mk(write("ports/1/gids/1", "hello\n")))
	require.NoError(t, err)
	_, err = devs[0].GIDs(1)
	assert.ErrorContains(t, err, "gids/1")
	assert.ErrorContains(t, err, "hello")
	// A zero GID entry is skipped, and its unreadable attributes do not matter.
	devs, err = Scan(mk(write("ports/1/gids/1", "0000:0000:0000:0000:0000:0000:0000:0000\n")))
	require.NoError(t, err)
	gids, err := devs[0].GIDs(1)
	require.NoError(t, err)
	assert.Len(t, gids, 1)
	// A device read elsewhere (a literal) has no GID table to read.
	_, err = (&Device{Name: "x", Ports: []Port{{Num: 1}}}).GIDs(1)
	assert.ErrorContains(t, err, "not read through rdmadev")
}

func FuzzParsers(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "100 Gb/sec (4X EDR)", "fe80:0000:0000:0000:0000:0000:0000:0001", "0x1a", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _ = ParseState(s)
		if v, err := ParseRate(s); err == nil && (v < 0 || v != v) {
			t.Fatalf("ParseRate(%q) = %v", s, v)
		}
		if ip, err := ParseGID(s); err == nil && len(ip) != 16 {
			t.Fatalf("ParseGID(%q) = %v", s, ip)
		}
		_, _ = ParseLID(s)
	})
}

// gidTree writes a one-port device with the GID table entries given
// (index -> GID, type, netdev) on a port of link layer linkLayer.
func gidTree(t *testing.T, linkLayer string, entries map[int][3]string) *Device {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(dir, "sys/devices/virtual/infiniband/roce0")
	for _, d := range []string{"ports/1/gids", "ports/1/gid_attrs/types", "ports/1/gid_attrs/ndevs"} {
		require.NoError(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/class/infiniband"), 0o755))
	require.NoError(t, os.Symlink("../../devices/virtual/infiniband/roce0", filepath.Join(dir, "sys/class/infiniband/roce0")))
	files := map[string]string{"parent": "eth2\n", "ports/1/state": "4: ACTIVE\n", "ports/1/rate": "100 Gb/sec (4X EDR)\n", "ports/1/link_layer": linkLayer + "\n"}
	for i, e := range entries {
		files[fmt.Sprintf("ports/1/gids/%d", i)] = e[0] + "\n"
		files[fmt.Sprintf("ports/1/gid_attrs/types/%d", i)] = e[1] + "\n"
		files[fmt.Sprintf("ports/1/gid_attrs/ndevs/%d", i)] = e[2] + "\n"
	}
	for n, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(base, n), []byte(v), 0o644))
	}
	d, err := Load(root(t, dir), "roce0")
	require.NoError(t, err)
	return d
}

// GDR_GID_NETDEV: the RoCE v2 GID of that netdev, IPv4-mapped first; the
// automatic rule would take eth2's (lower index); a netdev without RoCE v2
// GIDs, an InfiniBand port, or an index as well are errors naming what
// was asked and what exists.
func TestPickGIDByNetdev(t *testing.T) {
	const (
		ll     = "fe80:0000:0000:0000:5054:00ff:fe12:3456"
		llVLAN = "fe80:0000:0000:0000:5054:00ff:fe12:3457"
		v4     = "0000:0000:0000:0000:0000:ffff:c612:0001" // 198.18.0.1 on eth2
		v4VLAN = "0000:0000:0000:0000:0000:ffff:c613:0001" // 198.19.0.1 on eth2.100
	)
	entries := map[int][3]string{
		0: {ll, "IB/RoCE v1", "eth2"}, 1: {ll, "RoCE v2", "eth2"},
		2: {v4, "IB/RoCE v1", "eth2"}, 3: {v4, "RoCE v2", "eth2"},
		4: {llVLAN, "IB/RoCE v1", "eth2.100"}, 5: {llVLAN, "RoCE v2", "eth2.100"},
		6: {v4VLAN, "IB/RoCE v1", "eth2.100"}, 7: {v4VLAN, "RoCE v2", "eth2.100"},
	}
	d := gidTree(t, "Ethernet", entries)
	g, err := PickGID(d, 1, -1, "")
	require.NoError(t, err)
	assert.Equal(t, 3, g.Index, "automatic: eth2's RoCE v2 IPv4 GID")
	g, err = PickGID(d, 1, -1, "eth2.100")
	require.NoError(t, err)
	assert.Equal(t, 7, g.Index, "the VLAN's own RoCE v2 IPv4 GID")
	assert.Equal(t, "eth2.100", g.Ndev)
	assert.Equal(t, "198.19.0.1", g.Addr.String())
	g, err = PickGID(d, 1, -1, "eth2")
	require.NoError(t, err)
	assert.Equal(t, 3, g.Index)

	// Without an IPv4 address on the VLAN: its link-local RoCE v2 GID.
	noV4 := map[int][3]string{}
	for i, e := range entries {
		if i != 7 {
			noV4[i] = e
		}
	}
	g, err = PickGID(gidTree(t, "Ethernet", noV4), 1, -1, "eth2.100")
	require.NoError(t, err)
	assert.Equal(t, 5, g.Index)

	_, err = PickGID(d, 1, -1, "eth3")
	require.Error(t, err)
	for _, w := range []string{"GDR_GID_NETDEV=eth3", "roce0 port 1", "no RoCE v2 GID of that netdev", "eth2, eth2.100"} {
		assert.Contains(t, err.Error(), w)
	}
	_, err = PickGID(d, 1, 3, "eth2")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GDR_GID_NETDEV=eth2 and GDR_GID_INDEX=3")
	_, err = PickGID(gidTree(t, "InfiniBand", map[int][3]string{0: {ll, "IB/RoCE v1", ""}}), 1, -1, "ib0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "link layer is InfiniBand")
	// A netdev whose only GIDs are RoCE v1 has no RoCE v2 GID to give.
	v1only := map[int][3]string{0: {ll, "IB/RoCE v1", "eth2"}, 1: {llVLAN, "IB/RoCE v1", "eth2.100"}}
	_, err = PickGID(gidTree(t, "Ethernet", v1only), 1, -1, "eth2.100")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "netdevs with RoCE v2 GIDs here: none")
}

// RoCE LAG as sysfs shows it: mlx5_bond_0 on the first PF, its netdev's
// master a bond whose lower_ links name both PFs' netdevs; GIDs on bond0.
// A master without bonding/ (a bridge) is no bond.
func TestBond(t *testing.T) {
	d, err := Load(fixture(t, "bond"), "mlx5_bond_0")
	require.NoError(t, err)
	assert.Equal(t, "0000:05:00.0", d.PCI)
	require.NotNil(t, d.Bond)
	assert.Equal(t, &Bond{Master: "bond0", Slaves: []string{"ens5f0np0", "ens5f1np1"}, PCI: []string{"0000:05:00.0", "0000:05:00.1"}}, d.Bond)
	assert.Equal(t, []string{"0000:05:00.0", "0000:05:00.1"}, d.Functions())
	g, err := PickGID(d, 1, -1, "")
	require.NoError(t, err)
	assert.Equal(t, "bond0", g.Ndev)
	assert.Equal(t, "RoCE v2", g.Type)

	dir := t.TempDir()
	require.NoError(t, hostfstest.Copy(filepath.Join("..", "..", "fixtures", "hosts", "bond"), dir))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "sys", "devices", "virtual", "net", "bond0", "bonding")))
	d, err = Load(root(t, dir), "mlx5_bond_0")
	require.NoError(t, err)
	assert.Nil(t, d.Bond, "a master that is not a bond")
	assert.Equal(t, []string{"0000:05:00.0"}, d.Functions())

	// Software devices span no PCI function.
	rx, err := Load(fixture(t, "rxe"), "rxe0")
	require.NoError(t, err)
	assert.Nil(t, rx.Functions())
}

// The port watch's reader: the state afresh, and content or names that
// are not sysfs' an error naming the file and the value, never a panic.
func TestPortState(t *testing.T) {
	r := hostfstest.Tree(t, map[string]string{
		"sys/class/infiniband/rxe0/ports/1/state": "4: ACTIVE\n",
		"sys/class/infiniband/rxe0/ports/2/state": "1: DOWN\n",
		"sys/class/infiniband/rxe0/ports/3/state": "garbage\n",
		"sys/class/infiniband/rxe0/ports/4/state": "\n",
		"sys/class/net/eth0/operstate":            "down\n",
	})
	s, err := PortState(r, "rxe0", 1)
	require.NoError(t, err)
	assert.Equal(t, "ACTIVE", s)
	s, err = PortState(r, "rxe0", 2)
	require.NoError(t, err)
	assert.Equal(t, "DOWN", s)
	_, err = PortState(r, "rxe0", 3)
	assert.EqualError(t, err, `/sys/class/infiniband/rxe0/ports/3/state: port state "garbage": want "<number>: <NAME>"`)
	_, err = PortState(r, "rxe0", 4)
	assert.ErrorContains(t, err, `/sys/class/infiniband/rxe0/ports/4/state: port state ""`)
	_, err = PortState(r, "rxe0", 5)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "ports/5/state")
	for _, bad := range []struct {
		dev  string
		port int
		msg  string
	}{{"../x", 1, `RDMA device name "../x" is not valid`}, {"", 1, "not valid"}, {"a b", 1, "not valid"},
		{"rxe0", 0, "rxe0: port 0 is not a port number (1..255)"}, {"rxe0", 256, "not a port number"}} {
		_, err := PortState(r, bad.dev, bad.port)
		assert.ErrorContains(t, err, bad.msg, "%q %d", bad.dev, bad.port)
	}
	assert.Equal(t, "/sys/class/infiniband/mlx5_0/ports/1", PortDir("mlx5_0", 1))

	op, err := OperState(r, "eth0")
	require.NoError(t, err)
	assert.Equal(t, "down", op)
	_, err = OperState(r, "eth9")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = OperState(r, "../eth0")
	assert.ErrorContains(t, err, `netdev name "../eth0" is not valid`)
}

// The lane speed name of a rate file, as rate_show writes it; and the
// port keeps it.
func TestParseSpeed(t *testing.T) {
	for in, want := range map[string]string{"200 Gb/sec (4X HDR)": "HDR", "2.5 Gb/sec (1X SDR)": "SDR", "400 Gb/sec (8X HDR)": "HDR",
		"40 Gb/sec (4X FDR10)": "FDR10", "100 Gb/sec": "", "": "", "100 Gb/sec (EDR)": "", "100 Gb/sec (4X EDR": "EDR", "x (a b c)": ""} {
		assert.Equal(t, want, ParseSpeed(in), in)
	}
	devs, err := Scan(fixture(t, "pix"))
	require.NoError(t, err)
	assert.Equal(t, "HDR", devs[0].Ports[0].Speed)
}

// A netdev's MTU and VLAN type: DEVTYPE=vlan in its uevent or an entry in
// /proc/net/vlan; content that is not an MTU is an error naming the file
// and the value; a missing netdev is fs.ErrNotExist.
func TestReadNetdev(t *testing.T) {
	r := hostfstest.Tree(t, map[string]string{
		"sys/class/net/eth2/mtu":        "1500\n",
		"sys/class/net/eth2/uevent":     "INTERFACE=eth2\nIFINDEX=4\n",
		"sys/class/net/eth2.100/mtu":    "9000\n",
		"sys/class/net/eth2.100/uevent": "DEVTYPE=vlan\nINTERFACE=eth2.100\nIFINDEX=7\n",
		"sys/class/net/eth3.7/mtu":      "1500\n",
		"proc/net/vlan/eth3.7":          "eth3.7  VID: 7\n",
		"sys/class/net/bad/mtu":         "jumbo\n",
		"sys/class/net/zero/mtu":        "0\n",
	})
	n, err := ReadNetdev(r, "eth2")
	require.NoError(t, err)
	assert.Equal(t, Netdev{Name: "eth2", MTU: 1500}, n)
	n, err = ReadNetdev(r, "eth2.100")
	require.NoError(t, err)
	assert.Equal(t, Netdev{Name: "eth2.100", MTU: 9000, VLAN: true}, n)
	n, err = ReadNetdev(r, "eth3.7")
	require.NoError(t, err)
	assert.True(t, n.VLAN, "no uevent: /proc/net/vlan says so")
	_, err = ReadNetdev(r, "bad")
	assert.EqualError(t, err, `/sys/class/net/bad/mtu: "jumbo" is not an MTU in bytes`)
	_, err = ReadNetdev(r, "zero")
	assert.ErrorContains(t, err, `"0" is not an MTU`)
	_, err = ReadNetdev(r, "eth9")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = ReadNetdev(r, "../eth2")
	assert.ErrorContains(t, err, `netdev name "../eth2" is not valid`)

	// The dual-port tree's RoCE netdevs (fixtures/gen: 1500 and 9000).
	for nd, mtu := range map[string]int{"ens5f0np0": 1500, "ens5f1np1": 9000} {
		n, err := ReadNetdev(fixture(t, "dual-port"), nd)
		require.NoError(t, err)
		assert.Equal(t, mtu, n.MTU, nd)
	}
}

// libibverbs lists a device only if its /dev/infiniband/uverbsN exists
// (rdma-core libibverbs/init.c try_access_device). In a recorded tree the
// tree's /dev counts; a tree with no /dev/infiniband at all was recorded
// without device nodes and is not judged.
func TestNodeState(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, hostfstest.Copy(filepath.Join("..", "..", "fixtures", "hosts", "pix"), dir))
	devs, err := Scan(root(t, dir))
	require.NoError(t, err)
	require.Len(t, devs, 2)
	for _, d := range devs {
		assert.Equal(t, NodePresent, d.NodeState, d.Name)
		assert.Equal(t, filepath.Join(dir, "dev", "infiniband", d.Uverbs), d.Node)
	}
	// A pod given one NIC: only its node is mounted.
	require.NoError(t, os.Remove(filepath.Join(dir, "dev", "infiniband", "uverbs0")))
	devs, err = Scan(root(t, dir))
	require.NoError(t, err)
	assert.Equal(t, "uverbs0", devs[0].Uverbs)
	assert.Equal(t, NodeMissing, devs[0].NodeState)
	assert.Equal(t, NodePresent, devs[1].NodeState)
	d, err := Load(root(t, dir), "mlx5_0")
	require.NoError(t, err)
	assert.Equal(t, NodeMissing, d.NodeState, "Load looks where Scan does")

	// A tree recorded without /dev: nothing to judge by.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "dev")))
	devs, err = Scan(root(t, dir))
	require.NoError(t, err)
	for _, d := range devs {
		assert.Equal(t, NodeUnchecked, d.NodeState, d.Name)
	}
	// An empty /dev/infiniband is a recorded fact: no nodes.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev", "infiniband"), 0o755))
	devs, err = Scan(root(t, dir))
	require.NoError(t, err)
	for _, d := range devs {
		assert.Equal(t, NodeMissing, d.NodeState, d.Name)
	}
}

// The running host mounted elsewhere (a pod's /host): the tree's /dev shows
// the node's nodes, but libibverbs opens this process's own /dev, so that
// is where the node must be.
func TestNodeStateLiveRootLooksInOwnDev(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skipf("no /proc/sys/kernel/random/boot_id on this machine: %v", err)
	}
	if _, err := os.Stat("/dev/infiniband/uverbs0"); err == nil {
		t.Skip("this machine has /dev/infiniband/uverbs0: the test needs a process without it")
	}
	dir := t.TempDir()
	require.NoError(t, hostfstest.Copy(filepath.Join("..", "..", "fixtures", "hosts", "pix"), dir))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "proc")))
	require.NoError(t, os.Symlink("/proc", filepath.Join(dir, "proc")))
	r := root(t, dir)
	require.True(t, r.IsLive(), "proc is this kernel's procfs: the running host mounted at %s", dir)
	require.FileExists(t, filepath.Join(dir, "dev", "infiniband", "uverbs0"), "the mounted host's /dev has the node")
	devs, err := Scan(r)
	require.NoError(t, err)
	require.NotEmpty(t, devs)
	assert.Equal(t, NodeMissing, devs[0].NodeState)
	assert.Equal(t, "/dev/infiniband/uverbs0", devs[0].Node, "the path looked at is this process's own")
}

// An index NCCL_IB_GID_INDEX set (inherited where GDR_GID_INDEX is unset)
// is used as given, and a miss names the variable and its file.
func TestPickGIDAsNames(t *testing.T) {
	devs, err := Scan(fixture(t, "dual-port"))
	require.NoError(t, err)
	g, err := PickGIDAs(devs[0], 1, 1, "NCCL_IB_GID_INDEX in /etc/nccl.conf", "")
	require.NoError(t, err)
	assert.Equal(t, 1, g.Index)
	_, err = PickGIDAs(devs[0], 1, 9, "NCCL_IB_GID_INDEX in /etc/nccl.conf", "")
	assert.ErrorContains(t, err, "GID index 9 (NCCL_IB_GID_INDEX in /etc/nccl.conf) is empty or absent")
	_, err = PickGID(devs[0], 1, 9, "")
	assert.ErrorContains(t, err, "GID index 9 (GDR_GID_INDEX) is empty or absent")
}
