package rdmadev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
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
	for _, bad := range []string{"", "fast", "100 Gbps", "NaN Gb/sec", "-5 Gb/sec"} {
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
	assert.NotZero(t, p.LID)
	g, err := PickGID(d, 1, -1)
	require.NoError(t, err)
	assert.Equal(t, 0, g.Index)
	_, err = PickGID(d, 2, -1)
	assert.ErrorContains(t, err, "no port 2")
	_, err = PickGID(d, 1, 5)
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
	require.Len(t, p.GIDs, 4)
	g, err := PickGID(d, 1, -1)
	require.NoError(t, err)
	assert.Equal(t, 3, g.Index, "RoCE v2 with IPv4 on an ACTIVE port")
	assert.Equal(t, "198.18.0.1", g.Addr.String())
	assert.Equal(t, "eth0", g.Ndev)
	g, err = PickGID(d, 1, 1)
	require.NoError(t, err)
	assert.Equal(t, "RoCE v2", g.Type)
	// A port that is not ACTIVE falls back to index 0.
	p.State = "DOWN"
	g, err = PickGID(d, 1, -1)
	require.NoError(t, err)
	assert.Equal(t, 0, g.Index)
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
		"garbage gid":    {write("ports/1/gids/1", "hello\n"), []string{"gids/1", "hello"}},
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
	// A zero GID entry is skipped, and its unreadable attributes do not matter.
	devs, err := Scan(mk(write("ports/1/gids/1", "0000:0000:0000:0000:0000:0000:0000:0000\n")))
	require.NoError(t, err)
	assert.Len(t, devs[0].Ports[0].GIDs, 1)
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
