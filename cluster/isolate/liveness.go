package isolate

import (
	"fmt"
	"maps"
)

// Liveness is what a run's barriers recorded about hosts that were not
// there (package cluster reads it from the barrier files): a host that had
// not arrived when the start barrier closed never ran, and a host that had
// not finished round k when that round's barrier closed stopped in round k.
// Neither is a hardware verdict. Every task plans from the same closed
// barrier files, so every task sees the same Liveness for the rounds before
// the one it plans.
//
// What isolation does with it:
//
//   - a host that did not start is left out of the schedule: the base
//     rounds pair the hosts that started, so nobody waits for it or fails
//     with it;
//   - a pair in round k or later with a host that stopped in round k is
//     Stopped (the partner stopped): judged neither way, never a link or a
//     rail of either end; the partner is re-paired where it has not passed
//     on that rail, as an untested host;
//   - a stopped host is never scheduled again, and what was not settled
//     about it before it stopped is not reported as a suspect: its run did
//     not finish (a rail already found bad stays bad: that evidence came
//     from finished rounds).
type Liveness struct {
	NotStarted map[string]bool // did not start
	Stopped    map[string]int  // host -> the round it stopped in
}

// Before is the liveness the planner of round k knows: the stops in the
// rounds before k (round k's own barrier has not closed yet).
func (l Liveness) Before(k int) Liveness {
	out := Liveness{NotStarted: l.NotStarted}
	for h, r := range l.Stopped {
		if r < k {
			if out.Stopped == nil {
				out.Stopped = map[string]int{}
			}
			out.Stopped[h] = r
		}
	}
	return out
}

// Clone is a copy that can be changed without changing l.
func (l Liveness) Clone() Liveness {
	return Liveness{NotStarted: maps.Clone(l.NotStarted), Stopped: maps.Clone(l.Stopped)}
}

// Gone reports whether host cannot take part in round k: it did not start,
// or it stopped in a round up to k.
func (l Liveness) Gone(host string, k int) bool {
	if l.NotStarted[host] {
		return true
	}
	r, ok := l.Stopped[host]
	return ok && r <= k
}

// Of is the host's line: "did not start", "stopped in round 2", or "".
func (l Liveness) Of(host string) string {
	if l.NotStarted[host] {
		return DidNotStart
	}
	if r, ok := l.Stopped[host]; ok {
		return fmt.Sprintf("%s %d", StoppedIn, r)
	}
	return ""
}

// Lines of a host whose run did not finish (Host.Liveness).
const (
	DidNotStart = "did not start"
	StoppedIn   = "stopped in round"
)

// started is hosts less those that did not start, with each one's position
// in hosts.
func (l Liveness) started(hosts []string) (names []string, at []int) {
	for i, h := range hosts {
		if !l.NotStarted[h] {
			names = append(names, h)
			at = append(at, i)
		}
	}
	return names, at
}
