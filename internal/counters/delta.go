package counters

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/verdict"
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

// The levels of a judged change (verdict.Level).
const (
	Report = verdict.Info // informational: reported, never fails
	Warn   = verdict.Warn // worth a look; does not fail
	Fail   = verdict.Fail // an error counter rose
)

// Judged is a change the caller should show, with the finding it comes
// to: its level, a cause naming counter, device, delta and what a rise
// usually means, and for a failure the remedy and the part its cause
// points at (Remedy, PartOf); the device is the counter's.
type Judged struct {
	Change
	verdict.Finding
}

// Judge turns a delta into findings: every counter that rose, was reset,
// appeared, vanished or sits saturated, plus the snapshots' problems are
// the caller's to report (Delta.Problems). Error counters that rose fail;
// corrected errors, resets, saturation and vanished counters warn;
// informational, data and unknown counters are reported. An AER TOTAL_*
// rise is judged only when no named counter of its file rose (a counter
// name this suite does not know); otherwise it is reported.
func Judge(d Delta) []Judged { return JudgeWith(d, Options{}) }

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
func JudgeWith(d Delta, o Options) []Judged {
	named := map[string]bool{} // device|group with a named AER rise
	for _, c := range d.Changes {
		if c.Key.Source == AER && !IsTotal(c.Key) && c.Rose() {
			named[c.Key.Device+"|"+c.Key.Group] = true
		}
	}
	var out []Judged
	for _, c := range d.Changes {
		f := Judged{Change: c}
		f.Device, f.Evidence = c.Key.Device, []string{c.String()}
		switch {
		case c.Gone:
			f.Level = Warn
			f.Cause = fmt.Sprintf("%s vanished during the run (device or port removed?)", c)
		case c.Reset:
			f.Level = Warn
			f.Cause = fmt.Sprintf("%s: something cleared the counters during the run, so a rise cannot be ruled out", c)
		case c.Delta == 0 && !c.Saturated:
			continue
		case c.Delta == 0 && c.Saturated:
			if c.Class.Kind != Error && c.Class.Kind != Corrected {
				continue
			}
			f.Level = Warn
			f.Cause = fmt.Sprintf("%s: %s; %s", c, c.Class.Kind, c.Class.Meaning)
		default:
			f.Level, f.Cause = judgeRise(c, named)
			if why, ok := SoftwareTimer[c.Key.Name]; ok && f.Level == Fail && c.Key.Source == HW && o.Software[c.Key.Device] {
				f.Level, f.Cause = Warn, f.Cause+"; "+why
			}
		}
		if f.Level == Fail {
			f.Remedy, f.Part = Remedy(c.Class.Cause), PartOf(c.Class.Cause)
		}
		out = append(out, f)
	}
	return out
}

func judgeRise(c Change, named map[string]bool) (verdict.Level, string) {
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
func Failed(fs []Judged) []Judged {
	var out []Judged
	for _, f := range fs {
		if f.Level == Fail {
			out = append(out, f)
		}
	}
	return out
}

// Summary is one line per finding of at least level at.
func Summary(fs []Judged, at verdict.Level) string {
	var b strings.Builder
	for _, f := range fs {
		if !f.Level.AtLeast(at) {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", strings.ToUpper(levelWord(f.Level)), f.Cause)
	}
	return b.String()
}

// levelWord is the word Summary has always printed for a level.
func levelWord(l verdict.Level) string {
	if l == Report {
		return "report"
	}
	return l.String()
}

// The parts a counter's cause points at (verdict.Finding.Part, in the
// report's words: report/part.go).
const (
	PartLink = "cable/optic"  // bit errors, link retraining, link down
	PartPCIe = "pcie link"    // AER: a PCIe link or the devices on it
	PartPath = "network path" // packets lost or late between the hosts
)

// PartOf is the part a rise of cause c points at; "" when it names none
// (a configuration, a device's own error).
func PartOf(c Cause) string {
	switch c {
	case CauseLink:
		return PartLink
	case CausePCIe, CausePCIeProto:
		return PartPCIe
	case CauseRetrans, CauseCongestion:
		return PartPath
	}
	return ""
}

// remedies by cause: what to do when an error counter of that cause rose.
var remedies = map[Cause]string{
	CauseLink:       "reseat or replace the cable or transceiver, check the switch port's own counters; vendors' RMA processes ask for these counters",
	CausePCIe:       "reseat the card and riser, check the slot's PCIe generation setting in the BIOS and the retimers; see the AER lines in the kernel log",
	CausePCIeProto:  "check ACS and the IOMMU on the GPU<->NIC path (TOPO area), the NIC and GPU firmware; see the AER lines in the kernel log",
	CauseCongestion: "check flow control (PFC/ECN for RoCE), the switch's buffers and drops, and that no other traffic shares the link during qualification",
	CauseRetrans:    "find where packets were lost: the switch's drop counters, PFC/ECN configuration for RoCE, the cable; a healthy lossless fabric retransmits nothing during a test",
	CauseRNR:        "a SEND found no posted receive: an application (or suite) bug, or receive queues too short",
	CauseTransport:  "an operation was rejected (keys, lengths, QP state): check the MR registration path (peermem/dma-buf) and the NIC firmware",
	CauseConfig:     "check partitions (P_Key), VLs and switch routing for this port",
	CauseInternal:   "the device reported an internal error: update its firmware, and have it replaced if it repeats",
}

// Remedy is what to do when an error counter of cause c rose.
func Remedy(c Cause) string {
	if r, ok := remedies[c]; ok {
		return r
	}
	return "read the counter's meaning above and the kernel log; rerun to see whether it repeats"
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
