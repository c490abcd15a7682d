//go:build rdma && gpu

package pingpong

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// halfResult is what one memory kind measured.
type halfResult struct {
	done    bool // every step ran and passed
	skipped bool
	gbps    float64
	p50us   float64
	mem     string // gdr.mem of the half: host, gpu or gpu-emulated
}

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
func TestPP09HostVsGPU(t *testing.T) {
	testenv.Req(t, "PP-09")
	compareMem(t, membuf.Host, membuf.GPU, gpuAbsence())
}

// gpuAbsence says why the GPU half cannot run here ("" when it can),
// naming libcuda.so.1 or the missing GPU. A driver that is present but
// broken is not absence: the GPU half fails on it with CUDA's error.
func gpuAbsence() string {
	d, err := cuda.Load()
	var le *cuda.LoadError
	switch {
	case errors.As(err, &le) && le.Missing:
		return fmt.Sprintf("no CUDA driver: %v", err)
	case cuda.Code(err) == cuda.ErrNoDevice:
		return fmt.Sprintf("no GPU: %v", err)
	case err != nil:
		return ""
	}
	if devs, err := d.Devices(); err == nil && len(devs) == 0 {
		return "no GPU: cuDeviceGetCount is 0 (libcuda.so.1 loaded)"
	}
	return ""
}

// compareMem runs the PP-09 halves on memory kinds base then other (host,
// GPU) and reports them side by side on t with "_host"/"_gpu" keys. A
// non-empty absent (why the other half cannot run here) makes the first
// half agree a skip with the peer, which ends the comparison on both hosts.
func compareMem(t *testing.T, base, other membuf.Kind, absent string) {
	cfg := testenv.Config(t)
	size := maxBWSize(cfg.BWSizes)
	bufSize := max(size, verifyBuf, 2*latRegion)
	res := []*halfResult{{}, {}}
	for i, k := range []membuf.Kind{base, other} {
		r := res[i]
		t.Run(string(k), func(t *testing.T) {
			testenv.Req(t, "PP-09")
			t.Cleanup(func() { r.skipped = t.Skipped() })
			sh := share(t, nil, bufSize, forced(k), absent)
			r.mem = memLabel(sh.First())
			ok := t.Run("WRITE-data", func(t *testing.T) {
				testenv.Req(t, "PP-09")
				verifyAll(t, sh.Ends(t), writeCheck)
			})
			ok = t.Run(fmt.Sprintf("WRITE-bw/%d", size), func(t *testing.T) {
				testenv.Req(t, "PP-09")
				gbps, _, thrWhy := measureBW(t, sh.Ends(t), verbs.OpWrite, "WRITE", size, true)
				testenv.Attr(t, "threshold", "reported only (PP-08 holds the floor; here: "+thrWhy+")")
				r.gbps = gbps
			}) && ok
			ok = t.Run("WRITE-lat/"+strconv.Itoa(latSize), func(t *testing.T) {
				testenv.Req(t, "PP-09")
				// Both halves wait on WRITE_WITH_IMM completions: the CPU
				// cannot poll GPU memory, and one method keeps the ratio fair.
				lat, _ := latency(t, sh.Ends(t), true)
				testenv.Attr(t, "threshold", "reported only (PP-07 holds the ceiling)")
				r.p50us = stats.US(lat.P50)
			}) && ok
			r.done = ok
		})
		if r.skipped {
			break // the GPU half would skip for the same reason
		}
	}
	h, g := res[0], res[1]
	if h.skipped || g.skipped {
		// The halves skip for the reasons every pingpong test shares (no
		// RDMA device here or at the peer): the subtest says which.
		_, why, _ := rc.Probe(t)
		if why == "" {
			why = absent
		}
		if why == "" {
			why = "the peer asked to skip: see the skipped subtest's log"
		}
		testenv.Absent(t, "PP-09 needs both halves, and the %s half was skipped: %s",
			map[bool]string{true: "host-memory", false: "GPU-memory"}[h.skipped], why)
	}
	if !h.done || !g.done {
		// The failing subtest carries the cause; this keeps the parent honest.
		t.Fatalf("host memory passed: %v, GPU memory passed: %v; see the failed subtests above", h.done, g.done)
	}
	testenv.Attr(t, "mem", g.mem)
	testenv.Attr(t, "size_bytes", size)
	testenv.Attr(t, "bw_gbit_s_host", h.gbps)
	testenv.Attr(t, "bw_gbit_s_gpu", g.gbps)
	testenv.Attr(t, "lat_us_p50_host", h.p50us)
	testenv.Attr(t, "lat_us_p50_gpu", g.p50us)
	testenv.Attr(t, "lat_mode", "write_with_imm+cq (both halves)")
	bwRatio, latRatio := ratio(g.gbps, h.gbps), ratio(g.p50us, h.p50us)
	testenv.Attr(t, "bw_ratio_gpu_host", bwRatio)
	testenv.Attr(t, "lat_ratio_gpu_host", latRatio)
	t.Logf("WRITE %d B: host %.3f Gb/s, GPU %.3f Gb/s (GPU/host %.3f); WRITE %d B p50: host %.2f us, GPU %.2f us (GPU/host %.3f)",
		size, h.gbps, g.gbps, bwRatio, latSize, h.p50us, g.p50us, latRatio)
}
