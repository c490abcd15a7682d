package floors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	ib400    = Wire{LinkLayer: InfiniBand, Speed: "NDR", PathMTU: 4096}
	roce1024 = Wire{LinkLayer: Ethernet, GIDType: "RoCE v2", Speed: "NDR", PathMTU: 1024}
	roce4096 = Wire{LinkLayer: Ethernet, GIDType: "RoCE v2", Speed: "NDR", PathMTU: 4096}
)

func vlan(w Wire) Wire { w.VLAN = true; return w }

// Every header and framing byte, itemised, per link layer and variant.
func TestWireOverhead(t *testing.T) {
	cases := []struct {
		w    Wire
		oh   int
		note string
	}{
		{ib400, 26, "InfiniBand: LRH 8, BTH 12, ICRC 4, VCRC 2 = 26 B a packet"},
		{Wire{LinkLayer: InfiniBand, GRH: true, PathMTU: 4096}, 66, "InfiniBand: LRH 8, GRH 40, BTH 12, ICRC 4, VCRC 2 = 66 B a packet"},
		{roce1024, 82, "RoCE v2: preamble+SFD 8, Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, IFG 12 = 82 B a packet"},
		{vlan(roce1024), 86, "RoCE v2: preamble+SFD 8, Ethernet 14, VLAN tag 4, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, IFG 12 = 86 B a packet"},
		{Wire{LinkLayer: Ethernet, GIDType: "RoCE v2", IPv6: true, PathMTU: 4096}, 102, "RoCE v2: preamble+SFD 8, Ethernet 14, IPv6 40, UDP 8, BTH 12, ICRC 4, FCS 4, IFG 12 = 102 B a packet"},
		{Wire{LinkLayer: Ethernet, GIDType: "IB/RoCE v1", PathMTU: 1024}, 94, "RoCE v1: preamble+SFD 8, Ethernet 14, GRH 40, BTH 12, ICRC 4, FCS 4, IFG 12 = 94 B a packet"},
		{Wire{LinkLayer: Ethernet, PathMTU: 1024}, 82, "= 82 B a packet (GID type unknown: RoCE v2 assumed)"},
	}
	for _, c := range cases {
		assert.Equal(t, c.oh, c.w.Overhead(), c.note)
		assert.Contains(t, c.w.OverheadNote(), c.note)
	}
}

// The payload share of a 400G port at 1 MiB WRITEs, and the floor it
// gives where the port limits (0.9 of it): RoCE v2 at MTU 1024 caps near
// 0.926 of the port, so 0.9 x 400 = 360 asks more than 97 % of what the
// wire can carry; the derived floor is 0.9 x 370.3 = 333.3.
func TestWireShare400G(t *testing.T) {
	cases := []struct {
		name      string
		w         Wire
		eff, gbps float64 // payload share, 0.9 x 400 x share
	}{
		{"IB NDR MTU 4096", ib400, 0.993677, 357.72},
		{"RoCE v2 MTU 1024", roce1024, 0.925846, 333.30},
		{"RoCE v2 MTU 4096", roce4096, 0.980359, 352.93},
		{"RoCE v2 VLAN MTU 1024", vlan(roce1024), 0.922510, 332.10},
		{"RoCE v2 VLAN MTU 4096", vlan(roce4096), 0.979421, 352.59},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.w.Share(1<<20, false)
			require.NoError(t, err)
			pkts := (1<<20 + c.w.PathMTU - 1) / c.w.PathMTU
			assert.InDelta(t, float64(1<<20)/float64(1<<20+pkts*c.w.Overhead()+RETHBytes), s.Fraction, 1e-12)
			assert.InDelta(t, c.eff, s.Fraction, 1e-6)
			assert.Equal(t, s.Fraction, s.Efficiency, "no line code above FDR")
			b, err := FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{gen5Path("")}, PortShare: &s})
			require.NoError(t, err)
			assert.Equal(t, "port", b.Limit)
			f := Floors(b, DefaultFractions, []int{1 << 20})[0]
			assert.InDelta(t, c.gbps, f.Gbps, 0.01)
			assert.Less(t, f.Gbps, 0.9*400, "below today's 0.9 x port")
			assert.Contains(t, f.Why, s.Note)
			assert.Contains(t, b.Source, "port 400 Gb/s x wire efficiency")
			assert.Contains(t, b.Source, c.w.Kind())
			assert.Equal(t, s.Fraction, b.PortShare)
		})
	}
	// The headroom the old floor left at MTU 1024: 360 of 370.3.
	s, err := roce1024.Share(1<<20, false)
	require.NoError(t, err)
	assert.InDelta(t, 0.972, 360/(400*s.Fraction), 0.001)
}

// RETH rides once per WRITE, AETH on the first and last READ response;
// smaller messages pay them more often. Errors name the bad input.
func TestWireShareMessages(t *testing.T) {
	w, err := roce1024.Share(65536, false)
	require.NoError(t, err)
	assert.InDelta(t, 65536.0/(65536+64*82+16), w.Fraction, 1e-12)
	r, err := roce1024.Share(1<<20, true)
	require.NoError(t, err)
	assert.InDelta(t, float64(1<<20)/float64(1<<20+1024*82+2*AETHBytes), r.Fraction, 1e-12)
	one, err := roce1024.Share(512, true)
	require.NoError(t, err)
	assert.InDelta(t, 512.0/(512+82+AETHBytes), one.Fraction, 1e-12, "a one-packet READ response carries one AETH")
	assert.Equal(t, "wire efficiency 0.9258 at path MTU 1024 B (RoCE v2, 82 B a packet)", func() string { s, _ := roce1024.Share(1<<20, false); return s.Short }())

	for _, mtu := range []int{0, 1000, 8192, -1} {
		bad := roce1024
		bad.PathMTU = mtu
		_, err := bad.Share(1<<20, false)
		assert.ErrorContains(t, err, "path MTU", mtu)
	}
	_, err = roce1024.Share(0, false)
	assert.ErrorContains(t, err, "message size 0 B")
	_, err = FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{nil}, PortShare: &Share{Fraction: 1.5}})
	assert.ErrorContains(t, err, "port payload share 1.5")
}

// The rate file counts SDR, DDR and QDR before their 8b/10b code and FDR
// at 14 Gb/s a lane; RoCE rates are Ethernet MAC rates whatever speed
// name mlx5 gives them (40 GbE is "4X QDR").
func TestWireLineCode(t *testing.T) {
	for speed, want := range map[string]float64{"SDR": 0.8, "DDR": 0.8, "QDR": 0.8, "FDR10": 1, "FDR": 13.636363 / 14, "EDR": 1, "HDR": 1, "NDR": 1, "XDR": 1} {
		c, why := Wire{LinkLayer: InfiniBand, Speed: speed}.LineCode()
		assert.InDelta(t, want, c, 1e-6, speed)
		assert.Contains(t, why, speed)
	}
	c, why := Wire{LinkLayer: InfiniBand, Speed: ""}.LineCode()
	assert.Equal(t, 1.0, c)
	assert.Contains(t, why, "not known")
	c, _ = Wire{LinkLayer: Ethernet, Speed: "QDR"}.LineCode()
	assert.Equal(t, 1.0, c, "40 GbE is reported as 4X QDR: its rate is the MAC's")

	// A 4X QDR InfiniBand port: "40 Gb/sec", 32 of data, less the headers.
	qdr := Wire{LinkLayer: InfiniBand, Speed: "QDR", PathMTU: 4096}
	s, err := qdr.Share(1<<20, false)
	require.NoError(t, err)
	assert.InDelta(t, 0.8*s.Efficiency, s.Fraction, 1e-12)
	assert.Contains(t, s.Note, "line code 0.8000")
	assert.Contains(t, s.Short, "x line code 0.8000")
	b, err := FindLayout(Layout{PortGbps: 40, Loopback: true, Paths: []Path{gen5Path("")}, PortShare: &s})
	require.NoError(t, err)
	assert.Less(t, b.Gbps, 32.0, "the old floor (0.9 x 40 = 36) asked more than QDR carries")
}

// Linux's iboe_get_mtu: the netdev MTU less 96 B, rounded down to an
// InfiniBand MTU.
func TestRoCEMTU(t *testing.T) {
	for netdev, want := range map[int]int{1500: 1024, 9000: 4096, 4200: 4096, 4192: 4096, 4191: 2048, 2144: 2048, 1120: 1024, 1119: 512, 351: 0, 0: 0} {
		assert.Equal(t, want, RoCEMTU(netdev), netdev)
	}
	assert.Equal(t, 4192, NetdevMTUFor4096)
}

// The cause of a RoCE path MTU below 4096: the netdev MTU that holds it
// there, on this host or the peer; the peer's port when only its active
// MTU is known; nothing on InfiniBand or at 4096.
func TestWireMTUCause(t *testing.T) {
	cause, ok := roce1024.MTUCause([]MTUEnd{{Who: "this host", ActiveMTU: 1024, Netdev: "ens1f0np0", NetdevMTU: 1500}})
	require.True(t, ok)
	for _, w := range []string{"the RoCE path MTU is 1024 B", "this host's netdev ens1f0np0 has MTU 1500", "RoCE MTU of 1024 B", "iboe_get_mtu", "4192 or more gives 4096", "92.6%", "98.0%"} {
		assert.Contains(t, cause, w)
	}
	// This host at 9000, the peer at 1500: the peer's.
	cause, ok = roce1024.MTUCause([]MTUEnd{{Who: "this host (client)", ActiveMTU: 4096, Netdev: "ens1f0np0", NetdevMTU: 9000}, {Who: "the peer (10.0.0.2)", ActiveMTU: 1024, NetdevMTU: 1500}})
	require.True(t, ok)
	assert.Contains(t, cause, "the peer (10.0.0.2)'s netdev has MTU 1500")
	assert.NotContains(t, cause, "ens1f0np0")
	// The peer's netdev MTU not sent: its active MTU says where.
	cause, ok = roce1024.MTUCause([]MTUEnd{{Who: "this host (client)", ActiveMTU: 4096, NetdevMTU: 9000}, {Who: "the peer (10.0.0.2)", ActiveMTU: 1024}})
	require.True(t, ok)
	assert.Contains(t, cause, "the peer (10.0.0.2)'s port has active MTU 1024 B")
	// Netdevs at 9000 on both and a path MTU of 1024: not the netdevs.
	_, ok = roce1024.MTUCause([]MTUEnd{{Who: "a", ActiveMTU: 4096, NetdevMTU: 9000}, {Who: "b", ActiveMTU: 4096, NetdevMTU: 9000}})
	assert.False(t, ok)
	_, ok = roce4096.MTUCause([]MTUEnd{{Who: "a", ActiveMTU: 4096, NetdevMTU: 1500}})
	assert.False(t, ok, "at 4096 there is nothing to raise")
	ib := ib400
	ib.PathMTU = 2048
	_, ok = ib.MTUCause([]MTUEnd{{Who: "a", ActiveMTU: 2048}})
	assert.False(t, ok, "no netdev sets an InfiniBand MTU")
	assert.Contains(t, MTURemedy, "4200 or more")
}

// Two hosts in both directions, port-limited: each wire direction carries
// one stream, so the source says 2 x the port's payload.
func TestWireShareTwoHostsBidir(t *testing.T) {
	s, err := roce4096.Share(1<<20, false)
	require.NoError(t, err)
	b, err := FindLayout(Layout{PortGbps: 400, Bidir: true, Paths: []Path{gen5Path("client "), gen5Path("server ")}, ReadReq: []int{4096, 4096}, PortShare: &s})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)
	assert.InDelta(t, 2*400*s.Fraction, b.Gbps, 1e-9)
	assert.Equal(t, "2 x port 400 Gb/s x "+s.Short, b.Source)
	// A PCIe limit says which link.
	slow := Path{{Gbps: 100, By: "server NIC 0000:af:00.0"}}
	b, err = FindLayout(Layout{PortGbps: 400, Paths: []Path{gen5Path("client "), slow}, ReadReq: []int{4096, 4096}, PortShare: &s})
	require.NoError(t, err)
	assert.Equal(t, "server NIC 0000:af:00.0 toward the memory (the NIC writes the buffer) (100.0 Gb/s)", b.Source)
	assert.Equal(t, s.Fraction, b.PortShare, "the port's share is a fact whatever limits")
}
