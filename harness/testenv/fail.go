package testenv

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// failures counts each test's failures: the first one's attributes are the
// test's, later ones only add to gdr.failures_count (a key is written once:
// JUnit properties and the report keep one value per key). An entry stays
// after its test ends, so that a failure in a later cleanup (the leak check
// runs last) does not write the attributes a second time; it is not counted.
var failures sync.Map // testing.TB -> *atomic.Int64

// warnings are each test's Warn findings, written as one gdr.warning when
// the test ends.
var warnings sync.Map // testing.TB -> *warnList

type warnList struct {
	mu    sync.Mutex
	lines []string
}

// Fail records f on t and stops the test: an absent finding skips (or
// fails under GDR_STRICT=1, Absent), any other fails with f's outcome.
// Every failure of the suite goes through Fail, Error or Record, so its
// cause, remedy and outcome never have to be parsed back out of a message.
func Fail(t testing.TB, f verdict.Finding) {
	t.Helper()
	if f.Kind() == verdict.Absent {
		absent(t, f)
	}
	record(t, f)
	t.Fatalf("%s", f.Line())
}

// Error is Fail without stopping the test, for checks that report every
// offender (each bridge, each device) before the test ends. An absent
// finding still ends the test (a skip cannot go on).
func Error(t testing.TB, f verdict.Finding) {
	t.Helper()
	if f.Kind() == verdict.Absent {
		absent(t, f)
	}
	record(t, f)
	t.Errorf("%s", f.Line())
}

// Record records an engine's findings, in order, with one call: Info as a
// log line, Warn as a log line and in gdr.warning, Fail through Error (an
// absent one ends the test there). It is the one way a list of findings
// reaches a test.
func Record(t testing.TB, fs ...verdict.Finding) {
	t.Helper()
	for _, f := range fs {
		switch f.Level {
		case verdict.Info:
			t.Logf("%s", f.Line())
		case verdict.Warn:
			t.Logf("WARNING: %s", f.Line())
			warn(t, f.Line())
		default:
			Error(t, f)
		}
	}
}

// Stop ends the test on err, an engine's error: a *verdict.Finding in its
// chain is recorded with its fields (the cause is the whole message, which
// says where it happened); any other error is one no engine classified,
// so the suite could not judge. nil does nothing.
func Stop(t testing.TB, err error) {
	t.Helper()
	if f := verdict.Of(err); f != nil {
		Fail(t, *f)
	}
}

// absent ends the test because what f needs is not there: a skip naming
// it, or under GDR_STRICT=1 a failure with outcome absent (which names no
// part). Its attributes say what is missing and what to do either way.
func absent(t testing.TB, f verdict.Finding) {
	t.Helper()
	f.Outcome = verdict.Absent
	if Config(t).Strict {
		f.Cause = "GDR_STRICT=1: " + f.Cause
		record(t, f)
		t.Fatalf("%s", f.Line())
	}
	if _, failed := failures.Load(t); !failed {
		Attr(t, "gdr.skip", f.Cause) // verdict.KeySkip
		writeAttrs(t, f)
	}
	t.Skip(f.Line())
}

// record writes f's attributes when it is t's first failure, and counts it
// otherwise; the count (gdr.failures_count, 2 or more) is written by a
// cleanup, when the test ends.
func record(t testing.TB, f verdict.Finding) {
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
	writeAttrs(t, f)
}

func writeAttrs(t testing.TB, f verdict.Finding) {
	t.Helper()
	for _, a := range f.Attrs() {
		Attr(t, a.Key, a.Value)
	}
}

// warn keeps a Warn finding's line for t's gdr.warning.
func warn(t testing.TB, line string) {
	t.Helper()
	w := &warnList{}
	if v, loaded := warnings.LoadOrStore(t, w); loaded {
		w = v.(*warnList)
	} else {
		t.Cleanup(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			Attr(t, "gdr.warning", strings.Join(w.lines, " | "))
		})
	}
	w.mu.Lock()
	w.lines = append(w.lines, line)
	w.mu.Unlock()
}

// Failf reports something present but wrong and stops the test (the host
// fell short). The message is the cause; remedy is what to do about it.
func Failf(t testing.TB, remedy, format string, args ...any) {
	t.Helper()
	Fail(t, *verdict.Failf(remedy, format, args...))
}

// Errorf is Failf without stopping the test, for checks that report every
// offender (each bridge, each device) before the test ends.
func Errorf(t testing.TB, remedy, format string, args ...any) {
	t.Helper()
	Error(t, *verdict.Failf(remedy, format, args...))
}

// NotJudgedf stops a test the suite could not judge: a suite bug, a peer
// lost or unreachable, the budget spent, a host tool that errored.
func NotJudgedf(t testing.TB, remedy, format string, args ...any) {
	t.Helper()
	Fail(t, *verdict.NotJudgedf(remedy, format, args...))
}

// Absent ends the test because hardware or software it needs is not there.
// The message must say what is missing and where the suite looked; remedy
// says what to install, load or run ("" when nothing can be done here).
// Under GDR_STRICT=1 this is a failure (outcome absent), not a skip.
func Absent(t testing.TB, remedy, format string, args ...any) {
	t.Helper()
	absent(t, *verdict.Absentf(remedy, format, args...))
}

// withPrefix is an attribute name with its gdr. prefix, as Attr writes it.
func withPrefix(name string) string {
	if strings.HasPrefix(name, "gdr.") {
		return name
	}
	return "gdr." + name
}
