package soak

import (
	"sort"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
)

// CounterRate is one counter's rise on one rail over the run.
type CounterRate struct {
	Rail int          `json:"rail"` // index into Series.Rails
	Key  counters.Key `json:"key"`
	// Rise is the sum of the counter's increases between samples; a value
	// that went down (the counter was cleared or wrapped) counts from zero
	// again and sets Reset.
	Rise  uint64 `json:"rise"`
	Reset bool   `json:"reset,omitempty"`
	// Over is the time between the counter's first and last sample.
	Over time.Duration `json:"over_ns"`
	// First and Last are when it first and last rose; zero when it never
	// rose.
	First time.Time `json:"first,omitempty"`
	Last  time.Time `json:"last,omitempty"`
}

// PerHour is the rise per hour; ok is false when the counter was seen at
// one moment only, so no rate can be told.
func (c CounterRate) PerHour() (rate float64, ok bool) {
	if c.Over <= 0 {
		return 0, false
	}
	return float64(c.Rise) / c.Over.Hours(), true
}

// Rates is every counter's rise per rail, from the samples' cumulative
// values (a counter repeated only when it changed), ordered by rail and
// key. Counters that never rose are included with Rise 0, so a table can
// show that they were watched.
func Rates(s *Series) []CounterRate {
	type state struct {
		rate CounterRate
		last uint64
		seen time.Time
	}
	var out []CounterRate
	for ri := range s.Rails {
		by := map[counters.Key]*state{}
		for _, x := range s.Samples {
			if ri >= len(x.Rails) {
				continue
			}
			for _, c := range x.Rails[ri].Counters {
				st, ok := by[c.Key]
				if !ok {
					by[c.Key] = &state{rate: CounterRate{Rail: ri, Key: c.Key}, last: c.Value, seen: x.At}
					continue
				}
				var up uint64
				if c.Value >= st.last {
					up = c.Value - st.last
				} else {
					st.rate.Reset = true
					up = c.Value
				}
				if up > 0 {
					if st.rate.First.IsZero() {
						st.rate.First = x.At
					}
					st.rate.Last = x.At
					st.rate.Rise += up
				}
				st.last = c.Value
				st.rate.Over = x.At.Sub(st.seen)
			}
		}
		// A counter that changed no more after its first value was watched
		// until the last sample: its rate is over the whole run since then.
		if n := len(s.Samples); n > 0 {
			end := s.Samples[n-1].At
			for _, st := range by {
				st.rate.Over = end.Sub(st.seen)
			}
		}
		keys := make([]counters.Key, 0, len(by))
		for k := range by {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			out = append(out, by[k].rate)
		}
	}
	return out
}
