//go:build rdma

package pingpong

import (
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/harness/health"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// connect connects this test's ends (harness/rc) on rail r (nil: the
// primary rail) on a buffer of bufSize bytes from alloc (nil: the memory
// GDR_MEM selects), with the settings both hosts must share. skip, when
// set, is a reason only this host knows of.
func connect(t *testing.T, r *rails.Rail, bufSize int, alloc rc.Alloc, skip string) []*rc.End {
	t.Helper()
	return rc.Connect(t, connOptions(t, r, bufSize, alloc, skip))
}

// share is connect for a test whose subtests run on one connection in turn
// (rc.Shared): a subtest that fails makes the next one connect afresh
// instead of failing on what it left behind.
func share(t *testing.T, r *rails.Rail, bufSize int, alloc rc.Alloc, skip string) *rc.Shared {
	t.Helper()
	return rc.Share(t, connOptions(t, r, bufSize, alloc, skip))
}

func connOptions(t *testing.T, r *rails.Rail, bufSize int, alloc rc.Alloc, skip string) rc.Options {
	// Every connection is traffic HLTH-01 judges the counters around.
	if hr := r; hr != nil {
		window.Around(t, hr)
	} else if p := testenv.Selection(t).Primary; p != nil {
		window.Around(t, p)
	}
	if alloc == nil {
		alloc = newBuffer
	}
	return rc.Options{Rail: r, BufSize: bufSize, Alloc: alloc, Skip: skip, Info: rc.Settings(testenv.Config(t))}
}

// window is the counters window of this package's traffic tests
// (harness/health), judged by HLTH-01 after them.
var window = health.New()

// soloBW holds each rail's WRITE bandwidth at the largest size, measured
// alone by PP-08, for PP-10's comparison with all rails at once.
var soloBW sync.Map // rail index -> Gb/s

// threshold rules, documented in docs/floors.md: on hardware NICs, bandwidth at
// every size of the sweep >= the internal/floors fraction for that size of
// the bottleneck of the point's streams over the links each crosses per
// direction (floors.Layout), and small-WRITE p50 latency <= the ceiling of
// the memory kind measured (floors.LatCeilingFor; p99 twice that, p99.9
// four times from 10000 iterations); software devices (rxe, siw) get none.
