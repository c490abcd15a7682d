//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/testenv"
)

// Shared is one connection that the subtests of a test run on in turn (a
// bandwidth sweep, the steps of a host or GPU half). One failure stays one
// failure: each subtest after the first starts with a checkpoint on every
// session (oob.Session.Checkpoint: both hosts resync at the subtest's name,
// dropping what the subtest before left unread, and say whether their side
// of it passed). When both did, the subtest runs on the same connection;
// when either did not (its QP may be in the error state, its peer's result
// unread), it connects afresh on a session named for itself, so it runs on
// its own merits. After such a reconnect each later subtest connects
// afresh as well (the objects belong to the subtest that made them).
type Shared struct {
	parent *testing.T
	o      Options
	first  []*End
	ends   []*End
	owner  *testing.T // the test whose cleanups release ends
	prev   *testing.T // the subtest that ran before
}

// Share connects t's ends (Connect) for its subtests to share.
func Share(t *testing.T, o Options) *Shared {
	t.Helper()
	ends := Connect(t, o)
	return &Shared{parent: t, o: o, first: ends, ends: ends, owner: t}
}

// First are the ends Share connected.
func (s *Shared) First() []*End { return s.first }

// Ends returns the ends subtest t runs on: the shared connection when it
// is still in step on both hosts, else a fresh one. It ends t when neither
// can be had, with the cause.
func (s *Shared) Ends(t *testing.T) []*End {
	t.Helper()
	// The peer's diagnosis of a host one subtest behind needs every
	// subtest in this process's history, connected or not.
	oob.DefaultHistory.Begin(t.Name())
	prev := s.prev
	s.prev = t
	if prev == nil && s.ends != nil {
		return s.ends // fresh from Share
	}
	if s.ends != nil && s.owner == s.parent {
		ok := !prev.Failed() && !prev.Skipped()
		both, err := checkpoint(s.ends, t.Name(), ok)
		switch {
		case err == nil && both:
			return s.ends
		case err == nil:
			t.Logf("%s did not pass on both hosts (here: %s): connecting afresh so that %s runs on its own merits",
				prev.Name(), map[bool]string{true: "passed", false: "failed or skipped"}[ok], t.Name())
		case timedOut(err):
			s.drop()
			testenv.NotJudgedf(t, "", "the peer did not reach %s on the shared connection: %v", t.Name(), err)
		default:
			t.Logf("the shared connection cannot carry %s (%v): connecting afresh", t.Name(), err)
		}
	}
	s.drop()
	o := s.o
	o.Session = t.Name()
	s.ends = Connect(t, o)
	s.owner = t
	return s.ends
}

// drop closes the shared sessions, so a peer still waiting on them hears
// at once instead of after GDR_TIMEOUT.
func (s *Shared) drop() {
	for _, e := range s.ends {
		e.Sess.Close()
	}
	s.ends = nil
}

func timedOut(err error) bool {
	var e *oob.Error
	return errors.As(err, &e) && e.TimedOut
}

// checkpoint runs oob.Session.Checkpoint on every end at once (loopback:
// both ends of this process talk to each other) and says whether all are
// in step and passed.
func checkpoint(ends []*End, point string, ok bool) (bool, error) {
	both := make([]bool, len(ends))
	errs := make([]error, len(ends))
	var wg sync.WaitGroup
	for i, e := range ends {
		wg.Go(func() {
			both[i], errs[i] = e.Sess.Checkpoint(point, ok)
			if errs[i] != nil {
				e.Sess.Close() // the other end of a loopback pair must not wait
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return false, fmt.Errorf("%s: %w", ends[i].Role, err)
		}
	}
	for _, b := range both {
		if !b {
			return false, nil
		}
	}
	return true, nil
}
