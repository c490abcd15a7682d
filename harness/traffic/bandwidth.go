//go:build rdma

package traffic

import (
	"fmt"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// BWSpec is one bandwidth point. Bidir: both ends send at once (ib_write_bw
// -b), each from the first Size bytes of its buffer into the second Size
// bytes of the peer's (the buffer holds 2*Size). Largest: the largest
// GDR_BW_SIZES size, where GDR_MIN_BW_GBPS applies.
type BWSpec struct {
	Op      verbs.Opcode
	Name    string
	Size    int
	Largest bool
	Bidir   bool
}

// step names the point's barrier and results on the session.
func (sp BWSpec) step() string {
	s := fmt.Sprintf("bw %s %d", sp.Name, sp.Size)
	if sp.Bidir {
		s += " bidir"
	}
	return s
}

// MaxSize is the largest of sizes (GDR_BW_SIZES; GDR_MIN_BW_GBPS applies there).
func MaxSize(sizes []int) int {
	m := 0
	for _, s := range sizes {
		m = max(m, s)
	}
	return m
}

// Sweep is PP-08's points, like ib_write_bw and ib_read_bw: WRITE at every
// size, READ at every size, then WRITE in both directions at once at the
// largest (ib_write_bw -b: a full-duplex port carries twice its rate).
func Sweep(sizes []int) []BWSpec {
	maxSize := MaxSize(sizes)
	var out []BWSpec
	for _, op := range []struct {
		op   verbs.Opcode
		name string
	}{{verbs.OpWrite, "WRITE"}, {verbs.OpRead, "READ"}} {
		for _, size := range sizes {
			out = append(out, BWSpec{Op: op.op, Name: op.name, Size: size, Largest: size == maxSize})
		}
	}
	return append(out, BWSpec{Op: verbs.OpWrite, Name: "WRITE-BIDIR", Size: maxSize, Largest: true, Bidir: true})
}

// Solo reports whether sp is the point PP-10 compares a rail's rate with
// all rails at once against: WRITE, one direction, the largest size.
func (sp BWSpec) Solo() bool { return sp.Op == verbs.OpWrite && sp.Largest && !sp.Bidir }

// BWResult is a bandwidth point as the client measured it (the sum of
// both directions when bidirectional), with the floor that applies (0:
// none) and why. MTUCause, when set, says that a RoCE path MTU below 4096
// comes from a netdev MTU (floors.Wire.MTUCause): a failure then names
// it and puts its remedy first.
type BWResult struct {
	Gbps, Floor float64
	Why         string
	MTUCause    string
}

// Log is the point's line for the test log.
func (r BWResult) Log(sp BWSpec) string {
	return fmt.Sprintf("%s %d B: %.3f Gb/s (%s)", sp.Name, sp.Size, r.Gbps, r.Why)
}

// BWRemedy is what a bandwidth failure tells the operator to look at.
const BWRemedy = "check the NIC's PCIe link (width/speed), the GPU<->NIC path class (GDR_MAX_PATH), NIC firmware and the fabric; or set GDR_MIN_BW_GBPS"

// JudgeBW records r's floor and fails below it. A failure whose path MTU
// a netdev MTU holds below 4096 says so and names the MTU first: on RoCE
// 1024 B packets leave 92.6 % of the port to payload, 4096 B ones 98 %.
func JudgeBW(sp BWSpec, r BWResult) Judgement {
	var v Judgement
	v.attr("threshold_source", r.Why)
	if r.Floor > 0 {
		v.attr("min_bw_gbit_s", r.Floor)
	}
	if r.Floor > 0 && r.Gbps < r.Floor {
		remedy, cause := BWRemedy, ""
		if r.MTUCause != "" {
			remedy, cause = floors.MTURemedy+"; then "+BWRemedy, "; "+r.MTUCause
		}
		v.fail(true, remedy, "bw_gbit_s", "min_bw_gbit_s", "%s bandwidth at %d B is %.2f Gb/s, below the %.2f Gb/s floor (%s)%s", sp.Name, sp.Size, r.Gbps, r.Floor, r.Why, cause)
	}
	return v
}

// side is what one end does in a point: send (fill the pattern), receive
// (check what the NIC wrote at dst), post the WRs; seed is the pattern it
// sends, peerSeed the one its peer sends.
type side struct {
	sender, receiver, posts bool
	dst                     int
	seed, peerSeed          uint64
}

// plan is the side of an end with role in sp, for the agreed seed. One
// direction: both ends derive the same pattern; both: each its own.
func plan(sp BWSpec, role string, seed uint64) side {
	client := role == "client"
	s := side{sender: sp.Bidir || client == (sp.Op == verbs.OpWrite), posts: client || sp.Bidir}
	s.receiver = sp.Bidir || !s.sender
	if sp.Bidir {
		s.dst = sp.Size
	}
	s.seed = membuf.IterSeed(seed, sp.Size, iterOf(client || !sp.Bidir))
	s.peerSeed = membuf.IterSeed(seed, sp.Size, iterOf(!client || !sp.Bidir))
	return s
}

func iterOf(first bool) int {
	if first {
		return 1
	}
	return 2
}

// want is the pattern the NIC wrote at this side's dst.
func (s side) want(bidir bool) uint64 {
	if bidir {
		return s.peerSeed
	}
	return s.seed // one direction: both sides derived the same seed
}

// txDepth is the WRs a point keeps in flight: GDR_TX_DEPTH within the send
// queue, and for READ within the responder's depth (more only queue).
func txDepth(cfg, sqDepth, rdAtom int, op verbs.Opcode) int {
	td := min(cfg, sqDepth)
	if op == verbs.OpRead {
		td = min(td, rdAtom*8)
	}
	return td
}

// Bandwidth measures one point like ib_write_bw/ib_read_bw on connected
// ends (buffers of at least Size bytes, 2*Size when bidirectional):
// GDR_BW_ITERS WRs after a warm-up, GDR_TX_DEPTH in flight, one signaled
// in CQMod; then the side whose buffer the NIC wrote checks its final
// contents against the sender's pattern (data under load, like perftest's
// --data_validation), through a flushed read-back for GPU memory. It
// records the facts on the ends and returns the client's rate with the
// floor that applies; the caller decides whether to enforce it. Call it
// from the test goroutine (each end's PCIe path is read there, testenv).
func Bandwidth(ends []*rc.End, sp BWSpec) (BWResult, []error) {
	paths := map[*rc.End]pathLimit{}
	for _, e := range ends {
		paths[e] = endPath(e)
	}
	var res BWResult
	errs := rc.Each(ends, func(e *rc.End) error {
		b := bwEnd{e: e, sp: sp, s: plan(sp, e.Role, e.Seed), own: paths[e]}
		if err := b.run(); err != nil {
			return err
		}
		if e.Role == "client" || len(ends) == 1 {
			res = b.result()
		}
		return nil
	})
	return res, errs
}

// bwEnd is one end's run of a point.
type bwEnd struct {
	e     *rc.End
	sp    BWSpec
	s     side
	own   pathLimit
	r     oob.Result // this end's measurement
	peer  oob.Result // the peer's
	total float64    // the point's rate as this end reports it
}

func (b *bwEnd) run() error {
	e, sp := b.e, b.sp
	if err := b.fill(); err != nil {
		return err
	}
	if err := e.Sess.Barrier(sp.step(), 0); err != nil {
		return err
	}
	if err := b.measure(); err != nil {
		return err
	}
	// A side that does not post waits here while the other measures:
	// bound the wait by the transfer at a pessimistic rate, not by
	// heartbeats alone.
	restore := e.Sess.Within(e.WaitBudget(int64(sp.Size) * int64(pointIters(e, sp.Size))))
	peer, err := e.Sess.ExchangeResult(b.r)
	restore()
	if err != nil {
		return err
	}
	b.peer = peer
	if err := b.checkData(); err != nil {
		return err
	}
	b.report()
	return nil
}

// fill writes the pattern where data leaves and poison where it lands.
func (b *bwEnd) fill() error {
	e, sp, s, size := b.e, b.sp, b.s, b.sp.Size
	if s.sender {
		if err := e.FillPatternAt(0, size, s.seed); err != nil {
			return err
		}
	}
	if s.receiver && !sp.Bidir {
		// Poison the transfer and the guard behind it (CheckBufAt reads
		// both).
		if err := e.FillPoison(min(size+64, e.Buf.Len()), rc.Poison); err != nil {
			return err
		}
	}
	if sp.Bidir {
		// The second half receives; fill it with poison behind the
		// pattern of the first.
		return e.Buf.Fill(bidirImage(size, s.seed))
	}
	return nil
}

// bidirImage is a bidirectional end's buffer: its pattern for seed in the
// first size bytes, poison in the second.
func bidirImage(size int, seed uint64) []byte {
	p := make([]byte, 2*size)
	membuf.Pattern(p[:size], seed)
	for i := size; i < len(p); i++ {
		p[i] = rc.Poison
	}
	return p
}

// measure runs the WRs on a posting end (the client, both when
// bidirectional) and sets b.r; the peer's floor needs this host's PCIe
// path too, so its slowest link travels with the result.
func (b *bwEnd) measure() error {
	e := b.e
	b.r = oob.Result{Name: b.sp.step(), OK: true, Values: map[string]float64{"rate": e.RateGbps()}}
	if b.s.posts {
		r, err := b.post()
		if err != nil {
			return err
		}
		b.r = r
	}
	b.r.Values["pcie"], b.r.Msg = b.own.Gbps, b.own.By
	if b.own.readReq > 0 {
		b.r.Values["read_req"] = float64(b.own.readReq)
	}
	// The peer's framing: a VLAN tag on either host's link lengthens the
	// frames the floor counts; a netdev MTU names the path MTU's cause.
	if b.own.wire.VLAN {
		b.r.Values["wire_vlan"] = 1
	}
	if b.own.wire.NetdevMTU > 0 {
		b.r.Values["netdev_mtu"] = float64(b.own.wire.NetdevMTU)
	}
	return nil
}

func (b *bwEnd) post() (oob.Result, error) {
	e, sp, size := b.e, b.sp, b.sp.Size
	iters := pointIters(e, size)
	td := txDepth(e.Cfg.TxDepth, e.QP.SQDepth, e.RdAtom, sp.Op)
	mr, remote := e.MR(), e.Remote()
	laddr, raddr := mr.Addr, remote.Addr
	if sp.Bidir {
		raddr += uint64(size)
	}
	stop := e.Sess.Heartbeat() // the peer waits on the session meanwhile
	defer stop()
	yield := e.YieldAfter(size, min(CQMod, td))
	e.Attr("bw_yield_after_us", stats.US(yield))
	var rtt time.Duration
	var err error
	if sp.Op == verbs.OpRead && !sp.Bidir {
		// The outstanding-read bound of the floor needs this path's
		// round trip at this size (internal/floors.ReadBound).
		if rtt, err = readRTT(e, mr, laddr, raddr, remote.RKey, size); err != nil {
			return oob.Result{}, err
		}
	}
	if sp.Bidir && e.Software {
		if td, err = softwareCap(e, mr, laddr, raddr, remote.RKey, size, td); err != nil {
			return oob.Result{}, err
		}
	}
	el, err := allQPs(e, loopArgs(e, sp.Op, mr, laddr, raddr, remote.RKey, size, td, yield))
	if err != nil {
		return oob.Result{}, err
	}
	return measured(sp.step(), int64(size)*int64(iters)*int64(len(e.QPs)), el, e.RateGbps(), td, rtt), nil
}

// measured is a posting end's result: bytes over el, the port rate, the
// tx depth and, for READ, the round trip of one READ.
func measured(step string, bytes int64, el time.Duration, rate float64, td int, rtt time.Duration) oob.Result {
	r := oob.Result{Name: step, OK: true, Values: map[string]float64{"gbps": stats.Gbps(bytes, el), "mbps": stats.MBps(bytes, el),
		"sec": el.Seconds(), "rate": rate, "td": float64(td)}}
	if rtt > 0 {
		r.Values["read_rtt_ns"] = float64(rtt)
	}
	return r
}

// checkData: the buffer the NIC wrote holds the sender's pattern after the
// last WR (data under load). Both sides of a bidirectional run check and
// report the peer's verdict; one direction settles the receiver's.
func (b *bwEnd) checkData() error {
	e, sp, s := b.e, b.sp, b.s
	var check error
	if s.receiver {
		if sp.Bidir {
			check = e.CheckRegion(s.dst, sp.Size, s.want(true)) // the front half is our own pattern
		} else {
			check = e.CheckBufAt(s.dst, sp.Size, s.want(false))
		}
		if check != nil {
			check = fmt.Errorf("after the %s bandwidth run of %d x %d B: %w", sp.Name, pointIters(e, sp.Size), sp.Size, check)
		}
	}
	if !sp.Bidir {
		if err := e.Settle("bw data", s.receiver, check); err != nil {
			return err
		}
		return check
	}
	pr, err := e.Sess.ExchangeResult(checkResult("bw data", check))
	if err != nil {
		return err
	}
	if check == nil && !pr.OK {
		check = fmt.Errorf("the peer (%s) found after the bidirectional run: %s", e.Sess.Peer(), pr.Msg)
	}
	return check
}

// checkResult is a check's outcome as an out-of-band result.
func checkResult(name string, err error) oob.Result {
	if err != nil {
		return oob.Result{Name: name, OK: false, Msg: err.Error()}
	}
	return oob.Result{Name: name, OK: true}
}

// aggregate is the point's rate as an end with role reports it, and the
// result whose rate and tx depth it shows: the client's (a server shows
// its peer's), and for a bidirectional run the sum of both directions.
func aggregate(role string, bidir bool, r, peer oob.Result) (shown oob.Result, total float64) {
	switch {
	case bidir:
		return r, r.Values["gbps"] + peer.Values["gbps"]
	case role == "server":
		return peer, peer.Values["gbps"]
	}
	return r, r.Values["gbps"]
}

func (b *bwEnd) report() {
	e, sp := b.e, b.sp
	res, total := aggregate(e.Role, sp.Bidir, b.r, b.peer)
	b.total = total
	e.Attr("bw_gbit_s", total)
	if sp.Bidir {
		e.Attr("bw_gbit_s_each", fmt.Sprintf("%s %.3f, peer %.3f", e.Role, b.r.Values["gbps"], b.peer.Values["gbps"]))
	}
	e.Attr("bw_mib_s", res.Values["mbps"])
	e.Attr("size_bytes", sp.Size)
	e.Attr("iters", pointIters(e, sp.Size))
	if n := pointIters(e, sp.Size); n < e.Cfg.BWIters {
		e.Attr("bw_iters_note", fmt.Sprintf("software device: %d of GDR_BW_ITERS=%d WRs of %d B per queue pair (%d B, at most %d B a point: its rate is the host CPU's)",
			n, e.Cfg.BWIters, sp.Size, n*sp.Size, SoftwareBytesPerPoint))
	}
	e.Attr("tx_depth", int(res.Values["td"]))
	e.Attr("qps", len(e.QPs))
	if len(e.QPs) > 1 {
		e.Attr("qps_clock", "one clock: the queue pairs start together after their warm-ups (a start gate); the rate is all bytes over the earliest first post to the latest last completion")
	}
	e.Attr("op", sp.Name)
	e.Attr("mr_path", e.MR().Path)
	e.Attr("data_checked", fmt.Sprintf("final %d B verified at the receiver", sp.Size))
}

// result is the point's rate with its floor (the reporting end: the
// client, or the only end here).
func (b *bwEnd) result() BWResult {
	e, sp := b.e, b.sp
	l, note := layout(b.own, b.peer, e.Loopback(), sp)
	if note != "" {
		e.Attr("peer_read_req_note", note)
	}
	rb := readBound(b.r, e.RdAtom, len(e.QPs), sp.Size)
	if rb != nil {
		e.Attr("read_rtt_us", b.r.Values["read_rtt_ns"]/1e3)
		e.Attr("read_bound_gbit_s", rb.Gbps())
		e.Attr("read_bound", rb.String())
	}
	l.PortGbps = min(e.RateGbps(), b.peer.Values["rate"])
	w, cause := b.wire(e)
	f := e.BWFloor(rc.BWPoint{Size: sp.Size, Largest: sp.Largest, Bidir: sp.Bidir, Read: rb, ReadOp: sp.Op == verbs.OpRead, Wire: w}, l)
	if f.Fraction.Fraction > 0 {
		e.Attr("bw_floor_fraction", f.Fraction.Fraction)
	}
	if src := f.FloorSource(); src != "" {
		e.Attr("floor_source", src)
	}
	if f.Limit.PortShare > 0 {
		e.Attr("wire_payload_fraction", f.Limit.PortShare)
	}
	if f.Limit.Gbps > 0 {
		e.Attr("bw_limit_gbit_s", f.Limit.Gbps)
		e.Attr("bw_limit_source", f.Limit.Limit)
		e.Attr("bw_limit_note", f.Limit.Derived)
	}
	if b.own.notes != "" {
		e.Attr("pcie_path_note", b.own.notes)
	}
	return BWResult{Gbps: b.total, Floor: f.Gbps, Why: f.Why, MTUCause: cause}
}

// wire is the point's framing (nil on a software device, whose rate is
// fictional) with its facts recorded on e, and the reason a RoCE path MTU
// is below 4096 when a netdev MTU explains it (pointWire).
func (b *bwEnd) wire(e *rc.End) (*floors.Wire, string) {
	if e.Software || b.own.wire.LinkLayer == "" {
		return nil, ""
	}
	peerAddr := ""
	if !e.Loopback() {
		peerAddr = e.Sess.Peer()
	}
	w, cause, facts := pointWire(b.own.wire, b.peer, e.Port.ActiveMTU, e.Peer.MTU, e.Role, peerAddr)
	for _, f := range facts {
		e.Attr(f.Key, f.Value)
	}
	return &w, cause
}

// pointWire is a point's framing: this end's, with a VLAN tag when either
// host's link carries one (peer.Values["wire_vlan"]); why its RoCE path
// MTU is below 4096 when a netdev MTU of either host explains it; and the
// facts to record. peerAddr is "" in loopback (one host, one NIC).
func pointWire(own rc.WireFacts, peer oob.Result, activeMTU, peerMTU int, role, peerAddr string) (floors.Wire, string, Judgement) {
	w := own.Wire
	if peer.Values["wire_vlan"] == 1 {
		w.VLAN = true
	}
	var facts Judgement
	facts.attr("wire_overhead_bytes", w.Overhead())
	facts.attr("wire_overhead_note", w.OverheadNote())
	if own.NetdevMTU > 0 {
		facts.attr("netdev_mtu_bytes", own.NetdevMTU)
	}
	if own.Note != "" {
		facts.attr("wire_note", own.Note)
	}
	ends := []floors.MTUEnd{{Who: "this host", ActiveMTU: activeMTU, Netdev: own.Netdev, NetdevMTU: own.NetdevMTU}}
	if peerAddr != "" {
		ends[0].Who = "this host (" + role + ")"
		ends = append(ends, floors.MTUEnd{Who: "the peer (" + peerAddr + ")", ActiveMTU: peerMTU, NetdevMTU: int(peer.Values["netdev_mtu"])})
	}
	cause, _ := w.MTUCause(ends)
	if cause != "" {
		facts.attr("wire_mtu_note", cause)
	}
	return w, cause, facts
}

// peerByMax bounds the peer's words before they reach a message.
const peerByMax = 200

// layout is the paths and read request sizes of a point's floor: this
// host's own in loopback; on two hosts both, the source's first (for
// one-way READ the NIC reads the peer's buffer: the peer's path is the
// source). note says what was assumed of a peer's read request size.
func layout(own pathLimit, peer oob.Result, loopback bool, sp BWSpec) (l floors.Layout, note string) {
	l.Paths, l.ReadReq = []floors.Path{{own.Limit}}, []int{own.readReq}
	if loopback {
		return l, ""
	}
	by := peer.Msg
	if len(by) > peerByMax {
		by = clip.QuoteN(by, peerByMax)
	}
	peerPath := floors.Path{{Gbps: peer.Values["pcie"], By: by}}
	peerReq, err := floors.ReadReqOf(peer.Values["read_req"])
	if err != nil {
		note = fmt.Sprintf("from the peer: %v; %d B assumed", err, floors.AssumedMaxReadReq)
	}
	if sp.Op == verbs.OpRead && !sp.Bidir {
		l.Paths, l.ReadReq = []floors.Path{peerPath, l.Paths[0]}, []int{peerReq, own.readReq}
		return l, note
	}
	l.Paths, l.ReadReq = append(l.Paths, peerPath), append(l.ReadReq, peerReq)
	return l, note
}

// readBound is the outstanding-read bound of a point whose result r holds
// a READ round trip (nil otherwise).
func readBound(r oob.Result, rdAtom, qps, size int) *floors.ReadBound {
	ns := r.Values["read_rtt_ns"]
	if ns <= 0 {
		return nil
	}
	return &floors.ReadBound{Depth: rdAtom, QPs: qps, Size: size, RTT: time.Duration(ns)}
}

// pathLimit is one end's PCIe path for the floors (rc.End.PathLimit), its
// NIC's read request size (rc.End.NICReadReq; 0 unknown) and its port's
// framing (rc.End.WireFacts).
type pathLimit struct {
	floors.Limit
	notes   string
	readReq int
	wire    rc.WireFacts
}

func endPath(e *rc.End) pathLimit {
	l, ok, notes, err := e.PathLimit()
	p := pathOf(l, ok, notes, err, e.NICReadReq())
	if !e.Software {
		p.wire = e.WireFacts()
	}
	return p
}

// pathOf keeps a path only when it is known and was read without error;
// an error becomes a note.
func pathOf(l floors.Limit, ok bool, notes []string, err error, readReq int) pathLimit {
	if err != nil {
		notes = append(notes, fmt.Sprintf("PCIe path not counted: %v", err))
	}
	if !ok || err != nil {
		l = floors.Limit{}
	}
	return pathLimit{Limit: l, notes: strings.Join(notes, "; "), readReq: readReq}
}
