//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
)

// Open loads the CUDA driver for t. No libcuda.so.1, or a driver that sees no
// GPU, is testenv.Absent naming what was looked for; a driver that is there
// but broken fails with CUDA's error and a remedy.
func Open(t testing.TB) *Driver {
	t.Helper()
	d, err := Load()
	if err == nil {
		return d
	}
	var le *LoadError
	switch {
	case errors.As(err, &le) && le.Missing:
		testenv.Absent(t, "no CUDA driver: %v", err)
	case errors.As(err, &le):
		testenv.Failf(t, "install a complete NVIDIA driver (one version for the kernel module and libcuda)", "%v", err)
	case Code(err) == ErrNoDevice && InitRemedy(err) == config.SlurmNoGPUsRemedy:
		testenv.Absent(t, "no GPU: %v", err) // the error names Slurm's part and the remedy
	case Code(err) == ErrNoDevice:
		testenv.Absent(t, "no GPU: %v (libcuda.so.1 loaded; the driver sees no CUDA device: check nvidia-smi, /dev/nvidia*, CUDA_VISIBLE_DEVICES)", err)
	default:
		testenv.Failf(t, InitRemedy(err), "%v", err)
	}
	return nil
}

// Primary retains dev's primary context for t and releases it in t.Cleanup.
func Primary(t testing.TB, dev Device) *Context {
	t.Helper()
	c, err := dev.Retain()
	if err != nil {
		testenv.Failf(t, InitRemedy(err), "GPU %s: %v", dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := c.Release(); err != nil {
			testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("GPU %s: %v", dev.PCI, err)})
		}
	})
	return c
}

// Alloc allocates size bytes of device memory for t (freed in t.Cleanup) and
// sets SYNC_MEMOPS on it, as every buffer RDMA touches needs.
func Alloc(t testing.TB, c *Context, size int) *Mem {
	t.Helper()
	m, err := c.Alloc(size)
	if err != nil {
		testenv.Failf(t, allocRemedy(err), "GPU %s: %v", c.Dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("GPU %s: %v", c.Dev.PCI, err)})
		}
	})
	if err := c.SetSyncMemops(m.Addr()); err != nil {
		testenv.Failf(t, "upgrade the NVIDIA driver", "GPU %s: %v", c.Dev.PCI, err)
	}
	return m
}

// AllocVMM allocates size bytes of RDMA-capable VMM device memory for t (the
// way NCCL allocates; see Allocator), torn down in t.Cleanup. SYNC_MEMOPS is
// not set: the driver refuses it on VMM memory, and VMM.Fill waits for its
// copy instead.
func AllocVMM(t testing.TB, c *Context, size int) *VMM {
	t.Helper()
	m, err := c.AllocVMM(size, true)
	if err != nil {
		testenv.Failf(t, allocRemedy(err), "GPU %s: %v", c.Dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("GPU %s: %v", c.Dev.PCI, err)})
		}
	})
	return m
}

// AllocBy allocates size bytes of device memory for t through allocator a:
// Alloc for cuMemAlloc, AllocVMM for cuMemCreate.
func AllocBy(t testing.TB, c *Context, a Allocator, size int) Buffer {
	t.Helper()
	switch a {
	case CuMemAlloc:
		return Alloc(t, c, size)
	case CuMemCreate:
		return AllocVMM(t, c, size)
	}
	testenv.NotJudgedf(t, "", "suite bug: unknown GPU allocator %q", a)
	return nil
}

// AllocManaged allocates managed memory for t (freed in t.Cleanup).
func AllocManaged(t testing.TB, c *Context, size int) *Mem {
	t.Helper()
	m, err := c.AllocManaged(size)
	if err != nil {
		testenv.Failf(t, allocRemedy(err), "GPU %s: %v", c.Dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("GPU %s: %v", c.Dev.PCI, err)})
		}
	})
	return m
}

// HostAlloc allocates n bytes of pinned host memory for t (freed in t.Cleanup).
// The buffer prefers the GPU's NUMA node (its copy engines reach it there
// without crossing sockets), recorded as gdr.pinned_numa.
func HostAlloc(t testing.TB, c *Context, n int) *Pinned {
	t.Helper()
	h, place := HostAllocNear(t, c, n)
	testenv.Attr(t, "pinned_numa", place)
	return h
}

// HostAllocNear is HostAlloc without the attribute: it returns where the
// buffer went, for tests that allocate for several GPUs before the subtest
// that reports each one exists.
func HostAllocNear(t testing.TB, c *Context, n int) (*Pinned, string) {
	t.Helper()
	node := -1
	if g := GPUOf(t, c.Dev); g != nil {
		node = g.NUMA
	}
	var h *Pinned
	place, err := numa.Prefer(node, func() (err error) {
		h, err = c.HostAlloc(n)
		return err
	})
	if err != nil {
		testenv.Failf(t, "free host memory, or raise the locked-memory limit (ulimit -l unlimited)", "GPU %s: %v", c.Dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("GPU %s: %v", c.Dev.PCI, err)})
		}
	})
	return h, place
}

// EnablePeer lets c reach peer's memory for t (cuCtxEnablePeerAccess) and,
// when this call enabled it, disables it again in t.Cleanup, so the shared
// primary context is left as it was found. It reports whether this call
// enabled it (false: it already was). A failure fails t with a remedy.
func EnablePeer(t testing.TB, c, peer *Context) bool {
	t.Helper()
	now, err := c.EnablePeerAccess(peer)
	if err != nil {
		testenv.Failf(t, PeerRemedy(err), "GPU %s -> GPU %s: %v", c.Dev.PCI, peer.Dev.PCI, err)
	}
	if now {
		t.Cleanup(func() {
			if err := c.DisablePeerAccess(peer); err != nil {
				testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("GPU %s -> GPU %s: %v", c.Dev.PCI, peer.Dev.PCI, err)})
			}
		})
	}
	return now
}

func allocRemedy(err error) string {
	switch Code(err) {
	case ErrOutOfMemory:
		return "free GPU memory (nvidia-smi shows which processes hold it) or pick another GPU with GDR_GPU"
	case ErrNotSupported:
		return "upgrade the NVIDIA driver: it lacks part of the virtual memory management API NCCL allocates with (cuMemCreate, cuMemMap, cuMemSetAccess)"
	}
	return "check dmesg for NVRM/Xid errors; a driver/library version mismatch also shows here"
}

// Misowned is m's device pointer claimed by c instead of its own context:
// the emulated GPU's tests (lab/emugpu) hand it to copies to show that a
// pointer under the wrong context is refused.
func (m *Mem) Misowned(c *Context) *Mem {
	return &Mem{devMem: devMem{ctx: c, addr: m.addr, size: m.size, span: m.span}}
}
