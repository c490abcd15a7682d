package kmod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Built-in modules (a /sys/module directory without initstate and no
// /proc/modules line, as on the GPU machine's kernel) count as loaded.
func TestSummaryCountsBuiltinModules(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(s), 0o644))
	}
	write("proc/modules", "nvidia_uvm 2093056 0 - Live 0x0 (O)\nmlx5_ib 475136 0 - Live 0x0\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/module/ib_core/parameters"), 0o755))
	write("sys/module/mlx5_ib/initstate", "live\n")
	root, err := hostfs.New(dir)
	require.NoError(t, err)

	h, err := New(root)
	require.NoError(t, err)
	s := h.Summary([]string{"ib_core", "mlx5_ib", "ib_uverbs"})
	assert.Contains(t, s, "loaded: ib_core (built in), mlx5_ib;")
	assert.Contains(t, s, "not loaded: ib_uverbs")
	assert.Contains(t, s, "/proc/modules (2 modules)")
	assert.True(t, h.Has("ib_core"))
	assert.False(t, h.Has("ib_uverbs"))
	assert.Contains(t, RDMASummary(root), "ib_core (built in)")
}

func TestRDMASummaryOnBadModulesFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "proc"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "proc/modules"), []byte("garbage\n"), 0o644))
	root, err := hostfs.New(dir)
	require.NoError(t, err)
	assert.Contains(t, RDMASummary(root), "kernel modules unknown")
}
