// Package wait is the labs' one poll, on the host and in the guest agent:
// a condition checked at an interval until it holds or a deadline passes.
package wait

import (
	"context"
	"time"
)

// For calls ok, then again every `every`, until ok holds (nil), deadline
// passed or ctx ended (a *Timeout naming what it waited for). ok runs once
// more after the last sleep, so the last state it saw is the one at the
// deadline, which callers that build their own message from it rely on.
// The guest agent has no context and passes context.Background().
func For(ctx context.Context, deadline time.Time, every time.Duration, what string, ok func() bool) error {
	for !ok() {
		if time.Now().After(deadline) {
			return &Timeout{What: what}
		}
		if err := ctx.Err(); err != nil {
			return &Timeout{What: what, Cause: err}
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// Timeout is a wait that ended without what it waited for.
type Timeout struct {
	What  string
	Cause error // the context's, when it ended before the deadline
}

func (e *Timeout) Error() string {
	if e.Cause != nil {
		return "stopped waiting for " + e.What + ": " + e.Cause.Error()
	}
	return "timed out waiting for " + e.What
}

func (e *Timeout) Unwrap() error { return e.Cause }
