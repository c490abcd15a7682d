//go:build rdma

package traffic

import (
	"fmt"
	"time"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// On a software device (rxe, siw) the requester's ACK timer runs while the
// host CPU, not a NIC, moves the data: on a loaded emulated host 128
// outstanding 1 MiB WRITEs in both directions keep the oldest one
// unacknowledged past the timer, rxe resends from it (go-back-N), every
// resend queues behind the rest, and the link livelocks (issue 17: the
// lab's fault matrix under load). A hardware NIC acknowledges at line rate
// whatever the host does, so it keeps GDR_TX_DEPTH. The suite therefore
// caps a software device's bidirectional point at what the measured round
// trip lets complete within half the ACK timeout, both directions sharing
// one host, above a floor of bytes that ran clean.

// ackTimeout is the local ACK timeout an IB timeout exponent gives
// (4.096 us x 2^t, IBTA 1.4 vol. 1, 9.7.6.1.3); 0 means none.
func ackTimeout(exp int) time.Duration {
	if exp <= 0 || exp > 31 {
		return 0
	}
	return 4096 * time.Nanosecond << exp
}

// SoftwareInflightFloor is what a software device may always keep in
// flight per queue pair and direction: the lab's delayed link (lab-faults
// delay-jitter, 20 +- 10 ms) ran 128 x 64 KiB each way clean, and capping
// it by the round trip alone (one WR) stretched that point past its
// deadline; the livelock needed 128 x 1 MiB (issue 17).
const SoftwareInflightFloor = 8 << 20

// InflightCap is the tx depth for size-byte WRs on qps queue pairs, both
// directions busy: as many as complete within half the ACK timeout of
// exponent ackExp given rtt (one WR's round trip alone: depth x rtt x 2
// directions x qps <= timeout/2), never fewer than SoftwareInflightFloor
// bytes' worth or 1, never more than td. why says how it came about; it is
// empty when td stands.
func InflightCap(td, size, qps, ackExp int, rtt time.Duration) (depth int, why string) {
	to := ackTimeout(ackExp)
	if to == 0 || rtt <= 0 || qps < 1 || size < 1 {
		return td, ""
	}
	fit := int(to / 2 / (rtt * 2 * time.Duration(qps)))
	floor := SoftwareInflightFloor / size
	depth = max(1, min(td, max(fit, floor)))
	if depth == td {
		return td, ""
	}
	why = fmt.Sprintf("software device: %d of %d WRs of %d B in flight per queue pair (%d B): one alone took %v; over both directions and %d queue pair(s), %d complete within half the ACK timeout (%v, GDR_IB_TIMEOUT=%d)",
		depth, td, size, depth*size, rtt.Round(time.Microsecond), qps, max(fit, 0), to, ackExp)
	switch {
	case fit < depth && floor == depth:
		why += fmt.Sprintf(", and %d B are always allowed", SoftwareInflightFloor)
	case fit < 1:
		// rxe asks for ACKs inside a long WR too (Linux rxe,
		// RXE_MAX_PKT_PER_ACK) and each ACK restarts the timer, so a WR
		// longer than the timer still progresses (the lab's load case:
		// 430 ms per 1 MiB WR, passing); a deep queue of them livelocked.
		why += ": one, the least there is"
	}
	return depth, why
}

// softwareCap measures one WR's round trip on e's first queue pair (the
// peer doing the same at once) and returns the tx depth InflightCap allows,
// recorded on e as bw_inflight_cap_note and bw_inflight_cap_bytes.
func softwareCap(e *rc.End, mr *verbs.MR, laddr, raddr uint64, rkey uint32, size, td int) (int, error) {
	if td*size <= SoftwareInflightFloor {
		return td, nil // within the floor: no round trip to pay for
	}
	rtt, err := roundTrip(e, verbs.OpWrite, mr, laddr, raddr, rkey, size)
	if err != nil {
		return 0, fmt.Errorf("WRITE round trip at %d B (one in flight, for the software device's in-flight cap): %w", size, err)
	}
	depth, why := InflightCap(td, size, len(e.QPs), e.Cfg.IBTimeout, rtt)
	if why != "" {
		e.Attr("bw_inflight_cap_note", why)
		e.Attr("bw_inflight_cap_bytes", depth*size)
	}
	return depth, nil
}
