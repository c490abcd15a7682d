//go:build rdma

package traffic

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/rc"
)

// The engines run on a test's connected ends, with the ends' outcome
// recorded (rc.Done: a failed end ends the test) and the result logged.

// VerifyOn runs the data check fn over VerifySizes on ends (Verify).
func VerifyOn(t *testing.T, ends []*rc.End, fn Transfer) {
	t.Helper()
	rc.Done(t, ends, Verify(ends, fn))
}

// LatencyOn measures LatSize-byte WRITE round trips on ends (Latency) and
// returns the client's numbers with the ceiling that applies; the caller
// decides whether to enforce it.
func LatencyOn(t *testing.T, ends []*rc.End, forceImm bool) LatResult {
	t.Helper()
	res, errs := Latency(ends, forceImm)
	rc.Done(t, ends, errs)
	t.Logf("%s", res.Log())
	return res
}

// BandwidthOn measures one bandwidth point on ends (Bandwidth) and returns
// the client's rate with the floor that applies.
func BandwidthOn(t *testing.T, ends []*rc.End, sp BWSpec) BWResult {
	t.Helper()
	res, errs := Bandwidth(ends, sp)
	rc.Done(t, ends, errs)
	t.Logf("%s", res.Log(sp))
	return res
}
