//go:build gpu && rdma

package memreg

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpumr"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
)

// setup picks and opens the primary rail's (GPU, NIC) pair. The RDMA device
// is looked for first, so a GPU host without a NIC skips naming
// /sys/class/infiniband.
func setup(t *testing.T) (*gpumr.GPU, *gpumr.NIC) {
	t.Helper()
	n := gpumr.OpenNIC(t)
	return gpumr.OpenGPU(t), n
}

func TestMREG01HostBaseline(t *testing.T) {
	testenv.Req(t, "MREG-01")
	// The NIC the GPU tests use; the baseline itself needs no GPU.
	n := gpumr.OpenNIC(t)
	buf, err := membuf.NewHost(gpumr.BufSize)
	if err != nil {
		testenv.Failf(t, "free host memory", "%v", err)
	}
	t.Cleanup(func() { _ = buf.Close() })
	mr, err := n.PD.RegMR(buf.Addr(), buf.Len(), rc.Access, membuf.Host)
	if err != nil {
		testenv.Attr(t, "host_mr", "fail")
		testenv.Failf(t, "raise the locked-memory limit (ulimit -l unlimited; LimitMEMLOCK=infinity for services) and check the NIC driver in dmesg",
			"%s: registering %s of host memory: %v", n.Name, cuda.Size(gpumr.BufSize), err)
	}
	gpumr.CloseAtEnd(t, n.Name, mr)
	testenv.Attr(t, "host_mr", "ok")
	t.Logf("%s: host MR %s lkey %#x rkey %#x", n.Name, cuda.Size(gpumr.BufSize), mr.LKey, mr.RKey)
}

func TestMREG02DeviceMemoryControl(t *testing.T) {
	testenv.Req(t, "MREG-02")
	// No NIC needed: this proves the classifier the registrations rely on.
	g := gpumr.OpenGPU(t)
	m := cuda.Alloc(t, g.Ctx, gpumr.BufSize)
	gpumr.RequireDevice(t, g, m)

	// The classifier must reject everything else, or RequireDevice proves nothing.
	man := cuda.AllocManaged(t, g.Ctx, gpumr.BufSize)
	pinned := cuda.HostAlloc(t, g.Ctx, gpumr.BufSize)
	plain, err := membuf.NewHost(gpumr.BufSize)
	if err != nil {
		testenv.Failf(t, "free host memory", "%v", err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	var seen []string
	defer func() { testenv.Attr(t, "controls", strings.Join(seen, "; ")) }()
	controls := []typeControl{
		{"cuMemAllocManaged", man.Addr(), cuda.MemManaged},
		{"cuMemHostAlloc", pinned.Addr(), cuda.MemHost},
		{"mmap host memory", plain.Addr(), cuda.MemUnknown},
	}
	if why := cuda.VMMAbsence(g.Drv, g.Dev); why != "" {
		seen = append(seen, "cuMemCreate not checked: "+why)
	} else {
		vmm := cuda.AllocVMM(t, g.Ctx, gpumr.BufSize)
		controls = append(controls, typeControl{"cuMemCreate", vmm.Addr(), cuda.MemDevice})
		seen = append(seen, vmmRDMAControl(t, g, vmm)...)
	}
	for _, c := range controls {
		mt, err := g.Ctx.PointerType(c.addr)
		if err != nil {
			testenv.Failf(t, "upgrade the NVIDIA driver", "%s: %v", c.what, err)
		}
		seen = append(seen, c.what+"="+string(mt))
		if mt != c.want {
			testenv.Errorf(t, "report this driver: CU_POINTER_ATTRIBUTE_MEMORY_TYPE/IS_MANAGED misreport memory",
				"%s memory at %#x classified %s, want %s", c.what, c.addr, mt, c.want)
		}
	}
}

// typeControl is memory MREG-02 classifies and what it must be classified.
type typeControl struct {
	what string
	addr uintptr
	want cuda.MemoryType
}

// vmmRDMAControl proves that CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE,
// which RequireDevice demands of cuMemCreate memory, tells memory created
// with gpuDirectRDMACapable from memory created without it: otherwise that
// check could not fail. It returns what it saw, for gdr.controls.
func vmmRDMAControl(t *testing.T, g *gpumr.GPU, vmm *cuda.VMM) []string {
	t.Helper()
	plain, err := g.Ctx.AllocVMM(gpumr.BufSize, false)
	if err != nil {
		testenv.Failf(t, "check dmesg for NVRM/Xid errors", "GPU %s: %v", g.Dev.PCI, err)
	}
	t.Cleanup(func() {
		if err := plain.Close(); err != nil {
			testenv.Errorf(t, "", "GPU %s: %v", g.Dev.PCI, err)
		}
	})
	var seen []string
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
		seen = append(seen, fmt.Sprintf("%s: IS_GPU_DIRECT_RDMA_CAPABLE=%v", c.what, ok))
		if ok != c.want {
			testenv.Errorf(t, "report this driver: IS_GPU_DIRECT_RDMA_CAPABLE must follow the allocation's gpuDirectRDMACapable flag",
				"%s memory at %#x reads IS_GPU_DIRECT_RDMA_CAPABLE=%v, want %v", c.what, c.m.Addr(), ok, c.want)
		}
	}
	return seen
}

// judged says whether GDR_MR asks for this path on this host: a path the
// operator deselected is reported, not judged.
func judged(t *testing.T, path config.MRPath) bool {
	t.Helper()
	m := testenv.Config(t).MR
	ok := m == config.MRAuto || m == path
	if !ok {
		testenv.Attr(t, "judged", fmt.Sprintf("no: GDR_MR=%s", m))
	}
	return ok
}

// MREG-03, -04 and -05 run on each GPU allocator (gpumr.EachAlloc: a
// subtest cuMemAlloc, then cuMemCreate as NCCL allocates, absent where
// GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0).

func TestMREG03Peermem(t *testing.T) {
	testenv.Req(t, "MREG-03")
	g, n := setup(t)
	gpumr.EachAlloc(t, "MREG-03", g, func(t *testing.T, a cuda.Allocator) {
		o := gpumr.TryPeermem(t, g, n, a)
		testenv.Attr(t, "peermem", o.State)
		switch {
		case o.State == gpumr.OK:
			t.Logf("GPU %s -> %s: ibv_reg_mr on %s of %s memory works (%s)", g.Dev.PCI, n.Name, cuda.Size(gpumr.BufSize), a, o.Detail)
			gpumr.MoveData(t, g, n, config.MRPeermem, a)
		case !judged(t, config.MRPeermem):
			testenv.Attr(t, "peermem_error", o.Err.Error())
			t.Logf("peermem path unavailable, and not required (GDR_MR=%s): %v; %s", testenv.Config(t).MR, o.Err, o.Why())
		default:
			// Absent when nvidia_peermem is not loaded (gpumr says so):
			// dma-buf is the other way (MREG-04), and MREG-05 fails when
			// neither works.
			testenv.Attr(t, "peermem_error", o.Err.Error())
			f := o.Finding
			f.Cause = fmt.Sprintf("GPU %s -> %s: %s memory: %v: %s", g.Dev.PCI, n.Name, a, o.Err, f.Cause)
			testenv.Fail(t, f)
		}
	})
}

func TestMREG04Dmabuf(t *testing.T) {
	testenv.Req(t, "MREG-04")
	g, n := setup(t)
	gpumr.EachAlloc(t, "MREG-04", g, func(t *testing.T, a cuda.Allocator) {
		o := gpumr.TryDmabuf(t, g, n, a)
		testenv.Attr(t, "dmabuf", o.State)
		switch {
		case o.State == gpumr.OK:
			t.Logf("GPU %s -> %s: ibv_reg_dmabuf_mr on %s memory works (%s)", g.Dev.PCI, n.Name, a, o.Detail)
			gpumr.MoveData(t, g, n, config.MRDmabuf, a)
		case !judged(t, config.MRDmabuf):
			t.Logf("dma-buf path %s, and not required (GDR_MR=%s): %s", o.State, testenv.Config(t).MR, o.Why())
		case o.State == gpumr.Unsupported:
			f := o.Finding
			f.Cause = "dma-buf path unsupported here: " + f.Cause
			testenv.Fail(t, f) // absent
		default:
			testenv.Attr(t, "dmabuf_error", o.Err.Error())
			f := o.Finding
			f.Cause = fmt.Sprintf("GPU %s -> %s: %s memory: %v: %s", g.Dev.PCI, n.Name, a, o.Err, f.Cause)
			testenv.Fail(t, f)
		}
	})
}

func TestMREG05AnyPath(t *testing.T) {
	testenv.Req(t, "MREG-05")
	g, n := setup(t)
	gpumr.EachAlloc(t, "MREG-05", g, func(t *testing.T, a cuda.Allocator) {
		p := gpumr.TryPeermem(t, g, n, a)
		d := gpumr.TryDmabuf(t, g, n, a)
		testenv.Attr(t, "peermem", p.State)
		testenv.Attr(t, "dmabuf", d.State)
		t.Logf("GPU %s -> %s, %s memory: peermem=%s, dmabuf=%s", g.Dev.PCI, n.Name, a, p.State, d.State)
		want := testenv.Config(t).MR
		okPeer, okDma := p.State == gpumr.OK, d.State == gpumr.OK
		switch {
		case want == config.MRPeermem && okPeer, want == config.MRDmabuf && okDma, want == config.MRAuto && (okPeer || okDma):
			// The path GDR_MR asks for (auto: the first that works) moves data.
			gpumr.MoveData(t, g, n, want, a)
			return
		}
		pe, de := "", ""
		if p.Err != nil {
			pe = p.Err.Error() + ": "
		}
		if d.Err != nil {
			de = d.Err.Error() + ": "
		}
		remedy := "load nvidia_peermem (modprobe nvidia-peermem), or enable dma-buf: NVIDIA open kernel module, Linux >= 5.12, rdma-core >= 34 and a NIC driver with dma-buf MRs; or set GDR_MR to the path this host is meant to use"
		if a == cuda.CuMemCreate {
			remedy += "; where only cuMemCreate memory fails, NCCL's default allocations cannot be registered: update the NVIDIA driver (nvidia_peermem with it), or set NCCL_CUMEM_ENABLE=0 until then"
		}
		testenv.Failf(t, remedy,
			"GPU %s -> %s: %s memory cannot be registered through the path GDR_MR=%s asks for: peermem: %s%s; dma-buf: %s%s",
			g.Dev.PCI, n.Name, a, want, pe, p.Why(), de, d.Why())
	})
}
