//go:build rdma

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
)

// This file's name sorts after every other test file of the package, and go
// test runs tests in file order: HLTH-01 runs after the traffic tests it
// judges. A traffic test in a file sorting later would not be judged (its
// name would be missing from gdr.tests_judged).

// HLTH-01: no error counter of a rail's NIC (port counters, hw_counters) or
// of the PCIe functions between its GPU and NIC (AER) rose while this
// package's traffic tests ran; the kernel log lines of the run reported.
func TestHLTH01TrafficCounters(t *testing.T) {
	testenv.Req(t, "HLTH-01")
	rc.NeedNIC(t, rc.Rails(t)) // no NIC: no traffic could run
	window.Judge(t, "HLTH-01", "the pingpong traffic tests (PP-01..PP-10)")
}
