package testenv

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Outcomes of a failed test, recorded as gdr.outcome. A failed case without
// one counts as fell_short (recordings made before the attribute).
const (
	// FellShort: the hardware or the host's configuration fell short (JUnit <failure>).
	FellShort = "fell_short"
	// NotJudged: the suite could not judge (a suite bug, a peer lost or
	// unreachable, the budget spent, a host tool that errored: JUnit <error>).
	NotJudged = "not_judged"
)

// Failure is one failure of a test, in the fields the report reads from its
// attributes instead of parsing the log line (gdr.cause, gdr.remedy,
// gdr.outcome, gdr.measured, gdr.threshold, gdr.threshold_source).
type Failure struct {
	Cause     string // the cause sentence, without the remedy
	Remedy    string // what to do; "" when the cause says it, or nobody knows
	NotJudged bool   // the suite could not judge; else the host fell short
	// When a value was judged: the attribute keys of the value and of its
	// bound (gdr.bw_gbit_s, gdr.min_bw_gbit_s), and where the bound comes
	// from in words ("" when the test records gdr.threshold_source itself).
	Measured, Threshold, Source string
}

// Outcome is f's gdr.outcome.
func (f Failure) Outcome() string {
	if f.NotJudged {
		return NotJudged
	}
	return FellShort
}

// line is the log line people read: "cause; remedy: what to do".
func (f Failure) line() string {
	if f.Remedy == "" {
		return f.Cause
	}
	return f.Cause + "; remedy: " + f.Remedy
}

// failures counts each test's failures: the first one's attributes are the
// test's, later ones only add to gdr.failures_count (a key is written once:
// JUnit properties and the report keep one value per key). An entry stays
// after its test ends, so that a failure in a later cleanup (the leak check
// runs last) does not write the attributes a second time; it is not counted.
var failures sync.Map // testing.TB -> *atomic.Int64

// Fail records f on t and stops the test. Every failure of the suite goes
// through Fail or Error, so its cause never has to be parsed back out of
// the message.
func Fail(t testing.TB, f Failure) {
	t.Helper()
	record(t, f)
	t.Fatalf("%s", f.line())
}

// Error is Fail without stopping the test, for checks that report every
// offender (each bridge, each device) before the test ends.
func Error(t testing.TB, f Failure) {
	t.Helper()
	record(t, f)
	t.Errorf("%s", f.line())
}

// record writes f's attributes when it is t's first failure, and counts it
// otherwise; the count (gdr.failures_count, 2 or more) is written by a
// cleanup, when the test ends.
func record(t testing.TB, f Failure) {
	t.Helper()
	n := new(atomic.Int64)
	if v, loaded := failures.LoadOrStore(t, n); loaded {
		v.(*atomic.Int64).Add(1)
		return
	}
	n.Store(1)
	t.Cleanup(func() {
		if c := n.Load(); c > 1 {
			Attr(t, "gdr.failures_count", c)
		}
	})
	Attr(t, "gdr.outcome", f.Outcome())
	Attr(t, "gdr.cause", f.Cause)
	if f.Remedy != "" {
		Attr(t, "gdr.remedy", f.Remedy)
	}
	if f.Measured != "" {
		Attr(t, "gdr.measured", withPrefix(f.Measured))
	}
	if f.Threshold != "" {
		Attr(t, "gdr.threshold", withPrefix(f.Threshold))
	}
	if f.Source != "" {
		Attr(t, "gdr.threshold_source", f.Source)
	}
}

// NotJudgedf stops a test the suite could not judge: a suite bug, a peer
// lost or unreachable, the budget spent, a host tool that errored.
func NotJudgedf(t testing.TB, remedy, format string, args ...any) {
	t.Helper()
	Fail(t, Failure{Cause: fmt.Sprintf(format, args...), Remedy: remedy, NotJudged: true})
}

// withPrefix is an attribute name with its gdr. prefix, as Attr writes it.
func withPrefix(name string) string {
	if strings.HasPrefix(name, "gdr.") {
		return name
	}
	return "gdr." + name
}
