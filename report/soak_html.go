// The soak section of a host in report.html: each rail's rate and each
// GPU's clock and temperature over the run, events on the time axis, and
// the counters that rose.

package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/soak"
)

// soakChartPoints is the most points a chart's line holds: about one per
// two pixels of its plot; a longer series is downsampled (keeping each
// bucket's minimum, so a dip stays in sight).
const soakChartPoints = 240

// soakEventsListed bounds the events a host's section lists, and
// soakMarks those a chart marks; summary.json keeps them all.
const (
	soakEventsListed = 50
	soakMarks        = 60
)

// soakView is a host's soak section.
type soakView struct {
	Ran, Line string
	Emulated  bool
	Rails     []template.HTML // one chart a rail
	GPUs      []template.HTML // SM clock, then temperature, a line a GPU
	Rates     []soakRateRow   // counters that rose
	Watched   int             // counters watched
	Events    []soakEventRow
	More      int // events past soakEventsListed
}

type soakRateRow struct{ Rail, Counter, Rise, PerHour, First, Last string }
type soakEventRow struct{ At, Kind, Device, Text string }

// soakViewOf is h's soak section, nil when it ran none.
func soakViewOf(h *HostResult) *soakView {
	sk := h.Soak
	if sk == nil {
		return nil
	}
	s := soak.Downsample(sk.Series, soakChartPoints)
	v := &soakView{Ran: sk.Ran(), Line: sk.Line(), Emulated: s.Emulated}
	for i := range s.Rails {
		v.Rails = append(v.Rails, template.HTML(railChart(s, sk, i)))
	}
	if len(s.GPUs) > 0 {
		v.GPUs = append(v.GPUs, template.HTML(gpuChart(s, "SM clock (MHz)", "lowest", func(g soak.GPUSample) *float64 { return g.SMClockMHz })))
		v.GPUs = append(v.GPUs, template.HTML(gpuChart(s, "temperature (°C)", "highest", func(g soak.GPUSample) *float64 { return g.TempC })))
	}
	for _, r := range sk.Rates {
		v.Watched++
		if r.Rise == 0 {
			continue
		}
		row := soakRateRow{Rail: sk.RailName(r.Rail), Counter: r.Key.String(), Rise: fmt.Sprint(r.Rise), PerHour: "–",
			First: runAt(sk.Series.Start, r.First), Last: runAt(sk.Series.Start, r.Last)}
		if r.Reset {
			row.Rise += " (reset during the run)"
		}
		if ph, ok := r.PerHour(); ok {
			row.PerHour = fmtNum(ph)
		}
		v.Rates = append(v.Rates, row)
	}
	for i, e := range sk.Series.Events {
		if i == soakEventsListed {
			v.More = len(sk.Series.Events) - i
			break
		}
		v.Events = append(v.Events, soakEventRow{At: runAt(sk.Series.Start, e.At), Kind: string(e.Kind), Device: e.Device, Text: e.Text})
	}
	return v
}

// runAt is t as a time into the run: "+1h02m10s".
func runAt(start, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return "+" + t.Sub(start).Round(time.Second).String()
}

// markOf is how an event is marked on a chart: a letter and a colour that
// reads 4.5:1 on white (TestPageContrast).
var markOf = map[soak.EventKind][2]string{
	soak.LinkDown: {"D", "#cf222e"}, soak.LinkUp: {"U", "#1a7f37"}, soak.Xid: {"X", "#8250df"},
	soak.AER: {"A", "#9a6700"}, soak.Cut: {"C", "#57606a"}, soak.Stopped: {"S", "#cf222e"},
}

// timeChart is a chart over a run's time: lines (with a min-max band
// where given), a floor, spans where the port was down, and events marked
// on the time axis.
type timeChart struct {
	title, ylabel, alt string
	w, h, right        float64 // size, and the right margin (a legend's room where several lines)
	total              float64 // seconds from the start to the end
	lines              []timeLine
	floor              float64
	down               [][2]float64
	marks              []soak.Event
	start              time.Time
}

type timeLine struct {
	name, color string
	pts         []point // y NaN: not measured (a gap)
	band        [][2]float64
}

func (c timeChart) svg() string {
	const l, top, bot = 52.0, 30.0, 30.0
	w, h, r := c.w, c.h, c.right
	maxY := c.floor
	for _, ln := range c.lines {
		for i, p := range ln.pts {
			if !math.IsNaN(p.y) {
				maxY = math.Max(maxY, p.y)
			}
			if ln.band != nil && !math.IsNaN(ln.band[i][1]) {
				maxY = math.Max(maxY, ln.band[i][1])
			}
		}
	}
	if maxY <= 0 {
		maxY = 1
	}
	maxY *= 1.1
	total := math.Max(c.total, 1)
	px := func(x float64) float64 { return l + x/total*(w-l-r) }
	py := func(y float64) float64 { return h - bot - y/maxY*(h-top-bot) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart soak" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" role="img" aria-label="%s">`, w, h, w, esc(c.alt))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.alt))
	fmt.Fprintf(&b, `<text x="%.0f" y="14" font-size="12" font-weight="600">%s</text>`, l, esc(c.title))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#d0d7de"/>`, l, top, w-l-r, h-top-bot)
	for i := 0; i <= 3; i++ {
		y := maxY / 1.1 * float64(i) / 3
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eaeef2"/><text x="%.0f" y="%.1f" font-size="10" text-anchor="end">%s</text>`,
			l, w-r, py(y), py(y), l-4, py(y)+3, fmtNum(math.Round(y)))
	}
	step := tickStep(total)
	for x := 0.0; x <= total+1e-9; x += step {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eaeef2"/><text x="%.1f" y="%.0f" font-size="10" text-anchor="middle">%s</text>`,
			px(x), px(x), top, h-bot, px(x), h-bot+12, tickLabel(x))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="10" text-anchor="end">%s</text>`, w-r, h-4, esc("time into the run · "+c.ylabel))
	for _, d := range c.down {
		x0, x1 := px(d[0]), px(d[1])
		fmt.Fprintf(&b, `<rect class="down" x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="#cf222e" fill-opacity="0.18"><title>port not ACTIVE %s to %s</title></rect>`,
			x0, top, math.Max(x1-x0, 2), h-top-bot, tickLabel(d[0]), tickLabel(d[1]))
	}
	if c.floor > 0 {
		fmt.Fprintf(&b, `<line class="floor" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#cf222e" stroke-dasharray="6 4"/><text x="%.0f" y="%.1f" font-size="10" fill="#cf222e">floor %s</text>`,
			l, w-r, py(c.floor), py(c.floor), l+4, py(c.floor)-3, fmtNum(c.floor))
	}
	for i, ln := range c.lines {
		fmt.Fprintf(&b, `<g class="series"><title>%s</title>`, esc(ln.name))
		if ln.band != nil {
			var up, lo []string
			for k, p := range ln.pts {
				if bd := ln.band[k]; !math.IsNaN(bd[0]) {
					up = append(up, fmt.Sprintf("%.1f,%.1f", px(p.x), py(bd[1])))
					lo = append([]string{fmt.Sprintf("%.1f,%.1f", px(p.x), py(bd[0]))}, lo...)
				}
			}
			if len(up) > 1 {
				fmt.Fprintf(&b, `<polygon class="band" fill="%s" fill-opacity="0.22" stroke="none" points="%s"/>`, ln.color, strings.Join(append(up, lo...), " "))
			}
		}
		var seg []string
		flush := func() {
			if len(seg) > 0 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, ln.color, strings.Join(seg, " "))
			}
			seg = nil
		}
		for _, p := range ln.pts {
			if math.IsNaN(p.y) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		flush()
		if len(c.lines) > 1 {
			fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f" font-size="11">%s</text>`,
				w-r+8, top+float64(i)*15, ln.color, w-r+22, top+9+float64(i)*15, esc(clip(ln.name, 22)))
		}
		b.WriteString(`</g>`)
	}
	for i, e := range c.marks {
		if i == soakMarks {
			fmt.Fprintf(&b, `<text x="%.0f" y="14" font-size="10" text-anchor="end">+%d more events</text>`, w-r, len(c.marks)-i)
			break
		}
		m, ok := markOf[e.Kind]
		if !ok {
			m = [2]string{"E", "#57606a"}
		}
		x := px(e.At.Sub(c.start).Seconds())
		fmt.Fprintf(&b, `<g class="event"><title>%s %s %s: %s</title><line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="1"/><text x="%.1f" y="%.0f" font-size="9" text-anchor="middle" fill="%s">%s</text></g>`,
			esc(runAt(c.start, e.At)), esc(string(e.Kind)), esc(e.Device), esc(clip(e.Text, 160)), x, x, top, h-bot, m[1], x, top-3, m[1], m[0])
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// tickStep is a time-axis step giving at most 8 ticks over total seconds.
func tickStep(total float64) float64 {
	for _, s := range []float64{10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		if total/s <= 8 {
			return s
		}
	}
	return math.Ceil(total/8/86400) * 86400
}

// tickLabel is seconds into the run as an axis says it: 0, 30s, 5m, 1h, 2h30.
func tickLabel(x float64) string {
	d := time.Duration(x) * time.Second
	switch {
	case x == 0:
		return "0"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02d", int(d.Hours()), int(d.Minutes())%60)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02d", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// railChart is rail i's rate over the run (s downsampled for the page; sk
// the whole run's numbers for its text alternative).
func railChart(s *soak.Series, sk *Soak, i int) string {
	rl := s.Rails[i]
	c := timeChart{w: 460, h: 170, right: 14, total: s.Duration().Seconds(), start: s.Start, ylabel: "RDMA WRITE Gbit/s"}
	c.title = fmt.Sprintf("rail %d · %s port %d", rl.Index, rl.Device, rl.Port)
	if rl.Peer != "" {
		c.title += " → " + rl.Peer
	}
	if rl.Floor != nil {
		c.floor = *rl.Floor
	}
	ln := timeLine{name: c.title, color: palette[0]}
	downFrom := -1.0
	for _, x := range s.Samples {
		rs := x.Rails[i]
		t := x.At.Sub(s.Start).Seconds()
		p, bd := point{t, math.NaN()}, [2]float64{math.NaN(), math.NaN()}
		if rs.Gbps != nil {
			p.y = *rs.Gbps
			bd = [2]float64{p.y, p.y}
			if rs.GbpsMin != nil {
				bd[0] = *rs.GbpsMin
			}
			if rs.GbpsMax != nil {
				bd[1] = *rs.GbpsMax
			}
		}
		ln.pts, ln.band = append(ln.pts, p), append(ln.band, bd)
		switch down := rs.State != "" && rs.State != "ACTIVE"; {
		case down && downFrom < 0:
			downFrom = math.Max(t-s.Interval.Seconds(), 0)
		case !down && downFrom >= 0:
			c.down = append(c.down, [2]float64{downFrom, t})
			downFrom = -1
		}
	}
	if downFrom >= 0 {
		c.down = append(c.down, [2]float64{downFrom, c.total})
	}
	c.lines = []timeLine{ln}
	on := map[string]bool{rl.Device: true, rl.PCI: true, rl.GPU: true}
	for _, b := range rl.Between {
		on[b] = true
	}
	for _, e := range s.Events {
		if e.Rail != nil && *e.Rail == i || e.Rail == nil && (e.Device == "" || on[e.Device]) {
			c.marks = append(c.marks, e)
		}
	}
	c.alt = fmt.Sprintf("%s: RDMA WRITE rate over %s: %s", c.title, sk.Ran(), sk.Rails[i].Numbers())
	if c.floor > 0 {
		c.alt += fmt.Sprintf("; floor %s Gbit/s (%s)", fmtNum(c.floor), rl.FloorSource)
	}
	if len(c.marks) > 0 {
		c.alt += "; " + plural(len(c.marks), "event", "events") + " marked"
	}
	return c.svg()
}

// gpuChart is one GPU value over the run, a line a GPU; worst says which
// of a downsampled bucket's values the line shows (soak.Downsample).
func gpuChart(s *soak.Series, what, worst string, val func(soak.GPUSample) *float64) string {
	c := timeChart{w: 640, h: 200, right: 150, total: s.Duration().Seconds(), start: s.Start, ylabel: what, title: "GPUs: " + what}
	lo, hi := math.Inf(1), math.Inf(-1)
	for gi, g := range s.GPUs {
		ln := timeLine{name: fmt.Sprintf("GPU %d %s", g.Index, short(g.PCI)), color: palette[gi%len(palette)]}
		for _, x := range s.Samples {
			p := point{x.At.Sub(s.Start).Seconds(), math.NaN()}
			if gi < len(x.GPUs) {
				if v := val(x.GPUs[gi]); v != nil {
					p.y = *v
					lo, hi = math.Min(lo, p.y), math.Max(hi, p.y)
				}
			}
			ln.pts = append(ln.pts, p)
		}
		c.lines = append(c.lines, ln)
	}
	for _, e := range s.Events {
		if e.Kind == soak.Xid || e.Kind == soak.Cut {
			c.marks = append(c.marks, e)
		}
	}
	c.alt = fmt.Sprintf("%s of %s over the run", what, plural(len(s.GPUs), "GPU", "GPUs"))
	if !math.IsInf(lo, 0) {
		c.alt += fmt.Sprintf(": from %s to %s", fmtNum(lo), fmtNum(hi))
	}
	if s.Downsampled > 0 {
		c.alt += fmt.Sprintf(" (each point the %s of its %s)", worst, span(s.Duration()/time.Duration(max(len(s.Samples), 1))))
	}
	if len(s.GPUs) > len(palette) {
		c.alt += "; colours repeat past " + fmt.Sprint(len(palette)) + " GPUs"
	}
	return c.svg()
}

// soakFleetRow is a host's row in a merge's soak table.
type soakFleetRow struct {
	Host, Anchor, Ran, Worst string
	Rails                    []string
	Downs                    int
}

func soakFleetRowOf(h *HostResult) soakFleetRow {
	sk := h.Soak
	row := soakFleetRow{Host: h.Named(), Anchor: anchor(h.Identity.Host), Ran: sk.Ran(), Worst: clip(soakWorst(h), 200)}
	for _, r := range sk.Rails {
		row.Downs += r.Downs
		if r.Min == nil {
			row.Rails = append(row.Rails, fmt.Sprintf("%d %s: not measured", r.Rail, r.Device))
			continue
		}
		row.Rails = append(row.Rails, fmt.Sprintf("%d %s: %s / %s", r.Rail, r.Device, fmtNum(*r.Min), fmtNum(*r.Median)))
	}
	return row
}
