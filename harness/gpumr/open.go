//go:build gpu && rdma

package gpumr

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// NIC is the NIC under test, opened for t.
type NIC struct {
	Name string
	Ctx  *verbs.Context
	PD   *verbs.PD
}

// GPU is the GPU under test with its primary context.
type GPU struct {
	Drv *cuda.Driver
	Dev cuda.Device
	Ctx *cuda.Context
	// C2C: the GPU is coherently attached over NVLink-C2C (the NVIDIA
	// driver's numa_status file), or that could not be read (C2CErr): what
	// MREG-02 proves, and how a registration is credited, depend on it
	// (ControlMeaning, JudgePlainRegistration).
	C2C    bool
	C2CErr error
}

// OpenNIC opens the primary rail's NIC (testenv.Selection: GDR_RDMA_DEVICE,
// else the NIC of GDR_GPU's rail, else rail 0's) with a protection domain,
// or ends the test as absent naming where the suite looked.
func OpenNIC(t *testing.T) *NIC {
	t.Helper()
	r, stop := rc.Probe(t)
	rc.StopIf(t, stop)
	n := &NIC{Name: r.NIC.Name}
	ctx, err := verbs.Open(n.Name)
	if err != nil {
		// A node this process may not open carries its own remedy
		// (verbs.NodeAccess); other failures get the general one.
		f := verdict.Of(err)
		f.Outcome = verdict.FellShort
		if f.Remedy == "" {
			f.Remedy = "check ib_uverbs is loaded and /dev/infiniband/uverbs* is accessible"
		}
		testenv.Fail(t, *f)
	}
	CloseAtEnd(t, n.Name, ctx)
	pd, err := ctx.AllocPD()
	if err != nil {
		testenv.Failf(t, "check dmesg for the NIC driver's errors", "%s: %v", n.Name, err)
	}
	CloseAtEnd(t, n.Name, pd)
	n.Ctx, n.PD = ctx, pd
	return n
}

// CloseAtEnd closes c when t ends; an error closing it fails t.
func CloseAtEnd(t *testing.T, nic string, c interface{ Close() error }) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			testenv.Errorf(t, "", "%s: %v", nic, err)
		}
	})
}

// OpenGPU opens the primary rail's GPU with its primary context. Where the
// host's PCI bus lists NVIDIA GPUs that CUDA cannot give this process, the
// registration is not judged, "CUDA unusable: <why>" (cuda.OpenForMemory):
// never absent, and GPU-01 judges why.
func OpenGPU(t *testing.T) *GPU {
	t.Helper()
	d := cuda.OpenForMemory(t)
	_, dev := cuda.Rail(t, d)
	g := &GPU{Drv: d, Dev: dev, Ctx: cuda.Primary(t, dev)}
	// Unreadable is taken as C2C: the narrower meaning, never a pass on
	// an assumption.
	g.C2C, g.C2CErr = nvdriver.IsC2C(testenv.Root(t), dev.PCI)
	if g.C2CErr != nil {
		g.C2C = true
	}
	return g
}

// Meaning is gdr.control_meaning for g (ControlMeaning), naming why C2C
// was assumed where the driver's directory could not be read.
func (g *GPU) Meaning() string {
	m := ControlMeaning(g.C2C)
	if g.C2CErr != nil {
		m += " (taken as NVLink-C2C: " + g.C2CErr.Error() + ")"
	}
	return m
}

// RequireDevice is the negative control every GPU registration runs first:
// the buffer must be device memory (cuMemAlloc or cuMemCreate), so a
// registration that only works on managed or host memory can never pass as
// GPUDirect RDMA. It records CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE
// as gdr.gdr_capable, and for cuMemCreate memory requires it: that memory
// was created with gpuDirectRDMACapable, and reading 0 means the driver
// dropped the flag (its dma-buf export still succeeds then, so the export
// cannot tell).
func RequireDevice(t *testing.T, g *GPU, m cuda.Buffer) {
	t.Helper()
	mt, err := g.Ctx.PointerType(m.Addr())
	if err != nil {
		testenv.Failf(t, "upgrade the NVIDIA driver", "GPU %s: %v", g.Dev.PCI, err)
	}
	testenv.Attr(t, "mem_type", string(mt))
	if mt != cuda.MemDevice {
		testenv.Failf(t, "suite bug or broken driver: the buffer must come from cuMemAlloc or cuMemCreate",
			"GPU %s: %s buffer at %#x is %s memory, not device memory", g.Dev.PCI, m.Allocator(), m.Addr(), mt)
	}
	ok, err := g.Ctx.GPUDirectRDMACapable(m.Addr())
	switch {
	case err != nil && m.Allocator() == cuda.CuMemCreate:
		testenv.Failf(t, "upgrade the NVIDIA driver (IS_GPU_DIRECT_RDMA_CAPABLE needs CUDA 11.3+)", "GPU %s: %v", g.Dev.PCI, err)
	case err != nil:
		testenv.Attr(t, "gdr_capable", "unreadable: "+err.Error())
	default:
		testenv.Attr(t, "gdr_capable", ok)
	}
	if !ok && m.Allocator() == cuda.CuMemCreate {
		testenv.Failf(t, "upgrade the NVIDIA driver: NCCL creates its buffers this way and they would not register either",
			"GPU %s: cuMemCreate memory at %#x created with gpuDirectRDMACapable=1 reads IS_GPU_DIRECT_RDMA_CAPABLE=0 although %s is 1",
			g.Dev.PCI, m.Addr(), cuda.AttrGPUDirectRDMAWithVMM)
	}
}

// EachAlloc runs fn in one subtest per GPU allocator, named by it
// (cuMemAlloc, then cuMemCreate), each with requirement id and
// gdr.gpu_alloc. The cuMemCreate subtest is absent, naming the attribute,
// where the GPU cannot register that memory (cuda.VMMAbsence: GPU-05
// judges the attribute).
func EachAlloc(t *testing.T, id string, g *GPU, fn func(t *testing.T, a cuda.Allocator)) {
	t.Helper()
	for _, a := range cuda.Allocators() {
		t.Run(string(a), func(t *testing.T) {
			testenv.Req(t, id)
			testenv.Attr(t, "gpu_alloc", string(a))
			if a == cuda.CuMemCreate {
				if why := cuda.VMMAbsence(g.Drv, g.Dev); why != "" {
					testenv.Absent(t, "", "%s", why)
				}
			}
			fn(t, a)
		})
	}
}
