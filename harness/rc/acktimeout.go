package rc

import (
	"time"

	"github.com/gdrconf/gdrconf/internal/config"
)

// SoftwareIBTimeout is the ACK timeout exponent of a software device's
// queue pairs (18: 1.07 s) when GDR_IB_TIMEOUT is not set. A hardware NIC
// acknowledges at line rate and keeps perftest's 14 (67 ms); rxe's
// acknowledgements are host CPU work, and on the lab's emulated, loaded
// hosts a 1 MiB WRITE's round trip took 430 ms, so at 67 ms the requester
// resent data that was still on its way, every resend queued behind the
// rest, and a bidirectional point with 1% loss made no progress for 46 s
// (issue 17, lab-faults loss-1pct under LAB_LOAD=2). 1.07 s is over twice
// that round trip, and seven retries (8.6 s) still end a dead link's WRs
// well within GDR_TIMEOUT.
const SoftwareIBTimeout = 18

// AckTimeout is the exponent a connection uses: GDR_IB_TIMEOUT as given,
// else the default, raised to SoftwareIBTimeout on software devices.
func AckTimeout(cfg config.Config, software bool) int {
	if software && !cfg.IBTimeoutSet {
		return max(cfg.IBTimeout, SoftwareIBTimeout)
	}
	return cfg.IBTimeout
}

// AckDuration is the local ACK timeout exponent exp stands for (4.096 us x
// 2^exp, IBTA 1.4 vol. 1, 9.7.6.1.3); 0 means none.
func AckDuration(exp int) time.Duration {
	if exp <= 0 || exp > 31 {
		return 0
	}
	return 4096 * time.Nanosecond << exp
}
