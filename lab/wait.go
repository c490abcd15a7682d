package lab

import (
	"context"
	"time"
)

// waitFor is the lab's one poll: it calls ok, then again every `every`,
// until ok holds (nil), deadline passed or ctx ended (a *waitTimeout
// naming what it waited for). ok runs once more after the last sleep, so
// the last state it saw is the one at the deadline, which callers that
// build their own message from it rely on. The host's and the guest's
// waits share it; the guest has no context and passes
// context.Background().
func waitFor(ctx context.Context, deadline time.Time, every time.Duration, what string, ok func() bool) error {
	for !ok() {
		if time.Now().After(deadline) {
			return &waitTimeout{what: what}
		}
		if err := ctx.Err(); err != nil {
			return &waitTimeout{what: what, cause: err}
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

// waitTimeout is a wait that ended without what it waited for.
type waitTimeout struct {
	what  string
	cause error // the context's, when it ended before the deadline
}

func (e *waitTimeout) Error() string {
	if e.cause != nil {
		return "stopped waiting for " + e.what + ": " + e.cause.Error()
	}
	return "timed out waiting for " + e.what
}

func (e *waitTimeout) Unwrap() error { return e.cause }
