//go:build rdma

package pingpong

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// Data checks move these sizes (odd ones catch length handling), each a few
// iterations with a fresh pattern, so they stay quick under emulation.
var verifySizes = []int{1, 4093, 65536, 1 << 20}

const (
	verifyBuf = 1<<20 + 4096 // largest verify size plus a guard
	poison    = rc.Poison
	latSize   = 2 // ib_write_lat's default message size
	latRegion = 4096
)

func verifyIters(e *rc.End) int { return min(max(e.Cfg.Iters, 1), 4) }

// PP-01: the RDMA device and port this host uses, with its GID.
func TestPP01Device(t *testing.T) { perRail(t, "PP-01", device) }

func device(t *testing.T, r *rails.Rail) {
	ends := connect(t, r, 4096, nil, "")
	errs := rc.Each(ends, func(e *rc.End) error {
		e.Attr("port_state", e.Port.StateName)
		e.Attr("active_mtu", e.Port.ActiveMTU)
		e.Attr("lid", e.Port.LID)
		e.Attr("gid_index", e.GID.Index)
		e.Attr("gid", e.GID.Addr.String())
		if e.GID.Type != "" {
			e.Attr("gid_type", e.GID.Type)
		}
		if e.GID.Ndev != "" {
			e.Attr("netdev", e.GID.Ndev)
		}
		e.Attr("rate_gbit_s", e.RateGbps())
		e.Attr("software", e.Software)
		e.Attr("fw_ver", e.Ctx.Attr().FWVer)
		e.Attr("max_qp_rd_atom", e.Ctx.Attr().MaxQPRdAtom)
		e.Attr("max_qp_init_rd_atom", e.Ctx.Attr().MaxQPInitRdAtom)
		// A fact for the memreg area's dma-buf path, not a check here.
		if d, err := e.PD.ProbeDmabuf(); err != nil {
			e.Attr("dmabuf_mr", "probe failed: "+err.Error())
		} else {
			e.Attr("dmabuf_mr", fmt.Sprintf("supported=%v (%s)", d.Supported, d.Reason))
		}
		if e.Port.LinkLayer == "Ethernet" && e.GID.Type != "RoCE v2" && e.GID.Type != "" {
			e.Attr("warning", fmt.Sprintf("GID %d is %s, not RoCE v2: RoCE v1 is not routable", e.GID.Index, e.GID.Type))
		}
		if e.Port.LinkLayer == "InfiniBand" && e.Port.LID == 0 {
			return fmt.Errorf("%s port %d is ACTIVE on InfiniBand but has LID 0: start a subnet manager (opensm)", e.Dev, e.Cfg.IBPort)
		}
		return nil
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
}

// PP-02: an RC connection reaches RTS on both ends and carries a message.
func TestPP02Connect(t *testing.T) { perRail(t, "PP-02", connectCheck) }

func connectCheck(t *testing.T, r *rails.Rail) {
	ends := connect(t, r, 4096, nil, "")
	errs := rc.Each(ends, func(e *rc.End) error {
		// A zero-length SEND proves the path, not just the state machine.
		if e.Role == "server" {
			if err := e.QP.PostRecv(verbs.RecvWR{ID: 1}); err != nil {
				return err
			}
		}
		if err := e.Sess.Barrier("recv posted", 0); err != nil {
			return err
		}
		if e.Role == "client" {
			if err := e.QP.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpSend, Signaled: true}); err != nil {
				return err
			}
			if _, err := e.SCQ.Wait(1, "zero-length SEND", e.Timeout()); err != nil {
				return err
			}
		} else {
			wc, err := e.RCQ.Wait(1, "receive of the zero-length SEND", e.Timeout())
			if err != nil {
				return err
			}
			if wc[0].Opcode != verbs.WCRecv || wc[0].ByteLen != 0 {
				return fmt.Errorf("receive completion has opcode %d and %d bytes, want RECV and 0", wc[0].Opcode, wc[0].ByteLen)
			}
		}
		e.Attr("qpn", e.QP.Num)
		e.Attr("peer_qpn", e.Peer.QPN)
		return e.Settle("connect", false, nil)
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
}

// transfer is one data check: the client moves size bytes of the pattern
// for seed with some opcode between its registration local and the peer's
// registration remote; the receiving side compares the whole transfer.
type transfer func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, seed uint64, size, i int) error

// runVerify runs a data check on every rail.
func runVerify(t *testing.T, id string, fn transfer) {
	perRail(t, id, func(t *testing.T, r *rails.Rail) {
		verifyAll(t, connect(t, r, verifyBuf, nil, ""), fn)
	})
}

// verifyAll runs fn over verifySizes on connected ends (buffers of at least
// verifyBuf bytes), once per pair of registrations (rc.End.Rounds: GPU
// memory registered through both peermem and dma-buf carries data through
// each), and fails t when any transfer is wrong.
func verifyAll(t *testing.T, ends []*rc.End, fn transfer) {
	errs := rc.Each(ends, func(e *rc.End) error {
		n := 0
		var rounds []string
		for r := 0; r < e.Rounds(); r++ {
			local, remote := e.Round(r)
			for _, size := range verifySizes {
				for i := 0; i < verifyIters(e); i++ {
					seed := membuf.IterSeed(e.Seed+uint64(r)*0x100000001, size, i)
					if err := fn(e, local, remote, seed, size, i); err != nil {
						return fmt.Errorf("%d bytes, iteration %d, local %s MR -> peer %s MR: %w", size, i, local.Path, remote.Path, err)
					}
					n++
				}
			}
			rounds = append(rounds, local.Path+"->"+remote.Path)
		}
		e.Attr("mr_paths", strings.Join(rounds, ", ")) // one per round, in order
		e.Attr("checked_transfers", n)
		e.Attr("sizes_bytes", rc.JoinInts(verifySizes))
		return nil
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
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

// chained is size bytes of op as up to 4 chained WRs, the last one signaled.
func chained(op verbs.Opcode, local *verbs.MR, remote oob.RemoteMR, size int) []verbs.SendWR {
	cs := chunks(size)
	wrs := make([]verbs.SendWR, len(cs))
	for k, c := range cs {
		wrs[k] = wr(uint64(k), op, local, remote.Addr, remote.RKey, c[0], c[1], k == len(cs)-1)
	}
	return wrs
}

// PP-03: RDMA WRITE delivers the data intact.
func TestPP03Write(t *testing.T) { runVerify(t, "PP-03", writeCheck) }

// writeCheck is one RDMA WRITE data check: the client writes the pattern in
// chained WRs, the server compares it (a device-to-host copy for GPU memory,
// after the flush of the NIC's writes).
func writeCheck(e *rc.End, local *verbs.MR, remote oob.RemoteMR, seed uint64, size, i int) error {
	if e.Role == "server" {
		if err := e.FillPoison(size+64, poison); err != nil {
			return err
		}
	} else if err := e.FillPattern(size, seed); err != nil {
		return err
	}
	if err := e.Sess.Barrier("ready", i); err != nil {
		return err
	}
	if e.Role == "client" {
		if err := e.QP.PostSend(chained(verbs.OpWrite, local, remote, size)...); err != nil {
			return err
		}
		if _, err := e.SCQ.Wait(1, "RDMA WRITE", e.WaitBudget(int64(size))); err != nil {
			return err
		}
	}
	// The client's completion means the data is placed at the server.
	restore := e.Sess.Within(e.WaitBudget(int64(size)))
	err := e.Sess.Barrier("written", i)
	restore()
	if err != nil {
		return err
	}
	var check error
	if e.Role == "server" {
		check = e.CheckBuf(size, seed)
	}
	return e.Settle("write check", e.Role == "server", check)
}

// PP-04: RDMA WRITE_WITH_IMM delivers the data and the immediate value.
func TestPP04WriteImm(t *testing.T) {
	runVerify(t, "PP-04", func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, seed uint64, size, i int) error {
		imm := uint32(seed)
		if e.Role == "server" {
			if err := e.FillPoison(size+64, poison); err != nil {
				return err
			}
			if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(i)}); err != nil {
				return err
			}
		} else if err := e.FillPattern(size, seed); err != nil {
			return err
		}
		if err := e.Sess.Barrier("ready", i); err != nil {
			return err
		}
		var check error
		if e.Role == "client" {
			w := wr(uint64(i), verbs.OpWriteImm, local, remote.Addr, remote.RKey, 0, size, true)
			w.Imm = imm
			if err := e.QP.PostSend(w); err != nil {
				return err
			}
			if _, err := e.SCQ.Wait(1, "RDMA WRITE_WITH_IMM", e.WaitBudget(int64(size))); err != nil {
				return err
			}
		} else {
			// The receive completion is the notification: no out-of-band step.
			wc, err := e.RCQ.Wait(1, "RECV_RDMA_WITH_IMM completion", e.WaitBudget(int64(size)))
			if err != nil {
				return err
			}
			switch w := wc[0]; {
			case w.Opcode != verbs.WCRecvWriteImm:
				check = fmt.Errorf("receive completion opcode %d, want RECV_RDMA_WITH_IMM (%d)", w.Opcode, verbs.WCRecvWriteImm)
			case !w.HasImm || w.Imm != imm:
				check = fmt.Errorf("immediate value 0x%08x (present %v), want 0x%08x", w.Imm, w.HasImm, imm)
			case int(w.ByteLen) != size:
				check = fmt.Errorf("completion byte_len %d, want %d", w.ByteLen, size)
			default:
				check = e.CheckBuf(size, seed)
			}
		}
		return e.Settle("write-imm check", e.Role == "server", check)
	})
}

// PP-05: RDMA READ fetches the peer's data intact.
func TestPP05Read(t *testing.T) {
	runVerify(t, "PP-05", func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, seed uint64, size, i int) error {
		if e.Role == "server" {
			if err := e.FillPattern(size, seed); err != nil {
				return err
			}
		} else if err := e.FillPoison(size+64, poison); err != nil {
			return err
		}
		if err := e.Sess.Barrier("ready", i); err != nil {
			return err
		}
		var check error
		if e.Role == "client" {
			if err := e.QP.PostSend(chained(verbs.OpRead, local, remote, size)...); err != nil {
				return err
			}
			if _, err := e.SCQ.Wait(1, "RDMA READ", e.WaitBudget(int64(size))); err != nil {
				return err
			}
			// The NIC wrote the client's buffer: CheckBuf reads it back
			// through a flushed device-to-host copy for GPU memory.
			check = e.CheckBuf(size, seed)
		}
		restore := e.Sess.Within(e.WaitBudget(int64(size)))
		defer restore()
		return e.Settle("read check", e.Role == "client", check)
	})
}

// PP-06: SEND/RECV delivers the message intact with the right length. A
// small SEND from host memory goes inline (the provider copies it); from GPU
// memory it never does (harness/verbs decides from the MR).
func TestPP06SendRecv(t *testing.T) {
	runVerify(t, "PP-06", func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, seed uint64, size, i int) error {
		if e.Role == "server" {
			if err := e.FillPoison(size+64, poison); err != nil {
				return err
			}
			if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(i), Local: local, LocalAddr: local.Addr, Len: uint32(local.Len)}); err != nil {
				return err
			}
		} else if err := e.FillPattern(size, seed); err != nil {
			return err
		}
		if err := e.Sess.Barrier("ready", i); err != nil {
			return err
		}
		var check error
		if e.Role == "client" {
			if err := e.QP.PostSend(wr(uint64(i), verbs.OpSend, local, 0, 0, 0, size, true)); err != nil {
				return err
			}
			if _, err := e.SCQ.Wait(1, "SEND", e.WaitBudget(int64(size))); err != nil {
				return err
			}
		} else {
			wc, err := e.RCQ.Wait(1, "RECV completion", e.WaitBudget(int64(size)))
			if err != nil {
				return err
			}
			switch w := wc[0]; {
			case w.Opcode != verbs.WCRecv:
				check = fmt.Errorf("receive completion opcode %d, want RECV (%d)", w.Opcode, verbs.WCRecv)
			case int(w.ByteLen) != size:
				check = fmt.Errorf("completion byte_len %d, want %d", w.ByteLen, size)
			default:
				check = e.CheckBuf(size, seed)
			}
		}
		return e.Settle("send check", e.Role == "server", check)
	})
}

// PP-07: small RDMA WRITE latency, measured like ib_write_lat.
func TestPP07Latency(t *testing.T) { perRail(t, "PP-07", latencyCheck) }

func latencyCheck(t *testing.T, r *rails.Rail) {
	sh := share(t, r, 2*latRegion, nil, "")
	t.Run("WRITE/"+strconv.Itoa(latSize), func(t *testing.T) {
		testenv.Req(t, "PP-07")
		lat, threshold, thrWhy := latency(t, sh.Ends(t), false)
		testenv.Attr(t, "threshold", thrWhy)
		if threshold > 0 {
			testenv.Attr(t, "max_lat_us_p50", threshold)
		}
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
func latency(t *testing.T, ends []*rc.End, forceImm bool) (lat stats.Latency, threshold float64, thrWhy string) {
	errs := rc.Each(ends, func(e *rc.End) error {
		// Host memory: poll the last byte like ib_write_lat. Memory the CPU
		// cannot poll (GPU) waits on WRITE_WITH_IMM completions.
		useImm := forceImm || !e.Host() || e.Peer.Mem != string(membuf.Host)
		if err := e.FillPoison(2*latRegion, 0); err != nil {
			return err
		}
		if err := e.Sess.Barrier("lat start", 0); err != nil {
			return err
		}
		mr, remote := e.MR(), e.Remote()
		iters := e.Cfg.Iters + 1 // n+1 posts give n round trips
		var stamps []int64
		err := e.OnNICCPUs(func() (err error) {
			stamps, err = e.QP.Latency(verbs.LatArgs{SendCQ: e.SCQ, RecvCQ: e.RCQ, Local: mr, SendAddr: mr.Addr,
				PollAddr: mr.Addr + latRegion + latSize - 1, RemoteAddr: remote.Addr + latRegion, RKey: remote.RKey,
				Size: latSize, Iters: iters, First: e.Role == "client", UseImm: useImm, Timeout: e.Timeout()})
			return err
		})
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
		r, err := e.Sess.ExchangeResult(resultOf("latency", l))
		if err != nil {
			return err
		}
		if e.Role == "server" {
			l = latencyOf(r)
		}
		e.Attr("lat_us_p50", stats.US(l.P50))
		e.Attr("lat_us_p99", stats.US(l.P99))
		e.Attr("lat_us_p999", stats.US(l.P999))
		e.Attr("lat_us_min", stats.US(l.Min))
		e.Attr("lat_us_max", stats.US(l.Max))
		e.Attr("iters", l.N)
		e.Attr("size_bytes", latSize)
		e.Attr("lat_mode", map[bool]string{true: "write_with_imm+cq", false: "write+poll_last_byte"}[useImm])
		e.Attr("mr_path", mr.Path)
		if e.Role == "client" || len(ends) == 1 {
			lat = l
			threshold, thrWhy = latThreshold(e)
		}
		return nil
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
	t.Logf("WRITE %d B latency (one way, us): p50 %.2f p99 %.2f p99.9 %.2f min %.2f max %.2f over %d round trips",
		latSize, stats.US(lat.P50), stats.US(lat.P99), stats.US(lat.P999), stats.US(lat.Min), stats.US(lat.Max), lat.N)
	return lat, threshold, thrWhy
}

func resultOf(name string, l stats.Latency) oob.Result {
	return oob.Result{Name: name, OK: true, Values: map[string]float64{
		"p50": float64(l.P50), "p99": float64(l.P99), "p999": float64(l.P999), "min": float64(l.Min), "max": float64(l.Max), "n": float64(l.N)}}
}

func latencyOf(r oob.Result) stats.Latency {
	v := r.Values
	return stats.Latency{P50: time.Duration(v["p50"]), P99: time.Duration(v["p99"]), P999: time.Duration(v["p999"]),
		Min: time.Duration(v["min"]), Max: time.Duration(v["max"]), N: int(v["n"])}
}

func latThreshold(e *rc.End) (float64, string) {
	switch {
	case e.Cfg.MaxLatUS > 0:
		return e.Cfg.MaxLatUS, fmt.Sprintf("GDR_MAX_LAT_US=%g", e.Cfg.MaxLatUS)
	case e.Software:
		return 0, fmt.Sprintf("no threshold: software device (%s), its timing is not a NIC's", e.SoftWhy)
	}
	return defaultMaxLatUS, fmt.Sprintf("default ceiling %.0f us for a hardware NIC (set GDR_MAX_LAT_US to change)", defaultMaxLatUS)
}

// PP-08: RDMA WRITE and READ bandwidth over the size sweep, like ib_write_bw
// and ib_read_bw: tx depth 128, one signaled WR per 100.
func TestPP08Bandwidth(t *testing.T) { perRail(t, "PP-08", bandwidthSweep) }

func bandwidthSweep(t *testing.T, r *rails.Rail) {
	cfg := testenv.Config(t)
	maxSize := maxBWSize(cfg.BWSizes)
	sh := share(t, r, maxSize, nil, "")
	for _, op := range []verbs.Opcode{verbs.OpWrite, verbs.OpRead} {
		name := map[verbs.Opcode]string{verbs.OpWrite: "WRITE", verbs.OpRead: "READ"}[op]
		for _, size := range cfg.BWSizes {
			t.Run(fmt.Sprintf("%s/%d", name, size), func(t *testing.T) {
				testenv.Req(t, "PP-08")
				bandwidth(t, sh.Ends(t), op, name, size, size == maxSize, func(gbps float64) {
					if op == verbs.OpWrite && size == maxSize {
						soloBW.Store(r.Index, gbps) // PP-10 compares all rails at once with this
					}
				})
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
// bandwidth measures op at size, hands the result to seen (before any
// verdict) and fails t below the floor that applies.
func bandwidth(t *testing.T, ends []*rc.End, op verbs.Opcode, name string, size int, largest bool, seen func(float64)) float64 {
	gbps, threshold, thrWhy := measureBW(t, ends, op, name, size, largest)
	if seen != nil {
		seen(gbps)
	}
	testenv.Attr(t, "threshold", thrWhy)
	if threshold > 0 {
		testenv.Attr(t, "min_bw_gbit_s", threshold)
	}
	if threshold > 0 && gbps < threshold {
		testenv.Failf(t, "check the NIC's PCIe link (width/speed), the GPU<->NIC path class (GDR_MAX_PATH), NIC firmware and the fabric; or set GDR_MIN_BW_GBPS",
			"%s bandwidth at %d B is %.2f Gb/s, below the %.2f Gb/s floor (%s)", name, size, gbps, threshold, thrWhy)
	}
	return gbps
}

// measureBW runs op at size on connected ends (buffers of at least size
// bytes), reports it on t and returns the client's Gb/s with the floor that
// applies; the caller decides whether to enforce it.
func measureBW(t *testing.T, ends []*rc.End, op verbs.Opcode, name string, size int, largest bool) (gbps, threshold float64, thrWhy string) {
	errs := rc.Each(ends, func(e *rc.End) error {
		iters := e.Cfg.Iters
		step := fmt.Sprintf("bw %s %d", name, size)
		if err := e.Sess.Barrier(step, 0); err != nil {
			return err
		}
		var r oob.Result
		if e.Role == "client" {
			td := min(txDepth, e.QP.SQDepth)
			if op == verbs.OpRead {
				td = min(td, e.RdAtom*8) // reads beyond the responder's depth only queue
			}
			mr, remote := e.MR(), e.Remote()
			stop := e.Sess.Heartbeat() // the server waits on the session meanwhile
			var el time.Duration
			err := e.OnNICCPUs(func() (err error) {
				el, err = e.QP.Bandwidth(verbs.BWArgs{CQ: e.SCQ, Op: op, Local: mr, LocalAddr: mr.Addr, RemoteAddr: remote.Addr,
					RKey: remote.RKey, Size: size, Iters: iters, TxDepth: td, CQMod: min(cqMod, td), Timeout: e.Timeout()})
				return err
			})
			stop()
			if err != nil {
				return err
			}
			bytes := int64(size) * int64(iters)
			r = oob.Result{Name: step, OK: true, Values: map[string]float64{"gbps": stats.Gbps(bytes, el), "mbps": stats.MBps(bytes, el),
				"sec": el.Seconds(), "rate": e.RateGbps()}}
		} else {
			r = oob.Result{Name: step, OK: true, Values: map[string]float64{"rate": e.RateGbps()}}
		}
		// The server waits here while the client measures: bound the wait
		// by the transfer at a pessimistic rate, not by heartbeats alone.
		restore := e.Sess.Within(e.WaitBudget(int64(size) * int64(iters)))
		peer, err := e.Sess.ExchangeResult(r)
		restore()
		if err != nil {
			return err
		}
		res, peerRate := r, peer.Values["rate"]
		if e.Role == "server" {
			res = peer
		}
		e.Attr("bw_gbit_s", res.Values["gbps"])
		e.Attr("bw_mib_s", res.Values["mbps"])
		e.Attr("size_bytes", size)
		e.Attr("iters", iters)
		e.Attr("op", name)
		e.Attr("mr_path", e.MR().Path)
		if e.Role == "client" || len(ends) == 1 {
			gbps = res.Values["gbps"]
			threshold, thrWhy = bwThreshold(e, min(e.RateGbps(), peerRate), largest)
		}
		return nil
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
	t.Logf("%s %d B: %.3f Gb/s (%s)", name, size, gbps, thrWhy)
	return gbps, threshold, thrWhy
}

func bwThreshold(e *rc.End, rate float64, largest bool) (float64, string) {
	switch {
	case !largest:
		return 0, "reported only: thresholds apply at the largest size of GDR_BW_SIZES"
	case e.Cfg.MinBWGbps > 0:
		return e.Cfg.MinBWGbps, fmt.Sprintf("GDR_MIN_BW_GBPS=%g", e.Cfg.MinBWGbps)
	case e.Software:
		return 0, fmt.Sprintf("no threshold: software device (%s), its port rate is fictional", e.SoftWhy)
	case rate <= 0:
		return 0, "no threshold: the port rate is unknown"
	}
	return bwFraction * rate, fmt.Sprintf("%.0f%% of the %.0f Gb/s port rate", bwFraction*100, rate)
}
