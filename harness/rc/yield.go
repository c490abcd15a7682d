//go:build rdma

package rc

import (
	"math"
	"time"
)

// SoftwareYieldAfter is how long a wait of a bandwidth loop on a software
// device (rxe, siw) spins before it yields the CPU: the C side's
// YIELD_AFTER_NS (harness/verbs/shim.c), measured in the Soft-RoCE lab on a
// one-CPU VM, where the kernel thread that completes the work needs it.
const SoftwareYieldAfter = 20 * time.Microsecond

// yieldMargin is added to twice the expected moderation window before a
// hardware loop yields: scheduling noise and a completion's own latency.
const yieldMargin = 100 * time.Microsecond

// unknownRateGbps stands in for a hardware port whose rate is unknown: lower
// than any RDMA NIC's, so the loop never yields inside a real window.
const unknownRateGbps = 1

// YieldAfter is how long a bandwidth loop's wait for a completion spins
// before it yields the CPU. On a hardware NIC the loop waits a whole
// moderation window between completions (one signaled WR per cqMod, each of
// size bytes, the port shared by streams queue pairs): at 1 MiB, cqMod 100
// and 400 Gb/s that is 2.1 ms, so a fixed 20 us would yield through the
// whole run. It yields only past twice the window at the port's rate plus
// yieldMargin, i.e. when the NIC is late, not when it is busy. Software
// devices keep SoftwareYieldAfter.
func YieldAfter(software bool, rateGbps float64, size, cqMod, streams int) time.Duration {
	if software {
		return SoftwareYieldAfter
	}
	if rateGbps <= 0 || math.IsNaN(rateGbps) {
		rateGbps = unknownRateGbps
	}
	bits := float64(max(size, 1)) * 8 * float64(max(cqMod, 1)) * float64(max(streams, 1))
	window := bits / (rateGbps * 1e9) * float64(time.Second)
	d := 2*window + float64(yieldMargin)
	if d > float64(time.Hour) { // beyond any stall bound: never
		return time.Hour
	}
	return time.Duration(d)
}

// YieldAfter is YieldAfter for this end's device, port and queue pairs.
func (e *End) YieldAfter(size, cqMod int) time.Duration {
	return YieldAfter(e.Software, e.RateGbps(), size, cqMod, len(e.QPs))
}
