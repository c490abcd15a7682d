package soak

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// dip is one run of consecutive measured samples below a rail's floor.
type dip struct {
	first, last int // sample indexes
	length      time.Duration
	lowest      float64
}

// dips are rail ri's runs below floor. A sample whose rate was not
// measured neither starts nor ends a dip; its interval counts towards one
// only inside it.
func (s *Series) dips(ri int, floor float64) []dip {
	var out []dip
	var cur *dip
	for i, x := range s.Samples {
		g := x.Rails[ri].Gbps
		if g == nil {
			continue
		}
		if *g >= floor {
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur == nil {
			cur = &dip{first: i, lowest: *g}
		}
		cur.last = i
		cur.lowest = min(cur.lowest, *g)
	}
	if cur != nil {
		out = append(out, *cur)
	}
	// A dip lasts its samples' intervals, unmeasured ones inside it too.
	for k := range out {
		for i := out[k].first; i <= out[k].last; i++ {
			out[k].length += s.span(i)
		}
	}
	return out
}

// measured is how many samples of rail ri carry a rate.
func (s *Series) measured(ri int) int {
	n := 0
	for _, x := range s.Samples {
		if x.Rails[ri].Gbps != nil {
			n++
		}
	}
	return n
}

// JudgeDips is SOAK-01: no rail below its floor (Rail.Floor) for longer
// than th.MaxDip. Every dip is counted and timed (gdr.dip_count,
// gdr.dip_longest_sec, gdr.dip_total_sec); a rail without a floor is
// absent, one whose rate was never measured not judged. A rail whose
// traffic stopped on an error fails, floor or not (stopped).
func JudgeDips(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqDip); r != nil {
		return r
	}
	var out []Result
	for ri, rail := range s.Rails {
		r := Result{Req: ReqDip, Device: rail.Device}
		s.stopped(&r, ri)
		switch {
		case rail.Floor == nil:
			r.add(*verdict.Absentf("", "%s has no bandwidth floor (Rail.Floor: a software device's rate is fictional, or no floor is known for the NIC): its dips cannot be judged", railName(rail)))
		case s.measured(ri) == 0:
			r.add(*verdict.NotJudgedf("", "%s: none of the %d samples measured its bandwidth, so no dip can be judged", railName(rail), len(s.Samples)))
		default:
			floor := *rail.Floor
			ds := s.dips(ri, floor)
			var total, longest time.Duration
			li := -1
			for k, d := range ds {
				total += d.length
				if d.length > longest {
					longest, li = d.length, k
				}
			}
			r.count("dip_count", len(ds))
			r.num("dip_longest_sec", longest.Seconds())
			r.num("dip_total_sec", total.Seconds())
			r.num("max_dip_sec", th.MaxDip.Seconds())
			r.num("min_bw_gbit_s", floor)
			if longest > th.MaxDip {
				d := ds[li]
				src := rail.FloorSource
				if src == "" {
					src = "source not recorded"
				}
				r.add(verdict.Finding{
					Cause: fmt.Sprintf("%s was below its floor %s (%s) %s for %s in all; the longest, %s from %s, went down to %s, longer than the %s allowed",
						railName(rail), gbit(floor), src, plural(len(ds), "time", "times"), total, d.length, s.since(s.Samples[d.first].At), gbit(d.lowest), th.MaxDip),
					Remedy:    "look at what else loaded the host at that time (CPU or memory pressure, other traffic on the rail), the link's state and BER (SOAK-03, SOAK-04) and the GPU's clocks (SOAK-05) over the same minutes",
					Measured:  "gdr.dip_longest_sec",
					Threshold: "gdr.max_dip_sec",
					Source:    SrcDip,
					Evidence:  s.railEvidence(ri, d.first, d.last),
				})
			}
		}
		out = append(out, r)
	}
	return finish(s, out)
}

// stopped adds to r (SOAK-01) rail ri's traffic that ended on an error
// before the soak did: from then on the rail carried nothing, the longest
// dip there is, whether or not the rail has a floor (its later samples are
// not measured, so the dips alone would miss it). A stop within the last
// two intervals of a run that was cut is the cut's doing (the peer got the
// same signal), so it is only said.
func (s *Series) stopped(r *Result, ri int) {
	evs := s.railEvents(ri, Stopped)
	if len(evs) == 0 {
		return
	}
	e := evs[0]
	rail := s.Rails[ri]
	left := s.End.Sub(e.At)
	r.num("traffic_stopped_sec", e.At.Sub(s.Start).Seconds())
	if s.Cut != "" && left <= 2*s.Interval {
		r.add(verdict.Finding{Level: verdict.Info, Cause: fmt.Sprintf("%s: its traffic stopped %s as the run was cut (%s): %s", railName(rail), s.since(e.At), s.Cut, e.Text)})
		return
	}
	f := verdict.Finding{
		Cause: fmt.Sprintf("%s: its traffic stopped on an error %s, and the rail carried nothing for the %s the soak ran after it: %s",
			railName(rail), s.since(e.At), left.Round(time.Second), e.Text),
		Remedy:   "the error says what ended it: a peer that stopped (its own log), the NIC (ibv_devinfo, the kernel log) or the GPU (SOAK-07); run the soak again to see whether it recurs",
		Measured: "gdr.traffic_stopped_sec",
	}
	// A link that went down before the stop is the likely cause: an RC
	// connection ends once its retries run out while the link is down.
	var down *Event
	for _, d := range s.railEvents(ri, LinkDown) {
		if !d.At.After(e.At) {
			down = &d
		}
	}
	if down != nil {
		f.Cause += fmt.Sprintf("; its link went down before it, %s (%s)", s.since(down.At), down.Text)
		f.Remedy = "the link went down first (SOAK-03) and the connection's retries ran out while it was down: " + remedyLink
		f.Part = counters.PartLink
	}
	if i := s.sampleAt(e.At); i >= 0 {
		f.Evidence = s.railEvidence(ri, i, i)
	}
	r.add(f)
}

// sampleAt is the index of the sample taken at t, -1 if none.
func (s *Series) sampleAt(t time.Time) int {
	for i, x := range s.Samples {
		if x.At.Equal(t) {
			return i
		}
	}
	return -1
}

// JudgeStable is SOAK-06: each rail's mean rate in the last quarter of the
// run keeps th.MinStableRatio of its first quarter's
// (gdr.stable_ratio). The worst window of th.StableWindow is reported
// beside it (gdr.bw_gbit_s_worst_window), and named in a failure.
func JudgeStable(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqStable); r != nil {
		return r
	}
	var out []Result
	for ri, rail := range s.Rails {
		r := Result{Req: ReqStable, Device: rail.Device}
		var first, last []float64
		var idx []int
		for i, x := range s.Samples {
			if x.Rails[ri].Gbps != nil {
				idx = append(idx, i)
			}
		}
		if len(idx) < 4 {
			r.add(*verdict.NotJudgedf("", "%s: %d of %d samples measured its bandwidth, fewer than the 4 (one a quarter) a first and last quarter need", railName(rail), len(idx), len(s.Samples)))
			out = append(out, r)
			continue
		}
		t0, t1 := s.Samples[idx[0]].At, s.Samples[idx[len(idx)-1]].At
		q := t1.Sub(t0) / 4
		var fi, la []int
		for _, i := range idx {
			at := s.Samples[i].At
			switch {
			case !at.After(t0.Add(q)):
				first = append(first, *s.Samples[i].Rails[ri].Gbps)
				fi = append(fi, i)
			case !at.Before(t1.Add(-q)):
				last = append(last, *s.Samples[i].Rails[ri].Gbps)
				la = append(la, i)
			}
		}
		mf, ml := mean(first), mean(last)
		wm, wi, wj := s.worstWindow(ri, th.StableWindow)
		r.num("bw_gbit_s_first_quarter", mf)
		r.num("bw_gbit_s_last_quarter", ml)
		if wi >= 0 {
			r.num("bw_gbit_s_worst_window", wm)
		}
		if mf <= 0 {
			r.add(*verdict.NotJudgedf("", "%s moved nothing in the run's first quarter (mean %s): no ratio can be taken", railName(rail), gbit(mf)))
			out = append(out, r)
			continue
		}
		rt := ml / mf
		r.num("stable_ratio", rt)
		r.num("min_stable_ratio", th.MinStableRatio)
		if rt < th.MinStableRatio {
			worst := ""
			if wi >= 0 {
				worst = fmt.Sprintf("; its worst %s averaged %s, from %s", th.StableWindow, gbit(wm), s.since(s.Samples[wi].At))
			}
			ev := []string{"first quarter:"}
			for _, i := range edge(fi, 2, false) {
				ev = append(ev, s.railLine(ri, i))
			}
			ev = append(ev, "last quarter:")
			for _, i := range edge(la, 2, true) {
				ev = append(ev, s.railLine(ri, i))
			}
			if wi >= 0 {
				ev = append(ev, "worst window:", s.railLine(ri, wi), s.railLine(ri, wj))
			}
			r.add(verdict.Finding{
				Cause: fmt.Sprintf("%s sagged over the run: its last quarter averaged %s, %.2f of its first quarter's %s, below %.2f%s",
					railName(rail), gbit(ml), rt, gbit(mf), th.MinStableRatio, worst),
				Remedy:    "the rate decayed as the run went on: compare with the GPU's clocks and temperature (SOAK-05), the optic's temperature and BER (SOAK-04) and the host's CPU and memory load over the same time; a NIC or GPU that slows once warm needs its cooling checked",
				Measured:  "gdr.stable_ratio",
				Threshold: "gdr.min_stable_ratio",
				Source:    cmp.Or(th.StableSource, SrcStable),
				Evidence:  ev,
			})
		}
		out = append(out, r)
	}
	return finish(s, out)
}

// edge is the first n of xs, or the last n when last.
func edge(xs []int, n int, last bool) []int {
	if len(xs) <= n {
		return xs
	}
	if last {
		return xs[len(xs)-n:]
	}
	return xs[:n]
}

// worstWindow is the lowest mean rate of rail ri over any span of w (the
// measured samples from one to the last within w of it), and the first and
// last sample of that span; -1 when nothing was measured.
func (s *Series) worstWindow(ri int, w time.Duration) (float64, int, int) {
	best, bi, bj := math.Inf(1), -1, -1
	for i, x := range s.Samples {
		if x.Rails[ri].Gbps == nil {
			continue
		}
		var sum float64
		n, j := 0, i
		for k := i; k < len(s.Samples) && s.Samples[k].At.Sub(x.At) < w; k++ {
			if g := s.Samples[k].Rails[ri].Gbps; g != nil {
				sum += *g
				n++
				j = k
			}
		}
		// Only full windows: a span cut by the end of the run is noise.
		if s.Samples[len(s.Samples)-1].At.Sub(x.At) < w-s.Interval && bi >= 0 {
			break
		}
		if m := sum / float64(n); m < best {
			best, bi, bj = m, i, j
		}
	}
	return best, bi, bj
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
