//go:build rdma && gpu

package pingpong

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
)

// newBuffer, gpu builds: GDR_MEM=gpu gives GPU memory, GDR_MEM=host host
// memory, and unset gives GPU memory when libcuda.so.1 loads and sees a GPU,
// else host memory. The GPU is GDR_GPU, else the one nearest the NIC
// (GDR_RDMA_DEVICE, else the first device in /sys/class/infiniband).
// Call it from the test goroutine (it may end the test).
func newBuffer(t testing.TB, size int) membuf.Buffer {
	t.Helper()
	if k, ok := memForced.Load(t); ok {
		if k.(membuf.Kind) == membuf.GPU {
			return gpuBuffer(t, size, "forced by the test (host/GPU comparison)")
		}
		memAttrs(t, "host", "forced by the test (host/GPU comparison)", "")
		return hostBuffer(t, size)
	}
	cfg := testenv.Config(t)
	switch cfg.Mem {
	case config.MemHost:
		memAttrs(t, "host", "GDR_MEM=host", "")
		return hostBuffer(t, size)
	case config.MemGPU:
		return gpuBuffer(t, size, "GDR_MEM=gpu")
	}
	d, err := cuda.Load()
	if err != nil {
		memAttrs(t, "host", fmt.Sprintf("GDR_MEM unset and no usable CUDA driver (%v)", err), "")
		return hostBuffer(t, size)
	}
	devs, err := d.Devices()
	if err != nil || len(devs) == 0 {
		memAttrs(t, "host", fmt.Sprintf("GDR_MEM unset and the CUDA driver lists no GPU (%v)", err), "")
		return hostBuffer(t, size)
	}
	return gpuBuffer(t, size, "GDR_MEM unset, GPU present")
}

// gpuBuffer allocates size bytes of device memory (SYNC_MEMOPS set) on the
// chosen GPU, freed and its context released through t.Cleanup. A host
// without libcuda or a GPU gets testenv.Absent naming what is missing.
func gpuBuffer(t testing.TB, size int, why string) membuf.Buffer {
	t.Helper()
	d := cuda.Open(t)
	dev, choice := chooseGPU(t, cuda.GPUs(t, d))
	memAttrs(t, "gpu", why, dev.PCI+" ("+choice+")")
	c := cuda.Primary(t, dev)
	return cuda.Alloc(t, c, size)
}

// chooseGPU picks GDR_GPU (GPUs already filtered it to one), else the GPU
// with the best PCIe path to the NIC the tests use (GDR_RDMA_DEVICE, else
// the first device in /sys/class/infiniband, as probe in end_test.go picks).
func chooseGPU(t testing.TB, devs []cuda.Device) (cuda.Device, string) {
	t.Helper()
	cfg := testenv.Config(t)
	if cfg.GPU != "" {
		return devs[0], "GDR_GPU"
	}
	root := testenv.Root(t)
	nic := cfg.RDMADevice
	if nic == "" {
		names, err := verbs.SysDevices(root)
		if err != nil || len(names) == 0 {
			return devs[0], fmt.Sprintf("first GPU: no RDMA device to be near (%v)", err)
		}
		nic = names[0]
	}
	p, err := cuda.NearestGPU(root, devs, nic)
	if err != nil {
		return p.GPU, fmt.Sprintf("%s (%v)", p.Reason, err)
	}
	return p.GPU, p.Reason
}

// memForced holds per-test overrides set by withMem.
var memForced sync.Map

// withMem makes newBuffer(t, ...) return memory of kind k for this test
// whatever GDR_MEM says, so one test can run the same traffic on host and on
// GPU memory in two subtests and report them side by side:
//
//	for _, k := range []membuf.Kind{membuf.Host, membuf.GPU} {
//		t.Run(string(k), func(t *testing.T) { withMem(t, k); ends := connect(t, n); ... })
//	}
//
// Both hosts run the subtests in the same order, so both ends agree on the
// kind. gpu builds only (a file with the rdma && gpu constraint).
func withMem(t testing.TB, k membuf.Kind) {
	memForced.Store(t, k)
	t.Cleanup(func() { memForced.Delete(t) })
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
