//go:build gpu && rdma

package memreg

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpumr"
	"github.com/gdrconf/gdrconf/harness/membuf"
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
	testenv.Stop(t, err)
	t.Cleanup(func() { _ = buf.Close() })
	mr, err := gpumr.RegisterHost(n, buf)
	if err != nil {
		testenv.Attr(t, "host_mr", "fail")
		testenv.Stop(t, err)
	}
	gpumr.CloseAtEnd(t, n.Name, mr)
	testenv.Attr(t, "host_mr", "ok")
	t.Logf("%s: host MR %s lkey %#x rkey %#x", n.Name, cuda.Size(gpumr.BufSize), mr.LKey, mr.RKey)
}

func TestMREG02DeviceMemoryControl(t *testing.T) {
	testenv.Req(t, "MREG-02")
	// No NIC needed: this proves the classifier the registrations rely on.
	g := gpumr.OpenGPU(t)
	// On NVLink-C2C the controls prove device memory only (ControlMeaning).
	testenv.Attr(t, "control_meaning", g.Meaning())
	m := cuda.Alloc(t, g.Ctx, gpumr.BufSize)
	gpumr.RequireDevice(t, g, m)

	// The classifier must reject everything else, or RequireDevice proves nothing.
	man := cuda.AllocManaged(t, g.Ctx, gpumr.BufSize)
	pinned := cuda.HostAlloc(t, g.Ctx, gpumr.BufSize)
	plain, err := membuf.NewHost(gpumr.BufSize)
	testenv.Stop(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	var seen []string
	defer func() { testenv.Attr(t, "controls", strings.Join(seen, "; ")) }()
	controls := []gpumr.TypeControl{
		{What: "cuMemAllocManaged", Addr: man.Addr(), Want: cuda.MemManaged},
		{What: "cuMemHostAlloc", Addr: pinned.Addr(), Want: cuda.MemHost},
		{What: "mmap host memory", Addr: plain.Addr(), Want: cuda.MemUnknown},
	}
	if why := cuda.VMMAbsence(g.Drv, g.Dev); why != "" {
		seen = append(seen, "cuMemCreate not checked: "+why)
	} else {
		vmm := cuda.AllocVMM(t, g.Ctx, gpumr.BufSize)
		controls = append(controls, gpumr.TypeControl{What: "cuMemCreate", Addr: vmm.Addr(), Want: cuda.MemDevice})
		s, fs := gpumr.VMMControl(t, g, vmm)
		seen = append(seen, s...)
		testenv.Record(t, fs...)
	}
	s, fs := gpumr.TypeControls(t, g, controls)
	seen = append(seen, s...)
	testenv.Record(t, fs...)
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
		case o.State == gpumr.OK && o.Unproven != nil:
			// Registered without a peer client on a coherent GPU:
			// not credited to the peermem path (MREG-02's meaning).
			testenv.Attr(t, "control_meaning", g.Meaning())
			testenv.Fail(t, *o.Unproven)
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
		okPeer, okDma := p.State == gpumr.OK && p.Unproven == nil, d.State == gpumr.OK
		switch {
		case want == config.MRPeermem && okPeer, want == config.MRDmabuf && okDma, want == config.MRAuto && (okPeer || okDma):
			// The path GDR_MR asks for (auto: the first that works) moves data.
			gpumr.MoveData(t, g, n, want, a)
			return
		case p.Unproven != nil && want != config.MRDmabuf:
			// Only a registration MREG-02 cannot credit on this coherent
			// GPU: not judged, never a pass or a failure on an unknown.
			testenv.Attr(t, "control_meaning", g.Meaning())
			testenv.Fail(t, *p.Unproven)
		}
		pe, de := "", ""
		if p.Err != nil {
			pe = p.Err.Error() + ": "
		}
		if d.Err != nil {
			de = d.Err.Error() + ": "
		}
		testenv.Failf(t, gpumr.NoPathRemedy(a == cuda.CuMemCreate),
			"GPU %s -> %s: %s memory cannot be registered through the path GDR_MR=%s asks for: peermem: %s%s; dma-buf: %s%s",
			g.Dev.PCI, n.Name, a, want, pe, p.Why(), de, d.Why())
	})
}
