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
	testenv.Fail(t, testenv.Failure{Cause: err.Error(), NotJudged: true})
}

// connectFailed stops t when the session to the peer could not be opened:
// not judged, unless this host had its own reason to fail (fail), which
// the peer could not be told.
func connectFailed(t testing.TB, err error, fail string) {
	t.Helper()
	testenv.Fail(t, testenv.Failure{Cause: connectError(err, fail).Error(), NotJudged: fail == ""})
}

// endsFailure is the failure of the ends' errors errs that are shown (their
// indexes): one line each, "role: error". A remedy an error carries
// (verdict.Failure) becomes the failure's remedy and leaves the cause; the
// log line is the same either way.
func endsFailure(ends []*End, errs []error, shown []int) testenv.Failure {
	f := testenv.Failure{NotJudged: true}
	var causes []string
	for _, i := range shown {
		err := errs[i]
		msg := err.Error()
		var vf *verdict.Failure
		if errors.As(err, &vf) && vf.Remedy != "" {
			if f.Remedy == "" {
				f.Remedy = vf.Remedy
			}
			msg = strings.Replace(msg, "; remedy: "+vf.Remedy, "", 1)
		}
		causes = append(causes, fmt.Sprintf("%s: %s", ends[i].Role, msg))
		f.NotJudged = f.NotJudged && lostPeer(err)
	}
	f.Cause = strings.Join(causes, "\n")
	return f
}

// Stop ends t on err, an error of a run over RC ends (nil does nothing):
// not judged when the peer was lost or the budget spent (lostPeer), else
// the host fell short.
func Stop(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		testenv.Fail(t, testenv.Failure{Cause: err.Error(), NotJudged: lostPeer(err)})
	}
}
