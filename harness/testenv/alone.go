package testenv

import (
	"errors"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/internal/suitelock"
)

var (
	aloneOnce sync.Once
	aloneErr  error
)

// notAloneRemedy is what a run with two conformance binaries at once does.
const notAloneRemedy = "run the conformance packages one at a time (make conformance and dist/run.sh do; " +
	"go test needs -p 1), and no second run of the suite on this host meanwhile"

// alone makes sure no other conformance binary runs on this host while
// this one does (internal/suitelock): GPU copies, RDMA traffic and counter
// reads of two packages at once disturb each other's measurements. The
// first test of the binary takes the lock; every test of a binary that
// found it taken is not judged, naming the holder. Runs against a recorded
// host tree touch no device and take no lock.
func alone(t testing.TB) {
	t.Helper()
	if !Root(t).IsLive() {
		return
	}
	path := Config(t).SuiteLock
	// The lock is held until the binary exits (suitelock keeps a raw
	// descriptor that nothing closes).
	aloneOnce.Do(func() { _, aloneErr = suitelock.Acquire(path) })
	judgeAlone(t, aloneErr)
}

// judgeAlone ends t when err says another binary holds the lock, and
// records that no lock guards the run when it could not be taken at all.
func judgeAlone(t testing.TB, err error) {
	t.Helper()
	var busy *suitelock.BusyError
	switch {
	case errors.As(err, &busy):
		NotJudgedf(t, notAloneRemedy, "another conformance binary runs on this host at the same time: %s holds %s; "+
			"its GPU copies, RDMA traffic and counter reads would disturb this one's measurements", busy.Holder, busy.Path)
	case err != nil:
		Attr(t, "suite_lock", "not taken ("+err.Error()+"): a second conformance binary running at once would go unnoticed")
	}
}
