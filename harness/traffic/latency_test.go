//go:build rdma

package traffic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/internal/stats"
)

func us(f float64) time.Duration { return time.Duration(f * float64(time.Microsecond)) }

// The peer's numbers travel as an out-of-band result and come back whole.
func TestLatencyResult(t *testing.T) {
	l := stats.Latency{P50: us(2), P99: us(3), P999: us(4), Min: us(1), Max: us(9), N: 1000}
	assert.Equal(t, l, latencyOf(resultOf("latency", l)))
	assert.Equal(t, "WRITE 2 B latency (one way, us): p50 2.00 p99 3.00 p99.9 4.00 min 1.00 max 9.00 over 1000 round trips", LatResult{Lat: l}.Log())
	assert.Equal(t, []time.Duration{5, 7}, deltas([]int64{10, 15, 22}))
	assert.Empty(t, deltas(nil))
	assert.Equal(t, "write_with_imm+cq", latMode(true))
	assert.Equal(t, "write+poll_last_byte", latMode(false))
}

func TestTailCeilings(t *testing.T) {
	p99, p999 := tailCeilings(3, 0, 0)
	assert.Equal(t, []float64{6, 12}, []float64{p99, p999})
	p99, p999 = tailCeilings(3, 5, 7)
	assert.Equal(t, []float64{5, 7}, []float64{p99, p999}, "GDR_MAX_LAT_P99_US / GDR_MAX_LAT_P999_US win")
}

func TestJudgeLatencyNoCeiling(t *testing.T) {
	why := "no threshold: software device (rxe on eth0), its timing is not a NIC's"
	v := JudgeLatency(LatResult{Lat: stats.Latency{P50: us(500)}, Ceil: rc.LatCeiling{Why: why}}, 0, 0)
	assert.Equal(t, Judgement{{Key: "threshold_source", Value: why}}, v)
}

func TestJudgeLatency(t *testing.T) {
	ceil := rc.LatCeiling{US: 3, Why: "default", Kind: "host", Source: "src"}
	ok := JudgeLatency(LatResult{Lat: stats.Latency{P50: us(2), P99: us(5), N: 1000}, Ceil: ceil}, 0, 0)
	assert.False(t, ok.Failed())
	assert.Equal(t, Judgement{{Key: "threshold_source", Value: "default"}, {Key: "max_lat_kind", Value: "host"}, {Key: "max_lat_source", Value: "src"},
		{Key: "max_lat_us_p50", Value: 3.0}, {Key: "max_lat_us_p99", Value: 6.0},
		{Key: "p999_judged", Value: "no: 1000 round trips, p99.9 needs 10000 (GDR_ITERS)"}}, ok)

	bad := JudgeLatency(LatResult{Lat: stats.Latency{P50: us(4), P99: us(7), P999: us(13), N: 10000}, Ceil: ceil}, 0, 0)
	var fails []string
	for _, e := range bad {
		if e.Finding != nil {
			assert.Equal(t, LatRemedy, e.Finding.Remedy)
			assert.False(t, e.Fatal, "every latency offender is reported")
			fails = append(fails, e.Finding.Cause)
		}
	}
	require.Len(t, fails, 3)
	assert.Equal(t, "WRITE 2 B latency p50 4.00 us is above the 3.00 us ceiling (default)", fails[0])
	assert.Equal(t, "WRITE 2 B latency p99 7.00 us is above the 6.00 us tail ceiling (p50 4.00 us): the tail shows jitter the median hides", fails[1])
	assert.Equal(t, "WRITE 2 B latency p99.9 13.00 us is above the 12.00 us ceiling", fails[2])
	assert.Contains(t, bad, Entry{Key: "max_lat_us_p999", Value: 12.0})
	// No kind: GDR_MAX_LAT_US set, no memory kind's ceiling named.
	v := JudgeLatency(LatResult{Lat: stats.Latency{P50: us(1)}, Ceil: rc.LatCeiling{US: 3, Why: "GDR_MAX_LAT_US=3"}}, 0, 0)
	assert.Equal(t, "max_lat_us_p50", v[1].Key)
}
