//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Open loads the CUDA driver for t. No libcuda.so.1, or a driver that sees
// no GPU, is testenv.Absent naming what was looked for where the PCI bus
// lists no NVIDIA GPU; a driver that is there but broken fails with CUDA's
// error and a remedy. On the running host, NVIDIA GPUs on the PCI bus that
// CUDA does not show this process are not absent (internal/nvdriver.Judge):
// the test fails naming both counts, the addresses and the cause, or is
// not judged when the cause is the run's configuration (a Slurm step
// without a GPU request, CUDA_VISIBLE_DEVICES, a container or device cgroup
// not given them).
func Open(t testing.TB) *Driver {
	t.Helper()
	d, err := Load()
	if err == nil {
		if devs, derr := d.Devices(); derr == nil && len(devs) == 0 {
			testenv.Stop(t, hidden(t, nil, nil, "cuDeviceGetCount is 0", false).Err())
		}
		return d
	}
	var le *LoadError
	switch {
	case errors.As(err, &le) && le.Missing:
		testenv.Stop(t, hidden(t, nil, nil, err.Error(), true).Err())
		testenv.Absent(t, "install "+Package, "no CUDA driver: %s does not open (%s)", Library, le.Msg)
	case errors.As(err, &le):
		testenv.Failf(t, completeDriver, "%v", err)
	case Code(err) == ErrNoDevice:
		testenv.Stop(t, hidden(t, nil, nil, plain(err), false).Err())
		if InitRemedy(err) == config.SlurmNoGPUsRemedy {
			testenv.Absent(t, config.SlurmNoGPUsRemedy, "no GPU: %v", err) // the error names Slurm's part
		}
		testenv.Absent(t, InitRemedy(err), "no GPU: %v (libcuda.so.1 loaded; the driver sees no CUDA device)", err)
	default:
		testenv.Failf(t, InitRemedy(err), "%v", err)
	}
	return nil
}

// OpenForMemory is Open for a test whose subject is not CUDA but that needs
// GPU memory (memreg's registrations, pingpong's traffic): where CUDA cannot
// give any on a host whose PCI bus lists NVIDIA GPUs (Unusable), the test
// is not judged, "CUDA unusable: <why>", whatever the cause; GPU-01 judges
// the cause itself. Elsewhere it is Open.
func OpenForMemory(t testing.TB) *Driver {
	t.Helper()
	if h := Unusable(t); h != nil {
		testenv.NotJudgedf(t, h.Finding.Remedy, "CUDA unusable: %s", h.Finding.Cause)
	}
	return Open(t)
}

// Unusable says why CUDA cannot give this process GPU memory on the running
// host although its PCI bus lists NVIDIA GPUs: nil when CUDA lists a GPU,
// on a host without NVIDIA GPUs on its PCI bus (there the GPU is absent),
// and on a recorded tree (GDR_HOST_ROOT), which cannot show what CUDA sees.
// A driver that loads but fails (a version mismatch) is unusable too.
func Unusable(t testing.TB) *nvdriver.Hidden {
	t.Helper()
	d, err := Load()
	var le *LoadError
	switch {
	case err == nil:
		devs, derr := d.Devices()
		switch {
		case derr != nil:
			return broken(t, derr)
		case len(devs) > 0:
			return nil
		}
		return hidden(t, nil, nil, "cuDeviceGetCount is 0", false)
	case errors.As(err, &le) && le.Missing:
		return hidden(t, nil, nil, err.Error(), true)
	case Code(err) == ErrNoDevice:
		return hidden(t, nil, nil, plain(err), false)
	}
	return broken(t, err)
}

// HostFallback is what a test that takes GPU memory when it can (pingpong
// with GDR_MEM unset) does where CUDA is Unusable on a host whose PCI bus
// lists NVIDIA GPUs: it records the test not judged, "CUDA unusable:
// <why>", once per test and without stopping it, so the test still runs on
// host memory and reports it, and returns why host memory (for gdr.mem_choice)
// with ok true. ok is false, nothing recorded, where CUDA can give GPU
// memory or the host has no NVIDIA GPU on its PCI bus.
func HostFallback(t testing.TB) (why string, ok bool) {
	t.Helper()
	h := Unusable(t)
	if h == nil {
		return "", false
	}
	if _, dup := fellBack.LoadOrStore(t, true); !dup {
		t.Cleanup(func() { fellBack.Delete(t) })
		testenv.Error(t, verdict.Finding{Outcome: verdict.NotJudged, Remedy: h.Finding.Remedy,
			Cause: "CUDA unusable: " + h.Finding.Cause + "; the test ran on host memory (gdr.mem=host), so its GPU-memory path is not judged"})
	}
	return "GDR_MEM unset and CUDA unusable on a host with NVIDIA GPUs on its PCI bus: host memory, GPU memory not judged", true
}

// fellBack holds the tests HostFallback recorded.
var fellBack sync.Map

// completeDriver is what a libcuda.so.1 that opens but lacks the calls the
// suite needs asks for.
const completeDriver = "install a complete NVIDIA driver (one version for the kernel module and libcuda)"

// broken is a CUDA that failed with err on a host whose PCI bus lists
// NVIDIA GPUs: the host fell short, with CUDA's remedy. nil without such
// GPUs.
func broken(t testing.TB, err error) *nvdriver.Hidden {
	t.Helper()
	gpus := busGPUs(t)
	if len(gpus) == 0 {
		return nil
	}
	var bus []string
	for _, g := range gpus {
		bus = append(bus, g.BDF)
	}
	remedy := InitRemedy(err)
	if le := (*LoadError)(nil); errors.As(err, &le) {
		remedy = completeDriver
	}
	return &nvdriver.Hidden{Missing: gpus, Finding: verdict.Finding{Outcome: verdict.FellShort, Remedy: remedy,
		Cause: fmt.Sprintf("the PCI bus lists %d NVIDIA GPU(s) (%s) but CUDA fails: %v", len(gpus), strings.Join(bus, ", "), err)}}
}

// hidden judges CUDA's view (the PCI addresses it lists, seen; what it
// answered when it lists none, cuda; libMissing: libcuda.so.1 did not
// open) against the NVIDIA GPUs on the PCI bus as the selection read them
// (internal/nvdriver.Judge); want limits the judgement to those addresses
// (nil: every GPU on the bus). It is nil without such GPUs, and on a
// recorded tree: a tree cannot show what CUDA sees, so its GPU tests read
// as before (absent without a CUDA driver on the machine that runs them).
func hidden(t testing.TB, want, seen []string, cuda string, libMissing bool) *nvdriver.Hidden {
	t.Helper()
	gpus := busGPUs(t)
	if len(gpus) == 0 {
		return nil
	}
	return nvdriver.Judge(nvdriver.Visibility{Root: testenv.Root(t), GPUs: gpus, Want: want, Seen: seen, CUDA: cuda,
		LibMissing: libMissing, Slurm: testenv.Config(t).Slurm, Container: testenv.Selection(t).Process.Container})
}

// busGPUs are the NVIDIA GPUs on the running host's PCI bus, from the
// selection's one reading of sysfs; none on a recorded tree.
func busGPUs(t testing.TB) []*pci.Device {
	t.Helper()
	if !testenv.Root(t).IsLive() {
		return nil
	}
	var out []*pci.Device
	for _, g := range testenv.Selection(t).GPUs {
		if g.Dev != nil {
			out = append(out, g.Dev)
		}
	}
	return out
}

// plain is a CUDA error without what the suite added to it (Error.Why):
// nvdriver.Judge says that itself.
func plain(err error) string {
	var ce *Error
	if errors.As(err, &ce) {
		e := *ce
		e.Why = ""
		return e.Error()
	}
	return err.Error()
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
			testenv.Errorf(t, "", "GPU %s: %v", dev.PCI, err)
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
			testenv.Errorf(t, "", "GPU %s: %v", c.Dev.PCI, err)
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
			testenv.Errorf(t, "", "GPU %s: %v", c.Dev.PCI, err)
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
			testenv.Errorf(t, "", "GPU %s: %v", c.Dev.PCI, err)
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
			testenv.Errorf(t, "", "GPU %s: %v", c.Dev.PCI, err)
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
				testenv.Errorf(t, "", "GPU %s -> GPU %s: %v", c.Dev.PCI, peer.Dev.PCI, err)
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
