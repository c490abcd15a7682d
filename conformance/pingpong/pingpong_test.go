//go:build rdma

package pingpong

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// Data checks move these sizes (odd ones catch length handling), each a few
// iterations with a fresh pattern, so they stay quick under emulation.
var verifySizes = []int{1, 4093, 65536, 1 << 20}

const (
	verifyBuf = 1<<20 + 4096 // largest verify size plus a guard
	poison    = 0xa5
	latSize   = 2 // ib_write_lat's default message size
	latRegion = 4096
)

func verifyIters(e *end) int { return min(max(e.cfg.Iters, 1), 4) }

// PP-01: the RDMA device and port this host uses, with its GID.
func TestPP01Device(t *testing.T) {
	testenv.Req(t, "PP-01")
	ends := connect(t, 4096)
	errs := each(ends, func(e *end) error {
		e.attr("port_state", e.port.StateName)
		e.attr("active_mtu", e.port.ActiveMTU)
		e.attr("lid", e.port.LID)
		e.attr("gid_index", e.gid.Index)
		e.attr("gid", e.gid.String())
		if e.gid.Type != "" {
			e.attr("gid_type", e.gid.Type)
		}
		if e.gid.Netdev != "" {
			e.attr("netdev", e.gid.Netdev)
		}
		e.attr("rate_gbps", e.rateGbps())
		e.attr("software", e.software)
		e.attr("fw_ver", e.ctx.Attr().FWVer)
		// A fact for the memreg area's dma-buf path, not a check here.
		if d, err := e.pd.ProbeDmabuf(); err != nil {
			e.attr("dmabuf_mr", "probe failed: "+err.Error())
		} else {
			e.attr("dmabuf_mr", fmt.Sprintf("supported=%v (%s)", d.Supported, d.Reason))
		}
		if e.port.LinkLayer == "Ethernet" && !e.gid.IsRoCEv2() && e.gid.Type != "" {
			e.attr("warning", fmt.Sprintf("GID %d is %s, not RoCE v2: RoCE v1 is not routable", e.gid.Index, e.gid.Type))
		}
		if e.port.LinkLayer == "InfiniBand" && e.port.LID == 0 {
			return fmt.Errorf("%s port %d is ACTIVE on InfiniBand but has LID 0: start a subnet manager (opensm)", e.dev, e.cfg.IBPort)
		}
		return nil
	})
	failIf(t, ends, errs)
	report(t, ends)
}

// PP-02: an RC connection reaches RTS on both ends and carries a message.
func TestPP02Connect(t *testing.T) {
	testenv.Req(t, "PP-02")
	ends := connect(t, 4096)
	errs := each(ends, func(e *end) error {
		// A zero-length SEND proves the path, not just the state machine.
		if e.role == "server" {
			if err := e.qp.PostRecv(verbs.RecvWR{ID: 1}); err != nil {
				return err
			}
		}
		if err := e.sess.Barrier("recv posted", 0); err != nil {
			return err
		}
		if e.role == "client" {
			if err := e.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpSend, Signaled: true}); err != nil {
				return err
			}
			if _, err := e.scq.Wait(1, "zero-length SEND", e.cfg.Timeout); err != nil {
				return err
			}
		} else {
			wc, err := e.rcq.Wait(1, "receive of the zero-length SEND", e.cfg.Timeout)
			if err != nil {
				return err
			}
			if wc[0].Opcode != verbs.WCRecv || wc[0].ByteLen != 0 {
				return fmt.Errorf("receive completion has opcode %d and %d bytes, want RECV and 0", wc[0].Opcode, wc[0].ByteLen)
			}
		}
		e.attr("qpn", e.qp.Num)
		e.attr("peer_qpn", e.peer.QPN)
		return e.settle("connect", false, nil)
	})
	failIf(t, ends, errs)
	report(t, ends)
}

// transfer is one data check: the client moves size bytes of iteration i's
// pattern with op; the receiving side compares the whole transfer.
type transfer func(e *end, size, i int) error

func runVerify(t *testing.T, id string, fn transfer) {
	testenv.Req(t, id)
	verifyAll(t, connect(t, verifyBuf), fn)
}

// verifyAll runs fn over verifySizes on connected ends (buffers of at least
// verifyBuf bytes) and fails t when any transfer is wrong.
func verifyAll(t *testing.T, ends []*end, fn transfer) {
	errs := each(ends, func(e *end) error {
		n := 0
		for _, size := range verifySizes {
			for i := 0; i < verifyIters(e); i++ {
				if err := fn(e, size, i); err != nil {
					return fmt.Errorf("%d bytes, iteration %d: %w", size, i, err)
				}
				n++
			}
		}
		e.attr("checked_transfers", n)
		e.attr("sizes", joinInts(verifySizes))
		return nil
	})
	failIf(t, ends, errs)
	report(t, ends)
}

// checkBuf reads back size bytes plus the guard and compares with the pattern.
func (e *end) checkBuf(size int, seed uint64) error {
	got := make([]byte, min(size+64, e.buf.Len()))
	if err := e.buf.ReadBack(got); err != nil {
		return fmt.Errorf("reading back the %s buffer: %w", e.buf.Kind(), err)
	}
	want := make([]byte, size)
	membuf.Pattern(want, seed)
	if err := membuf.Compare(got[:size], want, poison); err != nil {
		return err
	}
	return membuf.Guard(got, size, poison)
}

// chunks splits [0,size) into up to 4 WRs, so the list is posted chained with
// only the last one signaled (RC completes them in order).
func chunks(size int) [][2]int {
	n := min(4, size)
	var out [][2]int
	step := size / n
	for off := 0; off < size; off += step {
		l := min(step, size-off)
		if len(out) == n-1 {
			l = size - off
		}
		out = append(out, [2]int{off, l})
		if len(out) == n {
			break
		}
	}
	return out
}

// PP-03: RDMA WRITE delivers the data intact.
func TestPP03Write(t *testing.T) { runVerify(t, "PP-03", writeCheck) }

// writeCheck is one RDMA WRITE data check: the client writes the pattern in
// chained WRs, the server compares it (a device-to-host copy for GPU memory).
func writeCheck(e *end, size, i int) error {
	seed := membuf.IterSeed(e.seed, size, i)
	if e.role == "server" {
		if err := e.fillPoison(size+64, poison); err != nil {
			return err
		}
	} else {
		if err := e.fillPattern(size, seed); err != nil {
			return err
		}
	}
	if err := e.sess.Barrier("ready", i); err != nil {
		return err
	}
	if e.role == "client" {
		cs := chunks(size)
		wrs := make([]verbs.SendWR, len(cs))
		for k, c := range cs {
			wrs[k] = verbs.SendWR{ID: uint64(k), Op: verbs.OpWrite, LocalAddr: e.mr.Addr + uint64(c[0]), Len: uint32(c[1]), LKey: e.mr.LKey,
				RemoteAddr: e.peer.Addr + uint64(c[0]), RKey: e.peer.RKey, Signaled: k == len(cs)-1}
		}
		if err := e.qp.PostSend(wrs...); err != nil {
			return err
		}
		if _, err := e.scq.Wait(1, "RDMA WRITE", e.cfg.Timeout); err != nil {
			return err
		}
	}
	// The client's completion means the data is placed at the server.
	restore := e.sess.Within(e.waitBudget(int64(size)))
	err := e.sess.Barrier("written", i)
	restore()
	if err != nil {
		return err
	}
	var local error
	if e.role == "server" {
		local = e.checkBuf(size, seed)
	}
	return e.settle("write check", e.role == "server", local)
}

// PP-04: RDMA WRITE_WITH_IMM delivers the data and the immediate value.
func TestPP04WriteImm(t *testing.T) {
	runVerify(t, "PP-04", func(e *end, size, i int) error {
		seed := membuf.IterSeed(e.seed, size, i)
		imm := uint32(seed)
		if e.role == "server" {
			if err := e.fillPoison(size+64, poison); err != nil {
				return err
			}
			if err := e.qp.PostRecv(verbs.RecvWR{ID: uint64(i)}); err != nil {
				return err
			}
		} else {
			if err := e.fillPattern(size, seed); err != nil {
				return err
			}
		}
		if err := e.sess.Barrier("ready", i); err != nil {
			return err
		}
		var local error
		if e.role == "client" {
			if err := e.qp.PostSend(verbs.SendWR{ID: uint64(i), Op: verbs.OpWriteImm, LocalAddr: e.mr.Addr, Len: uint32(size), LKey: e.mr.LKey,
				RemoteAddr: e.peer.Addr, RKey: e.peer.RKey, Imm: imm, Signaled: true}); err != nil {
				return err
			}
			if _, err := e.scq.Wait(1, "RDMA WRITE_WITH_IMM", e.cfg.Timeout); err != nil {
				return err
			}
		} else {
			// The receive completion is the notification: no out-of-band step.
			wc, err := e.rcq.Wait(1, "RECV_RDMA_WITH_IMM completion", e.waitBudget(int64(size)))
			if err != nil {
				return err
			}
			w := wc[0]
			switch {
			case w.Opcode != verbs.WCRecvWriteImm:
				local = fmt.Errorf("receive completion opcode %d, want RECV_RDMA_WITH_IMM (%d)", w.Opcode, verbs.WCRecvWriteImm)
			case !w.HasImm || w.Imm != imm:
				local = fmt.Errorf("immediate value 0x%08x (present %v), want 0x%08x", w.Imm, w.HasImm, imm)
			case int(w.ByteLen) != size:
				local = fmt.Errorf("completion byte_len %d, want %d", w.ByteLen, size)
			default:
				local = e.checkBuf(size, seed)
			}
		}
		return e.settle("write-imm check", e.role == "server", local)
	})
}

// PP-05: RDMA READ fetches the peer's data intact.
func TestPP05Read(t *testing.T) {
	runVerify(t, "PP-05", func(e *end, size, i int) error {
		seed := membuf.IterSeed(e.seed, size, i)
		if e.role == "server" {
			if err := e.fillPattern(size, seed); err != nil {
				return err
			}
		} else if err := e.fillPoison(size+64, poison); err != nil {
			return err
		}
		if err := e.sess.Barrier("ready", i); err != nil {
			return err
		}
		var local error
		if e.role == "client" {
			cs := chunks(size)
			wrs := make([]verbs.SendWR, len(cs))
			for k, c := range cs {
				wrs[k] = verbs.SendWR{ID: uint64(k), Op: verbs.OpRead, LocalAddr: e.mr.Addr + uint64(c[0]), Len: uint32(c[1]), LKey: e.mr.LKey,
					RemoteAddr: e.peer.Addr + uint64(c[0]), RKey: e.peer.RKey, Signaled: k == len(cs)-1}
			}
			if err := e.qp.PostSend(wrs...); err != nil {
				return err
			}
			if _, err := e.scq.Wait(1, "RDMA READ", e.waitBudget(int64(size))); err != nil {
				return err
			}
			local = e.checkBuf(size, seed)
		}
		restore := e.sess.Within(e.waitBudget(int64(size)))
		defer restore()
		return e.settle("read check", e.role == "client", local)
	})
}

// PP-06: SEND/RECV delivers the message intact with the right length.
func TestPP06SendRecv(t *testing.T) {
	runVerify(t, "PP-06", func(e *end, size, i int) error {
		seed := membuf.IterSeed(e.seed, size, i)
		if e.role == "server" {
			if err := e.fillPoison(size+64, poison); err != nil {
				return err
			}
			if err := e.qp.PostRecv(verbs.RecvWR{ID: uint64(i), LocalAddr: e.mr.Addr, Len: uint32(e.mr.Len), LKey: e.mr.LKey}); err != nil {
				return err
			}
		} else {
			if err := e.fillPattern(size, seed); err != nil {
				return err
			}
		}
		if err := e.sess.Barrier("ready", i); err != nil {
			return err
		}
		var local error
		if e.role == "client" {
			if err := e.qp.PostSend(verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, LocalAddr: e.mr.Addr, Len: uint32(size), LKey: e.mr.LKey,
				Signaled: true, Inline: size <= e.qp.MaxInline}); err != nil {
				return err
			}
			if _, err := e.scq.Wait(1, "SEND", e.cfg.Timeout); err != nil {
				return err
			}
		} else {
			wc, err := e.rcq.Wait(1, "RECV completion", e.waitBudget(int64(size)))
			if err != nil {
				return err
			}
			switch w := wc[0]; {
			case w.Opcode != verbs.WCRecv:
				local = fmt.Errorf("receive completion opcode %d, want RECV (%d)", w.Opcode, verbs.WCRecv)
			case int(w.ByteLen) != size:
				local = fmt.Errorf("completion byte_len %d, want %d", w.ByteLen, size)
			default:
				local = e.checkBuf(size, seed)
			}
		}
		return e.settle("send check", e.role == "server", local)
	})
}

// PP-07: small RDMA WRITE latency, measured like ib_write_lat.
func TestPP07Latency(t *testing.T) {
	testenv.Req(t, "PP-07")
	ends := connect(t, 2*latRegion)
	t.Run("WRITE/"+strconv.Itoa(latSize), func(t *testing.T) {
		testenv.Req(t, "PP-07")
		lat, threshold, thrWhy := latency(t, ends, false)
		testenv.Attr(t, "threshold", thrWhy)
		if threshold > 0 && stats.US(lat.P50) > threshold {
			testenv.Failf(t, "check the path between NIC and memory (PCIe topology, GDR_MAX_PATH), NIC firmware and the fabric; or set GDR_MAX_LAT_US",
				"WRITE %d B latency p50 %.2f us is above the %.2f us ceiling (%s)", latSize, stats.US(lat.P50), threshold, thrWhy)
		}
	})
}

// latency measures latSize-byte RDMA WRITE round trips on connected ends
// (buffers of at least 2*latRegion bytes), reports them on t and returns the
// client's numbers with the ceiling that applies; the caller decides whether
// to enforce it. forceImm waits on WRITE_WITH_IMM completions even on host
// memory, so host and GPU runs are timed the same way.
func latency(t *testing.T, ends []*end, forceImm bool) (lat stats.Latency, threshold float64, thrWhy string) {
	errs := each(ends, func(e *end) error {
		// Host memory: poll the last byte like ib_write_lat. Other kinds
		// cannot be polled by the CPU: wait on WRITE_WITH_IMM completions.
		useImm := forceImm || !e.host() || e.peer.Mem != string(membuf.Host)
		if err := e.fillPoison(2*latRegion, 0); err != nil {
			return err
		}
		if err := e.sess.Barrier("lat start", 0); err != nil {
			return err
		}
		iters := e.cfg.Iters + 1 // n+1 posts give n round trips
		stamps, err := e.qp.Latency(verbs.LatArgs{SendCQ: e.scq, RecvCQ: e.rcq, Local: e.mr, SendAddr: e.mr.Addr,
			PollAddr: e.mr.Addr + latRegion + latSize - 1, RemoteAddr: e.peer.Addr + latRegion, RKey: e.peer.RKey,
			Size: latSize, Iters: iters, First: e.role == "client", UseImm: useImm, Timeout: e.cfg.Timeout})
		if err != nil {
			return err
		}
		rt := make([]time.Duration, len(stamps)-1)
		for i := range rt {
			rt[i] = time.Duration(stamps[i+1] - stamps[i])
		}
		l, err := stats.Summarize(rt, true)
		if err != nil {
			return err
		}
		// Both sides report the client's numbers (the side that started).
		r, err := e.sess.ExchangeResult(resultOf("latency", l))
		if err != nil {
			return err
		}
		if e.role == "server" {
			l = latencyOf(r)
		}
		e.attr("lat_us_p50", stats.US(l.P50))
		e.attr("lat_us_p99", stats.US(l.P99))
		e.attr("lat_us_p999", stats.US(l.P999))
		e.attr("lat_us_min", stats.US(l.Min))
		e.attr("lat_us_max", stats.US(l.Max))
		e.attr("iters", l.N)
		e.attr("size", latSize)
		e.attr("lat_mode", map[bool]string{true: "write_with_imm+cq", false: "write+poll_last_byte"}[useImm])
		if e.role == "client" || len(ends) == 1 {
			lat = l
			threshold, thrWhy = e.latThreshold()
		}
		return nil
	})
	failIf(t, ends, errs)
	report(t, ends)
	t.Logf("WRITE %d B latency (one way, us): p50 %.2f p99 %.2f p99.9 %.2f min %.2f max %.2f over %d round trips",
		latSize, stats.US(lat.P50), stats.US(lat.P99), stats.US(lat.P999), stats.US(lat.Min), stats.US(lat.Max), lat.N)
	return lat, threshold, thrWhy
}

func resultOf(name string, l stats.Latency) oobResult {
	return oobResult{Name: name, OK: true, Values: map[string]float64{
		"p50": float64(l.P50), "p99": float64(l.P99), "p999": float64(l.P999), "min": float64(l.Min), "max": float64(l.Max), "n": float64(l.N)}}
}

func latencyOf(r oobResult) stats.Latency {
	v := r.Values
	return stats.Latency{P50: time.Duration(v["p50"]), P99: time.Duration(v["p99"]), P999: time.Duration(v["p999"]),
		Min: time.Duration(v["min"]), Max: time.Duration(v["max"]), N: int(v["n"])}
}

func (e *end) latThreshold() (float64, string) {
	switch {
	case e.cfg.MaxLatUS > 0:
		return e.cfg.MaxLatUS, fmt.Sprintf("GDR_MAX_LAT_US=%g", e.cfg.MaxLatUS)
	case e.software:
		return 0, fmt.Sprintf("no threshold: software device (%s), its timing is not a NIC's", e.swWhy)
	}
	return defaultMaxLatUS, fmt.Sprintf("default ceiling %.0f us for a hardware NIC (set GDR_MAX_LAT_US to change)", defaultMaxLatUS)
}

// PP-08: RDMA WRITE and READ bandwidth over the size sweep, like ib_write_bw
// and ib_read_bw: tx depth 128, one signaled WR per 100.
func TestPP08Bandwidth(t *testing.T) {
	testenv.Req(t, "PP-08")
	cfg := testenv.Config(t)
	maxSize := maxBWSize(cfg.BWSizes)
	ends := connect(t, maxSize)
	largest := maxSize
	for _, op := range []verbs.Opcode{verbs.OpWrite, verbs.OpRead} {
		name := map[verbs.Opcode]string{verbs.OpWrite: "WRITE", verbs.OpRead: "READ"}[op]
		for _, size := range cfg.BWSizes {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				testenv.Req(t, "PP-08")
				bandwidth(t, ends, op, name, size, size == largest)
			})
		}
	}
}

// maxBWSize is the largest size of GDR_BW_SIZES, where thresholds apply.
func maxBWSize(sizes []int) int {
	m := 0
	for _, s := range sizes {
		m = max(m, s)
	}
	return m
}

// bandwidth measures op at size and fails t below the floor that applies.
func bandwidth(t *testing.T, ends []*end, op verbs.Opcode, name string, size int, largest bool) {
	gbps, threshold, thrWhy := measureBW(t, ends, op, name, size, largest)
	testenv.Attr(t, "threshold", thrWhy)
	if threshold > 0 && gbps < threshold {
		testenv.Failf(t, "check the NIC's PCIe link (width/speed), the GPU<->NIC path class (GDR_MAX_PATH), NIC firmware and the fabric; or set GDR_MIN_BW_GBPS",
			"%s bandwidth at %d B is %.2f Gb/s, below the %.2f Gb/s floor (%s)", name, size, gbps, threshold, thrWhy)
	}
}

// measureBW runs op at size on connected ends (buffers of at least size
// bytes), reports it on t and returns the client's Gb/s with the floor that
// applies; the caller decides whether to enforce it.
func measureBW(t *testing.T, ends []*end, op verbs.Opcode, name string, size int, largest bool) (gbps, threshold float64, thrWhy string) {
	errs := each(ends, func(e *end) error {
		iters := e.cfg.Iters
		step := fmt.Sprintf("bw %s %d", name, size)
		if err := e.sess.Barrier(step, 0); err != nil {
			return err
		}
		var r oobResult
		if e.role == "client" {
			td := min(txDepth, e.qp.SQDepth)
			if op == verbs.OpRead {
				td = min(td, e.rdAtom*8) // reads beyond the responder's depth only queue
			}
			stop := e.sess.Heartbeat() // the server waits on the session meanwhile
			el, err := e.qp.Bandwidth(verbs.BWArgs{CQ: e.scq, Op: op, Local: e.mr, LocalAddr: e.mr.Addr, RemoteAddr: e.peer.Addr,
				RKey: e.peer.RKey, Size: size, Iters: iters, TxDepth: td, CQMod: min(cqMod, td), Timeout: e.cfg.Timeout})
			stop()
			if err != nil {
				return err
			}
			bytes := int64(size) * int64(iters)
			r = oobResult{Name: step, OK: true, Values: map[string]float64{"gbps": stats.Gbps(bytes, el), "mbps": stats.MBps(bytes, el),
				"sec": el.Seconds(), "rate": e.rateGbps()}}
		} else {
			r = oobResult{Name: step, OK: true, Values: map[string]float64{"rate": e.rateGbps()}}
		}
		peer, err := e.sess.ExchangeResult(r)
		if err != nil {
			return err
		}
		res, peerRate := r, peer.Values["rate"]
		if e.role == "server" {
			res = peer
		}
		e.attr("bw_gbps", res.Values["gbps"])
		e.attr("bw_mbps", res.Values["mbps"])
		e.attr("size", size)
		e.attr("iters", iters)
		e.attr("op", name)
		if e.role == "client" || len(ends) == 1 {
			gbps = res.Values["gbps"]
			threshold, thrWhy = e.bwThreshold(min(e.rateGbps(), peerRate), largest)
		}
		return nil
	})
	failIf(t, ends, errs)
	report(t, ends)
	t.Logf("%s %d B: %.3f Gb/s (%s)", name, size, gbps, thrWhy)
	return gbps, threshold, thrWhy
}

func (e *end) bwThreshold(rate float64, largest bool) (float64, string) {
	switch {
	case !largest:
		return 0, "reported only: thresholds apply at the largest size of GDR_BW_SIZES"
	case e.cfg.MinBWGbps > 0:
		return e.cfg.MinBWGbps, fmt.Sprintf("GDR_MIN_BW_GBPS=%g", e.cfg.MinBWGbps)
	case e.software:
		return 0, fmt.Sprintf("no threshold: software device (%s), its port rate is fictional", e.swWhy)
	case rate <= 0:
		return 0, "no threshold: the port rate is unknown"
	}
	return bwFraction * rate, fmt.Sprintf("%.0f%% of the %.0f Gb/s port rate", bwFraction*100, rate)
}
