//go:build linux

package numa

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/cpulist"
)

// OnCPUs really pins the thread for fn, and restores it afterwards.
func TestOnCPUs(t *testing.T) {
	one, err := cpulist.Parse("0")
	require.NoError(t, err)
	var before unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &before))
	var inside unix.CPUSet
	placed, err := OnCPUs(one, func() error { return unix.SchedGetaffinity(0, &inside) })
	require.NoError(t, err)
	assert.Equal(t, "CPUs 0", placed)
	assert.Equal(t, 1, inside.Count())
	assert.True(t, inside.IsSet(0))
	placed, err = OnCPUs(cpulist.Set{}, func() error { return nil })
	require.NoError(t, err)
	assert.Contains(t, placed, "unpinned")
	far, err := cpulist.Parse("4000")
	require.NoError(t, err)
	placed, _ = OnCPUs(far, func() error { return nil })
	assert.Contains(t, placed, "outside this process's affinity")
}

// Node 0 exists on every Linux host; an unknown node is left alone.
func TestPreferAndBind(t *testing.T) {
	placed, err := Prefer(0, func() error { return nil })
	require.NoError(t, err)
	t.Log(placed)
	placed, err = Prefer(-1, func() error { return nil })
	require.NoError(t, err)
	assert.Contains(t, placed, "unknown")
	mem, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	placed, err = Bind(mem, 0)
	require.NoError(t, err)
	assert.Equal(t, "NUMA node 0 preferred", placed)
}
