package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/counters"
)

// long is one rail and one GPU over n samples 10 s apart: 380 Gbit/s,
// 1980 MHz, 60 C, a symbol error counter that rises once.
func long(n int) *Series {
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	sym := counters.Key{Device: "mlx5_0", Port: 1, Source: counters.Port, Name: "symbol_error"}
	s := &Series{Version: Version, Host: "h", Start: t0, End: t0.Add(time.Duration(n) * 10 * time.Second), Interval: 10 * time.Second,
		Rails: []Rail{{Device: "mlx5_0", Port: 1}}, GPUs: []GPU{{PCI: "0000:1b:00.0"}},
		Events: []Event{{At: t0.Add(time.Hour), Kind: Xid, Device: "0000:1b:00.0", Text: "NVRM: Xid 79"}}}
	for i := 0; i < n; i++ {
		rs := RailSample{Gbps: f(380), State: "ACTIVE"}
		if i == 0 {
			rs.Counters = []Count{{Key: sym, Value: 10}}
		}
		if i == n/2 {
			rs.Counters = []Count{{Key: sym, Value: 14}}
		}
		var th uint64
		s.Samples = append(s.Samples, Sample{At: t0.Add(time.Duration(i+1) * 10 * time.Second), Rails: []RailSample{rs},
			GPUs: []GPUSample{{SMClockMHz: f(1980), TempC: f(60), PowerW: f(500), Throttle: &th}}})
	}
	return s
}

// One sample's dip, one DOWN sample, one throttled sample and one hot one
// survive a downsample of 2880 samples to 240; counters keep their rise.
func TestDownsampleKeepsTheWorst(t *testing.T) {
	s := long(2880)
	s.Samples[1001].Rails[0].Gbps = f(12)
	s.Samples[2000].Rails[0].State = "DOWN"
	s.Samples[2000].Rails[0].Gbps = nil
	s.Samples[1500].GPUs[0].SMClockMHz = f(1200)
	var slowdown uint64 = 0x20 // nvmlClocksEventReasonSwThermalSlowdown
	s.Samples[1500].GPUs[0].Throttle = &slowdown
	s.Samples[2500].GPUs[0].TempC = f(88)
	before := Rates(s)

	d := Downsample(s, 240)
	require.Len(t, d.Samples, 240)
	assert.Equal(t, 2880, d.Downsampled)
	assert.Equal(t, 0, s.Downsampled, "the input is not changed")
	assert.Len(t, s.Samples, 2880)
	require.NoError(t, d.Validate())

	var minBW, maxTemp, minClock float64 = 1e9, 0, 1e9
	var down bool
	var th uint64
	for _, x := range d.Samples {
		r := x.Rails[0]
		if r.GbpsMin != nil {
			minBW = min(minBW, *r.GbpsMin)
		}
		down = down || r.State == "DOWN"
		g := x.GPUs[0]
		maxTemp, minClock = max(maxTemp, *g.TempC), min(minClock, *g.SMClockMHz)
		th |= *g.Throttle
	}
	assert.Equal(t, 12.0, minBW, "the dip is the bucket's minimum")
	assert.True(t, down, "the DOWN sample's state survives")
	assert.Equal(t, 88.0, maxTemp)
	assert.Equal(t, 1200.0, minClock)
	assert.Equal(t, slowdown, th)
	// The dip's bucket (12 samples) has its mean between the dip and the rest.
	b := d.Samples[1001/12].Rails[0]
	assert.Equal(t, 349.333, *b.Gbps, "(11*380+12)/12 to the Mbit/s")
	assert.Equal(t, 380.0, *b.GbpsMax)
	assert.Equal(t, s.Samples[1001/12*12+11].At, d.Samples[1001/12].At, "a bucket is at its last sample's time")

	after := Rates(d)
	require.Len(t, after, len(before))
	assert.Equal(t, before[0].Rise, after[0].Rise, "the counter's rise over the run is kept")
	assert.Equal(t, s.Events, d.Events, "events are kept whole")

	// Downsampled again, the extremes carry over and the original count stays.
	dd := Downsample(d, 24)
	assert.Equal(t, 2880, dd.Downsampled)
	minBW = 1e9
	for _, x := range dd.Samples {
		if x.Rails[0].GbpsMin != nil {
			minBW = min(minBW, *x.Rails[0].GbpsMin)
		}
	}
	assert.Equal(t, 12.0, minBW)
}

// A series within the limit comes back as it is; so does any with no limit.
func TestDownsampleShortIsUnchanged(t *testing.T) {
	s := long(100)
	assert.Same(t, s, Downsample(s, 240))
	assert.Same(t, s, Downsample(s, 0))
	d := Downsample(s, 7)
	assert.Len(t, d.Samples, 7)
	assert.Equal(t, s.Samples[99].At, d.Samples[6].At, "the last bucket ends at the last sample")
}
