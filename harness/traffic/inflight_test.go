//go:build rdma

package traffic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAckTimeout(t *testing.T) {
	assert.Equal(t, 67108864*time.Nanosecond, ackTimeout(14), "perftest's default: 4.096 us x 2^14")
	assert.Zero(t, ackTimeout(0), "0: no timer")
	assert.Zero(t, ackTimeout(40), "out of range: no timer rather than an overflow")
}

func TestInflightCap(t *testing.T) {
	// 1 MiB WRs, 4 ms each alone: 4 fit in half of 67 ms over two
	// directions, but 8 MiB (8 WRs) are always allowed.
	d, why := InflightCap(128, 1<<20, 1, 14, 4*time.Millisecond)
	assert.Equal(t, 8, d)
	assert.Contains(t, why, "8 of 128 WRs of 1048576 B in flight per queue pair (8388608 B)")
	assert.Contains(t, why, "4 complete within half the ACK timeout (67.108864ms, GDR_IB_TIMEOUT=14), and 8388608 B are always allowed")
	// 1 ms each: 16 fit, above the floor.
	d, why = InflightCap(128, 1<<20, 1, 14, time.Millisecond)
	assert.Equal(t, 16, d)
	assert.NotContains(t, why, "always allowed")
	// The lab under load (430 ms per 1 MiB WR): none fit; the floor holds.
	d, _ = InflightCap(128, 1<<20, 1, 14, 430*time.Millisecond)
	assert.Equal(t, 8, d)
	// WRs larger than the floor: one, never none, and it says so.
	d, why = InflightCap(128, 16<<20, 1, 14, time.Second)
	assert.Equal(t, 1, d)
	assert.Contains(t, why, ": one, the least there is")
	// Several queue pairs share the round-trip budget.
	d, _ = InflightCap(128, 1<<20, 2, 14, 500*time.Microsecond)
	assert.Equal(t, 16, d)
	// 128 x 64 KiB is the floor itself (the delayed link's clean run):
	// GDR_TX_DEPTH stands, no reason recorded.
	d, why = InflightCap(128, 64<<10, 1, 14, 50*time.Millisecond)
	assert.Equal(t, 128, d)
	assert.Empty(t, why)
	// No ACK timer (GDR_IB_TIMEOUT=0) or no measurement: no cap.
	for _, c := range []struct {
		exp int
		rtt time.Duration
	}{{0, time.Millisecond}, {14, 0}} {
		d, why = InflightCap(128, 1<<20, 1, c.exp, c.rtt)
		assert.Equal(t, 128, d)
		assert.Empty(t, why)
	}
}

// A software device's bandwidth point moves at most SoftwareBytesPerPoint
// per queue pair; hardware keeps GDR_BW_ITERS.
func TestPointIters(t *testing.T) {
	assert.Equal(t, 200, PointIters(200, 1<<20, false), "hardware keeps GDR_BW_ITERS")
	assert.Equal(t, 64, PointIters(200, 1<<20, true), "64 MiB of 1 MiB WRs")
	assert.Equal(t, 1000, PointIters(1000, 64<<10, true), "lab-bench's 1000 x 64 KiB stands")
	assert.Equal(t, 200, PointIters(200, 64<<10, true), "1024 fit: GDR_BW_ITERS stands")
	assert.Equal(t, 8, PointIters(200, 32<<20, true), "never fewer than 8")
	assert.Equal(t, 5, PointIters(5, 16<<20, true), "never more than GDR_BW_ITERS")
	sum, bytes := RailSum([]RailResult{{Gbps: 1, Soft: true}, {Gbps: 2}}, 1<<20, 200)
	assert.InDelta(t, 3.0, sum, 1e-9)
	assert.Equal(t, int64(64+200)<<20, bytes, "a software rail moved 64 of its WRs")
}
