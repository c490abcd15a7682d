//go:build rdma

package pingpong

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// PP-01: the RDMA device and port this host uses, with its GID.
func TestPP01Device(t *testing.T) {
	testenv.Req(t, "PP-01")
	rc.PerRail(t, "PP-01", func(t *testing.T, r *rails.Rail) {
		ends := connect(t, r, 4096, nil, "")
		rc.Done(t, ends, rc.Each(ends, (*rc.End).DeviceFacts))
	})
}

// PP-02: an RC connection reaches RTS on both ends and carries a message.
func TestPP02Connect(t *testing.T) {
	testenv.Req(t, "PP-02")
	rc.PerRail(t, "PP-02", func(t *testing.T, r *rails.Rail) {
		ends := connect(t, r, 4096, nil, "")
		rc.Done(t, ends, traffic.ZeroSend(ends))
	})
}

// PP-03: RDMA WRITE delivers the data intact.
func TestPP03Write(t *testing.T) { runVerify(t, "PP-03", traffic.Write) }

// PP-04: RDMA WRITE_WITH_IMM delivers the data and the immediate value; in
// gpu builds again on cuMemCreate memory (runVMM: the NIC writes into
// memory allocated as NCCL allocates).
func TestPP04WriteImm(t *testing.T) {
	runVerify(t, "PP-04", traffic.WriteImm)
	runVMM(t, "PP-04", traffic.WriteImm)
}

// PP-05: RDMA READ fetches the peer's data intact; in gpu builds again on
// cuMemCreate memory (runVMM: the NIC reads it).
func TestPP05Read(t *testing.T) {
	runVerify(t, "PP-05", traffic.Read)
	runVMM(t, "PP-05", traffic.Read)
}

// PP-06: SEND/RECV delivers the message intact with the right length. A
// small SEND from host memory goes inline (the provider copies it); from GPU
// memory it never does (harness/verbs decides from the MR).
func TestPP06SendRecv(t *testing.T) { runVerify(t, "PP-06", traffic.Send) }

// runVerify runs a data check on every rail.
func runVerify(t *testing.T, id string, fn traffic.Transfer) {
	testenv.Req(t, id)
	rc.PerRail(t, id, func(t *testing.T, r *rails.Rail) {
		traffic.VerifyOn(t, connect(t, r, traffic.VerifyBuf, nil, ""), fn)
	})
}

// PP-07: small RDMA WRITE latency, measured like ib_write_lat.
func TestPP07Latency(t *testing.T) {
	testenv.Req(t, "PP-07")
	rc.PerRail(t, "PP-07", func(t *testing.T, r *rails.Rail) {
		sh := share(t, r, 2*traffic.LatRegion, nil, "")
		t.Run("WRITE/"+strconv.Itoa(traffic.LatSize), func(t *testing.T) {
			testenv.Req(t, "PP-07")
			res := traffic.LatencyOn(t, sh.Ends(t), false)
			cfg := testenv.Config(t)
			traffic.JudgeLatency(res, cfg.MaxLatP99US, cfg.MaxLatP999US).Record(t)
		})
	})
}

// PP-08: RDMA WRITE and READ bandwidth over the size sweep, like ib_write_bw
// and ib_read_bw: tx depth 128, one signaled WR per 100; then WRITE in both
// directions at once at the largest size (ib_write_bw -b: a full-duplex
// port carries twice its rate).
func TestPP08Bandwidth(t *testing.T) {
	testenv.Req(t, "PP-08")
	rc.PerRail(t, "PP-08", func(t *testing.T, r *rails.Rail) {
		cfg := testenv.Config(t)
		o := connOptions(t, r, 2*traffic.MaxSize(cfg.BWSizes), nil, "") // bidirectional runs use both halves
		o.QPs = cfg.QPs
		sh := rc.Share(t, o)
		for _, sp := range traffic.Sweep(cfg.BWSizes) {
			t.Run(fmt.Sprintf("%s/%d", sp.Name, sp.Size), func(t *testing.T) {
				testenv.Req(t, "PP-08")
				res := traffic.BandwidthOn(t, sh.Ends(t), sp)
				if sp.Solo() {
					soloBW.Store(r.Index, res.Gbps) // PP-10 compares all rails at once with this
				}
				traffic.JudgeBW(sp, res).Record(t)
			})
		}
	})
}
