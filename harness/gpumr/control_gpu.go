//go:build gpu && rdma

package gpumr

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// TypeControl is memory MREG-02 classifies and what it must be classified.
type TypeControl struct {
	What string
	Addr uintptr
	Want cuda.MemoryType
}

// TypeControls reads each control's memory type (JudgeType, on g's
// NVLink-C2C state) and returns what it read, for gdr.controls, and the
// misclassifications.
func TypeControls(t *testing.T, g *GPU, cs []TypeControl) (seen []string, fs []verdict.Finding) {
	t.Helper()
	for _, c := range cs {
		mt, err := g.Ctx.PointerType(c.Addr)
		if err != nil {
			testenv.Failf(t, "upgrade the NVIDIA driver", "%s: %v", c.What, err)
		}
		s, f := JudgeType(c.What, c.Addr, string(mt), string(c.Want), g.C2C)
		seen = append(seen, s)
		if f != nil {
			fs = append(fs, *f)
		}
	}
	return seen, fs
}

// VMMControl proves that CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE,
// which RequireDevice demands of cuMemCreate memory, tells vmm (created
// with gpuDirectRDMACapable) from memory created without it (JudgeCapable).
// It returns what it read, for gdr.controls, and the misreadings.
func VMMControl(t *testing.T, g *GPU, vmm *cuda.VMM) (seen []string, fs []verdict.Finding) {
	t.Helper()
	plain, err := g.Ctx.AllocVMM(BufSize, false)
	if err != nil {
		testenv.Failf(t, "check dmesg for NVRM/Xid errors", "GPU %s: %v", g.Dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := plain.Close(); err != nil {
			testenv.Errorf(t, "", "GPU %s: %v", g.Dev.PCI, err)
		}
	})
	for _, c := range []struct {
		what string
		m    *cuda.VMM
		want bool
	}{
		{"cuMemCreate gpuDirectRDMACapable=1", vmm, true},
		{"cuMemCreate gpuDirectRDMACapable=0", plain, false},
	} {
		ok, err := g.Ctx.GPUDirectRDMACapable(c.m.Addr())
		if err != nil {
			testenv.Failf(t, "upgrade the NVIDIA driver (IS_GPU_DIRECT_RDMA_CAPABLE needs CUDA 11.3+)", "%s: %v", c.what, err)
		}
		s, f := JudgeCapable(c.what, c.m.Addr(), ok, c.want)
		seen = append(seen, s)
		if f != nil {
			fs = append(fs, *f)
		}
	}
	return seen, fs
}
