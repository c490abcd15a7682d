// Package budget bounds a test's waits by the time its test binary has
// left. go test panics with a goroutine dump when -test.timeout passes; a
// slow fabric should instead end in one clear verdict per test. Every wait
// of a test is therefore the shorter of its own bound (GDR_TIMEOUT, or a
// transfer's budget) and the time left before the binary's deadline less a
// reserve for reporting, cleanup and the quick failures of the tests after it.
package budget

import (
	"errors"
	"fmt"
	"time"
)

// Reserve is kept back from the binary's deadline: the failing test reports
// and releases its objects, and every later test still gets to fail with
// its own message instead of the binary's timeout panic.
const Reserve = 5 * time.Second

// ErrExhausted is a wait cut short, or a test not started, because the test
// binary's deadline is near.
var ErrExhausted = errors.New("test budget exhausted")

// Budget is the time a test may still use. The zero value has no deadline.
type Budget struct {
	end   time.Time // the binary's deadline less Reserve
	limit time.Time // the binary's deadline itself, for messages
	has   bool
}

// New makes the budget of a test whose binary ends at deadline (ok false:
// no -test.timeout, no budget), keeping reserve back.
func New(deadline time.Time, ok bool, reserve time.Duration) Budget {
	if !ok {
		return Budget{}
	}
	return Budget{end: deadline.Add(-reserve), limit: deadline, has: true}
}

// Has reports whether the binary has a deadline.
func (b Budget) Has() bool { return b.has }

// End is the last moment a wait may reach (zero without a deadline).
func (b Budget) End() time.Time { return b.end }

// Left is the time a wait started now may still use; without a deadline
// it is a very long time.
func (b Budget) Left(now time.Time) time.Duration {
	if !b.has {
		return time.Duration(1<<63 - 1)
	}
	return b.end.Sub(now)
}

// Bound is d, or what is left when that is shorter; clipped says which.
func (b Budget) Bound(d time.Duration, now time.Time) (bound time.Duration, clipped bool) {
	left := b.Left(now)
	if d <= left {
		return d, false
	}
	return max(left, 0), true
}

// Start fails (ErrExhausted) when nothing is left for a test that starts
// now, naming the deadline and what to change.
func (b Budget) Start(what string, now time.Time) error {
	if b.Left(now) > 0 {
		return nil
	}
	return &Error{What: what, Limit: b.limit, At: now, Start: true}
}

// Cut is the error for a wait on what that the budget ended at now.
func (b Budget) Cut(what string, now time.Time) error {
	return &Error{What: what, Limit: b.limit, At: now}
}

// Error says that the test binary's deadline stopped a test or a wait.
type Error struct {
	What  string
	Limit time.Time // the binary's deadline
	At    time.Time
	Start bool // the test was not started at all
}

func (e *Error) Error() string {
	left := e.Limit.Sub(e.At).Round(100 * time.Millisecond)
	if e.Start {
		return fmt.Sprintf("%s not started: the test binary's deadline (-test.timeout) is %v away, within the %v kept for the tests' reports; earlier tests used the time (see their verdicts): raise -test.timeout, run fewer tests, or lower GDR_TIMEOUT",
			e.What, left, Reserve)
	}
	return fmt.Sprintf("%s: cut short %v before the test binary's deadline (-test.timeout), so that this and the following tests end in verdicts instead of the binary's timeout panic; earlier waits used the time: raise -test.timeout, or lower GDR_TIMEOUT",
		e.What, left)
}

// Unwrap makes errors.Is(err, ErrExhausted) true.
func (e *Error) Unwrap() error { return ErrExhausted }
