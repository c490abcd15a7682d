package floors_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// The floors of a recorded 8-GPU host's rail, built the way pingpong builds
// them (harness/rc.End.PathLimit): every function on the GPU<->NIC path as
// trained, with its MaxPayload.
func TestFloorsOnRecordedRail(t *testing.T) {
	s, rail := recordedRail(t)
	devs, missing := s.PathDevices(rail)
	require.Empty(t, missing)
	var links []floors.Link
	for _, d := range devs {
		links = append(links, floors.LinkOf(d.Dev, d.Role, s.Index.Device(d.Dev.Parent())))
	}
	b, err := floors.Find(rail.NIC.RateGbps, false, links)
	require.NoError(t, err)
	t.Logf("%s: port %.0f Gb/s; %s", rail, rail.NIC.RateGbps, b.Derived)
	sizes := []int{2, 4096, 16384, 65536, 1048576}
	fs := floors.Floors(b, floors.DefaultFractions, sizes)
	for _, f := range fs {
		t.Logf("  %8d B: floor %6.1f Gb/s  (%s)", f.Size, f.Gbps, f.Why)
	}
	assert.Zero(t, fs[0].Gbps)
	assert.InDelta(t, 0.9*b.Gbps, fs[4].Gbps, 1e-9)
	assert.LessOrEqual(t, b.Gbps, rail.NIC.RateGbps)
}

func pathOf(t *testing.T, links []floors.Link) floors.Path {
	t.Helper()
	p, err := floors.PathOf(links)
	require.NoError(t, err)
	return p
}

// recordedLinks are the recorded DGX's rail-5 paths as pingpong builds
// them (harness/rc.End.PathLimit): GPU memory crosses every function
// between the GPU and the NIC, host memory the NIC and the ports above it.
func recordedLinks(t *testing.T) (port float64, gpu, host []floors.Link) {
	t.Helper()
	s, rail := recordedRail(t)
	path := func(devs []rails.PathDevice, missing []string) []floors.Link {
		require.Empty(t, missing)
		require.NotEmpty(t, devs)
		var links []floors.Link
		for _, d := range devs {
			links = append(links, floors.LinkOf(d.Dev, d.Role, s.Index.Device(d.Dev.Parent())))
		}
		return links
	}
	gpu = path(s.PathDevices(rail))
	host = path(s.UpstreamDevices("NIC", rail.NIC.PCI))
	return rail.NIC.RateGbps, gpu, host
}

// nicReadReq is the NIC's Max_Read_Request_Size on the path (4096 on the
// recorded DGX's ConnectX-6).
func nicReadReq(t *testing.T, links []floors.Link) int {
	t.Helper()
	for _, l := range links {
		if strings.HasPrefix(l.Name, "NIC ") {
			return l.MaxReadReq
		}
	}
	t.Fatal("no NIC on the path")
	return 0
}

func slowest(p floors.Path) float64 {
	m := 0.0
	for i, l := range p {
		if i == 0 || l.Gbps < m {
			m = l.Gbps
		}
	}
	return m
}

func prefixed(p floors.Path, role string) floors.Path {
	out := make(floors.Path, len(p))
	for i, l := range p {
		out[i] = floors.Limit{Gbps: l.Gbps, By: role + " " + l.By}
	}
	return out
}

// The floor of every layout on the recorded DGX (200G ConnectX-6, PCIe
// gen4 x16: 228.8 Gb/s of payload per direction), GPU and host memory:
// at or under what the links carry per direction, and passable by a host
// that reaches 94 % of it (the share pinned copies reach on a gen5 H200:
// 52.8-55.0 GB/s of 57.2, LAB-NOTES).
func TestFloorsOnRecordedLayouts(t *testing.T) {
	port, gpuLinks, hostLinks := recordedLinks(t)
	require.Equal(t, 200.0, port)
	for _, mem := range []struct {
		name  string
		links []floors.Link
	}{{"gpu", gpuLinks}, {"host", hostLinks}} {
		p := pathOf(t, mem.links)
		link := slowest(p)
		require.InDelta(t, 228.8, link, 0.1, mem.name)
		mrrs := nicReadReq(t, mem.links)
		require.Equal(t, 4096, mrrs)
		w, err := floors.ReadReqLoad(mrrs)
		require.NoError(t, err)
		rr := []int{mrrs, mrrs}
		// Where a direction carries data and read requests, it carries
		// link/(1+w) of data per stream.
		cases := []struct {
			name  string
			l     floors.Layout
			carry float64 // what the links and the port carry, by hand
		}{
			{"loopback uni", floors.Layout{PortGbps: port, Loopback: true, Paths: []floors.Path{p}, ReadReq: rr[:1]}, min(port, link/(1+w))},
			{"loopback bidir", floors.Layout{PortGbps: port, Loopback: true, Bidir: true, Paths: []floors.Path{p}, ReadReq: rr[:1]}, min(port, link/(1+w))},
			{"two-host uni", floors.Layout{PortGbps: port, Paths: []floors.Path{prefixed(p, "client"), prefixed(p, "server")}, ReadReq: rr}, min(port, link)},
			{"two-host bidir", floors.Layout{PortGbps: port, Bidir: true, Paths: []floors.Path{prefixed(p, "client"), prefixed(p, "server")}, ReadReq: rr}, 2 * min(port, link/(1+w))},
		}
		for _, c := range cases {
			t.Run(mem.name+"/"+c.name, func(t *testing.T) {
				b, err := floors.FindLayout(c.l)
				require.NoError(t, err)
				f := floors.Floors(b, floors.DefaultFractions, []int{1 << 20})[0]
				t.Logf("%s: floor %.1f Gb/s (%s)", c.name, f.Gbps, f.Why)
				assert.InDelta(t, c.carry, b.Gbps, 1e-6)
				assert.LessOrEqual(t, f.Gbps, c.carry, "the floor asks no more than the path carries")
				assert.GreaterOrEqual(t, 0.94*c.carry, f.Gbps, "a healthy host at 94 %% of the path passes")
			})
		}
	}
	// Bidirectional loopback on this host: the port (200), shared by both
	// streams, not 2 x min(port, links) = 400.
	b, err := floors.FindLayout(floors.Layout{PortGbps: port, Loopback: true, Bidir: true, Paths: []floors.Path{pathOf(t, gpuLinks)}})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)
	assert.InDelta(t, port, b.Gbps, 1e-9)
}

// The recorded DGX's topology retrained at gen5 with a 400G port (an
// H100/H200 + ConnectX-7 host of the same shape): PP-08's loopback
// WRITE-BIDIR floor is 0.9 x min(port, one direction of the slowest link
// less the NIC's read requests) = 360 Gb/s, so a healthy host measuring
// 430 Gb/s passes (it was 720). With an 800G port the links limit.
func TestFloorsOnRecordedGen5Loopback(t *testing.T) {
	_, gpuLinks, hostLinks := recordedLinks(t)
	for name, links := range map[string][]floors.Link{"gpu": gpuLinks, "host": hostLinks} {
		gen5 := append([]floors.Link(nil), links...)
		for i := range gen5 {
			gen5[i].CurGTs = 32
		}
		p := pathOf(t, gen5)
		link := slowest(p)
		require.InDelta(t, 457.6, link, 0.1, name)
		mrrs := nicReadReq(t, gen5)
		w, err := floors.ReadReqLoad(mrrs)
		require.NoError(t, err)
		b, err := floors.FindLayout(floors.Layout{PortGbps: 400, Loopback: true, Bidir: true, Paths: []floors.Path{p}, ReadReq: []int{mrrs}})
		require.NoError(t, err)
		f := floors.Floors(b, floors.DefaultFractions, []int{1 << 20})[0]
		t.Logf("%s memory: %s", name, f.Why)
		assert.InDelta(t, 360, f.Gbps, 1e-6, name)
		assert.Less(t, f.Gbps, 430.0, "%s: a measured 430 Gb/s passes", name)
		assert.LessOrEqual(t, f.Gbps, link, name)
		b, err = floors.FindLayout(floors.Layout{PortGbps: 800, Loopback: true, Bidir: true, Paths: []floors.Path{p}, ReadReq: []int{mrrs}})
		require.NoError(t, err)
		assert.InDelta(t, link/(1+w), b.Gbps, 1e-6, name)
	}
}

// recordedRail is the recorded DGX's selection with the default
// configuration, and its rail 5 (the rail these tests read).
func recordedRail(t *testing.T) (*rails.Selection, *rails.Rail) {
	t.Helper()
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", "dgx"))
	require.NoError(t, err)
	cfg, err := config.Parse(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	s, err := rails.Discover(r).Select(cfg)
	require.NoError(t, err)
	return s, s.All[5]
}

// The recorded DGX's rail 5 port (200 Gb/sec, 4X HDR, InfiniBand) at the
// 4096 B path MTU an InfiniBand fabric runs: HDR's rate file is its data
// rate (no line code), every packet adds LRH, BTH, ICRC and VCRC (26 B),
// so the port carries 0.9937 of its rate in payload and the loopback
// floor, port-limited, is 0.9 x 198.7 = 178.9 Gb/s (it was 180).
func TestWireOnRecordedDGX(t *testing.T) {
	_, rail := recordedRail(t)
	p := rail.NIC.Dev.Port(rail.NIC.Port)
	require.NotNil(t, p)
	assert.Equal(t, "HDR", p.Speed)
	w := floors.Wire{LinkLayer: p.LinkLayer, Speed: p.Speed, PathMTU: 4096}
	assert.Equal(t, 26, w.Overhead())
	c, _ := w.LineCode()
	assert.Equal(t, 1.0, c)
	sh, err := w.Share(1<<20, false)
	require.NoError(t, err)
	assert.InDelta(t, 0.993677, sh.Fraction, 1e-6)
	_, gpu, _ := recordedLinks(t)
	path := pathOf(t, gpu)
	mrrs := nicReadReq(t, gpu)
	b, err := floors.FindLayout(floors.Layout{PortGbps: rail.NIC.RateGbps, Loopback: true, Paths: []floors.Path{path}, ReadReq: []int{mrrs}, PortShare: &sh})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)
	f := floors.Floors(b, floors.DefaultFractions, []int{1 << 20})[0]
	t.Logf("%s: %s", rail, f.Why)
	assert.InDelta(t, 178.86, f.Gbps, 0.01)
	assert.Contains(t, f.Why, "InfiniBand: LRH 8, BTH 12, ICRC 4, VCRC 2 = 26 B a packet")
	assert.Equal(t, "port 200 Gb/s x wire efficiency 0.9937 at path MTU 4096 B (InfiniBand, 26 B a packet)", b.Source)
	_, ok := w.MTUCause([]floors.MTUEnd{{Who: "this host", ActiveMTU: 4096}})
	assert.False(t, ok)
}

// The dual-port RoCE tree: mlx5_0's netdev has the Ethernet default MTU
// 1500, which Linux turns into a RoCE MTU of 1024 B; mlx5_1's has 9000
// (4096 B). Both 200 GbE ports, RoCE v2 over IPv4, no VLAN: at 1024 B the
// floor is 0.9 x 200 x 0.9258 = 166.7 Gb/s, at 4096 B 176.5, and only the
// first has a netdev MTU to blame.
func TestWireOnRecordedRoCE(t *testing.T) {
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", "dual-port"))
	require.NoError(t, err)
	for _, c := range []struct {
		dev     string
		netdev  string
		mtu, ib int
		floor   float64
	}{{"mlx5_0", "ens5f0np0", 1500, 1024, 166.65}, {"mlx5_1", "ens5f1np1", 9000, 4096, 176.46}} {
		t.Run(c.dev, func(t *testing.T) {
			d, err := rdmadev.Load(r, c.dev)
			require.NoError(t, err)
			p := d.Port(1)
			require.NotNil(t, p)
			g, err := rdmadev.PickGID(d, 1, -1, "")
			require.NoError(t, err)
			require.Equal(t, c.netdev, g.Ndev)
			nd, err := rdmadev.ReadNetdev(r, g.Ndev)
			require.NoError(t, err)
			assert.Equal(t, c.mtu, nd.MTU)
			assert.False(t, nd.VLAN)
			w := floors.Wire{LinkLayer: p.LinkLayer, GIDType: g.Type, IPv6: !g.IPv4(), VLAN: nd.VLAN, Speed: p.Speed, PathMTU: floors.RoCEMTU(nd.MTU)}
			assert.Equal(t, c.ib, w.PathMTU)
			assert.Equal(t, 82, w.Overhead())
			sh, err := w.Share(1<<20, false)
			require.NoError(t, err)
			b, err := floors.FindLayout(floors.Layout{PortGbps: p.RateGbps, Loopback: true, Paths: []floors.Path{{{Gbps: 457.6, By: "NIC " + d.PCI}}}, PortShare: &sh})
			require.NoError(t, err)
			f := floors.Floors(b, floors.DefaultFractions, []int{1 << 20})[0]
			t.Logf("%s: %s", c.dev, f.Why)
			assert.InDelta(t, c.floor, f.Gbps, 0.01)
			cause, ok := w.MTUCause([]floors.MTUEnd{{Who: "this host", ActiveMTU: w.PathMTU, Netdev: nd.Name, NetdevMTU: nd.MTU}})
			assert.Equal(t, c.ib < 4096, ok)
			if ok {
				assert.Contains(t, cause, "this host's netdev ens5f0np0 has MTU 1500")
			}
		})
	}
}
