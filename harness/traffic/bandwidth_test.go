//go:build rdma

package traffic

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// PP-08's subtests, in order: the names are the report's contract
// (rail0/WRITE-BIDIR/1048576).
func TestSweep(t *testing.T) {
	sizes := []int{65536, 1 << 20, 4096}
	var names []string
	var solo []string
	for _, sp := range Sweep(sizes) {
		names = append(names, sp.Name+"/"+strconv.Itoa(sp.Size))
		if sp.Solo() {
			solo = append(solo, sp.Name+"/"+strconv.Itoa(sp.Size))
		}
		assert.Equal(t, sp.Size == 1<<20, sp.Largest, sp.Name)
		assert.Equal(t, sp.Name == "READ", sp.Op == verbs.OpRead, sp.Name)
		assert.Equal(t, sp.Name == "WRITE-BIDIR", sp.Bidir, sp.Name)
	}
	assert.Equal(t, []string{"WRITE/65536", "WRITE/1048576", "WRITE/4096", "READ/65536", "READ/1048576", "READ/4096", "WRITE-BIDIR/1048576"}, names)
	assert.Equal(t, []string{"WRITE/1048576"}, solo, "PP-10 compares with WRITE at the largest size, one direction")
	assert.Equal(t, 0, MaxSize(nil))
	assert.Equal(t, 1<<20, MaxSize(sizes))
}

func TestStep(t *testing.T) {
	assert.Equal(t, "bw WRITE 4096", BWSpec{Name: "WRITE", Size: 4096}.step())
	assert.Equal(t, "bw WRITE-BIDIR 4096 bidir", BWSpec{Name: "WRITE-BIDIR", Size: 4096, Bidir: true}.step())
}

// Who sends, receives and posts; one direction shares one pattern, both
// directions cross them (each end checks the peer's).
func TestPlan(t *testing.T) {
	const seed = 0x1234
	w := BWSpec{Op: verbs.OpWrite, Size: 4096}
	c, s := plan(w, "client", seed), plan(w, "server", seed)
	assert.True(t, c.sender && !c.receiver && c.posts)
	assert.True(t, !s.sender && s.receiver && !s.posts)
	assert.Equal(t, c.seed, s.want(false), "the server checks the client's WRITE")
	assert.Zero(t, s.dst)

	r := BWSpec{Op: verbs.OpRead, Size: 4096}
	c, s = plan(r, "client", seed), plan(r, "server", seed)
	assert.True(t, !c.sender && c.receiver && c.posts, "the READ's client receives")
	assert.True(t, s.sender && !s.receiver && !s.posts)
	assert.Equal(t, s.seed, c.want(false))

	b := BWSpec{Op: verbs.OpWrite, Size: 4096, Bidir: true}
	c, s = plan(b, "client", seed), plan(b, "server", seed)
	for _, x := range []side{c, s} {
		assert.True(t, x.sender && x.receiver && x.posts)
		assert.Equal(t, 4096, x.dst, "into the second half")
	}
	assert.NotEqual(t, c.seed, s.seed)
	assert.Equal(t, c.seed, s.want(true))
	assert.Equal(t, s.seed, c.want(true))
}

func TestTxDepth(t *testing.T) {
	assert.Equal(t, 128, txDepth(128, 256, 16, verbs.OpWrite))
	assert.Equal(t, 100, txDepth(128, 100, 16, verbs.OpWrite), "the send queue bounds it")
	assert.Equal(t, 32, txDepth(128, 256, 4, verbs.OpRead), "READs beyond the responder's depth only queue")
	assert.Equal(t, 128, txDepth(128, 256, 16, verbs.OpRead))
}

func TestBidirImage(t *testing.T) {
	p := bidirImage(8, 7)
	require.Len(t, p, 16)
	for _, c := range p[8:] {
		assert.Equal(t, byte(rc.Poison), c)
	}
	assert.NotEqual(t, p[8:], p[:8])
}

func TestMeasured(t *testing.T) {
	r := measured("bw WRITE 1024", 1e9/8, time.Second, 400, 128, 0)
	assert.True(t, r.OK)
	assert.InDelta(t, 1, r.Values["gbps"], 1e-9)
	assert.InDelta(t, 1, r.Values["sec"], 1e-9)
	assert.Equal(t, 400.0, r.Values["rate"])
	assert.Equal(t, 128.0, r.Values["td"])
	assert.NotContains(t, r.Values, "read_rtt_ns")
	r = measured("bw READ 1024", 1, time.Second, 400, 32, 3*time.Microsecond)
	assert.Equal(t, 3000.0, r.Values["read_rtt_ns"])
}

// One direction: the client's rate on both ends; both: the sum.
func TestAggregate(t *testing.T) {
	cli := oob.Result{Name: "c", Values: map[string]float64{"gbps": 300}}
	srv := oob.Result{Name: "s", Values: map[string]float64{"gbps": 0}}
	shown, total := aggregate("client", false, cli, srv)
	assert.Equal(t, "c", shown.Name)
	assert.Equal(t, 300.0, total)
	shown, total = aggregate("server", false, srv, cli)
	assert.Equal(t, "c", shown.Name, "a server shows its peer's run")
	assert.Equal(t, 300.0, total)
	srv.Values["gbps"] = 280
	shown, total = aggregate("server", true, srv, cli)
	assert.Equal(t, "s", shown.Name)
	assert.Equal(t, 580.0, total)
}

func TestLayout(t *testing.T) {
	own := pathLimit{Limit: floors.Limit{Gbps: 457.6, By: "NIC 0000:19:00.0"}, readReq: 4096}
	peer := oob.Result{Msg: "peer NIC", Values: map[string]float64{"pcie": 200, "read_req": 512}}
	w := BWSpec{Op: verbs.OpWrite, Size: 1 << 20}

	l, note := layout(own, peer, true, w)
	assert.Equal(t, []floors.Path{{own.Limit}}, l.Paths, "loopback: this host's path only")
	assert.Equal(t, []int{4096}, l.ReadReq)
	assert.Empty(t, note)

	l, note = layout(own, peer, false, w)
	assert.Equal(t, []floors.Path{{own.Limit}, {{Gbps: 200, By: "peer NIC"}}}, l.Paths, "WRITE: this host is the source")
	assert.Equal(t, []int{4096, 512}, l.ReadReq)
	assert.Empty(t, note)

	r := BWSpec{Op: verbs.OpRead, Size: 1 << 20}
	l, _ = layout(own, peer, false, r)
	assert.Equal(t, []floors.Path{{{Gbps: 200, By: "peer NIC"}}, {own.Limit}}, l.Paths, "READ: the peer's buffer is the source")
	assert.Equal(t, []int{512, 4096}, l.ReadReq)
	r.Bidir = true
	l, _ = layout(own, peer, false, r)
	assert.Equal(t, own.Limit, l.Paths[0][0])

	peer = oob.Result{Msg: strings.Repeat("x", 300), Values: map[string]float64{"pcie": 200, "read_req": 1000}}
	l, note = layout(own, peer, false, w)
	assert.Equal(t, `"`+strings.Repeat("x", 200)+`"... (300 bytes)`, l.Paths[1][0].By, "the peer's words are bounded")
	assert.Equal(t, "from the peer: max read request size 1000 B: want a power of two from 128 to 4096; 512 B assumed", note)
	assert.Equal(t, []int{4096, 0}, l.ReadReq)
}

func TestReadBound(t *testing.T) {
	assert.Nil(t, readBound(oob.Result{Values: map[string]float64{}}, 16, 1, 4096))
	b := readBound(oob.Result{Values: map[string]float64{"read_rtt_ns": 5000}}, 16, 2, 4096)
	require.NotNil(t, b)
	assert.Equal(t, floors.ReadBound{Depth: 16, QPs: 2, Size: 4096, RTT: 5 * time.Microsecond}, *b)
}

func TestPathOf(t *testing.T) {
	l := floors.Limit{Gbps: 100, By: "NIC"}
	p := pathOf(l, true, []string{"a"}, nil, 512)
	assert.Equal(t, pathLimit{Limit: l, notes: "a", readReq: 512}, p)
	p = pathOf(l, false, nil, nil, 0)
	assert.Equal(t, floors.Limit{}, p.Limit, "an unknown path counts nothing")
	p = pathOf(l, true, []string{"a"}, errors.New("boom"), 0)
	assert.Equal(t, floors.Limit{}, p.Limit)
	assert.Equal(t, "a; PCIe path not counted: boom", p.notes)
}

func TestJudgeBW(t *testing.T) {
	sp := BWSpec{Name: "WRITE", Size: 1 << 20}
	v := JudgeBW(sp, BWResult{Gbps: 10, Why: "no threshold: software device (rxe on eth0), its port rate is fictional"})
	assert.Equal(t, Judgement{{Key: "threshold_source", Value: "no threshold: software device (rxe on eth0), its port rate is fictional"}}, v)
	v = JudgeBW(sp, BWResult{Gbps: 370, Floor: 360, Why: "derived"})
	assert.False(t, v.Failed())
	assert.Equal(t, Judgement{{Key: "threshold_source", Value: "derived"}, {Key: "min_bw_gbit_s", Value: 360.0}}, v)
	v = JudgeBW(sp, BWResult{Gbps: 200, Floor: 360, Why: "derived"})
	require.True(t, v.Failed())
	assert.Equal(t, Entry{Finding: &verdict.Finding{Outcome: verdict.FellShort, Cause: "WRITE bandwidth at 1048576 B is 200.00 Gb/s, below the 360.00 Gb/s floor (derived)", Remedy: BWRemedy,
		Measured: "gdr.bw_gbit_s", Threshold: "gdr.min_bw_gbit_s"}, Fatal: true}, v[2])
	assert.Equal(t, "WRITE 1048576 B: 200.000 Gb/s (derived)", BWResult{Gbps: 200, Floor: 360, Why: "derived"}.Log(sp))
}

// A RoCE point below its floor at path MTU 1024 whose netdev MTU is the
// cause: the failure says so and its remedy names the MTU first, before
// PCIe and firmware; without a cause the remedy is BWRemedy alone.
func TestJudgeBWMTUCause(t *testing.T) {
	sp := BWSpec{Name: "WRITE", Size: 1 << 20}
	cause := "the RoCE path MTU is 1024 B: this host's netdev ens1f0np0 has MTU 1500"
	v := JudgeBW(sp, BWResult{Gbps: 320, Floor: 333.3, Why: "derived", MTUCause: cause})
	require.True(t, v.Failed())
	e := v[2]
	assert.Equal(t, "WRITE bandwidth at 1048576 B is 320.00 Gb/s, below the 333.30 Gb/s floor (derived); "+cause, e.Finding.Cause)
	assert.True(t, strings.HasPrefix(e.Finding.Remedy, "raise the netdev MTU to 4200 or more"), e.Finding.Remedy)
	assert.Less(t, strings.Index(e.Finding.Remedy, "MTU"), strings.Index(e.Finding.Remedy, "PCIe"), "the MTU before PCIe and firmware")
	assert.Contains(t, e.Finding.Remedy, BWRemedy)
	// A pass records no cause and no failure.
	v = JudgeBW(sp, BWResult{Gbps: 350, Floor: 333.3, Why: "derived", MTUCause: cause})
	assert.False(t, v.Failed())
}

// A point's framing: this host's, a VLAN tag when the peer's link has
// one, the facts recorded, and the netdev MTU that holds the RoCE path
// MTU at 1024, on this host or the peer.
func TestPointWire(t *testing.T) {
	own := rc.WireFacts{Wire: floors.Wire{LinkLayer: floors.Ethernet, GIDType: "RoCE v2", Speed: "NDR", PathMTU: 1024}, Netdev: "ens1f0np0", NetdevMTU: 1500}
	w, cause, facts := pointWire(own, oob.Result{Values: map[string]float64{}}, 1024, 0, "server", "")
	assert.False(t, w.VLAN)
	assert.Contains(t, cause, "this host's netdev ens1f0np0 has MTU 1500")
	keys := map[string]any{}
	for _, f := range facts {
		keys[f.Key] = f.Value
	}
	assert.Equal(t, 82, keys["wire_overhead_bytes"])
	assert.Equal(t, 1500, keys["netdev_mtu_bytes"])
	assert.Equal(t, cause, keys["wire_mtu_note"])
	assert.Contains(t, keys["wire_overhead_note"], "= 82 B a packet")

	// Two hosts: this one at 9000 (4096), the peer's netdev at 1500 and
	// tagged.
	own.NetdevMTU = 9000
	w, cause, _ = pointWire(own, oob.Result{Values: map[string]float64{"wire_vlan": 1, "netdev_mtu": 1500}}, 4096, 1024, "client", "10.0.0.2:18515")
	assert.True(t, w.VLAN, "the peer's link is tagged")
	assert.Equal(t, 86, w.Overhead())
	assert.Contains(t, cause, "the peer (10.0.0.2:18515)'s netdev has MTU 1500")
	assert.NotContains(t, cause, "this host")

	// At 4096 nothing to blame; InfiniBand has no netdev MTU to blame.
	own.PathMTU = 4096
	_, cause, facts = pointWire(own, oob.Result{Values: map[string]float64{}}, 4096, 4096, "client", "10.0.0.2:18515")
	assert.Empty(t, cause)
	for _, f := range facts {
		assert.NotEqual(t, "wire_mtu_note", f.Key)
	}
	ib := rc.WireFacts{Wire: floors.Wire{LinkLayer: floors.InfiniBand, Speed: "NDR", PathMTU: 2048}}
	_, cause, _ = pointWire(ib, oob.Result{Values: map[string]float64{}}, 2048, 2048, "client", "10.0.0.2:18515")
	assert.Empty(t, cause)
}
