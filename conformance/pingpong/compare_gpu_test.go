//go:build rdma && gpu

package pingpong

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/stats"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// memLabel is what the ends' buffers are (the client's, in loopback).
func memLabel(ends []*rc.End) string { return membuf.Label(ends[len(ends)-1].Buf) }

// PP-09: the same (NIC, peer) pair runs RDMA WRITE data, bandwidth at the
// largest GDR_BW_SIZES size and 2-byte WRITE latency on host memory, then on
// GPU memory, and reports the two side by side. Both hosts run the halves
// in the same order, so both ends agree on the memory kind.
//
// No threshold on the ratios: how much slower GPU memory may be depends on
// the PCIe path between NIC and GPU (PIX vs PHB vs SYS), which TOPO and
// GDR_MAX_PATH already judge, and PP-07/PP-08 hold the absolute floors.
// The test fails when a half fails: registration, a wrong byte, a
// completion error or a timeout.
//
// Both hosts of a two-host run need a GPU. A host without one still opens
// the host half's session and offers its reason in the agreement, so both
// hosts skip with the same reason instead of one waiting for GDR_TIMEOUT.
// A host whose PCI bus lists NVIDIA GPUs that CUDA cannot give this process
// is not without one: its GPU half, and the test, are not judged.
func TestPP09HostVsGPU(t *testing.T) {
	testenv.Req(t, "PP-09")
	absent := cuda.Absence(t)
	size := traffic.MaxSize(testenv.Config(t).BWSizes)
	h, g := halves(t, membuf.Host, membuf.GPU, size, absent)
	if h.Skipped || g.Skipped {
		// The halves skip for the reasons every pingpong test shares (no
		// RDMA device here or at the peer): the subtest says which.
		why, remedy := "", ""
		if _, stop := rc.Probe(t); stop != nil && stop.Kind() == verdict.Absent {
			why, remedy = stop.Cause, stop.Remedy
		}
		testenv.Absent(t, remedy, "%s", traffic.HalfSkipped(h, g, why, absent))
	}
	if u := cuda.Unusable(t); !g.Done && u != nil {
		testenv.NotJudgedf(t, u.Finding.Remedy, "CUDA unusable: %s; the host-memory half ran (passed: %v), the GPU-memory half could not", u.Finding.Cause, h.Done)
	}
	// The failing subtest carries the cause; this keeps the parent honest.
	testenv.Stop(t, traffic.HalvesDone(h, g))
	v, line := traffic.Compare(h, g, size)
	v.Record(t)
	t.Logf("%s", line)
}

// halves runs the PP-09 halves on memory kinds base then other (host,
// GPU), one subtest each. A non-empty absent (why the other half cannot
// run here) makes the first half agree a skip with the peer, which ends
// the comparison on both hosts.
func halves(t *testing.T, base, other membuf.Kind, size int, absent string) (traffic.Half, traffic.Half) {
	res := []*traffic.Half{{}, {}}
	for i, k := range []membuf.Kind{base, other} {
		t.Run(string(k), func(t *testing.T) { runHalf(t, k, size, absent, res[i]) })
		if res[i].Skipped {
			break // the GPU half would skip for the same reason
		}
	}
	return *res[0], *res[1]
}

// runHalf is one PP-09 half on memory kind k: WRITE data, bandwidth at
// size and WRITE latency on one connection, recorded in r.
func runHalf(t *testing.T, k membuf.Kind, size int, absent string, r *traffic.Half) {
	testenv.Req(t, "PP-09")
	t.Cleanup(func() { r.Skipped = t.Skipped() })
	sh := share(t, nil, max(size, traffic.VerifyBuf, 2*traffic.LatRegion), forced(k), absent)
	r.Mem = memLabel(sh.First())
	ok := t.Run("WRITE-data", func(t *testing.T) {
		testenv.Req(t, "PP-09")
		traffic.VerifyOn(t, sh.Ends(t), traffic.Write)
	})
	ok = t.Run(fmt.Sprintf("WRITE-bw/%d", size), func(t *testing.T) { halfBW(t, sh, size, r) }) && ok
	ok = t.Run("WRITE-lat/"+strconv.Itoa(traffic.LatSize), func(t *testing.T) { halfLat(t, sh, r) }) && ok
	r.Done = ok
}

func halfBW(t *testing.T, sh *rc.Shared, size int, r *traffic.Half) {
	testenv.Req(t, "PP-09")
	res := traffic.BandwidthOn(t, sh.Ends(t), traffic.BWSpec{Op: verbs.OpWrite, Name: "WRITE", Size: size, Largest: true})
	testenv.Attr(t, "threshold_source", "reported only (PP-08 holds the floor; here: "+res.Why+")")
	r.Gbps = res.Gbps
}

func halfLat(t *testing.T, sh *rc.Shared, r *traffic.Half) {
	testenv.Req(t, "PP-09")
	// Both halves wait on WRITE_WITH_IMM completions: the CPU cannot poll
	// GPU memory, and one method keeps the ratio fair.
	res := traffic.LatencyOn(t, sh.Ends(t), true)
	testenv.Attr(t, "threshold_source", "reported only (PP-07 holds the ceiling)")
	r.P50US = stats.US(res.Lat.P50)
}
