//go:build rdma && !gpu

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// newBuffer is every pingpong test's memory: host memory in builds without
// the gpu tag. Call it from the test goroutine (it may end the test).
func newBuffer(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
	t.Helper()
	return rc.HostBuffer(t, size, r)
}
