package stats

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func us(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Microsecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Microsecond
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * time.Microsecond
	}
	cases := []struct {
		name string
		s    []time.Duration
		p    float64
		want time.Duration
	}{
		{"one sample", us(7), 0.99, 7 * time.Microsecond},
		{"p0", us(1, 2, 3), 0, 1 * time.Microsecond},
		{"p1 clamps", us(1, 2, 3), 1, 3 * time.Microsecond},
		{"p99 of 100", hundred, 0.99, 100 * time.Microsecond},
		{"p50 of 100", hundred, 0.5, 51 * time.Microsecond},
		{"p99 of 1000", thousand, 0.99, 991 * time.Microsecond},
		{"p99.9 of 1000", thousand, 0.999, 1000 * time.Microsecond},
		{"negative p clamps", us(1, 2), -1, 1 * time.Microsecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Percentile(c.s, c.p))
		})
	}
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2*time.Microsecond, Median(us(1, 2, 3)))
	assert.Equal(t, 2500*time.Nanosecond, Median(us(1, 2, 3, 4)))
	assert.Equal(t, 5*time.Microsecond, Median(us(5)))
}

func TestSummarize(t *testing.T) {
	l, err := Summarize(us(40, 20, 10, 30), true) // round trips
	require.NoError(t, err)
	assert.Equal(t, 4, l.N)
	assert.Equal(t, 5*time.Microsecond, l.Min)
	assert.Equal(t, 20*time.Microsecond, l.Max)
	assert.Equal(t, 12500*time.Nanosecond, l.P50)
	assert.Equal(t, 20*time.Microsecond, l.P99)
	assert.Equal(t, 20*time.Microsecond, l.P999)
	assert.Equal(t, 12500*time.Nanosecond, l.Mean)
	assert.InDelta(t, 5590, float64(l.StdDev), 2)

	in := us(3, 1, 2)
	l, err = Summarize(in, false)
	require.NoError(t, err)
	assert.Equal(t, us(3, 1, 2), in, "input not reordered")
	assert.Equal(t, 2*time.Microsecond, l.P50)

	_, err = Summarize(nil, false)
	assert.ErrorContains(t, err, "no latency samples")
	_, err = Summarize([]time.Duration{-1}, false)
	assert.ErrorContains(t, err, "negative sample")
}

func TestBandwidth(t *testing.T) {
	cases := []struct {
		bytes int64
		el    time.Duration
		gbps  float64
		mbps  float64
	}{
		{1_000_000_000, time.Second, 8, 953.674},
		{12_500_000_000, time.Second, 100, 11920.929},
		{65536 * 1000, 2 * time.Second, 0.262144, 31.25},
		{100, 0, 0, 0},
	}
	for _, c := range cases {
		assert.InDelta(t, c.gbps, Gbps(c.bytes, c.el), 1e-6)
		assert.InDelta(t, c.mbps, MBps(c.bytes, c.el), 1e-3)
	}
	assert.InDelta(t, 0.293601, GbpsFromMBps(35), 1e-6)
	assert.InDelta(t, US(1500*time.Nanosecond), 1.5, 1e-9)
}

func BenchmarkSummarize10k(b *testing.B) {
	s := make([]time.Duration, 10000)
	for i := range s {
		s[i] = time.Duration((i*7919)%10007) * time.Nanosecond
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Summarize(s, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGbps(b *testing.B) {
	var x float64
	for i := 0; b.Loop(); i++ {
		x += Gbps(int64(i), time.Second)
	}
	_ = x
}

// Two QPs that each ran 1 s but half a second apart moved their bytes over
// 1.5 s: the union, not the longest run (which would overstate the rate by
// half). Overlapping, nested and identical runs; bad input is an error.
func TestUnion(t *testing.T) {
	const s = int64(time.Second)
	for _, tc := range []struct {
		name string
		iv   []Interval
		want Interval
	}{
		{"one", []Interval{{10 * s, 11 * s}}, Interval{10 * s, 11 * s}},
		{"staggered", []Interval{{10 * s, 11 * s}, {10*s + s/2, 11*s + s/2}}, Interval{10 * s, 11*s + s/2}},
		{"nested", []Interval{{10 * s, 14 * s}, {11 * s, 12 * s}}, Interval{10 * s, 14 * s}},
		{"later first", []Interval{{12 * s, 13 * s}, {10 * s, 11 * s}}, Interval{10 * s, 13 * s}},
		{"same", []Interval{{10 * s, 11 * s}, {10 * s, 11 * s}, {10 * s, 11 * s}}, Interval{10 * s, 11 * s}},
	} {
		u, err := Union(tc.iv)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, u, tc.name)
	}
	u, _ := Union([]Interval{{10 * s, 11 * s}, {10*s + s/2, 11*s + s/2}})
	assert.Equal(t, 1500*time.Millisecond, u.Duration())
	// 2 x 1 GB over the union: 2 GB in 1.5 s, not in the longest run's 1 s.
	assert.InDelta(t, 2e9*8/1.5/1e9, Gbps(2e9, u.Duration()), 1e-9)

	_, err := Union(nil)
	assert.ErrorContains(t, err, "no intervals")
	_, err = Union([]Interval{{10 * s, 11 * s}, {12 * s, 11 * s}})
	assert.ErrorContains(t, err, "interval 1")
	_, err = Union([]Interval{{0, 0}})
	assert.ErrorContains(t, err, "not a measured run", "an unmeasured run (zero stamps) is no interval")
}
