//go:build linux

package numa

import (
	"runtime"
	"testing"
	"unsafe"

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

// policy reads the calling thread's memory policy mode (flags masked off).
func policy(t *testing.T) int {
	t.Helper()
	var mode int32
	mask := make([]uint64, policyBits/64)
	_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)), uintptr(unsafe.Pointer(&mask[0])), policyBits, 0, 0, 0)
	require.Zero(t, e, "get_mempolicy")
	return int(mode) &^ (1<<15 | 1<<14 | 1<<13) // MPOL_F_STATIC_NODES, RELATIVE_NODES, NUMA_BALANCING
}

// Near on a one-node machine (node 0 exists on every Linux host): fn runs
// pinned with node 0 preferred, and the thread's own policy (here
// MPOL_BIND to node 0, set beforehand) is back afterwards, as are the
// default policy and the affinity in the plain case.
func TestNearRestores(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &before))
	one, err := cpulist.Parse("0")
	require.NoError(t, err)

	require.Equal(t, mpolDefault, policy(t))
	inside := -1
	var cpus unix.CPUSet
	placed, err := Near(one, 0, func() error {
		inside = policy(t)
		return unix.SchedGetaffinity(0, &cpus)
	})
	require.NoError(t, err)
	assert.Equal(t, "CPUs 0, NUMA node 0 preferred", placed)
	assert.Equal(t, mpolPreferred, inside)
	assert.Equal(t, 1, cpus.Count())
	assert.Equal(t, mpolDefault, policy(t), "the default policy is back")
	var after unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &after))
	assert.Equal(t, before, after, "the affinity is back")

	const mpolBind = 2
	mask, max := nodemask(0)
	_, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolBind, uintptr(unsafe.Pointer(&mask[0])), max)
	require.Zero(t, e, "set_mempolicy(MPOL_BIND, node 0)")
	defer unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolDefault, 0, 0)
	_, err = Near(one, 0, func() error { inside = policy(t); return nil })
	require.NoError(t, err)
	assert.Equal(t, mpolPreferred, inside)
	assert.Equal(t, mpolBind, policy(t), "the thread's own policy is back, not the default")

	// An unknown node and no CPU list: fn runs as it is, and says so.
	placed, err = Near(cpulist.Set{}, -1, func() error { return nil })
	require.NoError(t, err)
	assert.Equal(t, "unpinned (no local CPU list), no NUMA placement (node unknown)", placed)
	// fn's error comes back.
	_, err = Near(one, 0, func() error { return unix.EIO })
	assert.ErrorIs(t, err, unix.EIO)
}
