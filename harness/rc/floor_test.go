//go:build rdma

package rc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/floors"
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
