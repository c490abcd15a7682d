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
