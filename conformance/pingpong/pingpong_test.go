//go:build rdma

package pingpong

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/floors"
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

// xfer is one data check's transfer: size bytes of the pattern for seed at
// byte offset off of both buffers (odd offsets: nothing is aligned for the
// NIC's convenience), iteration i.
type xfer struct {
	seed         uint64
	off, size, i int
}

// verifyOffset is the transfer's offset: unaligned, different per size and
// iteration, and small enough that offset + size + guard fit verifyBuf.
func verifyOffset(size, i int) int { return (size%61 + i*1021) % 4001 }

// transfer is one data check: the client moves x's bytes with some opcode
// between its registration local and the peer's registration remote; the
// receiving side compares the whole transfer and the poison around it.
type transfer func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x xfer) error

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
					x := xfer{seed: membuf.IterSeed(e.Seed+uint64(r)*0x100000001, size, i), off: verifyOffset(size, i), size: size, i: i}
					if err := fn(e, local, remote, x); err != nil {
						return fmt.Errorf("%d bytes at offset %d, iteration %d, local %s MR -> peer %s MR: %w", size, x.off, i, local.Path, remote.Path, err)
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
func chained(op verbs.Opcode, local *verbs.MR, remote oob.RemoteMR, off, size int) []verbs.SendWR {
	cs := chunks(size)
	wrs := make([]verbs.SendWR, len(cs))
	for k, c := range cs {
		wrs[k] = wr(uint64(k), op, local, remote.Addr, remote.RKey, off+c[0], c[1], k == len(cs)-1)
	}
	return wrs
}

// PP-03: RDMA WRITE delivers the data intact.
func TestPP03Write(t *testing.T) { runVerify(t, "PP-03", writeCheck) }

// writeCheck is one RDMA WRITE data check: the client writes the pattern in
// chained WRs, the server compares it (a device-to-host copy for GPU memory,
// after the flush of the NIC's writes).
func writeCheck(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x xfer) error {
	seed, off, size, i := x.seed, x.off, x.size, x.i
	if e.Role == "server" {
		if err := e.FillPoison(off+size+64, poison); err != nil {
			return err
		}
	} else if err := e.FillPatternAt(off, size, seed); err != nil {
		return err
	}
	if err := e.Sess.Barrier("ready", i); err != nil {
		return err
	}
	if e.Role == "client" {
		if err := e.QP.PostSend(chained(verbs.OpWrite, local, remote, off, size)...); err != nil {
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
		check = e.CheckBufAt(off, size, seed)
	}
	return e.Settle("write check", e.Role == "server", check)
}

// PP-04: RDMA WRITE_WITH_IMM delivers the data and the immediate value.
func TestPP04WriteImm(t *testing.T) {
	runVerify(t, "PP-04", func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x xfer) error {
		seed, off, size, i := x.seed, x.off, x.size, x.i
		imm := uint32(seed)
		if e.Role == "server" {
			if err := e.FillPoison(off+size+64, poison); err != nil {
				return err
			}
			if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(i)}); err != nil {
				return err
			}
		} else if err := e.FillPatternAt(off, size, seed); err != nil {
			return err
		}
		if err := e.Sess.Barrier("ready", i); err != nil {
			return err
		}
		var check error
		if e.Role == "client" {
			w := wr(uint64(i), verbs.OpWriteImm, local, remote.Addr, remote.RKey, off, size, true)
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
				check = e.CheckBufAt(off, size, seed)
			}
		}
		return e.Settle("write-imm check", e.Role == "server", check)
	})
}

// PP-05: RDMA READ fetches the peer's data intact.
func TestPP05Read(t *testing.T) {
	runVerify(t, "PP-05", func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x xfer) error {
		seed, off, size, i := x.seed, x.off, x.size, x.i
		if e.Role == "server" {
			if err := e.FillPatternAt(off, size, seed); err != nil {
				return err
			}
		} else if err := e.FillPoison(off+size+64, poison); err != nil {
			return err
		}
		if err := e.Sess.Barrier("ready", i); err != nil {
			return err
		}
		var check error
		if e.Role == "client" {
			if err := e.QP.PostSend(chained(verbs.OpRead, local, remote, off, size)...); err != nil {
				return err
			}
			if _, err := e.SCQ.Wait(1, "RDMA READ", e.WaitBudget(int64(size))); err != nil {
				return err
			}
			// The NIC wrote the client's buffer: CheckBuf reads it back
			// through a flushed device-to-host copy for GPU memory.
			check = e.CheckBufAt(off, size, seed)
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
	runVerify(t, "PP-06", func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x xfer) error {
		seed, off, size, i := x.seed, x.off, x.size, x.i
		if e.Role == "server" {
			if err := e.FillPoison(off+size+64, poison); err != nil {
				return err
			}
			if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(i), Local: local, LocalAddr: local.Addr + uint64(off), Len: uint32(local.Len - off)}); err != nil {
				return err
			}
		} else if err := e.FillPatternAt(off, size, seed); err != nil {
			return err
		}
		if err := e.Sess.Barrier("ready", i); err != nil {
			return err
		}
		var check error
		if e.Role == "client" {
			if err := e.QP.PostSend(wr(uint64(i), verbs.OpSend, local, 0, 0, off, size, true)); err != nil {
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
				check = e.CheckBufAt(off, size, seed)
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
		lat, ceil := latency(t, sh.Ends(t), false)
		threshold, thrWhy := ceil.US, ceil.Why
		testenv.Attr(t, "threshold", thrWhy)
		if ceil.Kind != "" {
			testenv.Attr(t, "max_lat_kind", ceil.Kind) // which memory kind's ceiling applied
			testenv.Attr(t, "max_lat_source", ceil.Source)
		}
		if threshold <= 0 {
			return
		}
		cfg := testenv.Config(t)
		p99, p999 := cfg.MaxLatP99US, cfg.MaxLatP999US
		if p99 <= 0 {
			p99 = 2 * threshold
		}
		if p999 <= 0 {
			p999 = 4 * threshold
		}
		testenv.Attr(t, "max_lat_us_p50", threshold)
		testenv.Attr(t, "max_lat_us_p99", p99)
		remedy := "check the path between NIC and memory (PCIe topology, GDR_MAX_PATH), NIC firmware, CPU placement (gdr.poll_cpus) and the fabric; or set GDR_MAX_LAT_US / GDR_MAX_LAT_P99_US / GDR_MAX_LAT_P999_US"
		if stats.US(lat.P50) > threshold {
			testenv.Errorf(t, remedy, "WRITE %d B latency p50 %.2f us is above the %.2f us ceiling (%s)", latSize, stats.US(lat.P50), threshold, thrWhy)
		}
		if stats.US(lat.P99) > p99 {
			testenv.Errorf(t, remedy, "WRITE %d B latency p99 %.2f us is above the %.2f us tail ceiling (p50 %.2f us): the tail shows jitter the median hides", latSize, stats.US(lat.P99), p99, stats.US(lat.P50))
		}
		if lat.N >= 10000 {
			testenv.Attr(t, "max_lat_us_p999", p999)
			if stats.US(lat.P999) > p999 {
				testenv.Errorf(t, remedy, "WRITE %d B latency p99.9 %.2f us is above the %.2f us ceiling", latSize, stats.US(lat.P999), p999)
			}
		} else {
			testenv.Attr(t, "p999_judged", fmt.Sprintf("no: %d round trips, p99.9 needs 10000 (GDR_ITERS)", lat.N))
		}
	})
}

// latency measures latSize-byte RDMA WRITE round trips on connected ends
// (buffers of at least 2*latRegion bytes), reports them on t and returns the
// client's numbers with the p50 ceiling that applies (rc.End.LatCeiling); the
// caller decides whether to enforce it. forceImm waits on WRITE_WITH_IMM completions even on host
// memory, so host and GPU runs are timed the same way.
func latency(t *testing.T, ends []*rc.End, forceImm bool) (lat stats.Latency, ceil rc.LatCeiling) {
	errs := rc.Each(ends, func(e *rc.End) error {
		// Host memory: poll the last byte like ib_write_lat. Memory the CPU
		// cannot poll (GPU) waits on WRITE_WITH_IMM completions.
		useImm := forceImm || !e.Host() || e.Peer.Mem != string(membuf.Host)
		if err := e.FillPoison(2*latRegion, 0); err != nil {
			return err
		}
		iters := e.Cfg.Iters + 1 // n+1 posts give n round trips
		pre := 0
		if useImm {
			// Receives posted before the barrier: the peer's first write
			// finds one (else an RNR NAK, which HLTH-01 would count).
			for pre < verbs.LatRecvs(iters) {
				if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(pre)}); err != nil {
					return err
				}
				pre++
			}
		}
		if err := e.Sess.Barrier("lat start", 0); err != nil {
			return err
		}
		mr, remote := e.MR(), e.Remote()
		var stamps []int64
		err := e.OnNICCPUs(func() (err error) {
			stamps, err = e.QP.Latency(verbs.LatArgs{SendCQ: e.SCQ, RecvCQ: e.RCQ, Local: mr, SendAddr: mr.Addr,
				PollAddr: mr.Addr + latRegion + latSize - 1, RemoteAddr: remote.Addr + latRegion, RKey: remote.RKey,
				Size: latSize, Iters: iters, First: e.Role == "client", UseImm: useImm, Preposted: pre, Timeout: e.Timeout()})
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
			ceil = e.LatCeiling(!useImm)
		}
		return nil
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
	t.Logf("WRITE %d B latency (one way, us): p50 %.2f p99 %.2f p99.9 %.2f min %.2f max %.2f over %d round trips",
		latSize, stats.US(lat.P50), stats.US(lat.P99), stats.US(lat.P999), stats.US(lat.Min), stats.US(lat.Max), lat.N)
	return lat, ceil
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

// PP-08: RDMA WRITE and READ bandwidth over the size sweep, like ib_write_bw
// and ib_read_bw: tx depth 128, one signaled WR per 100.
func TestPP08Bandwidth(t *testing.T) { perRail(t, "PP-08", bandwidthSweep) }

func bandwidthSweep(t *testing.T, r *rails.Rail) {
	cfg := testenv.Config(t)
	maxSize := maxBWSize(cfg.BWSizes)
	o := connOptions(t, r, 2*maxSize, nil, "") // bidirectional runs use both halves
	o.QPs = cfg.QPs
	sh := rc.Share(t, o)
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
	// Both directions at once, like ib_write_bw -b: a full-duplex port
	// carries twice its rate.
	t.Run(fmt.Sprintf("WRITE-BIDIR/%d", maxSize), func(t *testing.T) {
		testenv.Req(t, "PP-08")
		gbps, threshold, thrWhy := runBW(t, sh.Ends(t), bwSpec{op: verbs.OpWrite, name: "WRITE-BIDIR", size: maxSize, largest: true, bidir: true})
		judgeBW(t, "WRITE-BIDIR", maxSize, gbps, threshold, thrWhy)
	})
}

// maxBWSize is the largest size of GDR_BW_SIZES (GDR_MIN_BW_GBPS applies there).
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
	judgeBW(t, name, size, gbps, threshold, thrWhy)
	return gbps
}

// judgeBW records the floor and fails t below it.
func judgeBW(t *testing.T, name string, size int, gbps, threshold float64, thrWhy string) {
	testenv.Attr(t, "threshold", thrWhy)
	if threshold > 0 {
		testenv.Attr(t, "min_bw_gbit_s", threshold)
	}
	if threshold > 0 && gbps < threshold {
		testenv.Failf(t, "check the NIC's PCIe link (width/speed), the GPU<->NIC path class (GDR_MAX_PATH), NIC firmware and the fabric; or set GDR_MIN_BW_GBPS",
			"%s bandwidth at %d B is %.2f Gb/s, below the %.2f Gb/s floor (%s)", name, size, gbps, threshold, thrWhy)
	}
}

// measureBW runs op at size on connected ends (buffers of at least size
// bytes), reports it on t and returns the client's Gb/s with the floor that
// applies; the caller decides whether to enforce it.
func measureBW(t *testing.T, ends []*rc.End, op verbs.Opcode, name string, size int, largest bool) (gbps, threshold float64, thrWhy string) {
	return runBW(t, ends, bwSpec{op: op, name: name, size: size, largest: largest})
}

// bwSpec is one bandwidth point. bidir: both ends send at once (ib_write_bw
// -b), each from the first size bytes of its buffer into the second size
// bytes of the peer's (the buffer holds 2*size).
type bwSpec struct {
	op      verbs.Opcode
	name    string
	size    int
	largest bool
	bidir   bool
}

// runBW measures one point like ib_write_bw/ib_read_bw: GDR_BW_ITERS WRs
// after a warm-up, GDR_TX_DEPTH in flight, one signaled in cqMod; then the
// side whose buffer the NIC wrote checks its final contents against the
// sender's pattern (data under load, like perftest's --data_validation),
// through a flushed read-back for GPU memory. It reports on t and returns
// the Gb/s (the sum of both directions when bidir) with the floor that
// applies.
func runBW(t *testing.T, ends []*rc.End, sp bwSpec) (gbps, threshold float64, thrWhy string) {
	size := sp.size
	// Each end's PCIe path, read on the test goroutine (testenv).
	paths := map[*rc.End]pathLimit{}
	for _, e := range ends {
		paths[e] = endPath(e)
	}
	errs := rc.Each(ends, func(e *rc.End) error {
		iters := e.Cfg.BWIters
		step := fmt.Sprintf("bw %s %d", sp.name, size)
		if sp.bidir {
			step += " bidir"
		}
		sender := sp.bidir || (e.Role == "client") == (sp.op == verbs.OpWrite)
		receiver := sp.bidir || !sender
		src, dst := 0, 0 // offsets of the data the NIC reads and writes here
		if sp.bidir {
			dst = size
		}
		seed := membuf.IterSeed(e.Seed, size, map[bool]int{true: 1, false: 2}[e.Role == "client" || !sp.bidir])
		peerSeed := membuf.IterSeed(e.Seed, size, map[bool]int{true: 1, false: 2}[e.Role != "client" || !sp.bidir])
		if sender {
			if err := e.FillPatternAt(src, size, seed); err != nil {
				return err
			}
		}
		if receiver && !sp.bidir {
			// Poison the transfer and the guard behind it (CheckBufAt
			// reads both).
			if err := e.FillPoison(min(size+64, e.Buf.Len()), poison); err != nil {
				return err
			}
		}
		if sp.bidir {
			// The second half receives; fill it with poison behind the
			// pattern of the first.
			p := make([]byte, 2*size)
			membuf.Pattern(p[:size], seed)
			for i := size; i < len(p); i++ {
				p[i] = poison
			}
			if err := e.Buf.Fill(p); err != nil {
				return err
			}
		}
		if err := e.Sess.Barrier(step, 0); err != nil {
			return err
		}
		var r oob.Result
		posts := e.Role == "client" || sp.bidir
		if posts {
			td := min(e.Cfg.TxDepth, e.QP.SQDepth)
			if sp.op == verbs.OpRead {
				td = min(td, e.RdAtom*8) // reads beyond the responder's depth only queue
			}
			mr, remote := e.MR(), e.Remote()
			laddr, raddr := mr.Addr, remote.Addr
			if sp.bidir {
				raddr += uint64(size)
			}
			stop := e.Sess.Heartbeat() // the peer waits on the session meanwhile
			yield := e.YieldAfter(size, min(cqMod, td))
			e.Attr("bw_yield_after_us", stats.US(yield))
			var rtt time.Duration
			if sp.op == verbs.OpRead && !sp.bidir {
				// The outstanding-read bound of the floor needs this path's
				// round trip at this size (internal/floors.ReadBound).
				var err error
				if rtt, err = readRTT(e, mr, laddr, raddr, remote.RKey, size); err != nil {
					stop()
					return err
				}
			}
			el, err := bwAllQPs(e, verbs.BWArgs{Op: sp.op, Local: mr, LocalAddr: laddr, RemoteAddr: raddr,
				RKey: remote.RKey, Size: size, Iters: iters, TxDepth: td, CQMod: min(cqMod, td),
				Warmup: min(td, iters/10), Timeout: bwStall(e, td, size), YieldAfter: yield})
			stop()
			if err != nil {
				return err
			}
			bytes := int64(size) * int64(iters) * int64(len(e.QPs))
			r = oob.Result{Name: step, OK: true, Values: map[string]float64{"gbps": stats.Gbps(bytes, el), "mbps": stats.MBps(bytes, el),
				"sec": el.Seconds(), "rate": e.RateGbps(), "td": float64(td)}}
			if rtt > 0 {
				r.Values["read_rtt_ns"] = float64(rtt)
			}
		} else {
			r = oob.Result{Name: step, OK: true, Values: map[string]float64{"rate": e.RateGbps()}}
		}
		// The peer's floor needs this host's PCIe path too: its slowest
		// link travels with the result.
		own := paths[e]
		r.Values["pcie"], r.Msg = own.Gbps, own.By
		if own.readReq > 0 {
			r.Values["read_req"] = float64(own.readReq)
		}
		// A side that does not post waits here while the other measures:
		// bound the wait by the transfer at a pessimistic rate, not by
		// heartbeats alone.
		restore := e.Sess.Within(e.WaitBudget(int64(size) * int64(iters)))
		peer, err := e.Sess.ExchangeResult(r)
		restore()
		if err != nil {
			return err
		}
		// Data under load: the buffer the NIC wrote holds the sender's
		// pattern after the last WR.
		var check error
		if receiver {
			want := peerSeed
			if !sp.bidir {
				want = seed // one direction: both sides derived the same seed
			}
			if sp.bidir {
				check = e.CheckRegion(dst, size, want) // the front half is our own pattern
			} else {
				check = e.CheckBufAt(dst, size, want)
			}
			if check != nil {
				check = fmt.Errorf("after the %s bandwidth run of %d x %d B: %w", sp.name, iters, size, check)
			}
		}
		if sp.bidir {
			// Both sides check; each returns its own verdict and reports the peer's.
			pr, err := e.Sess.ExchangeResult(verdict("bw data", check))
			if err != nil {
				return err
			}
			if check == nil && !pr.OK {
				check = fmt.Errorf("the peer (%s) found after the bidirectional run: %s", e.Sess.Peer(), pr.Msg)
			}
		} else if err := e.Settle("bw data", receiver, check); err != nil {
			return err
		}
		if check != nil {
			return check
		}
		res, peerRate := r, peer.Values["rate"]
		total := r.Values["gbps"]
		switch {
		case sp.bidir:
			total += peer.Values["gbps"]
		case e.Role == "server":
			res, total = peer, peer.Values["gbps"]
		}
		e.Attr("bw_gbit_s", total)
		if sp.bidir {
			e.Attr("bw_gbit_s_each", fmt.Sprintf("%s %.3f, peer %.3f", e.Role, r.Values["gbps"], peer.Values["gbps"]))
		}
		e.Attr("bw_mib_s", res.Values["mbps"])
		e.Attr("size_bytes", size)
		e.Attr("iters", iters)
		e.Attr("tx_depth", int(res.Values["td"]))
		e.Attr("qps", len(e.QPs))
		if len(e.QPs) > 1 {
			e.Attr("qps_clock", "one clock: the queue pairs start together after their warm-ups (a start gate); the rate is all bytes over the earliest first post to the latest last completion")
		}
		e.Attr("op", sp.name)
		e.Attr("mr_path", e.MR().Path)
		e.Attr("data_checked", fmt.Sprintf("final %d B verified at the receiver", size))
		if e.Role == "client" || len(ends) == 1 {
			gbps = total
			paths, readReq := []floors.Path{{own.Limit}}, []int{own.readReq}
			if !e.Loopback() {
				by := peer.Msg // the peer's words: bounded before they reach a message
				if len(by) > 200 {
					by = clip.QuoteN(by, 200)
				}
				peerPath := floors.Path{{Gbps: peer.Values["pcie"], By: by}}
				peerReq, err := floors.ReadReqOf(peer.Values["read_req"])
				if err != nil {
					e.Attr("peer_read_req_note", fmt.Sprintf("from the peer: %v; %d B assumed", err, floors.AssumedMaxReadReq))
				}
				paths, readReq = append(paths, peerPath), append(readReq, peerReq)
				if sp.op == verbs.OpRead && !sp.bidir {
					// The NIC reads the peer's buffer: the peer's path is the source.
					paths, readReq = []floors.Path{peerPath, paths[0]}, []int{peerReq, own.readReq}
				}
			}
			var rb *floors.ReadBound
			if ns := r.Values["read_rtt_ns"]; ns > 0 {
				rb = &floors.ReadBound{Depth: e.RdAtom, QPs: len(e.QPs), Size: size, RTT: time.Duration(ns)}
				e.Attr("read_rtt_us", ns/1e3)
				e.Attr("read_bound_gbit_s", rb.Gbps())
				e.Attr("read_bound", rb.String())
			}
			f := e.BWFloor(rc.BWPoint{Size: size, Largest: sp.largest, Bidir: sp.bidir, Read: rb},
				floors.Layout{PortGbps: min(e.RateGbps(), peerRate), Paths: paths, ReadReq: readReq})
			threshold, thrWhy = f.Gbps, f.Why
			if f.Fraction.Fraction > 0 {
				e.Attr("bw_floor_fraction", f.Fraction.Fraction)
			}
			if f.Limit.Gbps > 0 {
				e.Attr("bw_limit_gbit_s", f.Limit.Gbps)
				e.Attr("bw_limit_source", f.Limit.Limit)
				e.Attr("bw_limit_note", f.Limit.Derived)
			}
			if own.notes != "" {
				e.Attr("pcie_path_note", own.notes)
			}
		}
		return nil
	})
	rc.FailIf(t, ends, errs)
	rc.Report(t, ends)
	t.Logf("%s %d B: %.3f Gb/s (%s)", sp.name, size, gbps, thrWhy)
	return gbps, threshold, thrWhy
}

// bwStall is the longest a bandwidth run may go without a completion:
// GDR_TIMEOUT plus the data between two completions (one signaled WR in
// cqMod) at rc's pessimistic rate. On a lossy or loaded link 100 WRs of
// 1 MiB take far longer than a small message's round trip.
func bwStall(e *rc.End, td, size int) time.Duration {
	return e.WaitBudget(int64(min(cqMod, td)) * int64(size))
}

// bwAllQPs runs a bandwidth loop on every queue pair of e at once, each on
// its own thread with its own send CQ, on the NIC's local CPUs (perftest -q
// posts round-robin from one thread; separate threads keep the C loop
// unchanged and scale the same on a real NIC). With several queue pairs the
// loops wait at a start gate after their warm-ups, and the time returned is
// the union of their runs, earliest first post to latest last completion:
// the aggregate rate is all bytes over one clock, as perftest -q measures
// it, not over the longest single run.
func bwAllQPs(e *rc.End, a verbs.BWArgs) (time.Duration, error) {
	ivs := make([]stats.Interval, len(e.QPs))
	errs := make([]error, len(e.QPs))
	if len(e.QPs) > 1 {
		gate, err := verbs.NewStartGate(len(e.QPs))
		if err != nil {
			return 0, err
		}
		defer gate.Close() // after every loop has returned (wg.Wait)
		a.Gate = gate
	}
	var wg sync.WaitGroup
	for i, qp := range e.QPs {
		wg.Go(func() {
			aa := a
			aa.CQ = e.SCQs[i]
			errs[i] = e.OnNICCPUs(func() (err error) {
				ivs[i], err = qp.BandwidthSpan(aa)
				return err
			})
		})
	}
	wg.Wait()
	for i := range e.QPs {
		if errs[i] != nil {
			return 0, fmt.Errorf("queue pair %d of %d: %w", i, len(e.QPs), errs[i])
		}
	}
	u, err := stats.Union(ivs)
	return u.Duration(), err
}

// verdict is a check's outcome as an out-of-band result.
func verdict(name string, err error) oob.Result {
	if err != nil {
		return oob.Result{Name: name, OK: false, Msg: err.Error()}
	}
	return oob.Result{Name: name, OK: true}
}

// pathLimit is one end's PCIe path for the floors (rc.End.PathLimit) and
// its NIC's read request size (rc.End.NICReadReq; 0 unknown).
type pathLimit struct {
	floors.Limit
	notes   string
	readReq int
}

func endPath(e *rc.End) pathLimit {
	l, ok, notes, err := e.PathLimit()
	if err != nil {
		notes = append(notes, fmt.Sprintf("PCIe path not counted: %v", err))
	}
	if !ok || err != nil {
		l = floors.Limit{}
	}
	return pathLimit{Limit: l, notes: strings.Join(notes, "; "), readReq: e.NICReadReq()}
}

// readRTTIters READs of one size, one in flight at a time, time the round
// trip of the outstanding-read bound on a hardware NIC (about 100 us in
// all); a software device gets no floor, and 4 keep the lab's rxe (tens
// of milliseconds per READ under qemu) from paying for the attribute.
const readRTTIters, readRTTItersSoft = 32, 4

// readRTT is the mean time from post to completion of one size-byte READ
// with nothing else in flight (the first queue pair, after one untimed
// READ). Posting and polling are inside it, so it errs long and the bound
// low: the floor it lowers is never above what the path allows.
func readRTT(e *rc.End, mr *verbs.MR, laddr, raddr uint64, rkey uint32, size int) (time.Duration, error) {
	n := readRTTIters
	if e.Software {
		n = readRTTItersSoft
	}
	var el time.Duration
	err := e.OnNICCPUs(func() (err error) {
		el, err = e.QP.Bandwidth(verbs.BWArgs{CQ: e.SCQ, Op: verbs.OpRead, Local: mr, LocalAddr: laddr, RemoteAddr: raddr,
			RKey: rkey, Size: size, Iters: n, TxDepth: 1, CQMod: 1, Warmup: 1, Timeout: bwStall(e, 1, size)})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("READ round trip at %d B (one in flight, for the outstanding-read bound): %w", size, err)
	}
	return el / time.Duration(n), nil
}
