//go:build rdma

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/membuf"
)

// hostBuffer maps page-aligned host memory, released by t.Cleanup.
func hostBuffer(t testing.TB, size int) membuf.Buffer {
	t.Helper()
	b, err := membuf.NewHost(size)
	if err != nil {
		t.Fatalf("host buffer of %d bytes: %v; remedy: free memory or lower GDR_BW_SIZES", size, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing host buffer: %v", err)
		}
	})
	return b
}
