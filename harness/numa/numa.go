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
	placed, restore := pin(cpus)
	defer restore()
	return placed, fn()
}

// pin restricts the calling (locked) thread to cpus; restore puts its
// affinity back.
func pin(cpus cpulist.Set) (placed string, restore func()) {
	nothing := func() {}
	if cpus.Empty() {
		return "unpinned (no local CPU list)", nothing
	}
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return "unpinned (" + err.Error() + ")", nothing
	}
	for _, c := range cpus.CPUs() {
		if old.IsSet(c) {
			set.Set(c)
		}
	}
	if set.Count() == 0 {
		return fmt.Sprintf("unpinned (CPUs %s are outside this process's affinity)", cpus), nothing
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return "unpinned (" + err.Error() + ")", nothing
	}
	return "CPUs " + cpus.String(), func() { _ = unix.SchedSetaffinity(0, &old) }
}

// nodemask is a one-node mask for the memory policy calls.
func nodemask(node int) ([]uint64, uintptr) {
	mask := make([]uint64, node/64+1)
	mask[node/64] |= 1 << (uint(node) % 64)
	return mask, uintptr(len(mask)*64 + 1)
}

// Prefer runs fn on this goroutine's OS thread with memory preferring NUMA
// node (set_mempolicy MPOL_PREFERRED), so what fn allocates and first
// touches (a driver's pinned host buffer) lands there; the thread's policy
// before is restored afterwards. node < 0 (unknown) runs fn as it is.
func Prefer(node int, fn func() error) (placed string, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	placed, restore := prefer(node)
	defer restore()
	return placed, fn()
}

// prefer sets the calling (locked) thread's policy to MPOL_PREFERRED node;
// restore puts the policy it had back.
func prefer(node int) (placed string, restore func()) {
	if node < 0 {
		return "no NUMA placement (node unknown)", func() {}
	}
	back := savePolicy()
	mask, max := nodemask(node)
	if _, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolPreferred, uintptr(unsafe.Pointer(&mask[0])), max); e != 0 {
		return "no NUMA placement (set_mempolicy: " + e.Error() + ")", func() {}
	}
	return fmt.Sprintf("NUMA node %d preferred", node), back
}

// policyBits is the node mask size for get_mempolicy: the kernel refuses a
// mask shorter than its node count (EINVAL), and MAX_NUMNODES is at most
// 1024 on distribution kernels.
const policyBits = 4096

// savePolicy reads the calling (locked) thread's memory policy and returns
// what puts it back; a policy it cannot read is restored as the default.
func savePolicy() (restore func()) {
	var mode int32
	mask := make([]uint64, policyBits/64)
	if _, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)), uintptr(unsafe.Pointer(&mask[0])), policyBits, 0, 0, 0); e != 0 {
		return func() { unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolDefault, 0, 0) }
	}
	if mode == mpolDefault {
		return func() { unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolDefault, 0, 0) }
	}
	return func() {
		// mode carries the policy's flags (MPOL_F_STATIC_NODES, ...) as
		// set_mempolicy takes them back.
		if _, _, e := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(mode), uintptr(unsafe.Pointer(&mask[0])), policyBits+1); e != 0 {
			unix.Syscall(unix.SYS_SET_MEMPOLICY, mpolDefault, 0, 0)
		}
	}
}

// Near runs fn on a CPU of cpus with memory preferring node, both restored
// afterwards (Enter and leave around fn).
func Near(cpus cpulist.Set, node int, fn func() error) (placed string, err error) {
	placed, leave := Enter(cpus, node)
	defer leave()
	return placed, fn()
}

// Enter locks the calling goroutine to its OS thread, restricts the thread
// to cpus and makes its memory prefer node; leave (idempotent) restores
// both and unlocks. What the goroutine creates and first touches in between
// lands on the node. This is for a NIC's queues: libmlx5 allocates CQ, QP
// and doorbell buffers inside ibv_create_cq/ibv_create_qp on the calling
// thread with posix_memalign and zeroes them there, so the kernel places
// their pages by that thread's policy (rdma-core providers/mlx5: buf.c
// mlx5_alloc_buf, cq.c mlx5_alloc_cq_buf, verbs.c mlx5_alloc_qp_buf,
// dbrec.c mlx5_alloc_dbrec). placed says what was applied, e.g.
// "CPUs 0-15, NUMA node 0 preferred".
func Enter(cpus cpulist.Set, node int) (placed string, leave func()) {
	runtime.LockOSThread()
	cpu, unpin := pin(cpus)
	mem, unprefer := prefer(node)
	done := false
	return cpu + ", " + mem, func() {
		if done {
			return
		}
		done = true
		unprefer()
		unpin()
		runtime.UnlockOSThread()
	}
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
