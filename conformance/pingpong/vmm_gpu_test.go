//go:build rdma && gpu

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
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
		testenv.Req(t, id)
		rc.PerRail(t, id, func(t *testing.T, r *rails.Rail) {
			testenv.Attr(t, "gpu_alloc", string(cuda.CuMemCreate))
			alloc := func(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
				t.Helper()
				return gpuBufferBy(t, size, r, "cuMemCreate case (PP-04/PP-05 on NCCL's allocator)", cuda.CuMemCreate)
			}
			traffic.VerifyOn(t, connect(t, r, traffic.VerifyBuf, alloc, cuda.RailVMMAbsence(t, railGPU(t, r), testenv.Selection(t).PrimaryWhy)), fn)
		})
	})
}
