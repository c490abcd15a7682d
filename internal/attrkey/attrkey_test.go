package attrkey

import (
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
