//go:build rdma

package traffic

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Half is what one memory kind of the host-vs-GPU comparison (PP-09)
// measured.
type Half struct {
	Done    bool // every step ran and passed
	Skipped bool
	Gbps    float64
	P50US   float64
	Mem     string // gdr.mem of the half: host, gpu or gpu-emulated
}

// HalfSkipped is why the comparison of host half h and GPU half g cannot
// be made ("" when neither was skipped): the cause every pingpong test
// shares (probeWhy, rc.Probe's skip), else absent (why the GPU half cannot
// run here), else the peer's.
func HalfSkipped(h, g Half, probeWhy, absent string) string {
	if !h.Skipped && !g.Skipped {
		return ""
	}
	why := probeWhy
	if why == "" {
		why = absent
	}
	if why == "" {
		why = "the peer asked to skip: see the skipped subtest's log"
	}
	half := "GPU-memory"
	if h.Skipped {
		half = "host-memory"
	}
	return fmt.Sprintf("PP-09 needs both halves, and the %s half was skipped: %s", half, why)
}

// HalvesDone is nil when host half h and GPU half g both ran and passed;
// otherwise the parent's finding, which only points at the failed
// subtest: that one carries the cause and its remedy.
func HalvesDone(h, g Half) error {
	if h.Done && g.Done {
		return nil
	}
	return verdict.Failf("", "host memory passed: %v, GPU memory passed: %v; see the failed subtests above", h.Done, g.Done)
}

// Compare is the side-by-side report of host half h and GPU half g at
// size bytes (no threshold: PP-07 and PP-08 hold those), with the line for
// the test log.
func Compare(h, g Half, size int) (Judgement, string) {
	var v Judgement
	v.attr("mem", g.Mem)
	v.attr("size_bytes", size)
	v.attr("bw_gbit_s_host", h.Gbps)
	v.attr("bw_gbit_s_gpu", g.Gbps)
	v.attr("lat_us_p50_host", h.P50US)
	v.attr("lat_us_p50_gpu", g.P50US)
	v.attr("lat_mode", "write_with_imm+cq (both halves)")
	bwRatio, latRatio := ratio(g.Gbps, h.Gbps), ratio(g.P50US, h.P50US)
	v.attr("bw_ratio_gpu_host", bwRatio)
	v.attr("lat_ratio_gpu_host", latRatio)
	return v, fmt.Sprintf("WRITE %d B: host %.3f Gb/s, GPU %.3f Gb/s (GPU/host %.3f); WRITE %d B p50: host %.2f us, GPU %.2f us (GPU/host %.3f)",
		size, h.Gbps, g.Gbps, bwRatio, LatSize, h.P50US, g.P50US, latRatio)
}
