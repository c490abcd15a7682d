package counters

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Change is one counter between two snapshots.
type Change struct {
	Key    Key
	Class  Class
	Before uint64
	After  uint64
	// Delta is After-Before when the counter did not go back; for a
	// counter that went back it is After (a lower bound of the rise since
	// the reset).
	Delta uint64
	// Reset: After < Before. The counter was cleared (perfquery -R, a
	// driver reload, a device reset) or a narrow counter wrapped; a reset
	// during a test is itself worth reporting.
	Reset bool
	// Saturated: After is the counter's maximum (IBTA error counters stop
	// at 2^width-1): any further rise cannot be seen.
	Saturated bool
	// New: the counter appeared after the first snapshot (a port came up).
	New bool
	// Gone: the counter was in the first snapshot only (device removed).
	Gone bool
}

// Rose reports whether the counter rose (or was reset, which hides whether it rose).
func (c Change) Rose() bool { return c.Delta > 0 || c.Reset }

func (c Change) String() string {
	s := fmt.Sprintf("%s: %d -> %d (+%d)", c.Key, c.Before, c.After, c.Delta)
	switch {
	case c.Gone:
		s = fmt.Sprintf("%s: %d -> gone", c.Key, c.Before)
	case c.New:
		s = fmt.Sprintf("%s: new, %d", c.Key, c.After)
	case c.Reset:
		s = fmt.Sprintf("%s: %d -> %d (went back: reset or wrapped; at least +%d since)", c.Key, c.Before, c.After, c.Delta)
	}
	if c.Saturated {
		s += " (saturated at its maximum: later rises are invisible; clear the port counters to judge)"
	}
	return s
}

// Delta is what changed between two snapshots.
type Delta struct {
	From, To time.Time
	Changes  []Change // every counter in either snapshot, in key order
	// Problems are both snapshots' problems (prefixed before:/after:), so
	// a counter that could not be read is never silently missing.
	Problems []string
	Absent   []string // the second snapshot's absences
}

// Elapsed is the time between the snapshots.
func (d Delta) Elapsed() time.Duration { return d.To.Sub(d.From) }

func maxFor(width int) uint64 {
	if width <= 0 || width >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(width) - 1
}

// Diff compares two snapshots of the same counters.
func Diff(before, after *Snapshot) Delta {
	d := Delta{From: before.Taken, To: after.Taken, Absent: append([]string(nil), after.Absent...)}
	for _, p := range before.Problems {
		d.Problems = append(d.Problems, "before: "+p)
	}
	for _, p := range after.Problems {
		d.Problems = append(d.Problems, "after: "+p)
	}
	keys := map[Key]bool{}
	for k := range before.Values {
		keys[k] = true
	}
	for k := range after.Values {
		keys[k] = true
	}
	ks := make([]Key, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sortKeys(ks)
	for _, k := range ks {
		b, hadB := before.Values[k]
		a, hadA := after.Values[k]
		c := Change{Key: k, Class: Classify(k), Before: b, After: a}
		switch {
		case !hadA:
			c.Gone = true
		case !hadB:
			c.New, c.Delta = true, a
		case a >= b:
			c.Delta = a - b
		default:
			c.Reset, c.Delta = true, a
		}
		if hadA && c.Class.Width > 0 && a == maxFor(c.Class.Width) {
			c.Saturated = true
		}
		d.Changes = append(d.Changes, c)
	}
	return d
}

// Verdict of one finding.
type Verdict int

const (
	Report Verdict = iota // informational: reported, never fails
	Warn                  // worth a look; does not fail
	Fail                  // an error counter rose
)

func (v Verdict) String() string {
	return [...]string{"report", "warn", "fail"}[v]
}

// Finding is a change the caller should show, with its verdict and a
// message naming counter, device, delta and what a rise usually means.
type Finding struct {
	Change
	Verdict Verdict
	Message string
}

// Judge turns a delta into findings: every counter that rose, was reset,
// appeared, vanished or sits saturated, plus the snapshots' problems are
// the caller's to report (Delta.Problems). Error counters that rose fail;
// corrected errors, resets, saturation and vanished counters warn;
// informational, data and unknown counters are reported. An AER TOTAL_*
// rise is judged only when no named counter of its file rose (a counter
// name this suite does not know); otherwise it is reported.
func Judge(d Delta) []Finding { return JudgeWith(d, Options{}) }

// Options change how JudgeWith weighs a rise.
type Options struct {
	// Software names the RDMA devices that are software devices (rxe,
	// siw): their timer-driven retransmission counters (SoftwareTimer)
	// warn instead of failing.
	Software map[string]bool
}

// SoftwareTimer are the rxe counters that rise without any packet lost
// when the lab runs under emulation, with why. A lost packet is seen
// elsewhere: out_of_seq_request at the receiver and rcvd_seq_err at the
// sender stay errors, as do retries exhausted.
var SoftwareTimer = map[string]string{
	"completer_retry_err": softTimerWhy,
	"duplicate_request":   softTimerWhy,
}

const softTimerWhy = "on a software device this rises without loss: rxe retransmits when its ACK timer (QP timeout 14: 67 ms) runs out, and under qemu TCG one round trip takes tens of ms; a clean lab run with no loss planted recorded completer_retry_err +191 and duplicate_request +3462 (fixtures/counters/README.md). Lost packets show as out_of_seq_request and rcvd_seq_err, which still fail"

// JudgeWith is Judge with options.
func JudgeWith(d Delta, o Options) []Finding {
	named := map[string]bool{} // device|group with a named AER rise
	for _, c := range d.Changes {
		if c.Key.Source == AER && !IsTotal(c.Key) && c.Rose() {
			named[c.Key.Device+"|"+c.Key.Group] = true
		}
	}
	var out []Finding
	for _, c := range d.Changes {
		f := Finding{Change: c}
		switch {
		case c.Gone:
			f.Verdict = Warn
			f.Message = fmt.Sprintf("%s vanished during the run (device or port removed?)", c)
		case c.Reset:
			f.Verdict = Warn
			f.Message = fmt.Sprintf("%s: something cleared the counters during the run, so a rise cannot be ruled out", c)
		case c.Delta == 0 && !c.Saturated:
			continue
		case c.Delta == 0 && c.Saturated:
			if c.Class.Kind != Error && c.Class.Kind != Corrected {
				continue
			}
			f.Verdict = Warn
			f.Message = fmt.Sprintf("%s: %s; %s", c, c.Class.Kind, c.Class.Meaning)
		default:
			f.Verdict, f.Message = judgeRise(c, named)
			if why, ok := SoftwareTimer[c.Key.Name]; ok && f.Verdict == Fail && c.Key.Source == HW && o.Software[c.Key.Device] {
				f.Verdict, f.Message = Warn, f.Message+"; "+why
			}
		}
		out = append(out, f)
	}
	return out
}

func judgeRise(c Change, named map[string]bool) (Verdict, string) {
	cl := c.Class
	what := fmt.Sprintf("%s rose by %d during the run", c.Key, c.Delta)
	if c.New {
		what = fmt.Sprintf("%s appeared during the run at %d", c.Key, c.After)
	}
	if IsTotal(c.Key) && c.Key.Group != AERRootPort {
		group := aerGroupOfTotal(c.Key.Name)
		if named[c.Key.Device+"|"+group] {
			return Report, fmt.Sprintf("%s (the named counters above account for it)", what)
		}
	}
	switch cl.Kind {
	case Error:
		return Fail, fmt.Sprintf("%s: %s (%s)", what, cl.Meaning, cl.Cause)
	case Corrected:
		return Warn, fmt.Sprintf("%s: %s (%s; corrected by hardware, no data lost, but a healthy link shows none during a test)", what, cl.Meaning, cl.Cause)
	case Info, Data:
		return Report, fmt.Sprintf("%s: %s", what, cl.Meaning)
	}
	return Report, fmt.Sprintf("%s: %s", what, cl.Meaning)
}

func aerGroupOfTotal(name string) string {
	switch name {
	case "TOTAL_ERR_COR":
		return AERCorrectable
	case "TOTAL_ERR_NONFATAL":
		return AERNonFatal
	case "TOTAL_ERR_FATAL":
		return AERFatal
	}
	return ""
}

// Failed returns the findings that fail.
func Failed(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Verdict == Fail {
			out = append(out, f)
		}
	}
	return out
}

// Summary is one line per finding of at least verdict min.
func Summary(fs []Finding, at Verdict) string {
	var b strings.Builder
	for _, f := range fs {
		if f.Verdict < at {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", strings.ToUpper(f.Verdict.String()), f.Message)
	}
	return b.String()
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Source != es[j].Source {
			return es[i].Source < es[j].Source
		}
		if es[i].Group != es[j].Group {
			return es[i].Group < es[j].Group
		}
		return es[i].Name < es[j].Name
	})
}
