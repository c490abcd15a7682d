//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// lostPeer says whether err means the suite could not judge: the peer
// vanished, stalled, runs another test or broke the protocol, or the
// test's budget ran out. A peer that reported a failure of its own
// (oob.ErrPeer) gave a verdict, and a wrong token or protocol version is
// the run's configuration: those are judged.
func lostPeer(err error) bool {
	for _, k := range []error{oob.ErrVanished, oob.ErrStalled, oob.ErrTest, oob.ErrProtocol, oob.ErrIntegrity, oob.ErrBudget} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// notJudged stops t on err of the out-of-band setup (listen, budget): the
// test never reached the hardware.
func notJudged(t testing.TB, err error) {
	t.Helper()
	testenv.Fail(t, verdict.Finding{Outcome: verdict.NotJudged, Cause: err.Error()})
}

// connectFailed stops t when the session to the peer could not be opened:
// not judged, unless this host had its own reason to fail (fail), which
// the peer could not be told: then fail, with the connect error beside its
// cause.
func connectFailed(t testing.TB, err error, fail *verdict.Finding) {
	t.Helper()
	if fail == nil {
		testenv.Fail(t, verdict.Finding{Outcome: verdict.NotJudged, Cause: connectError(err, "").Error()})
		return // Fail stops a real test; a recorder in the tests may not
	}
	f := *fail
	f.Cause = connectError(err, fail.Cause).Error()
	testenv.Fail(t, f)
}

// endsFailure is the failure of the ends' errors errs that are shown (their
// indexes): one line each, "role: error". A remedy an error carries (a
// verdict.Finding in its chain) is the failure's remedy; the first wins.
// Not judged when every end lost its peer or its budget (lostPeer), else
// the host fell short.
func endsFailure(ends []*End, errs []error, shown []int) verdict.Finding {
	f := verdict.Finding{Outcome: verdict.NotJudged}
	var causes []string
	for _, i := range shown {
		err := errs[i]
		if vf, ok := verdict.As(err); ok && f.Remedy == "" {
			f.Remedy = vf.Remedy
		}
		causes = append(causes, fmt.Sprintf("%s: %v", ends[i].Role, err))
		if !lostPeer(err) {
			f.Outcome = verdict.FellShort
		}
	}
	f.Cause = strings.Join(causes, "\n")
	return f
}

// Stop ends t on err, an error of a run over RC ends (nil does nothing):
// not judged when the peer was lost or the budget spent (lostPeer); else
// the verdict.Finding in its chain, with its outcome and remedy; else the
// host fell short (a transfer that failed is the host's).
func Stop(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	f := verdict.Of(err)
	if _, ok := verdict.As(err); !ok {
		f.Outcome = verdict.FellShort
	}
	if lostPeer(err) {
		f.Outcome = verdict.NotJudged
	}
	testenv.Fail(t, *f)
}
