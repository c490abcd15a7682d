//go:build rdma

package rc

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// 400G ConnectX-7 behind gen5 x16 (MPS 256): 457.6 Gb/s per direction;
// its read requests 4096 B (as the recorded DGX's ConnectX-6).
var (
	gen5   = floors.Path{{Gbps: 457.6, By: "NIC 0000:19:00.0"}}
	rr4096 = []int{4096, 4096}
)

// PP-08's WRITE-BIDIR in loopback (the default role) on a healthy 400G
// gen5 host: both streams share the port and each direction of the NIC's
// link, so the floor is 0.9 x min(400, 457.6 less the read requests) =
// 360, which a measured 430 Gb/s passes (it was 720).
func TestBWFloorLoopbackBidir(t *testing.T) {
	e := &End{Cfg: config.Defaults(), loopback: true}
	f := e.BWFloor(BWPoint{Size: 1 << 20, Largest: true, Bidir: true}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.InDelta(t, 360, f.Gbps, 1e-6)
	assert.Less(t, f.Gbps, 430.0)
	assert.Contains(t, f.Why, "shared by 2 stream(s)")
	assert.Equal(t, "port", f.Limit.Limit)

	// One direction: the port.
	f = e.BWFloor(BWPoint{Size: 1 << 20, Largest: true}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.InDelta(t, 360, f.Gbps, 1e-6)
}

// Two hosts, both directions: each host's link carries one stream each
// way, so twice min(port, links).
func TestBWFloorTwoHosts(t *testing.T) {
	e := &End{Cfg: config.Defaults()}
	peer := floors.Path{{Gbps: 228.8, By: "server NIC 0000:af:00.0"}}
	f := e.BWFloor(BWPoint{Size: 1 << 20, Largest: true, Bidir: true}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5, peer}, ReadReq: rr4096})
	w, err := floors.ReadReqLoad(4096)
	assert.NoError(t, err)
	assert.InDelta(t, 0.9*2*228.8/(1+w), f.Gbps, 1e-6)
	f = e.BWFloor(BWPoint{Size: 1 << 20, Largest: true}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5, peer}, ReadReq: rr4096})
	assert.InDelta(t, 0.9*228.8, f.Gbps, 1e-6)
	// A loopback layout handed to a two-host end is an input error, named.
	f = e.BWFloor(BWPoint{Size: 1 << 20}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.Zero(t, f.Gbps)
	assert.Contains(t, f.Why, "no threshold: 1 host paths for a two-host run")
}

// READ at 4 KiB, one QP, 16 outstanding, 2.5 us measured round trip: the
// floor is 0.6 x 209.7 Gb/s, not 0.6 x 400.
func TestBWFloorReadBound(t *testing.T) {
	e := &End{Cfg: config.Defaults(), loopback: true}
	rb := &floors.ReadBound{Depth: 16, QPs: 1, Size: 4096, RTT: 2500 * time.Nanosecond}
	f := e.BWFloor(BWPoint{Size: 4096, Read: rb}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.InDelta(t, 0.6*209.7, f.Gbps, 0.1)
	assert.Contains(t, f.Limit.Limit, "outstanding reads")
	assert.Contains(t, f.Why, "2.50 us measured READ round trip")
}

func TestBWFloorOverrides(t *testing.T) {
	cfg := config.Defaults()
	cfg.MinBWGbps = 300
	e := &End{Cfg: cfg, loopback: true}
	assert.Equal(t, 300.0, e.BWFloor(BWPoint{Size: 1 << 20, Largest: true, Bidir: true}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096}).Gbps)
	f := e.BWFloor(BWPoint{Size: 4096}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.Zero(t, f.Gbps)
	assert.Contains(t, f.Why, "reported only: GDR_MIN_BW_GBPS=300")

	soft := &End{Cfg: config.Defaults(), loopback: true, Software: true, SoftWhy: "rxe0 on eth0"}
	f = soft.BWFloor(BWPoint{Size: 1 << 20, Largest: true}, floors.Layout{PortGbps: 2.5, Paths: []floors.Path{nil}, ReadReq: rr4096})
	assert.Zero(t, f.Gbps)
	assert.Contains(t, f.Why, "software device (rxe0 on eth0)")
	f = (&End{Cfg: config.Defaults(), loopback: true}).BWFloor(BWPoint{Size: 1 << 20}, floors.Layout{PortGbps: 0, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.Equal(t, "no threshold: the port rate is unknown", f.Why)
}

// PP-07's ceiling per memory kind, with the kind and source recorded.
func TestLatCeiling(t *testing.T) {
	e := &End{Cfg: config.Defaults()}
	h := e.LatCeiling(true)
	assert.Equal(t, 2.5, h.US)
	assert.Equal(t, "host", h.Kind)
	assert.Contains(t, h.Why, "default host-memory ceiling 2.5 us")
	assert.Contains(t, h.Source, "ngc_multinode_perf")
	g := e.LatCeiling(false)
	assert.Equal(t, floors.MaxLatGPUP50US, g.US)
	assert.Equal(t, "gpu", g.Kind)
	assert.Contains(t, g.Why, "default gpu-memory ceiling 3.5 us")

	cfg := config.Defaults()
	cfg.MaxLatUS = 7
	c := (&End{Cfg: cfg}).LatCeiling(false)
	assert.Equal(t, 7.0, c.US)
	assert.Equal(t, "GDR_MAX_LAT_US=7", c.Why)
	assert.Empty(t, c.Kind, "an explicit ceiling is the operator's, not a memory kind's")
	c = (&End{Cfg: config.Defaults(), Software: true, SoftWhy: "rxe0"}).LatCeiling(true)
	assert.Zero(t, c.US)
	assert.Contains(t, c.Why, "software device (rxe0)")
}

// PP-08's floor on a 400G RoCE v2 port at path MTU 1024: the port carries
// 0.9258 of its rate in payload (82 B of framing and headers a packet),
// so the floor is 0.9 x 370.3 = 333.3 Gb/s, not 360 (2.6 % under what the
// wire can carry); at 4096, 352.9. The source travels in one line.
func TestBWFloorWire(t *testing.T) {
	e := &End{Cfg: config.Defaults(), loopback: true}
	roce := floors.Wire{LinkLayer: floors.Ethernet, GIDType: "RoCE v2", Speed: "NDR", PathMTU: 1024}
	f := e.BWFloor(BWPoint{Size: 1 << 20, Largest: true, Wire: &roce}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.InDelta(t, 333.30, f.Gbps, 0.01)
	assert.Equal(t, "0.9 x port 400 Gb/s x wire efficiency 0.9258 at path MTU 1024 B (RoCE v2, 82 B a packet)", f.FloorSource())
	assert.Contains(t, f.Why, "RoCE v2: preamble+SFD 8, Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, IFG 12 = 82 B a packet")
	assert.InDelta(t, 0.925846, f.Limit.PortShare, 1e-6)
	roce.PathMTU = 4096
	f = e.BWFloor(BWPoint{Size: 1 << 20, Largest: true, Wire: &roce}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.InDelta(t, 352.93, f.Gbps, 0.01)
	// READ responses carry AETH, not RETH: a hair more payload.
	r := e.BWFloor(BWPoint{Size: 1 << 20, ReadOp: true, Wire: &roce}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.Greater(t, r.Gbps, f.Gbps)

	// A path MTU that is not an InfiniBand MTU: the rate counts in full,
	// and the floor says why.
	roce.PathMTU = 0
	f = e.BWFloor(BWPoint{Size: 1 << 20, Wire: &roce}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.InDelta(t, 360, f.Gbps, 1e-6)
	assert.Contains(t, f.Why, "the port's rate counted in full: path MTU 0 B")
	// GDR_MIN_BW_GBPS has no derivation to show.
	cfg := config.Defaults()
	cfg.MinBWGbps = 300
	f = (&End{Cfg: cfg, loopback: true}).BWFloor(BWPoint{Size: 1 << 20, Largest: true, Wire: &roce}, floors.Layout{PortGbps: 400, Paths: []floors.Path{gen5}, ReadReq: rr4096})
	assert.Equal(t, 300.0, f.Gbps)
	assert.Empty(t, f.FloorSource())
}

// An end's framing from sysfs: the port's speed name, the GID's type and
// family, and its netdev's MTU and VLAN type (rdmadev); InfiniBand reads
// no netdev; a netdev that cannot be read is a note, not a failure.
func TestWireFacts(t *testing.T) {
	r := hostfstest.Tree(t, map[string]string{
		"sys/devices/virtual/infiniband/roce0/parent":             "eth2\n",
		"sys/devices/virtual/infiniband/roce0/ports/1/state":      "4: ACTIVE\n",
		"sys/devices/virtual/infiniband/roce0/ports/1/rate":       "400 Gb/sec (4X NDR)\n",
		"sys/devices/virtual/infiniband/roce0/ports/1/link_layer": "Ethernet\n",
		"sys/class/net/eth2.100/mtu":                              "1500\n",
		"sys/class/net/eth2.100/uevent":                           "DEVTYPE=vlan\n",
	})
	require.NoError(t, os.MkdirAll(filepath.Join(r.Dir(), "sys/class/infiniband"), 0o755))
	require.NoError(t, os.Symlink("../../devices/virtual/infiniband/roce0", filepath.Join(r.Dir(), "sys/class/infiniband/roce0")))
	d, err := rdmadev.Load(r, "roce0")
	require.NoError(t, err)
	e := &End{Cfg: config.Defaults(), Root: r, sysDev: d, PathMTU: 1024,
		Port: verbs.PortAttr{LinkLayer: "Ethernet", ActiveMTU: 1024},
		GID:  rdmadev.GID{Index: 3, Addr: net.ParseIP("::ffff:198.18.0.1"), Type: "RoCE v2", Ndev: "eth2.100"}}
	w := e.WireFacts()
	assert.Equal(t, WireFacts{Wire: floors.Wire{LinkLayer: "Ethernet", GIDType: "RoCE v2", VLAN: true, Speed: "NDR", PathMTU: 1024}, Netdev: "eth2.100", NetdevMTU: 1500}, w)
	assert.Equal(t, 86, w.Overhead())

	e.GID.Ndev = "eth9"
	w = e.WireFacts()
	assert.Contains(t, w.Note, "netdev eth9:")
	assert.False(t, w.VLAN)
	assert.Zero(t, w.NetdevMTU)

	e.Port.LinkLayer = "InfiniBand"
	w = e.WireFacts()
	assert.Equal(t, WireFacts{Wire: floors.Wire{LinkLayer: "InfiniBand", Speed: "NDR", PathMTU: 1024}}, w)
	assert.Equal(t, 26, w.Overhead())

	// A GRH the connection sends (a port that requires one) is 40 bytes
	// more of every packet.
	e.GRH = verbs.GRH{Use: true, Why: verbs.GRHPortFlags, LinkLayer: "InfiniBand"}
	w = e.WireFacts()
	assert.True(t, w.GRH)
	assert.Equal(t, 66, w.Overhead())
}
