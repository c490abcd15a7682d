//go:build rdma && gpu

package soak

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// railAlloc, gpu builds: the rail's GPU memory (cuMemAlloc), so the soak's
// traffic is GPUDirect RDMA, unless GDR_MEM=host or the rail has no GPU
// CUDA sees (then host memory, said in gdr.soak_mem).
func railAlloc(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
	t.Helper()
	if testenv.Config(t).Mem == config.MemHost || r == nil || r.GPU == nil {
		testenv.Attr(t, "soak_mem", "host")
		return rc.HostBuffer(t, size, r)
	}
	d, err := cuda.Load()
	if err != nil {
		testenv.Attr(t, "soak_mem", "host: no CUDA driver: "+err.Error())
		return rc.HostBuffer(t, size, r)
	}
	dev := cuda.DeviceOf(t, d, r.GPU)
	testenv.Attr(t, "soak_mem", dev.MemLabel())
	return cuda.AllocBy(t, cuda.Primary(t, dev), cuda.CuMemAlloc, size)
}
