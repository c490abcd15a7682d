//go:build rdma && gpu

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// runVMM runs data check fn once more on every rail, on cuMemCreate memory
// as NCCL allocates it (cuda.Allocator), in subtest cuMemCreate: one leaf
// per rail beside the rails of the memory GDR_MEM selects, so that a host
// whose NIC registers cuMemAlloc memory but not NCCL's fails PP-04/PP-05.
// Where this host cannot give that memory (GDR_MEM=host, no GPU, or
// GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED not 1) the reason is offered in the
// agreement, so both hosts skip alike; where its PCI bus lists NVIDIA GPUs
// that CUDA cannot give this process, the case is not judged (gpuBufferBy).
func runVMM(t *testing.T, id string, fn traffic.Transfer) {
	t.Run(string(cuda.CuMemCreate), func(t *testing.T) {
		perRail(t, id, func(t *testing.T, r *rails.Rail) {
			testenv.Attr(t, "gpu_alloc", string(cuda.CuMemCreate))
			alloc := func(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
				t.Helper()
				return gpuBufferBy(t, size, r, "cuMemCreate case (PP-04/PP-05 on NCCL's allocator)", cuda.CuMemCreate)
			}
			verifyAll(t, connect(t, r, traffic.VerifyBuf, alloc, vmmAbsence(t, r)), fn)
		})
	})
}

// vmmAbsence says why this host cannot run a cuMemCreate case on rail r
// ("" when it can). A driver that is there but broken is no absence: the
// allocation then fails with CUDA's error.
func vmmAbsence(t testing.TB, r *rails.Rail) string {
	t.Helper()
	if testenv.Config(t).Mem == config.MemHost {
		return "GDR_MEM=host: the cuMemCreate case moves data through GPU memory"
	}
	if why := gpuAbsence(t); why != "" {
		return why
	}
	g := railGPU(t, r)
	if g == nil {
		return "no GPU on this rail: " + testenv.Selection(t).PrimaryWhy
	}
	d, err := cuda.Load()
	if err != nil {
		return ""
	}
	devs, err := d.Devices()
	if err != nil {
		return ""
	}
	for _, dev := range devs {
		if dev.PCI == g.PCI {
			return cuda.VMMAbsence(d, dev)
		}
	}
	return "" // the allocation says which GPU CUDA does not see
}
