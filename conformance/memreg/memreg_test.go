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
	for _, c := range []struct {
		what string
		addr uintptr
		want cuda.MemoryType
	}{
		{"cuMemAllocManaged", man.Addr(), cuda.MemManaged},
		{"cuMemHostAlloc", pinned.Addr(), cuda.MemHost},
		{"mmap host memory", plain.Addr(), cuda.MemUnknown},
	} {
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

func TestMREG03Peermem(t *testing.T) {
	testenv.Req(t, "MREG-03")
	g, n := setup(t)
	o := gpumr.TryPeermem(t, g, n)
	testenv.Attr(t, "peermem", o.State)
	switch {
	case o.State == "ok":
		t.Logf("GPU %s -> %s: ibv_reg_mr on %s of device memory works (%s)", g.Dev.PCI, n.Name, cuda.Size(gpumr.BufSize), o.Why)
		gpumr.MoveData(t, g, n, config.MRPeermem)
	case !judged(t, config.MRPeermem):
		testenv.Attr(t, "peermem_error", o.Err.Error())
		t.Logf("peermem path unavailable, and not required (GDR_MR=%s): %v; %s", testenv.Config(t).MR, o.Err, o.Why)
	case strings.HasPrefix(o.Why, gpumr.PeermemNotLoaded):
		// Absent rather than failed: dma-buf is the other way (MREG-04),
		// and MREG-05 fails when neither works.
		testenv.Attr(t, "peermem_error", o.Err.Error())
		testenv.Absent(t, "peermem path unavailable: %v; %s", o.Err, o.Why)
	default:
		testenv.Attr(t, "peermem_error", o.Err.Error())
		testenv.Failf(t, o.Why, "GPU %s -> %s: %v", g.Dev.PCI, n.Name, o.Err)
	}
}

func TestMREG04Dmabuf(t *testing.T) {
	testenv.Req(t, "MREG-04")
	g, n := setup(t)
	o := gpumr.TryDmabuf(t, g, n)
	testenv.Attr(t, "dmabuf", o.State)
	switch {
	case o.State == "ok":
		t.Logf("GPU %s -> %s: ibv_reg_dmabuf_mr works (%s)", g.Dev.PCI, n.Name, o.Why)
		gpumr.MoveData(t, g, n, config.MRDmabuf)
	case !judged(t, config.MRDmabuf):
		t.Logf("dma-buf path %s, and not required (GDR_MR=%s): %s", o.State, testenv.Config(t).MR, o.Why)
	case o.State == "unsupported":
		testenv.Absent(t, "dma-buf path unsupported here: %s", o.Why)
	default:
		testenv.Attr(t, "dmabuf_error", o.Err.Error())
		testenv.Failf(t, o.Why, "GPU %s -> %s: %v", g.Dev.PCI, n.Name, o.Err)
	}
}

func TestMREG05AnyPath(t *testing.T) {
	testenv.Req(t, "MREG-05")
	g, n := setup(t)
	p := gpumr.TryPeermem(t, g, n)
	d := gpumr.TryDmabuf(t, g, n)
	testenv.Attr(t, "peermem", p.State)
	testenv.Attr(t, "dmabuf", d.State)
	t.Logf("GPU %s -> %s: peermem=%s, dmabuf=%s", g.Dev.PCI, n.Name, p.State, d.State)
	want := testenv.Config(t).MR
	okPeer, okDma := p.State == "ok", d.State == "ok"
	switch {
	case want == config.MRPeermem && okPeer, want == config.MRDmabuf && okDma, want == config.MRAuto && (okPeer || okDma):
		// The path GDR_MR asks for (auto: the first that works) moves data.
		gpumr.MoveData(t, g, n, want)
		return
	}
	pe, de := "", ""
	if p.Err != nil {
		pe = p.Err.Error() + ": "
	}
	if d.Err != nil {
		de = d.Err.Error() + ": "
	}
	testenv.Failf(t, "load nvidia_peermem (modprobe nvidia-peermem), or enable dma-buf: NVIDIA open kernel module, Linux >= 5.12, rdma-core >= 34 and a NIC driver with dma-buf MRs; or set GDR_MR to the path this host is meant to use",
		"GPU %s -> %s: GPU memory cannot be registered through the path GDR_MR=%s asks for: peermem: %s%s; dma-buf: %s%s",
		g.Dev.PCI, n.Name, want, pe, p.Why, de, d.Why)
}
