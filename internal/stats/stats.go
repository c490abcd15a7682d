// Package stats turns latency samples and byte counts into the numbers the
// pingpong tests report, computed the way perftest computes them so the lab
// can compare our harness with ib_write_lat/ib_write_bw.
package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Latency summarises round-trip samples. Like perftest's *_lat tools, a
// one-way latency is half a round trip.
type Latency struct {
	N              int
	Min, Max       time.Duration
	P50, P99, P999 time.Duration // "typical", 99% and 99.9% percentiles
	Mean           time.Duration
	StdDev         time.Duration
}

// Percentile returns the p-quantile (0 <= p <= 1) of sorted samples the way
// perftest indexes its sorted delta array: element floor(p*n), clamped to the
// last one. sorted must be ascending and non-empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	i := int(p * float64(n))
	if i >= n {
		i = n - 1
	}
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// Median is perftest's "typical": the middle sample, or the mean of the two
// middle samples for an even count. sorted must be ascending and non-empty.
func Median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Summarize computes Latency over samples (not modified). halve divides every
// sample by two first (round trips to one-way latency).
func Summarize(samples []time.Duration, halve bool) (Latency, error) {
	if len(samples) == 0 {
		return Latency{}, errors.New("stats: no latency samples")
	}
	s := make([]time.Duration, len(samples))
	for i, v := range samples {
		if v < 0 {
			return Latency{}, fmt.Errorf("stats: negative sample %v at %d", v, i)
		}
		if halve {
			v /= 2
		}
		s[i] = v
	}
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += float64(v)
	}
	mean := sum / float64(len(s))
	var sq float64
	for _, v := range s {
		d := float64(v) - mean
		sq += d * d
	}
	return Latency{
		N: len(s), Min: s[0], Max: s[len(s)-1],
		P50: Median(s), P99: Percentile(s, 0.99), P999: Percentile(s, 0.999),
		Mean: time.Duration(mean), StdDev: time.Duration(math.Sqrt(sq / float64(len(s)))),
	}, nil
}

// US converts a duration to microseconds.
func US(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Gbps is the bandwidth of bytes moved in el, in 10^9 bits per second
// (the unit NIC port rates use).
func Gbps(bytes int64, el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return float64(bytes) * 8 / el.Seconds() / 1e9
}

// MBps is perftest's "MB/sec" column: 2^20 bytes per second.
func MBps(bytes int64, el time.Duration) float64 {
	if el <= 0 {
		return 0
	}
	return float64(bytes) / el.Seconds() / (1 << 20)
}

// GbpsFromMBps converts perftest's MB/sec to Gbit/s.
func GbpsFromMBps(mb float64) float64 { return mb * (1 << 20) * 8 / 1e9 }

// Interval is one thread's timed run: first post to last completion, in
// nanoseconds of CLOCK_MONOTONIC (harness/verbs' clock).
type Interval struct{ Start, End int64 }

// Duration is the interval's length.
func (i Interval) Duration() time.Duration { return time.Duration(i.End - i.Start) }

// Union is the wall time over which several threads moved their bytes
// together: earliest start to latest end. An aggregate rate is all their
// bytes over it, on one clock as perftest -q measures (one process, one
// start and one end for every QP), not over the longest single run, which
// leaves out the time the threads were not all running.
func Union(iv []Interval) (Interval, error) {
	if len(iv) == 0 {
		return Interval{}, errors.New("stats.Union: no intervals")
	}
	u := iv[0]
	for n, i := range iv {
		if i.End < i.Start || i.Start <= 0 {
			return Interval{}, fmt.Errorf("stats.Union: interval %d runs from %d ns to %d ns: not a measured run", n, i.Start, i.End)
		}
		u.Start, u.End = min(u.Start, i.Start), max(u.End, i.End)
	}
	return u, nil
}
