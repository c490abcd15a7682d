package report

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Collect reads strict mode, role, peer and the host root as internal/config
// does, and still does when another GDR_* value is bad (the tests failed on
// it already; the host is still named).
func TestCollectReadsConfig(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proc/sys/kernel"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/sys/kernel/hostname"), []byte("gpu-07\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "proc/sys/kernel/osrelease"), []byte("6.8.0-1\n"), 0o644))
	t.Setenv("GDR_HOST_ROOT", root)
	t.Setenv("GDR_STRICT", "1")
	t.Setenv("GDR_ROLE", "client")
	t.Setenv("GDR_PEER", "10.0.0.1:18515")
	for _, bad := range []string{"", "fast"} {
		t.Setenv("GDR_MIN_BW_GBPS", bad)
		id := Collect()
		assert.Equal(t, "gpu-07", id.Host, "GDR_MIN_BW_GBPS=%q", bad)
		assert.Equal(t, "6.8.0-1", id.Kernel)
		assert.True(t, id.Strict)
		assert.Equal(t, "client", id.Role)
		assert.Equal(t, "10.0.0.1:18515", id.Peer)
	}
}
