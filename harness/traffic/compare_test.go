//go:build rdma

package traffic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestHalfSkipped(t *testing.T) {
	ran := Half{Done: true}
	assert.Empty(t, HalfSkipped(ran, ran, "", ""))
	skipped := Half{Skipped: true}
	assert.Equal(t, "PP-09 needs both halves, and the host-memory half was skipped: no RDMA device", HalfSkipped(skipped, Half{}, "no RDMA device", "no GPU"))
	assert.Equal(t, "PP-09 needs both halves, and the GPU-memory half was skipped: no GPU", HalfSkipped(ran, skipped, "", "no GPU"))
	assert.Equal(t, "PP-09 needs both halves, and the GPU-memory half was skipped: the peer asked to skip: see the skipped subtest's log", HalfSkipped(ran, skipped, "", ""))
}

// The parent of two halves fails when either did, without a remedy of its
// own: the failed subtest carries it.
func TestHalvesDone(t *testing.T) {
	ran, failed := Half{Done: true}, Half{}
	assert.NoError(t, HalvesDone(ran, ran))
	f, ok := verdict.As(HalvesDone(ran, failed))
	require.True(t, ok)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "host memory passed: true, GPU memory passed: false; see the failed subtests above", f.Cause)
	assert.Empty(t, f.Remedy)
}

func TestCompare(t *testing.T) {
	h := Half{Done: true, Gbps: 400, P50US: 2, Mem: "host"}
	g := Half{Done: true, Gbps: 300, P50US: 3, Mem: "gpu"}
	v, line := Compare(h, g, 1<<20)
	assert.False(t, v.Failed(), "no threshold on the ratios")
	keys := make([]string, len(v))
	for i, e := range v {
		keys[i] = e.Key
	}
	assert.Equal(t, []string{"mem", "size_bytes", "bw_gbit_s_host", "bw_gbit_s_gpu", "lat_us_p50_host", "lat_us_p50_gpu", "lat_mode", "bw_ratio_gpu_host", "lat_ratio_gpu_host"}, keys)
	assert.Equal(t, "gpu", v[0].Value)
	assert.Equal(t, 0.75, v[7].Value)
	assert.Equal(t, 1.5, v[8].Value)
	assert.Equal(t, "WRITE 1048576 B: host 400.000 Gb/s, GPU 300.000 Gb/s (GPU/host 0.750); WRITE 2 B p50: host 2.00 us, GPU 3.00 us (GPU/host 1.500)", line)
	_, line = Compare(Half{}, g, 4096)
	assert.Contains(t, line, "(GPU/host 0.000)", "nothing to compare against")
}
