package soak

import (
	"math"

	"github.com/gdrconf/gdrconf/internal/counters"
)

// Downsample is s with at most maxSamples samples, for a page or a summary
// that must stay readable and small over hours (8 rails x 8 h at 10 s is
// 2880 samples a rail). Consecutive samples are bucketed, each bucket
// becoming one sample at its last sample's time:
//   - a rail's Gbps is the bucket's mean (to the Mbit/s), GbpsMin and
//     GbpsMax its extremes,
//     so that a dip of one sample survives as the bucket's minimum;
//   - a rail's State is the first that was not ACTIVE, if any was not (a
//     DOWN sample must not vanish), else the last;
//   - counters keep each key's last cumulative value in the bucket (what
//     Rates needs: the rise over the run is unchanged);
//   - Link is the bucket's last mlxlink reading;
//   - each GPU value is its worst in the bucket: the lowest clocks and copy
//     rate, the highest temperature and power, every throttle reason seen.
//
// Events are kept whole (they are few, and each is a moment that matters).
// s itself is not changed; with maxSamples <= 0 or no more samples than it,
// s is returned as it is. Downsampled holds the original count.
func Downsample(s *Series, maxSamples int) *Series {
	n := len(s.Samples)
	if maxSamples <= 0 || n <= maxSamples {
		return s
	}
	out := *s
	if out.Downsampled == 0 {
		out.Downsampled = n
	}
	out.Samples = make([]Sample, 0, maxSamples)
	for b := 0; b < maxSamples; b++ {
		lo, hi := b*n/maxSamples, (b+1)*n/maxSamples
		if lo < hi {
			out.Samples = append(out.Samples, bucket(s.Samples[lo:hi], len(s.Rails), len(s.GPUs)))
		}
	}
	return &out
}

// bucket folds samples (at least one) into one, as Downsample says.
func bucket(xs []Sample, rails, gpus int) Sample {
	last := xs[len(xs)-1]
	out := Sample{At: last.At, Rails: make([]RailSample, rails)}
	for ri := range out.Rails {
		var sum float64
		var got int
		var r RailSample
		var order []counters.Key
		vals := map[counters.Key]uint64{}
		for _, x := range xs {
			if ri >= len(x.Rails) {
				continue
			}
			rs := x.Rails[ri]
			for _, v := range []*float64{rs.Gbps, rs.GbpsMin} {
				if v != nil {
					r.GbpsMin = lower(r.GbpsMin, *v)
				}
			}
			for _, v := range []*float64{rs.Gbps, rs.GbpsMax} {
				if v != nil {
					r.GbpsMax = higher(r.GbpsMax, *v)
				}
			}
			if rs.Gbps != nil {
				sum += *rs.Gbps
				got++
			}
			if rs.State != "" && (r.State == "" || r.State == "ACTIVE") {
				r.State = rs.State
			}
			for _, c := range rs.Counters {
				if _, ok := vals[c.Key]; !ok {
					order = append(order, c.Key)
				}
				vals[c.Key] = c.Value
			}
			if rs.Link != nil {
				r.Link = rs.Link
			}
		}
		if got > 0 {
			// To the Mbit/s: more digits are noise, and cost a
			// summary.json of a fleet megabytes.
			mean := math.Round(sum/float64(got)*1000) / 1000
			r.Gbps = &mean
		}
		if got <= 1 && r.GbpsMin != nil && r.GbpsMax != nil && *r.GbpsMin == *r.GbpsMax {
			r.GbpsMin, r.GbpsMax = nil, nil // one value: nothing to spread
		}
		for _, k := range order {
			r.Counters = append(r.Counters, Count{Key: k, Value: vals[k]})
		}
		out.Rails[ri] = r
	}
	if gpus == 0 {
		return out
	}
	any := false
	g := make([]GPUSample, gpus)
	for _, x := range xs {
		if len(x.GPUs) != gpus {
			continue
		}
		any = true
		for gi, v := range x.GPUs {
			w := &g[gi]
			w.SMClockMHz = lowerP(w.SMClockMHz, v.SMClockMHz)
			w.MemClockMHz = lowerP(w.MemClockMHz, v.MemClockMHz)
			w.CopyGbps = lowerP(w.CopyGbps, v.CopyGbps)
			w.TempC = higherP(w.TempC, v.TempC)
			w.PowerW = higherP(w.PowerW, v.PowerW)
			if v.Throttle != nil {
				t := *v.Throttle
				if w.Throttle != nil {
					t |= *w.Throttle
				}
				w.Throttle = &t
			}
		}
	}
	if any {
		out.GPUs = g
	}
	return out
}

func lower(p *float64, v float64) *float64 {
	if p == nil || v < *p {
		return &v
	}
	return p
}

func higher(p *float64, v float64) *float64 {
	if p == nil || v > *p {
		return &v
	}
	return p
}

func lowerP(p, v *float64) *float64 {
	if v == nil {
		return p
	}
	return lower(p, *v)
}

func higherP(p, v *float64) *float64 {
	if v == nil {
		return p
	}
	return higher(p, *v)
}
