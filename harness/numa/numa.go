//go:build linux

// Package numa places the suite's work near the devices it measures: the
// thread that polls a NIC's completion queue on a CPU of the NIC's
// local_cpulist, host buffers on the NIC's NUMA node, pinned copy buffers on
// the GPU's node (what perftest's and nvbandwidth's users arrange with
// numactl). Placement is best effort: a host that refuses it (no NUMA, a
// restricted cpuset) still runs, and the caller reports what it got.
package numa

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/cpulist"
)

// Memory policy modes (linux/mempolicy.h).
const (
	mpolDefault   = 0
	mpolPreferred = 1
)

// OnCPUs runs fn on this goroutine's OS thread restricted to cpus, then
// restores the thread's affinity. An empty set, or one the kernel refuses
// (a container's cpuset without those CPUs), runs fn unpinned; placed says
// which happened. fn must not hand its work to other goroutines.
func OnCPUs(cpus cpulist.Set, fn func() error) (placed string, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cpus.Empty() {
		return "unpinned (no local CPU list)", fn()
	}
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return "unpinned (" + err.Error() + ")", fn()
	}
	for _, c := range cpus.CPUs() {
		if old.IsSet(c) {
			set.Set(c)
		}
	}
	if set.Count() == 0 {
		return fmt.Sprintf("unpinned (CPUs %s are outside this process's affinity)", cpus), fn()
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return "unpinned (" + err.Error() + ")", fn()
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()
	return "CPUs " + cpus.String(), fn()
}

// nodemask is a one-node mask for the memory policy calls.
func nodemask(node int) ([]uint64, uintptr) {
	mask := make([]uint64, node/64+1)
	mask[node/64] |= 1 << (uint(node) % 64)
	return mask, uintptr(len(mask)*64 + 1)
}

// Prefer runs fn on this goroutine's OS thread with memory preferring NUMA
// node (set_mempolicy MPOL_PREFERRED), so what fn allocates and first
// touches (a driver's pinned host buffer) lands there. node < 0 (unknown)
// runs fn as it is.
func Prefer(node int, fn func() error) (placed string, err error) {
	if node < 0 {
		return "no NUMA placement (node unknown)", fn()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mask, max := nodemask(node)
	if _, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolPreferred, uintptr(unsafe.Pointer(&mask[0])), max); e != 0 {
		return "no NUMA placement (set_mempolicy: " + e.Error() + ")", fn()
	}
	defer unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolDefault, 0, 0) // back to the default policy
	return fmt.Sprintf("NUMA node %d preferred", node), fn()
}

// Bind makes the pages of mem prefer NUMA node (mbind MPOL_PREFERRED); call
// it before the pages are first touched. node < 0 does nothing.
func Bind(mem []byte, node int) (placed string, err error) {
	if node < 0 || len(mem) == 0 {
		return "no NUMA placement (node unknown)", nil
	}
	mask, max := nodemask(node)
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), mpolPreferred,
		uintptr(unsafe.Pointer(&mask[0])), max, 0)
	if e != 0 {
		return "", fmt.Errorf("mbind(%d bytes, node %d): %w", len(mem), node, e)
	}
	return fmt.Sprintf("NUMA node %d preferred", node), nil
}
