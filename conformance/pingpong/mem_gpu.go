//go:build rdma && gpu

package pingpong

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// newBuffer, gpu builds: GDR_MEM=gpu gives GPU memory, GDR_MEM=host host
// memory, and unset gives GPU memory when libcuda.so.1 loads and sees the
// rail's GPU, else host memory. The GPU is rail r's (the primary rail's when
// r is nil). Unset on a host whose PCI bus lists NVIDIA GPUs that CUDA
// cannot give this process, the test still runs on host memory and reports
// it, but is not judged (cuda.HostFallback), so that a host-memory pass
// never stands for the GPU path. Call it from the test goroutine (it may
// end the test).
func newBuffer(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
	t.Helper()
	cfg := testenv.Config(t)
	switch cfg.Mem {
	case config.MemHost:
		memAttrs(t, "host", "GDR_MEM=host", "")
		return rc.HostBuffer(t, size, r)
	case config.MemGPU:
		return gpuBuffer(t, size, r, "GDR_MEM=gpu")
	}
	if why, ok := cuda.HostFallback(t); ok {
		memAttrs(t, "host", why, "")
		return rc.HostBuffer(t, size, r)
	}
	d, err := cuda.Load()
	if err != nil {
		memAttrs(t, "host", fmt.Sprintf("GDR_MEM unset and no usable CUDA driver (%v)", err), "")
		return rc.HostBuffer(t, size, r)
	}
	devs, err := d.Devices()
	if err != nil || len(devs) == 0 {
		memAttrs(t, "host", fmt.Sprintf("GDR_MEM unset and the CUDA driver lists no GPU (%v)", err), "")
		return rc.HostBuffer(t, size, r)
	}
	if g := railGPU(t, r); g == nil {
		memAttrs(t, "host", "GDR_MEM unset and the rail has no GPU", "")
		return rc.HostBuffer(t, size, r)
	}
	return gpuBuffer(t, size, r, "GDR_MEM unset, GPU present")
}

// railGPU is rail r's GPU (the primary rail's when r is nil), or nil.
func railGPU(t testing.TB, r *rails.Rail) *rails.GPU {
	if r == nil {
		r = testenv.Selection(t).Primary
	}
	if r == nil {
		return nil
	}
	return r.GPU
}

// forced returns an Alloc of kind k whatever GDR_MEM says (PP-09 runs the
// same traffic on host, then GPU memory).
func forced(k membuf.Kind) rc.Alloc {
	return func(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
		t.Helper()
		if k == membuf.GPU {
			return gpuBuffer(t, size, r, "forced by the test (host/GPU comparison)")
		}
		memAttrs(t, "host", "forced by the test (host/GPU comparison)", "")
		return rc.HostBuffer(t, size, r)
	}
}

// gpuBuffer allocates size bytes of device memory (cuMemAlloc, SYNC_MEMOPS
// set) on rail r's GPU (the primary rail's when r is nil: GDR_GPU, else the
// GPU of the rail whose NIC the tests use), freed and its context released
// through t.Cleanup. A host without libcuda or a GPU gets testenv.Absent
// naming what is missing; one whose PCI bus lists NVIDIA GPUs that CUDA
// cannot give this process is not judged (cuda.OpenForMemory).
func gpuBuffer(t testing.TB, size int, r *rails.Rail, why string) membuf.Buffer {
	t.Helper()
	return gpuBufferBy(t, size, r, why, cuda.CuMemAlloc)
}

// gpuBufferBy is gpuBuffer through allocator a.
func gpuBufferBy(t testing.TB, size int, r *rails.Rail, why string, a cuda.Allocator) membuf.Buffer {
	t.Helper()
	d := cuda.OpenForMemory(t)
	g := railGPU(t, r)
	if g == nil {
		testenv.Absent(t, "", "no GPU on this rail: %s", testenv.Selection(t).PrimaryWhy)
	}
	dev := cuda.DeviceOf(t, d, g)
	memAttrs(t, dev.MemLabel(), why, dev.PCI)
	c := cuda.Primary(t, dev)
	return cuda.AllocBy(t, c, a, size)
}

// memAttrs records where the test's buffers live, once per test even when
// it allocates several.
var memSeen sync.Map

func memAttrs(t testing.TB, kind, why, gpu string) {
	t.Helper()
	if _, dup := memSeen.LoadOrStore(t, true); dup {
		return
	}
	t.Cleanup(func() { memSeen.Delete(t) })
	testenv.Attr(t, "mem", kind)
	testenv.Attr(t, "mem_choice", why)
	if gpu != "" {
		testenv.Attr(t, "mem_gpu", gpu)
	}
}
