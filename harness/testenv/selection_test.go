package testenv

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The selection is built once from GDR_HOST_ROOT and the GDR_* variables; a
// GPU source is not asked about a tree that is not the running host.
func TestSelectionOnTree(t *testing.T) {
	dgx, err := filepath.Abs("../../fixtures/hosts/dgx")
	require.NoError(t, err)
	t.Setenv("GDR_HOST_ROOT", dgx)
	t.Setenv("GDR_GPU", "5")
	called := false
	RegisterGPUSource("test driver", func() ([]string, error) { called = true; return []string{"0000:fe:00.0"}, nil })
	s := Selection(t)
	require.NotNil(t, s.Primary)
	assert.Equal(t, "0000:a9:00.0", s.Primary.GPU.PCI)
	assert.Equal(t, "mlx5_3", s.Primary.NIC.Name)
	assert.Len(t, s.GPUs, 8, "no driver GPU added on a recorded tree")
	assert.False(t, called)
	assert.Same(t, s, Selection(t), "built once")
	RailAttrs(t, s.Primary)
	RailAttrs(t, nil)
	// A source registered after the build is a suite bug the next call reports.
	RegisterGPUSource("late", func() ([]string, error) { return nil, nil })
	srcMu.Lock()
	assert.Equal(t, []string{"late"}, lateSource)
	lateSource = nil
	srcMu.Unlock()
}
