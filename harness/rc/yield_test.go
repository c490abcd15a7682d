//go:build rdma

package rc

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The yield threshold: software devices keep the lab's 20 us; hardware
// waits out twice a moderation window at the port's rate (shared by the
// queue pairs) plus the margin, so a 1 MiB run at 400 Gb/s never yields in
// a window (2.1 ms) and a 4 KiB one past 116 us; an unknown rate is taken
// as 1 Gb/s; nonsense sizes do not divide by zero or overflow.
func TestYieldAfter(t *testing.T) {
	assert.Equal(t, 20*time.Microsecond, YieldAfter(true, 2.5, 1<<20, 100, 1), "rxe keeps the measured setting")
	assert.Equal(t, 20*time.Microsecond, YieldAfter(true, 0, 4096, 1, 8))

	// 100 x 1 MiB x 8 bit / 400 Gb/s = 2.097 ms; x2 + 0.1 ms.
	mib := YieldAfter(false, 400, 1<<20, 100, 1)
	assert.InDelta(t, float64(2*2097152*time.Nanosecond+100*time.Microsecond), float64(mib), float64(time.Microsecond))
	assert.Greater(t, mib, 2*time.Millisecond, "longer than one window: no yield while the NIC is busy")
	// 100 x 4 KiB at 400 Gb/s: 8.2 us window.
	small := YieldAfter(false, 400, 4096, 100, 1)
	assert.InDelta(t, float64(2*8192*time.Nanosecond+100*time.Microsecond), float64(small), float64(time.Microsecond))
	// Four QPs share the port: each one's window is four times longer.
	assert.InDelta(t, float64(4*2*2097152*time.Nanosecond+100*time.Microsecond), float64(YieldAfter(false, 400, 1<<20, 100, 4)), float64(time.Microsecond))
	// Unknown rate: 1 Gb/s.
	assert.Equal(t, YieldAfter(false, 1, 4096, 100, 1), YieldAfter(false, 0, 4096, 100, 1))
	assert.Equal(t, YieldAfter(false, 1, 4096, 100, 1), YieldAfter(false, math.NaN(), 4096, 100, 1))
	// Degenerate arguments: one WR, one stream; huge ones cap at an hour.
	assert.Equal(t, YieldAfter(false, 100, 1, 1, 1), YieldAfter(false, 100, 0, 0, 0))
	assert.Equal(t, time.Hour, YieldAfter(false, 0, 1<<30, 8192, 64))
}
