//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// Absence says why GPU memory cannot be had on this host ("" when it can),
// naming libcuda.so.1 or the missing GPU, for a test that must agree a
// skip with its peer before it allocates. A driver that is present but
// broken is not absence: the allocation fails on it with CUDA's error. Nor
// is a CUDA that cannot see the GPUs on this host's PCI bus (Unusable):
// the test is not judged, naming why.
func Absence(t testing.TB) string {
	t.Helper()
	if Unusable(t) != nil {
		return ""
	}
	d, err := Load()
	if err != nil {
		return loadAbsence(err)
	}
	if devs, err := d.Devices(); err == nil && len(devs) == 0 {
		return "no GPU: cuDeviceGetCount is 0 (libcuda.so.1 loaded)"
	}
	return ""
}

// loadAbsence is the absence Load's err says: no library, or no device;
// "" for any other error (a broken driver is no absence).
func loadAbsence(err error) string {
	var le *LoadError
	switch {
	case errors.As(err, &le) && le.Missing:
		return fmt.Sprintf("no CUDA driver: %v", err)
	case Code(err) == ErrNoDevice:
		return fmt.Sprintf("no GPU: %v", err)
	}
	return ""
}

// RailVMMAbsence says why this host cannot run a cuMemCreate case on the
// rail's GPU g ("" when it can): GDR_MEM=host, no driver or GPU
// (Absence), no GPU on the rail (noGPU says why), or the GPU without
// GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED (VMMAbsence). A driver that is
// there but broken is no absence: the allocation then fails with CUDA's
// error.
func RailVMMAbsence(t testing.TB, g *rails.GPU, noGPU string) string {
	t.Helper()
	if testenv.Config(t).Mem == config.MemHost {
		return "GDR_MEM=host: the cuMemCreate case moves data through GPU memory"
	}
	if why := Absence(t); why != "" {
		return why
	}
	if g == nil {
		return "no GPU on this rail: " + noGPU
	}
	d, err := Load()
	if err != nil {
		return ""
	}
	devs, err := d.Devices()
	if err != nil {
		return ""
	}
	for _, dev := range devs {
		if dev.PCI == g.PCI {
			return VMMAbsence(d, dev)
		}
	}
	return "" // the allocation says which GPU CUDA does not see
}
