// A host's soak run (internal/soak) as the report shows it: its series,
// downsampled, and what each rail did over it. The SOAK requirements'
// verdicts come through the host's test results like any other.

package report

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/soak"
)

// SoakFile is the soak series in a host's report folder.
const SoakFile = soak.SeriesFile

// Samples of a host's series kept in summary.json: a host's up to
// soakKeep (twice a chart's width, so other tools can plot it), a merge's
// soakKeepAll shared among its hosts, no fewer than soakKeepMin each: a
// sample of 8 rails and 8 GPUs is about 1.5 kB of JSON, so a merge's
// series stay within some 25 MB (37 MB at 1024 hosts). Each kept sample's
// rate is its bucket's mean with the minimum and maximum beside it
// (soak.Downsample), so no dip is lost.
const (
	soakKeep    = 480
	soakKeepAll = 16384
	soakKeepMin = 24
)

// soakKeepFor is how many samples a host's series keeps in a report of
// hosts hosts.
func soakKeepFor(hosts int) int {
	return min(soakKeep, max(soakKeepMin, soakKeepAll/max(hosts, 1)))
}

// Soak is a host's soak run.
type Soak struct {
	// Series is the run, downsampled (soakKeepFor; Downsampled says how
	// many samples were measured).
	Series *soak.Series `json:"series"`
	// Rates are every counter's rise on each rail over the whole run.
	Rates []soak.CounterRate `json:"counter_rates,omitempty"`
	// Rails are each rail's numbers over the whole run, in Series.Rails'
	// order.
	Rails []SoakRail `json:"rails"`
	// Worst is the index in Rails of the rail that fared worst (most link
	// downs, then lowest rate against its floor); nil when no rail was
	// measured.
	Worst *int `json:"worst_rail,omitempty"`
}

// SoakRail is one rail's numbers over a soak run; nil: not measured.
type SoakRail struct {
	Rail   int      `json:"rail"`
	Device string   `json:"device"`
	Min    *float64 `json:"min_gbit_s,omitempty"`
	Median *float64 `json:"median_gbit_s,omitempty"`
	Max    *float64 `json:"max_gbit_s,omitempty"`
	Floor  *float64 `json:"floor_gbit_s,omitempty"`
	// Below is how many samples were under the floor.
	Below int `json:"below_floor,omitempty"`
	// Downs is how often the link went down: the most of its link_down
	// events, its samples' falls from ACTIVE and its link_downed counter's
	// rise (one flap is seen by all three).
	Downs int `json:"link_downs,omitempty"`
	// Ratio is the mean rate of the run's last quarter over its first.
	Ratio *float64 `json:"last_over_first_quarter,omitempty"`
}

// readSoak reads dir's soak series: nil, nil when the host ran no soak; an
// error naming the file and what is wrong with it otherwise.
func readSoak(dir string) (*soak.Series, error) {
	s, err := soak.Read(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return s, err
}

// soakOf is the report's view of s, its series downsampled to keep.
func soakOf(s *soak.Series, keep int) *Soak {
	v := &Soak{Series: soak.Downsample(s, keep), Rates: soak.Rates(s)}
	downed := map[int]int{}
	for _, r := range v.Rates {
		if r.Key.Name == "link_downed" {
			downed[r.Rail] += int(r.Rise)
		}
	}
	for i, rl := range s.Rails {
		sr := SoakRail{Rail: rl.Index, Device: rl.Device, Floor: rl.Floor}
		var vals, first, last []float64
		falls, active := 0, true
		n := len(s.Samples)
		for k, x := range s.Samples {
			rs := x.Rails[i]
			if rs.State != "" {
				if rs.State != "ACTIVE" && active {
					falls++
				}
				active = rs.State == "ACTIVE"
			}
			if rs.Gbps == nil {
				continue
			}
			g := *rs.Gbps
			vals = append(vals, g)
			if rl.Floor != nil && g < *rl.Floor {
				sr.Below++
			}
			switch {
			case k < n/4:
				first = append(first, g)
			case k >= n-n/4:
				last = append(last, g)
			}
		}
		events := 0
		for _, e := range s.Events {
			if e.Kind == soak.LinkDown && (e.Rail != nil && *e.Rail == i || e.Rail == nil && e.Device == rl.Device) {
				events++
			}
		}
		sr.Downs = max(falls, events, downed[i])
		if len(vals) > 0 {
			lo, med, hi := distribution(vals)
			sr.Min, sr.Median, sr.Max = &lo, &med, &hi
		}
		if mf, ml := mean(first), mean(last); len(first) > 0 && len(last) > 0 && mf > 0 {
			r := ml / mf
			sr.Ratio = &r
		}
		v.Rails = append(v.Rails, sr)
	}
	worst := -1
	for i, r := range v.Rails {
		if r.Min == nil && r.Downs == 0 {
			continue
		}
		if worst < 0 || worse(r, v.Rails[worst]) {
			worst = i
		}
	}
	if worst >= 0 {
		v.Worst = &worst
	}
	return v
}

// worse says whether rail a fared worse than b: more link downs, then a
// lower minimum against its floor (or, without floors, a lower minimum).
func worse(a, b SoakRail) bool {
	if a.Downs != b.Downs {
		return a.Downs > b.Downs
	}
	return score(a) < score(b)
}

func score(r SoakRail) float64 {
	if r.Min == nil {
		return math.Inf(1)
	}
	if r.Floor != nil && *r.Floor > 0 {
		return *r.Min / *r.Floor
	}
	return *r.Min
}

func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// span is a duration as a soak's reader says it: 2h0m, 5m30s, 40s.
func span(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		if s := int(d.Seconds()) % 60; s != 0 {
			return fmt.Sprintf("%dm%02ds", int(d.Minutes()), s)
		}
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// Ran says how long the run ran, against what was asked, and whether it
// was cut: "2h00m", "1h12m of 2h00m, cut: SIGTERM".
func (s *Soak) Ran() string {
	x := s.Series
	out := span(x.Duration())
	if x.Planned > 0 && (x.Cut != "" || x.Duration() < x.Planned-x.Interval) {
		out += " of " + span(x.Planned)
	}
	if x.Cut != "" {
		out += ", cut: " + x.Cut
	}
	return out
}

// RailName is rail i as the report names it: "rail 3 (mlx5_3)".
func (s *Soak) RailName(i int) string {
	r := s.Series.Rails[i]
	return fmt.Sprintf("rail %d (%s)", r.Index, r.Device)
}

// Numbers is a rail's numbers in a line: "2 link downs, min 180, median
// 390 Gbit/s, 31 samples under the floor 300".
func (r SoakRail) Numbers() string {
	var parts []string
	if r.Downs > 0 {
		parts = append(parts, plural(r.Downs, "link down", "link downs"))
	}
	if r.Min != nil {
		parts = append(parts, fmt.Sprintf("min %s, median %s Gbit/s", fmtNum(*r.Min), fmtNum(*r.Median)))
	} else {
		parts = append(parts, "no rate measured")
	}
	if r.Below > 0 && r.Floor != nil {
		parts = append(parts, fmt.Sprintf("%s under the floor %s", plural(r.Below, "sample", "samples"), fmtNum(*r.Floor)))
	}
	if r.Ratio != nil && *r.Ratio < 0.995 {
		parts = append(parts, fmt.Sprintf("last quarter %.0f%% of the first", *r.Ratio*100))
	}
	return strings.Join(parts, ", ")
}

// Line is the soak in one line, as summary.txt and summary.md give it:
// how long it ran, whether it was cut, its worst rail.
func (s *Soak) Line() string {
	x := s.Series
	l := fmt.Sprintf("soak %s, %s", s.Ran(), plural(len(x.Rails), "rail", "rails"))
	if len(x.GPUs) > 0 {
		l += ", " + plural(len(x.GPUs), "GPU", "GPUs")
	}
	if x.Emulated {
		l += " (emulated GPU)"
	}
	if s.Worst != nil {
		l += "; worst " + s.RailName(*s.Worst) + ": " + s.Rails[*s.Worst].Numbers()
	}
	return l
}

// soakWorst is the host's first failed SOAK requirement and why, "" when
// none failed.
func soakWorst(h *HostResult) string {
	for _, rq := range failuresFirst(h.Reqs) {
		if strings.HasPrefix(rq.ID, "SOAK-") && rq.Status == Fail {
			return rq.ID + ": " + rq.Reason
		}
	}
	return ""
}

// soakLine is the host's soak in one line with its first failed SOAK
// requirement, "" when it ran none.
func soakLine(h *HostResult) string {
	if h.Soak == nil {
		return ""
	}
	l := h.Soak.Line()
	if w := soakWorst(h); w != "" {
		l += "; " + clip(w, 200)
	}
	return l
}
