package attrkey

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	for _, k := range []string{"gdr.bw_gbit_s", "gdr.copy_gbyte_s", "gdr.lat_us_p50", "gdr.size_bytes", "bar1_free_mib",
		"gdr.gpu", "gdr.nic", "gdr.path", "gdr.lat_mode", "gdr.copy_fraction", "gdr.bw_ratio_gpu_host", "gdr.min_bw_gbit_s",
		"gdr.max_lat_us", "gdr.rate_gbit_s", "gdr.link_gt_s", "gdr.iters"} {
		assert.NoError(t, Check(k), k)
	}
	for _, k := range []string{"gdr.bw_gbps", "gdr.link_0000:00:06.0", "gdr.Link", "gdr.bw_mbps", "gdr.size", "gdr.h2d_gbps",
		"gdr.lat_p50", "gdr.", "gdr.a__b", "gdr.acs_0000_02_00_0x", "gdr.copy"} {
		assert.Error(t, Check(k), k)
	}
	// The failure attributes harness/testenv records (issue 18's contract):
	// descriptive words, no quantity, so no unit is asked of them.
	for _, k := range []string{"gdr.cause", "gdr.remedy", "gdr.outcome", "gdr.measured", "gdr.threshold",
		"gdr.threshold_source", "gdr.failures_count"} {
		assert.NoError(t, Check(k), k)
	}
	assert.NoError(t, CheckPart("acs_"))
	assert.Error(t, CheckPart("link_0000:"))
	assert.Error(t, CheckPart("_gbps"))
}

func TestUnitOf(t *testing.T) {
	for k, want := range map[string]string{"gdr.bw_gbit_s": "Gbit/s", "gdr.lat_us_p99": "µs", "gdr.copy_gbyte_s_mean": "GB/s",
		"gdr.size_bytes": "B", "gdr.bar1_total_mib": "MiB", "gdr.link_gt_s": "GT/s"} {
		_, d, ok := UnitOf(k)
		assert.True(t, ok, k)
		assert.Equal(t, want, d, k)
	}
	_, _, ok := UnitOf("gdr.gpu_count")
	assert.False(t, ok)
	_, _, ok = UnitOf("gdr.status")
	assert.False(t, ok)
}

// UnitOf reads every key as the split-and-join it replaced did, allocating
// nothing.
func TestUnitOfAsBefore(t *testing.T) {
	before := func(key string) (string, string, bool) {
		words := strings.Split(strings.TrimPrefix(key, Prefix), "_")
		for i := 1; i < len(words); i++ {
			rest := strings.Join(words[i:], "_")
			for _, u := range Units {
				if rest == u.Word || strings.HasPrefix(rest, u.Word+"_") {
					return u.Word, u.Display, true
				}
			}
		}
		return "", "", false
	}
	keys := []string{"", "gdr.", "gdr._", "gdr.us", "gdr._us", "gdr.x_", "gdr.a__gbit_s", "gdr.a_gbit_s_", "gdr.a_gbit", "gdr.a_gbitx_s",
		"gdr.lat_us_p50", "gdr.bw_ratio_gpu_host", "bw_gbit_s", "gdr.min_copy_fraction", "gdr.bar1_total_mib_x_us"}
	for _, u := range Units {
		keys = append(keys, "gdr.x_"+u.Word, "gdr.x_"+u.Word+"_p99", "gdr."+u.Word, "gdr.x_"+u.Word+"x", "gdr.x__"+u.Word)
	}
	for _, k := range keys {
		w1, d1, ok1 := before(k)
		w2, d2, ok2 := UnitOf(k)
		assert.Equal(t, []any{w1, d1, ok1}, []any{w2, d2, ok2}, k)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { UnitOf("gdr.copy_gbyte_s_mean") }))
}
