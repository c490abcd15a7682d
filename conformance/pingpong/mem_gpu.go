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
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
)

// newBuffer, gpu builds: GDR_MEM=gpu gives GPU memory, GDR_MEM=host host
// memory, and unset gives GPU memory when libcuda.so.1 loads and sees a GPU,
// else host memory. The GPU is GDR_GPU, else the one nearest the NIC.
// Call it from the test goroutine (it may end the test).
func newBuffer(t testing.TB, size int) membuf.Buffer {
	t.Helper()
	cfg := testenv.Config(t)
	switch cfg.Mem {
	case config.MemHost:
		memAttrs(t, "host", "GDR_MEM=host", "")
		return rc.HostBuffer(t, size)
	case config.MemGPU:
		return gpuBuffer(t, size, "GDR_MEM=gpu")
	}
	d, err := cuda.Load()
	if err != nil {
		memAttrs(t, "host", fmt.Sprintf("GDR_MEM unset and no usable CUDA driver (%v)", err), "")
		return rc.HostBuffer(t, size)
	}
	devs, err := d.Devices()
	if err != nil || len(devs) == 0 {
		memAttrs(t, "host", fmt.Sprintf("GDR_MEM unset and the CUDA driver lists no GPU (%v)", err), "")
		return rc.HostBuffer(t, size)
	}
	return gpuBuffer(t, size, "GDR_MEM unset, GPU present")
}

// forced returns an Alloc of kind k whatever GDR_MEM says (PP-09 runs the
// same traffic on host, then GPU memory).
func forced(k membuf.Kind) rc.Alloc {
	return func(t testing.TB, size int) membuf.Buffer {
		t.Helper()
		if k == membuf.GPU {
			return gpuBuffer(t, size, "forced by the test (host/GPU comparison)")
		}
		memAttrs(t, "host", "forced by the test (host/GPU comparison)", "")
		return rc.HostBuffer(t, size)
	}
}

// gpuBuffer allocates size bytes of device memory (SYNC_MEMOPS set) on the
// chosen GPU, freed and its context released through t.Cleanup. A host
// without libcuda or a GPU gets testenv.Absent naming what is missing.
func gpuBuffer(t testing.TB, size int, why string) membuf.Buffer {
	t.Helper()
	d := cuda.Open(t)
	dev, choice := chooseGPU(t, cuda.GPUs(t, d))
	memAttrs(t, dev.MemLabel(), why, dev.PCI+" ("+choice+")")
	c := cuda.Primary(t, dev)
	return cuda.Alloc(t, c, size)
}

// chooseGPU picks GDR_GPU (GPUs already filtered it to one), else the GPU
// with the best PCIe path to the NIC the tests use.
func chooseGPU(t testing.TB, devs []cuda.Device) (cuda.Device, string) {
	t.Helper()
	cfg := testenv.Config(t)
	if cfg.GPU != "" {
		return devs[0], "GDR_GPU"
	}
	root := testenv.Root(t)
	nic, _, _ := rc.Probe(cfg, root)
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
