// errno's symbolic names as the verbs man pages spell them.

package verbs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// errnoName is the symbolic name; EOPNOTSUPP rather than its alias ENOTSUP,
// as the verbs man pages spell it.
func errnoName(e syscall.Errno) string {
	if e == syscall.EOPNOTSUPP {
		return "EOPNOTSUPP"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return "unknown"
}
