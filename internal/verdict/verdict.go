// Package verdict holds the suite's one finding type. Every engine (in
// internal/ and harness/) says what it judged as Findings; a conformance
// test records them through harness/testenv with one call; the report
// reads them back from the test's attributes (Attrs, FromAttrs). No layer
// parses English to recover a remedy, a value, an outcome or a part.
//
// A *Finding is also an error, so an engine that stops early (a tool that
// is missing, a tree that cannot be read) returns one, and a wrapper
// (fmt.Errorf("...: %w", f)) keeps its fields for errors.As (As).
package verdict

import (
	"errors"
	"fmt"
	"strings"
)

// Outcome is what a finding that holds a test back comes to.
type Outcome string

const (
	// FellShort: the hardware or the host's configuration fell short
	// (JUnit <failure>).
	FellShort Outcome = "fell_short"
	// NotJudged: the suite could not judge (a suite bug, a peer lost, the
	// budget spent, a host tool that errored: JUnit <error>).
	NotJudged Outcome = "not_judged"
	// Absent: hardware or software the check needs is not there: the test
	// skips, or fails under GDR_STRICT=1 (JUnit <failure>, naming no part).
	Absent Outcome = "absent"
	// DidNotFinish: the test started and never ended (killed, panicked,
	// out of time). Only the report writes it, about a run: no engine
	// returns it and it names no part.
	DidNotFinish Outcome = "did_not_finish"
)

// Judged says whether o is a judgement of the host (it fell short), not
// a run that could not judge it or hardware that was not there.
func (o Outcome) Judged() bool { return o == FellShort }

// Level says how a finding counts. The zero value fails.
type Level int

const (
	Fail Level = iota // the test fails (Absent: skips, or fails under GDR_STRICT=1)
	Warn              // worth a look; reported, never fails
	Info              // a fact; reported, never fails
)

// AtLeast says whether l is as severe as m or more (Info < Warn < Fail).
func (l Level) AtLeast(m Level) bool { return severity(l) >= severity(m) }

func severity(l Level) int {
	switch l {
	case Fail:
		return 2
	case Warn:
		return 1
	}
	return 0
}

func (l Level) String() string {
	switch l {
	case Fail:
		return "fail"
	case Warn:
		return "warn"
	case Info:
		return "info"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// Finding is one thing an engine judged.
type Finding struct {
	Level Level
	// Outcome of a Fail finding; "" is FellShort (Kind).
	Outcome Outcome
	// Req is the requirement judged ("PP-08"), when the engine knows it;
	// a test's own requirement travels as gdr.req (testenv.Req).
	Req string
	// Device is what the finding is about: a PCI address (lowercase
	// dddd:bb:dd.f) or an RDMA device name; "" when it is the host.
	Device string
	// Rule names the engine's rule that judged, when it has named rules
	// (pcipath's "mps-path").
	Rule string
	// Cause is what is wrong or missing, and where the suite looked; no
	// remedy in it.
	Cause string
	// Remedy is what to do; "" when nobody knows.
	Remedy string
	// Measured and Threshold name the attributes that hold the judged
	// value and its bound (gdr.bw_gbit_s, gdr.min_bw_gbit_s; the prefix
	// is added when missing). Source says in words where the bound comes
	// from ("" when the test records gdr.threshold_source itself).
	Measured, Threshold, Source string
	// Evidence is what the finding rests on beyond the cause: the raw
	// readings a person checks it against (a register, a tool's line).
	Evidence []string
	// Part is the kind of part the engine knows is at fault, in the
	// report's words (report/part.go: "cable/optic", "pcie link", "gpu",
	// "nic", "host configuration", "host software", "network path"); ""
	// when the engine cannot tell and the report's rules decide.
	Part string
}

// Kind is f's outcome: FellShort when none was set.
func (f Finding) Kind() Outcome {
	if f.Outcome == "" {
		return FellShort
	}
	return f.Outcome
}

// Error is the cause alone: the remedy is a field, never text to cut out
// of a message (Line is what a person reads).
func (f *Finding) Error() string { return f.Cause }

// Line is the log line people read: "cause; remedy: what to do".
func (f Finding) Line() string { return Line(f.Cause, f.Remedy) }

// Line joins a cause and its remedy the way every log line of the suite
// does. It only ever joins: nothing splits a line back.
func Line(cause, remedy string) string {
	if remedy == "" {
		return cause
	}
	return cause + "; remedy: " + remedy
}

// Failf is a finding of something present but wrong (FellShort).
func Failf(remedy, format string, args ...any) *Finding {
	return &Finding{Outcome: FellShort, Remedy: remedy, Cause: fmt.Sprintf(format, args...)}
}

// Absentf is a finding of something missing: the cause says what and
// where the suite looked, the remedy what to install, load or run.
func Absentf(remedy, format string, args ...any) *Finding {
	return &Finding{Outcome: Absent, Remedy: remedy, Cause: fmt.Sprintf(format, args...)}
}

// NotJudgedf is a finding the engine could not make (a tool it runs
// failed, what it reads could not be parsed): not the host's shortcoming.
func NotJudgedf(remedy, format string, args ...any) *Finding {
	return &Finding{Outcome: NotJudged, Remedy: remedy, Cause: fmt.Sprintf(format, args...)}
}

// As finds the Finding in err's chain.
func As(err error) (*Finding, bool) {
	var f *Finding
	if errors.As(err, &f) && f != nil {
		return f, true
	}
	return nil, false
}

// IsAbsent says whether err carries a Finding of something absent.
func IsAbsent(err error) bool {
	f, ok := As(err)
	return ok && f.Kind() == Absent
}

// Of is err as a Finding: the one in its chain, its cause the whole
// message (what wrapped it says where); an error no engine classified is
// one the suite could not judge. nil is nil.
func Of(err error) *Finding {
	if err == nil {
		return nil
	}
	f, ok := As(err)
	if !ok {
		return &Finding{Outcome: NotJudged, Cause: err.Error()}
	}
	g := *f
	g.Cause = err.Error()
	return &g
}

// The attributes a recorded finding travels as (go test -json attr
// events, key=value; the report reads them back with FromAttrs). These
// keys are a contract: recordings made since gdr.cause existed carry the
// first five; gdr.device, gdr.rule, gdr.evidence and gdr.part_kind were
// added with this type, and readers treat them as optional.
const (
	KeyOutcome   = "gdr.outcome"
	KeyCause     = "gdr.cause"
	KeyRemedy    = "gdr.remedy"
	KeyMeasured  = "gdr.measured"
	KeyThreshold = "gdr.threshold"
	KeySource    = "gdr.threshold_source"
	KeyDevice    = "gdr.device"
	KeyRule      = "gdr.rule"
	KeyEvidence  = "gdr.evidence"
	KeyPart      = "gdr.part_kind"
	// KeySkip is a skip's reason (the cause of an absent finding that
	// skipped), written since before gdr.cause.
	KeySkip = "gdr.skip"
	// KeyStrictAbsent marked an absence failed under GDR_STRICT=1 in
	// recordings made before gdr.outcome had "absent"; FromAttrs reads it.
	KeyStrictAbsent = "gdr.absent"
)

// evidenceSep joins Evidence in one attribute value.
const evidenceSep = " | "

// Attr is one key=value of a recorded finding.
type Attr struct{ Key, Value string }

// Attrs are f's attributes in the order testenv writes them. Empty fields
// are left out: a value not measured is absent.
func (f Finding) Attrs() []Attr {
	var out []Attr
	add := func(k, v string) {
		if v != "" {
			out = append(out, Attr{k, v})
		}
	}
	add(KeyOutcome, string(f.Kind()))
	add(KeyCause, f.Cause)
	add(KeyRemedy, f.Remedy)
	add(KeyMeasured, prefixed(f.Measured))
	add(KeyThreshold, prefixed(f.Threshold))
	add(KeySource, f.Source)
	add(KeyDevice, f.Device)
	add(KeyRule, f.Rule)
	add(KeyEvidence, strings.Join(f.Evidence, evidenceSep))
	add(KeyPart, f.Part)
	return out
}

// FromAttrs is the finding a test recorded in its own attributes, and
// whether it recorded one (gdr.cause, or a skip's gdr.skip). A skip is an
// absent finding whose cause is its reason; a failure recorded before
// gdr.outcome existed fell short, and one marked gdr.absent was an absence
// failed under GDR_STRICT=1.
func FromAttrs(own map[string]string) (Finding, bool) {
	f := Finding{
		Cause:     own[KeyCause],
		Remedy:    own[KeyRemedy],
		Outcome:   Outcome(own[KeyOutcome]),
		Measured:  own[KeyMeasured],
		Threshold: own[KeyThreshold],
		Source:    own[KeySource],
		Device:    own[KeyDevice],
		Rule:      own[KeyRule],
		Part:      own[KeyPart],
	}
	if e := own[KeyEvidence]; e != "" {
		f.Evidence = strings.Split(e, evidenceSep)
	}
	if f.Cause == "" {
		if own[KeySkip] == "" {
			return Finding{}, false
		}
		f.Cause, f.Outcome = own[KeySkip], Absent
	}
	if own[KeyStrictAbsent] != "" {
		f.Outcome = Absent
	}
	if f.Outcome == "" {
		f.Outcome = FellShort
	}
	return f, true
}

func prefixed(name string) string {
	if name == "" || strings.HasPrefix(name, "gdr.") {
		return name
	}
	return "gdr." + name
}
