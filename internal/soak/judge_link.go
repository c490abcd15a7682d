package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/optics"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// flapCounter is the counter SOAK-03 judges (ports/<p>/counters and rxe's
// hw_counters spell it alike); SOAK-02 leaves it out.
const flapCounter = "link_downed"

// ceiling is the rate bound th puts on counter k, its source and the level
// a rate above it has; ok false for a counter no rate bound applies to
// (traffic, informational, unknown, and link_downed: SOAK-03).
func (th Thresholds) ceiling(k counters.Key, rail Rail) (limit float64, src string, level verdict.Level, why string, ok bool) {
	cl := counters.Classify(k)
	switch {
	case k.Source != counters.AER && k.Name == flapCounter:
		return 0, "", 0, "", false
	case k.Source == counters.Port && k.Name == "symbol_error":
		return th.MaxSymbolErrorsPerHour, SrcSymbolRate, verdict.Fail, "", true
	case cl.Kind == counters.Error:
		if w, soft := counters.SoftwareTimer[k.Name]; soft && k.Source == counters.HW && software(rail) {
			return th.MaxErrorsPerHour, SrcErrorRate, verdict.Warn, w, true
		}
		return th.MaxErrorsPerHour, SrcErrorRate, verdict.Fail, "", true
	case cl.Kind == counters.Corrected:
		return th.MaxCorrectedPerHour, SrcCorrectedRate, th.CorrectedLevel, "", true
	}
	return 0, "", 0, "", false
}

// JudgeRates is SOAK-02: every error counter of each rail (its port's
// counters and hw_counters, the AER counters of its NIC, its GPU and the
// PCIe functions between them) rose no faster per hour (Rates) than its
// bound: symbol errors th.MaxSymbolErrorsPerHour, other errors
// th.MaxErrorsPerHour, corrected errors th.MaxCorrectedPerHour (at
// th.CorrectedLevel). A counter shared by two rails (a switch port) is
// judged with the first. An AER total is judged only where no named AER
// counter of its function rose.
func JudgeRates(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqRates); r != nil {
		return r
	}
	byRail := map[int][]CounterRate{}
	for _, c := range Rates(s) {
		byRail[c.Rail] = append(byRail[c.Rail], c)
	}
	seen := map[counters.Key]bool{}
	var out []Result
	for ri, rail := range s.Rails {
		r := Result{Req: ReqRates, Device: rail.Device}
		rs := byRail[ri]
		if len(rs) == 0 {
			if why := s.unread(UnreadCounters); why != "" {
				r.add(*verdict.Absentf("", "%s: no counter was sampled%s", railName(rail), why))
			} else {
				r.add(*verdict.NotJudgedf("", "%s: no counter was sampled in %d samples: its error rates cannot be judged", railName(rail), len(s.Samples)))
			}
			out = append(out, r)
			continue
		}
		named := map[string]bool{} // AER functions with a named counter that rose
		for _, c := range rs {
			if c.Key.Source == counters.AER && !counters.IsTotal(c.Key) && c.Rise > 0 {
				named[c.Key.Device] = true
			}
		}
		worst, worstLimit, worstName := 0.0, th.MaxErrorsPerHour, ""
		var fs []verdict.Finding
		for _, c := range rs {
			if seen[c.Key] {
				continue
			}
			seen[c.Key] = true
			limit, src, level, why, ok := th.ceiling(c.Key, rail)
			if !ok || (counters.IsTotal(c.Key) && named[c.Key.Device]) {
				continue
			}
			ph, ok := c.PerHour()
			if !ok {
				continue
			}
			if level == verdict.Fail && (worstName == "" || worse(ph, limit, worst, worstLimit)) {
				worst, worstLimit, worstName = ph, limit, c.Key.String()
			}
			if ph <= limit || c.Rise == 0 {
				continue
			}
			cl := counters.Classify(c.Key)
			f := verdict.Finding{
				Level:     level,
				Device:    c.Key.Device,
				Cause:     fmt.Sprintf("%s rose by %d in %s, %.1f an hour, above %g an hour: %s (%s); first at %s, last at %s", c.Key, c.Rise, c.Over.Round(time.Second), ph, limit, cl.Meaning, cl.Cause, s.since(c.First), s.since(c.Last)),
				Measured:  "gdr.errors_per_hour",
				Threshold: "gdr.max_errors_per_hour",
				Source:    src,
				Evidence:  s.counterEvidence(ri, c.Key, 6),
			}
			if c.Reset {
				f.Cause += " (the counter was cleared during the run: its rise counts from zero after that)"
			}
			if why != "" {
				f.Cause += "; " + why
			}
			if level == verdict.Fail {
				f.Remedy, f.Part = counters.Remedy(cl.Cause), counters.PartOf(cl.Cause)
			}
			fs = append(fs, f)
		}
		// The failures first, then warnings: a test records the first's
		// values as its own.
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].Level == verdict.Fail && fs[j].Level != verdict.Fail })
		r.count("counters_count", len(rs))
		if worstName != "" {
			r.num("errors_per_hour", worst)
			r.num("max_errors_per_hour", worstLimit)
			r.attr("counter_name", worstName)
		}
		for _, f := range fs {
			r.add(f)
		}
		out = append(out, r)
	}
	return finish(s, out)
}

// worse says whether rate a (bound la) is worse than rate b (bound lb):
// past its bound before within it, then the faster.
func worse(a, la, b, lb float64) bool {
	if (a > la) != (b > lb) {
		return a > la
	}
	return a > b
}

// counterEvidence is up to n of counter k's values on rail ri, where it
// changed: "00:01:00 mlx5_1 port 1 counters/symbol_error = 40".
func (s *Series) counterEvidence(ri int, k counters.Key, n int) []string {
	var out []string
	for _, x := range s.Samples {
		for _, c := range x.Rails[ri].Counters {
			if c.Key == k {
				out = append(out, fmt.Sprintf("%s %s = %d", s.elapsed(x.At), k, c.Value))
			}
		}
	}
	if len(out) > n {
		out = append(out[:n/2], append([]string{"..."}, out[len(out)-(n-n/2):]...)...)
	}
	return out
}

// active says whether a port state is ACTIVE ("ACTIVE", sysfs' "4:
// ACTIVE").
func active(state string) bool {
	return strings.HasSuffix(strings.ToUpper(strings.TrimSpace(state)), "ACTIVE")
}

// downRun is a run of samples in which rail's port was not ACTIVE.
type downRun struct{ first, last int }

func (s *Series) downRuns(ri int) (runs []downRun, stateRead bool) {
	in := false
	for i, x := range s.Samples {
		st := x.Rails[ri].State
		if st == "" {
			continue
		}
		stateRead = true
		if active(st) {
			in = false
			continue
		}
		if !in {
			runs = append(runs, downRun{first: i})
			in = true
		}
		runs[len(runs)-1].last = i
	}
	return runs, stateRead
}

// railEvents are the events of kinds about rail ri, in time order.
func (s *Series) railEvents(ri int, kinds ...EventKind) []Event {
	var out []Event
	for _, e := range s.Events {
		mine := (e.Rail != nil && *e.Rail == ri) || (e.Rail == nil && e.Device != "" && e.Device == s.Rails[ri].Device)
		if !mine {
			continue
		}
		for _, k := range kinds {
			if e.Kind == k {
				out = append(out, e)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// JudgeFlaps is SOAK-03: no rail's link went down more than th.MaxFlaps
// times. Three witnesses, the most counted: the port's link_downed
// counter, samples whose port state was not ACTIVE, and the runner's link
// events. A rail with none of them read is not judged.
func JudgeFlaps(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqFlap); r != nil {
		return r
	}
	rates := Rates(s)
	var out []Result
	for ri, rail := range s.Rails {
		r := Result{Req: ReqFlap, Device: rail.Device}
		var downed *CounterRate
		for k := range rates {
			c := &rates[k]
			if c.Rail == ri && c.Key.Device == rail.Device && c.Key.Name == flapCounter && c.Key.Source != counters.AER {
				downed = c
			}
		}
		runs, stateRead := s.downRuns(ri)
		evs := s.railEvents(ri, LinkDown)
		if downed == nil && !stateRead && len(evs) == 0 {
			r.add(*verdict.NotJudgedf("", "%s: no sample read its port state or its link_downed counter, and no link event was recorded: its flaps cannot be judged%s", railName(rail), s.unread(UnreadCounters)))
			out = append(out, r)
			continue
		}
		var rise int
		if downed != nil {
			rise = int(downed.Rise)
		}
		flaps := max(rise, len(runs), len(evs))
		var downFor time.Duration
		for _, d := range runs {
			for i := d.first; i <= d.last; i++ {
				downFor += s.span(i)
			}
		}
		r.count("flaps_count", flaps)
		r.count("max_flaps_count", th.MaxFlaps)
		r.num("down_sec", downFor.Seconds())
		if flaps <= th.MaxFlaps {
			out = append(out, r)
			continue
		}
		// When: the events' times, else the down samples', else the
		// counter's first and last rise.
		var at []time.Time
		switch {
		case len(evs) > 0:
			for _, e := range evs {
				at = append(at, e.At)
			}
		case len(runs) > 0:
			for _, d := range runs {
				at = append(at, s.Samples[d.first].At)
			}
		default:
			at = append(at, downed.First, downed.Last)
		}
		var witness []string
		if downed != nil {
			witness = append(witness, fmt.Sprintf("link_downed +%d", rise))
		}
		if stateRead {
			witness = append(witness, fmt.Sprintf("%s not ACTIVE for %s", plural(len(runs), "run of samples", "runs of samples"), downFor))
		}
		if len(evs) > 0 {
			witness = append(witness, plural(len(evs), "link-down event", "link-down events"))
		}
		when := "first at " + s.since(at[0])
		if n := len(at); n > 1 {
			when += ", last at " + s.since(at[n-1])
			if gap := at[n-1].Sub(at[0]) / time.Duration(n-1); gap > 0 && len(at) == flaps {
				when += fmt.Sprintf(", every %s on average", gap.Round(time.Second))
			}
		}
		var ev []string
		if len(runs) > 0 {
			ev = s.railEvidence(ri, runs[0].first, runs[0].last)
		}
		for i, e := range evs {
			if i == 4 {
				ev = append(ev, fmt.Sprintf("... %d more events", len(evs)-i))
				break
			}
			ev = append(ev, fmt.Sprintf("%s %s %s", s.elapsed(e.At), e.Kind, e.Text))
		}
		if downed != nil {
			ev = append(ev, s.counterEvidence(ri, downed.Key, 4)...)
		}
		r.add(verdict.Finding{
			Cause:     fmt.Sprintf("%s: the link went down %s in %s (%s), %s", railName(rail), plural(flaps, "time", "times"), s.Duration().Round(time.Second), join(witness), when),
			Remedy:    remedyLink,
			Measured:  "gdr.flaps_count",
			Threshold: "gdr.max_flaps_count",
			Source:    SrcFlap,
			Evidence:  ev,
			Part:      counters.PartLink,
		})
		out = append(out, r)
	}
	return finish(s, out)
}

// berKind is one of mlxlink's BERs.
type berKind struct {
	name    string
	key     string // its attribute: gdr.<key> the last reading, gdr.max_<key> the ceiling
	get     func(*Link) *float64
	ceiling func(Thresholds) float64
	src     string
	level   verdict.Level
}

var berKinds = []berKind{
	{"effective (post-FEC) BER", "effective_ber", func(l *Link) *float64 { return l.EffectiveBER }, func(th Thresholds) float64 { return th.MaxEffectiveBER }, optics.SrcIBBER, verdict.Fail},
	{"symbol BER", "symbol_ber", func(l *Link) *float64 { return l.SymbolBER }, func(th Thresholds) float64 { return th.MaxEffectiveBER }, optics.SrcIBBER, verdict.Fail},
	// Raw BER above its ceiling is a warning, as optics.JudgeLink has it:
	// FEC still corrects it; its rise over the run fails (SrcBERRise).
	{"raw (pre-FEC) BER", "raw_ber", func(l *Link) *float64 { return l.RawBER }, func(th Thresholds) float64 { return th.MaxRawBER }, optics.SrcPAM4, verdict.Warn},
}

// JudgeBER is SOAK-04: no mlxlink BER of a rail above its ceiling at any
// reading (effective and symbol BER th.MaxEffectiveBER, raw th.MaxRawBER
// as a warning), and none risen more than th.MaxBERRise times over its
// first reading (gdr.ber_rise_ratio). A rail without a reading is
// absent: mlxlink is not there, or the NIC is not a Mellanox port.
func JudgeBER(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqBER); r != nil {
		return r
	}
	var out []Result
	for ri, rail := range s.Rails {
		r := Result{Req: ReqBER, Device: rail.Device}
		var at []int
		for i, x := range s.Samples {
			if x.Rails[ri].Link != nil {
				at = append(at, i)
			}
		}
		if len(at) == 0 {
			r.add(*verdict.Absentf("install MFT or mstflint (mlxlink, mstlink) on the host: the soak reads the ports' BER with it every few minutes",
				"%s: no mlxlink reading in the run, so its BER could not be followed%s", railName(rail), s.unread(UnreadMlxlink)))
			out = append(out, r)
			continue
		}
		worstRise, riseSeen, kindsRead := 0.0, false, 0
		var fs []verdict.Finding
		for _, k := range berKinds {
			var vals []int // sample indexes with this BER
			for _, i := range at {
				if k.get(s.Samples[i].Rails[ri].Link) != nil {
					vals = append(vals, i)
				}
			}
			if len(vals) == 0 {
				continue
			}
			kindsRead++
			v := func(i int) float64 { return *k.get(s.Samples[i].Rails[ri].Link) }
			top := 0.0
			for _, i := range vals {
				top = max(top, v(i))
			}
			r.ber(k.key, top) // the highest reading: what the ceiling judges
			r.ber("max_"+k.key, k.ceiling(th))
			// The ceiling: the first reading above it.
			for _, i := range vals {
				if v(i) > k.ceiling(th) {
					fs = append(fs, verdict.Finding{Level: k.level,
						Cause:     fmt.Sprintf("%s: %s %s at %s, above its ceiling %s", railName(rail), k.name, berText(v(i)), s.since(s.Samples[i].At), berText(k.ceiling(th))),
						Remedy:    remedyLink,
						Measured:  "gdr." + k.key,
						Threshold: "gdr.max_" + k.key,
						Source:    k.src,
						Evidence:  s.berEvidence(ri, vals, i),
						Part:      counters.PartLink})
					break
				}
			}
			if len(vals) < 2 {
				continue
			}
			base := max(v(vals[0]), th.BERRiseFloor)
			hi := vals[1]
			for _, i := range vals[1:] {
				if v(i) > v(hi) {
					hi = i
				}
			}
			rise := max(v(hi), th.BERRiseFloor) / base
			riseSeen = true
			worstRise = max(worstRise, rise)
			if rise > th.MaxBERRise {
				// Where it rose: the first reading past the factor.
				from := hi
				for _, i := range vals[1:] {
					if max(v(i), th.BERRiseFloor)/base > th.MaxBERRise {
						from = i
						break
					}
				}
				retrain := ""
				if evs := s.railEvents(ri, LinkDown, LinkUp); len(evs) > 0 && !evs[0].At.After(s.Samples[from].At) {
					retrain = fmt.Sprintf(" after the link went down at %s", s.since(evs[0].At))
				}
				fs = append(fs, verdict.Finding{
					Cause: fmt.Sprintf("%s: %s rose from %s at %s to %s at %s%s, %.0f times, more than the %g allowed over a run",
						railName(rail), k.name, berText(v(vals[0])), s.since(s.Samples[vals[0]].At), berText(v(hi)), s.since(s.Samples[hi].At), retrain, rise, th.MaxBERRise),
					Remedy:    "a BER that rose during the run (often after a retrain) means the link runs degraded while it stays up: retrain the port once more, and if the BER stays high reseat, clean or replace the cable or optic; check the switch port's own BER",
					Measured:  "gdr.ber_rise_ratio",
					Threshold: "gdr.max_ber_rise_ratio",
					Source:    SrcBERRise + "; " + SrcBERRiseFloor,
					Evidence:  s.berEvidence(ri, vals, from),
					Part:      counters.PartLink,
				})
			}
		}
		r.count("ber_readings_count", len(at))
		if riseSeen {
			r.num("ber_rise_ratio", worstRise)
			r.num("max_ber_rise_ratio", th.MaxBERRise)
		}
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].Level == verdict.Fail && fs[j].Level != verdict.Fail })
		for _, f := range fs {
			r.add(f)
		}
		if kindsRead == 0 {
			r.add(*verdict.Absentf("", "%s: mlxlink printed no BER in %s (older devices, or the link was down when it ran)", railName(rail), plural(len(at), "reading", "readings")))
		} else if !riseSeen && len(fs) == 0 {
			r.add(verdict.Finding{Level: verdict.Info, Cause: fmt.Sprintf("%s: one mlxlink reading in the run: its ceiling was judged, a rise cannot be", railName(rail))})
		}
		out = append(out, r)
	}
	return finish(s, out)
}

// berEvidence is the mlxlink readings of rail ri around sample at (one of
// idx): "00:20:00 effective 1.0e-12 symbol 1.0e-12 raw 2.0e-09".
func (s *Series) berEvidence(ri int, idx []int, at int) []string {
	k := sort.SearchInts(idx, at)
	var out []string
	for _, i := range idx[max(0, k-2):min(len(idx), k+2)] {
		l := s.Samples[i].Rails[ri].Link
		line := s.elapsed(s.Samples[i].At)
		for _, b := range []struct {
			n string
			v *float64
		}{{"effective", l.EffectiveBER}, {"symbol", l.SymbolBER}, {"raw", l.RawBER}} {
			if b.v != nil {
				line += " " + b.n + " " + berText(*b.v)
			}
		}
		out = append(out, line)
	}
	return out
}
