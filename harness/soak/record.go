package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/kmsg"
	"github.com/gdrconf/gdrconf/internal/optics"
	model "github.com/gdrconf/gdrconf/internal/soak"
)

// RailReading is what was read of one rail for one sample.
type RailReading struct {
	// Bytes moved by the rail's RDMA WRITEs since the previous reading;
	// nil when not measured (the load stopped on an error).
	Bytes *int64
	// State is the port's state (ACTIVE, DOWN, ...); "" when unreadable.
	State string
	// Counters are the cumulative values of the rail's NIC port counters
	// and its path's AER counters (counters.Take); nil when not read.
	Counters map[counters.Key]uint64
	// Link is mlxlink's view of the port when it ran for this sample.
	Link *optics.Link
	// Stopped is why the rail's traffic ended on an error ("" while it
	// runs, or when it ended because the soak did).
	Stopped string
}

// GPUReading is what was read of one GPU for one sample.
type GPUReading struct {
	SMClockMHz, MemClockMHz, TempC, PowerW *float64
	Throttle                               *uint64
	// CopyBytes moved by the GPU's copy loop since the previous reading;
	// nil when not measured.
	CopyBytes *int64
}

// Reading is one sample's raw readings, in the Series' rail and GPU order.
type Reading struct {
	At     time.Time
	Rails  []RailReading
	GPUs   []GPUReading
	Kernel []kmsg.Match // kernel log matches since the previous reading
}

// Recorder appends readings to a Series as Samples and Events.
type Recorder struct {
	S     *model.Series
	last  time.Time                 // the previous sample (the start at first)
	seen  []map[counters.Key]uint64 // per rail: the values last recorded
	state []string                  // per rail: the last state read
	ended []bool                    // per rail: its traffic_stopped event is recorded
	first bool
}

// NewRecorder records into s, whose Start, Rails and GPUs are set.
func NewRecorder(s *model.Series) *Recorder {
	if s.Version == 0 {
		s.Version = model.Version
	}
	r := &Recorder{S: s, last: s.Start, first: true, seen: make([]map[counters.Key]uint64, len(s.Rails)), state: make([]string, len(s.Rails)), ended: make([]bool, len(s.Rails))}
	for i := range r.seen {
		r.seen[i] = map[counters.Key]uint64{}
	}
	return r
}

// Step is what one reading added.
type Step struct {
	Sample model.Sample
	Events []model.Event
	// Rose names the counters that rose since the previous sample, with
	// by how much ("mlx5_1 port 1 counters/symbol_error +3").
	Rose []string
}

// Add turns x into a Sample and Events and appends them to the Series.
// Rates are over the time since the previous sample; counters are kept
// only where they changed (all in the first sample); a port that leaves
// ACTIVE is a link_down event and one that comes back a link_up; a rail
// whose traffic stopped on an error gets one traffic_stopped event; Xid and
// AER lines of the kernel log are events on the rail whose GPU, NIC or
// path they name.
func (r *Recorder) Add(x Reading) Step {
	var st Step
	dt := x.At.Sub(r.last)
	st.Sample = model.Sample{At: x.At, Rails: make([]model.RailSample, len(r.S.Rails))}
	for i := range r.S.Rails {
		var rd RailReading
		if i < len(x.Rails) {
			rd = x.Rails[i]
		}
		rs := &st.Sample.Rails[i]
		rs.Gbps = rate(rd.Bytes, dt)
		rs.State = rd.State
		rs.Counters, st.Rose = r.changed(i, rd.Counters, st.Rose)
		rs.Link = link(rd.Link)
		if ev, ok := r.stateEvent(i, x.At, rd.State); ok {
			st.Events = append(st.Events, ev)
		}
		if rd.Stopped != "" && !r.ended[i] {
			r.ended[i] = true
			idx := i
			st.Events = append(st.Events, model.Event{At: x.At, Kind: model.Stopped, Device: r.S.Rails[i].Device, Rail: &idx, Text: rd.Stopped})
		}
	}
	if len(x.GPUs) > 0 {
		st.Sample.GPUs = make([]model.GPUSample, len(r.S.GPUs))
		for i := range st.Sample.GPUs {
			if i >= len(x.GPUs) {
				continue
			}
			g := x.GPUs[i]
			st.Sample.GPUs[i] = model.GPUSample{SMClockMHz: g.SMClockMHz, MemClockMHz: g.MemClockMHz, TempC: g.TempC, PowerW: g.PowerW, Throttle: g.Throttle, CopyGbps: rate(g.CopyBytes, dt)}
		}
	}
	for _, m := range x.Kernel {
		if ev, ok := r.kernelEvent(x.At, m); ok {
			st.Events = append(st.Events, ev)
		}
	}
	r.S.Samples = append(r.S.Samples, st.Sample)
	r.S.Events = append(r.S.Events, st.Events...)
	r.S.End = x.At
	r.last = x.At
	r.first = false
	return st
}

// rate is bytes over dt in Gbit/s; nil when not measured or no time passed.
func rate(b *int64, dt time.Duration) *float64 {
	if b == nil || dt <= 0 {
		return nil
	}
	g := float64(*b) * 8 / dt.Seconds() / 1e9
	return &g
}

// changed returns the counters of rail i that changed since they were last
// recorded (every one the first time), in key order, and appends what rose
// to rose. A counter that went down (cleared, wrapped) is recorded too.
func (r *Recorder) changed(i int, now map[counters.Key]uint64, rose []string) ([]model.Count, []string) {
	if now == nil {
		return nil, rose
	}
	var out []model.Count
	seen := r.seen[i]
	for k, v := range now {
		old, ok := seen[k]
		if ok && old == v {
			continue
		}
		out = append(out, model.Count{Key: k, Value: v})
		if ok && v > old {
			rose = append(rose, fmt.Sprintf("%s +%d", k, v-old))
		}
		seen[k] = v
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key.String() < out[b].Key.String() })
	sort.Strings(rose)
	return out, rose
}

// stateEvent is a link_down when rail i's port leaves ACTIVE (or is not
// ACTIVE at the first sample) and a link_up when it comes back. An
// unreadable state ("") changes nothing.
func (r *Recorder) stateEvent(i int, at time.Time, state string) (model.Event, bool) {
	if state == "" {
		return model.Event{}, false
	}
	prev := r.state[i]
	r.state[i] = state
	rl := r.S.Rails[i]
	idx := i
	port := fmt.Sprintf("%s port %d", rl.Device, rl.Port)
	switch {
	case state != "ACTIVE" && (prev == "ACTIVE" || (prev == "" && r.first)):
		from := prev
		if from == "" {
			from = "the start"
		}
		return model.Event{At: at, Kind: model.LinkDown, Device: rl.Device, Rail: &idx, Text: fmt.Sprintf("%s: %s (was %s)", port, state, from)}, true
	case state == "ACTIVE" && prev != "" && prev != "ACTIVE":
		return model.Event{At: at, Kind: model.LinkUp, Device: rl.Device, Rail: &idx, Text: fmt.Sprintf("%s: ACTIVE again (was %s)", port, prev)}, true
	}
	return model.Event{}, false
}

// kernelEvent turns an Xid or AER match into an Event on the rail whose
// GPU, NIC or path function the line names (none: the host's).
func (r *Recorder) kernelEvent(at time.Time, m kmsg.Match) (model.Event, bool) {
	var kind model.EventKind
	switch m.Kind {
	case "xid", "nvrm": // an Xid, or the driver losing the GPU
		kind = model.Xid
	case "aer":
		kind = model.AER
	default:
		return model.Event{}, false
	}
	ev := model.Event{At: at, Kind: kind, Device: m.Device, Text: strings.TrimSpace(m.Text)}
	if m.Meaning != "" {
		ev.Text += " (" + m.Meaning + ")"
	}
	if m.Device != "" {
		for i, rl := range r.S.Rails {
			if names(rl.PCI, m.Device) || names(rl.GPU, m.Device) || contains(rl.Between, m.Device) {
				idx := i
				ev.Rail = &idx
				break
			}
		}
	}
	return ev, true
}

// names reports whether dev, as a log line names it, is the function bdf:
// an Xid names the GPU without its function ("PCI:0000:3b:00").
func names(bdf, dev string) bool {
	return bdf != "" && (bdf == dev || strings.HasPrefix(bdf, dev+"."))
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// link is the numbers the judges follow from mlxlink's output.
func link(l *optics.Link) *model.Link {
	if l == nil {
		return nil
	}
	out := &model.Link{EffectiveBER: l.EffectiveBER, RawBER: l.RawBER, SymbolBER: l.SymbolBER, LinkDown: l.LinkDown, Recovery: l.Recovery}
	if *out == (model.Link{}) {
		return nil // mlxlink printed none of them (link down, an old device)
	}
	return out
}
