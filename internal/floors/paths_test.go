package floors

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A healthy 400G ConnectX-7 host: NIC and GPU at gen5 x16, MPS 256 (457.6
// Gb/s of payload per direction), one switch port between them.
func gen5Path(prefix string) Path {
	g := 32e9 / 1e9 * 16 * 128 / 130 * 256 / 282 // GT/s x lanes x 128b/130b x TLP efficiency
	return Path{{Gbps: g, By: prefix + "GPU 0000:18:00.0"}, {Gbps: g, By: prefix + "switch port 0000:17:01.0"}, {Gbps: g, By: prefix + "NIC 0000:19:00.0"}}
}

func TestLayoutLoopbackUni(t *testing.T) {
	b, err := FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{gen5Path("")}})
	require.NoError(t, err)
	// One stream per link direction: the port (400) limits.
	assert.InDelta(t, 400, b.Gbps, 1e-9)
	assert.Equal(t, "port", b.Limit)
	assert.InDelta(t, 457.6, b.PCIeGb, 0.1)
	assert.Contains(t, b.Derived, "1 stream(s)")
}

// The issue-15 case: WRITE-BIDIR in loopback. Both streams cross every
// link in both directions and both are sent and received by the one port,
// so the total is min(port, one direction of the slowest link less the
// read requests' share): 400 Gb/s on a 400G gen5 host (floor 360), not
// 2 x min(400, 457.6) = 800 (floor 720, which no healthy host reaches).
func TestLayoutLoopbackBidir(t *testing.T) {
	b, err := FindLayout(Layout{PortGbps: 400, Loopback: true, Bidir: true, Paths: []Path{gen5Path("")}, ReadReq: []int{4096}})
	require.NoError(t, err)
	assert.InDelta(t, 400, b.Gbps, 1e-9)
	assert.Equal(t, "port", b.Limit)
	assert.Contains(t, b.Derived, "shared by 2 stream(s)")
	f := Floors(b, DefaultFractions, []int{1 << 20})[0]
	assert.InDelta(t, 360, f.Gbps, 1e-9)
	assert.Less(t, f.Gbps, 430.0, "a healthy host measuring 430 Gb/s passes")

	// A faster port (800G) behind the same gen5 links: now the link
	// directions limit, each carrying both streams and their read
	// requests: 457.6/(1+w) in all.
	w, err := ReadReqLoad(4096)
	require.NoError(t, err)
	assert.InDelta(t, 0.0070, w, 1e-4)
	b, err = FindLayout(Layout{PortGbps: 800, Loopback: true, Bidir: true, Paths: []Path{gen5Path("")}, ReadReq: []int{4096}})
	require.NoError(t, err)
	assert.InDelta(t, 457.6/(1+w), b.Gbps, 0.1)
	assert.Contains(t, b.Limit, string(ToMem), "the direction with the writes and the read requests")
	assert.Contains(t, b.Derived, "shared by 2 stream(s) and the read requests of 2 (0.007 each per byte read)")

	// Read request size unknown: the reset value 512 B is assumed, whose
	// requests take 5.6 %: 433.4.
	b, err = FindLayout(Layout{PortGbps: 800, Loopback: true, Bidir: true, Paths: []Path{gen5Path("")}})
	require.NoError(t, err)
	assert.InDelta(t, 433.4, b.Gbps, 0.1)
	_, err = FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{gen5Path("")}, ReadReq: []int{300}})
	assert.ErrorContains(t, err, "path 1's NIC: max read request size 300 B")

	// A slow port (100G): both streams share it, 100 in all.
	b, err = FindLayout(Layout{PortGbps: 100, Loopback: true, Bidir: true, Paths: []Path{gen5Path("")}})
	require.NoError(t, err)
	assert.InDelta(t, 100, b.Gbps, 1e-9)
	assert.Equal(t, "port", b.Limit)
}

func TestLayoutTwoHosts(t *testing.T) {
	a, peer := gen5Path("client "), Path{{Gbps: 228.8, By: "server NIC 0000:af:00.0 (gen4)"}}
	b, err := FindLayout(Layout{PortGbps: 400, Paths: []Path{a, peer}})
	require.NoError(t, err)
	assert.InDelta(t, 228.8, b.Gbps, 1e-9, "one direction: the slowest link of either host")
	assert.Equal(t, "server NIC 0000:af:00.0 (gen4) "+string(ToMem), b.Limit)

	// Both directions: each host's link carries one stream each way, and
	// toward the memory also the read requests of the stream it sends.
	b, err = FindLayout(Layout{PortGbps: 400, Bidir: true, Paths: []Path{a, peer}, ReadReq: []int{4096, 512}})
	require.NoError(t, err)
	w512, err := ReadReqLoad(512)
	require.NoError(t, err)
	assert.InDelta(t, 0.056, w512, 1e-3)
	assert.InDelta(t, 2*228.8/(1+w512), b.Gbps, 1e-9)
	b, err = FindLayout(Layout{PortGbps: 400, Bidir: true, Paths: []Path{gen5Path("client "), gen5Path("server ")}})
	require.NoError(t, err)
	assert.InDelta(t, 800, b.Gbps, 1e-9, "2 x min(port, links) on healthy hosts")
	assert.Equal(t, "port", b.Limit)

	// A peer whose path is unknown (0 Gb/s) contributes no link.
	b, err = FindLayout(Layout{PortGbps: 200, Paths: []Path{a, {{Gbps: 0, By: "server ?"}}}})
	require.NoError(t, err)
	assert.InDelta(t, 200, b.Gbps, 1e-9)
}

func TestLayoutBadInput(t *testing.T) {
	_, err := FindLayout(Layout{PortGbps: 0, Loopback: true, Paths: []Path{nil}})
	assert.ErrorContains(t, err, "port rate 0 Gb/s")
	_, err = FindLayout(Layout{PortGbps: 400, Loopback: true})
	assert.ErrorContains(t, err, "0 host paths for a loopback run: want 1")
	_, err = FindLayout(Layout{PortGbps: 400, Paths: []Path{nil}})
	assert.ErrorContains(t, err, "1 host paths for a two-host run: want 2")
	_, err = Derive(400, nil)
	assert.ErrorContains(t, err, "no stream")
	_, err = Derive(400, []Stream{{Name: "s", Hops: []Hop{{Name: "NIC x", Gbps: -1}}}})
	assert.ErrorContains(t, err, "NIC x: capacity -1")
}

// READ at 4 KiB with one QP: 16 reads outstanding per 2.5 us round trip
// carry 16 x 4096 x 8 / 2.5 us = 209.7 Gb/s, under the port's 400; the
// floor is the size's fraction of that, and it disappears as a limit at
// 64 KiB (3355 Gb/s).
func TestReadBound(t *testing.T) {
	rb := &ReadBound{Depth: 16, QPs: 1, Size: 4096, RTT: 2500 * time.Nanosecond}
	assert.InDelta(t, 209.7, rb.Gbps(), 0.1)
	b, err := FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{gen5Path("")}, Read: rb})
	require.NoError(t, err)
	assert.InDelta(t, 209.7, b.Gbps, 0.1)
	assert.Contains(t, b.Limit, "outstanding reads (16 x 1 QP(s) x 4096 B per 2.50 us")
	f := Floors(b, DefaultFractions, []int{4096})[0]
	assert.InDelta(t, 0.6*209.7, f.Gbps, 0.1)
	assert.Contains(t, f.Why, "measured READ round trip")

	// Four QPs: four times the reads in flight; the port limits again.
	rb4 := *rb
	rb4.QPs = 4
	b, err = FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{gen5Path("")}, Read: &rb4})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)

	rb64 := *rb
	rb64.Size = 65536
	b, err = FindLayout(Layout{PortGbps: 400, Paths: []Path{gen5Path("server "), gen5Path("client ")}, Read: &rb64})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)

	// Unknown round trip: no bound, nothing invented.
	assert.Zero(t, ReadBound{Depth: 16, QPs: 1, Size: 4096}.Gbps())
	b, err = FindLayout(Layout{PortGbps: 400, Loopback: true, Paths: []Path{gen5Path("")}, Read: &ReadBound{Depth: 16, Size: 4096}})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)
}

func TestLatCeilingFor(t *testing.T) {
	h := LatCeilingFor(true)
	assert.Equal(t, 2.5, h.P50US)
	assert.Equal(t, "host", h.Kind)
	assert.Contains(t, h.Source, "LAT_PASS_VAL")
	g := LatCeilingFor(false)
	assert.Equal(t, "gpu", g.Kind)
	assert.Greater(t, g.P50US, h.P50US, "the GPU path adds a payload fetch and a completion")
	assert.Equal(t, 3.5, g.P50US)
	assert.Contains(t, g.Source, "perftest issue 131")
	assert.Contains(t, g.Source, "provisional")
}

func TestReadReqLoad(t *testing.T) {
	w, err := ReadReqLoad(512)
	require.NoError(t, err)
	assert.InDelta(t, 26.0*282/(512*256), w, 1e-12)
	for _, bad := range []int{0, 64, 1000, 8192, -512} {
		_, err := ReadReqLoad(bad)
		assert.ErrorContains(t, err, "want a power of two from 128 to 4096", bad)
	}
	// Two hosts, one direction: the sender's requests flow toward its
	// memory where no data flows, so they limit nothing.
	b, err := FindLayout(Layout{PortGbps: 800, Paths: []Path{gen5Path("client "), gen5Path("server ")}, ReadReq: []int{128, 128}})
	require.NoError(t, err)
	assert.InDelta(t, 457.6, b.Gbps, 0.1)
	assert.NotContains(t, b.Derived, "read requests")
}

// A peer's read request size is a number off the wire: checked, named.
func TestReadReqOf(t *testing.T) {
	for v, want := range map[float64]int{0: 0, 512: 512, 4096: 4096, 128: 128} {
		got, err := ReadReqOf(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, got)
	}
	for _, bad := range []float64{511.5, 300, 64, 8192, -512, math.NaN(), math.Inf(1)} {
		_, err := ReadReqOf(bad)
		assert.Error(t, err, bad)
		assert.ErrorContains(t, err, "read request size", bad)
	}
}
