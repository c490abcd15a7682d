//go:build gpu && rdma

package memreg

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// bufSize is what each registration covers: one 2 MiB GPU page, the unit
// nvidia_peermem pins and the smallest a dma-buf export maps.
const bufSize = 2 << 20

// nicEnv is the NIC under test, opened for t.
type nicEnv struct {
	name string
	ctx  *verbs.Context
	pd   *verbs.PD
}

// gpuEnv is the GPU under test with its primary context.
type gpuEnv struct {
	drv *cuda.Driver
	dev cuda.Device
	ctx *cuda.Context
}

// pickNIC opens the primary rail's NIC (testenv.Selection: GDR_RDMA_DEVICE,
// else the NIC of GDR_GPU's rail, else rail 0's), or ends the test as
// absent naming where the suite looked.
func pickNIC(t *testing.T) *nicEnv {
	t.Helper()
	r, skip, fail := rc.Probe(t)
	switch {
	case skip != "":
		testenv.Absent(t, "%s", skip)
	case fail != "":
		testenv.Failf(t, "see the cause above", "%s", fail)
	}
	n := &nicEnv{name: r.NIC.Name}
	ctx, err := verbs.Open(n.name)
	if err != nil {
		testenv.Failf(t, "check ib_uverbs is loaded and /dev/infiniband/uverbs* is accessible", "%v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	})
	pd, err := ctx.AllocPD()
	if err != nil {
		testenv.Failf(t, "check dmesg for the NIC driver's errors", "%s: %v", n.name, err)
	}
	t.Cleanup(func() {
		if err := pd.Close(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	})
	n.ctx, n.pd = ctx, pd
	return n
}

// pickGPU opens the primary rail's GPU with its primary context.
func pickGPU(t *testing.T) *gpuEnv {
	t.Helper()
	d := cuda.Open(t)
	_, dev := cuda.Rail(t, d)
	return &gpuEnv{drv: d, dev: dev, ctx: cuda.Primary(t, dev)}
}

// setup picks and opens the primary rail's (GPU, NIC) pair. The RDMA device
// is looked for first, so a GPU host without a NIC skips naming
// /sys/class/infiniband.
func setup(t *testing.T) (*gpuEnv, *nicEnv) {
	t.Helper()
	n := pickNIC(t)
	return pickGPU(t), n
}

// requireDevice is the negative control every GPU registration runs first:
// the buffer must be cuMemAlloc device memory, so a registration that only
// works on managed or host memory can never pass as GPUDirect RDMA.
func requireDevice(t *testing.T, g *gpuEnv, m *cuda.Mem) {
	t.Helper()
	mt, err := g.ctx.PointerType(m.Addr())
	if err != nil {
		testenv.Failf(t, "upgrade the NVIDIA driver", "GPU %s: %v", g.dev.PCI, err)
	}
	testenv.Attr(t, "mem_type", string(mt))
	if mt != cuda.MemDevice {
		testenv.Failf(t, "suite bug or broken driver: the buffer must come from cuMemAlloc",
			"GPU %s: buffer at %#x is %s memory, not device memory", g.dev.PCI, m.Addr(), mt)
	}
}

func TestMREG01HostBaseline(t *testing.T) {
	testenv.Req(t, "MREG-01")
	// The NIC the GPU tests use; the baseline itself needs no GPU.
	n := pickNIC(t)
	buf, err := membuf.NewHost(bufSize)
	if err != nil {
		testenv.Failf(t, "free host memory", "%v", err)
	}
	t.Cleanup(func() { _ = buf.Close() })
	mr, err := n.pd.RegMR(buf.Addr(), buf.Len(), rc.Access, membuf.Host)
	if err != nil {
		testenv.Attr(t, "host_mr", "fail")
		testenv.Failf(t, "raise the locked-memory limit (ulimit -l unlimited; LimitMEMLOCK=infinity for services) and check the NIC driver in dmesg",
			"%s: registering %s of host memory: %v", n.name, cuda.Size(bufSize), err)
	}
	t.Cleanup(func() {
		if err := mr.Close(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	})
	testenv.Attr(t, "host_mr", "ok")
	t.Logf("%s: host MR %s lkey %#x rkey %#x", n.name, cuda.Size(bufSize), mr.LKey, mr.RKey)
}

func TestMREG02DeviceMemoryControl(t *testing.T) {
	testenv.Req(t, "MREG-02")
	// No NIC needed: this proves the classifier the registrations rely on.
	g := pickGPU(t)
	m := cuda.Alloc(t, g.ctx, bufSize)
	requireDevice(t, g, m)

	// The classifier must reject everything else, or requireDevice proves nothing.
	man := cuda.AllocManaged(t, g.ctx, bufSize)
	pinned := cuda.HostAlloc(t, g.ctx, bufSize)
	plain, err := membuf.NewHost(bufSize)
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
		mt, err := g.ctx.PointerType(c.addr)
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

// outcome of one registration path.
type outcome struct {
	state string // ok, fail, unsupported
	err   error
	why   string // for unsupported/fail: cause and remedy
}

// peermemState describes nvidia_peermem and the legacy nv_peer_mem as the
// host shows them.
func peermemState(t *testing.T) (loaded bool, legacy bool, desc string) {
	t.Helper()
	root := testenv.Root(t)
	h, err := kmod.New(root)
	if err != nil {
		return false, false, fmt.Sprintf("module state unreadable: %v", err)
	}
	st, err := h.Lookup("nvidia_peermem")
	if err != nil {
		return false, false, fmt.Sprintf("nvidia_peermem state unreadable: %v", err)
	}
	old, _ := h.Lookup("nv_peer_mem")
	desc = fmt.Sprintf("nvidia_peermem %s (%s %s)", st, root.Host("/sys/module/nvidia_peermem"), map[bool]string{true: "present", false: "absent"}[st.SysModule])
	if old.Loaded() {
		desc += "; legacy nv_peer_mem " + old.String()
	}
	return st.Loaded(), old.Loaded(), desc
}

// tryPeermem registers cuMemAlloc memory with plain ibv_reg_mr.
func tryPeermem(t *testing.T, g *gpuEnv, n *nicEnv) outcome {
	t.Helper()
	m := cuda.Alloc(t, g.ctx, bufSize)
	requireDevice(t, g, m)
	mr, err := n.pd.RegMR(m.Addr(), m.Len(), rc.Access, membuf.GPU)
	loaded, legacy, desc := peermemState(t)
	testenv.Attr(t, "nvidia_peermem", desc)
	if err == nil {
		t.Cleanup(func() {
			if err := mr.Close(); err != nil {
				t.Errorf("%s: %v", n.name, err)
			}
		})
		return outcome{state: "ok", why: desc}
	}
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case legacy:
		return outcome{"fail", err, "the legacy nv_peer_mem module is loaded: rmmod nv_peer_mem; modprobe nvidia-peermem (" + desc + ")"}
	case loaded:
		return outcome{"fail", err, "nvidia_peermem is loaded but the NIC stack refused GPU memory: nvidia_peermem was probably built against another OFED/rdma-core kernel stack than the running one (reinstall the NVIDIA driver after MLNX_OFED, or rebuild with DKMS), or the NIC driver lacks peer-memory support; look for nvidia_peermem/ib_umem lines in dmesg (" + desc + ")"}
	case errno == syscall.EFAULT || errno == syscall.EINVAL:
		return outcome{"fail", err, "nvidia_peermem is not loaded, so the NIC cannot pin GPU memory through ibv_reg_mr: modprobe nvidia-peermem (" + desc + ")"}
	}
	return outcome{"fail", err, "unexpected error registering GPU memory (" + desc + ")"}
}

// tryDmabuf probes dma-buf MR support, then registers an exported GPU buffer.
func tryDmabuf(t *testing.T, g *gpuEnv, n *nicEnv) outcome {
	t.Helper()
	if !verbs.HasDmabuf() {
		return outcome{state: "unsupported", err: verbs.ErrNoDmabufSymbol, why: verbs.ErrNoDmabufSymbol.Error()}
	}
	probe, err := n.pd.ProbeDmabuf()
	if err != nil {
		return outcome{"fail", err, "the kernel's answer to a dma-buf MR probe was unexpected"}
	}
	testenv.Attr(t, "dmabuf_probe", probe.Reason)
	if !probe.Supported && !probe.Inconclusive {
		return outcome{state: "unsupported", why: probe.Reason + ": needs Linux >= 5.12 and a NIC driver with dma-buf MRs (mlx5, irdma, efa, bnxt_re)"}
	}
	sup, aerr := g.dev.Attr(cuda.AttrDMABufSupported)
	if aerr != nil || sup != 1 || !g.drv.HasDmabufExport() {
		return outcome{state: "unsupported", why: fmt.Sprintf("GPU %s cannot export dma-buf (DMA_BUF_SUPPORTED=%d, driver CUDA %s; see GPU-04)", g.dev.PCI, sup, cuda.VersionString(g.drv.Version()))}
	}
	m := cuda.Alloc(t, g.ctx, bufSize)
	requireDevice(t, g, m)
	fd, off, _, err := m.DmabufFD()
	if err != nil {
		return outcome{"fail", err, "the GPU claims dma-buf support but export failed: check dmesg for NVRM errors (see GPU-08)"}
	}
	t.Cleanup(func() { _ = unix.Close(fd) }) // after the MR is gone (cleanups run last-in first-out)
	mr, err := n.pd.RegDmabufMR(off, m.Span(), uint64(m.Addr()), fd, rc.Access)
	if err != nil && probe.Inconclusive && (errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EPROTONOSUPPORT)) {
		return outcome{state: "unsupported", err: err, why: fmt.Sprintf("the probe was inconclusive and registering an exported GPU buffer on %s failed with %v: the kernel or the NIC driver does not support dma-buf MRs", n.name, err)}
	}
	if err != nil {
		return outcome{"fail", err, fmt.Sprintf("kernel, %s and GPU %s all claim dma-buf support but the registration failed: check dmesg for the NIC driver's and NVRM's messages, and that the GPU is not behind an IOMMU that blocks peer-to-peer (ACS)", n.name, g.dev.PCI)}
	}
	t.Cleanup(func() {
		if err := mr.Close(); err != nil {
			t.Errorf("%s: %v", n.name, err)
		}
	})
	return outcome{state: "ok", why: fmt.Sprintf("fd %d, %s, lkey %#x rkey %#x", fd, cuda.Size(m.Span()), mr.LKey, mr.RKey)}
}

// moveData proves a registration path carries data, not just registers:
// two RC QPs on the NIC in this process, each on a GPU buffer registered
// through path; an RDMA WRITE from one GPU buffer into the other (the NIC
// reads GPU memory, then writes GPU memory) and an RDMA READ back, each
// checked through a flushed device-to-host copy.
func moveData(t *testing.T, g *gpuEnv, n *nicEnv, path config.MRPath) {
	t.Helper()
	alloc := func(t testing.TB, size int, _ *rails.Rail) membuf.Buffer { return cuda.Alloc(t, g.ctx, size) }
	ends := rc.Connect(t, rc.Options{Dev: n.name, BufSize: moveSize, Alloc: alloc, Loopback: true, MR: path})
	srv, cli := ends[0], ends[1]
	wait := func(e *rc.End, what string) error {
		_, err := e.SCQ.Wait(1, what, e.WaitBudget(xfer))
		return err
	}
	step := func(what string, fill, target *rc.End, op verbs.Opcode, seed uint64) error {
		if err := fill.FillPattern(xfer, seed); err != nil {
			return err
		}
		if err := target.FillPoison(moveSize, rc.Poison); err != nil {
			return err
		}
		local, remote := cli.MR(), cli.Remote()
		w := verbs.SendWR{ID: 1, Op: op, Local: local, LocalAddr: local.Addr, Len: xfer, RemoteAddr: remote.Addr, RKey: remote.RKey, Signaled: true}
		if err := cli.QP.PostSend(w); err != nil {
			return err
		}
		if err := wait(cli, what); err != nil {
			return err
		}
		if err := target.CheckBuf(xfer, seed); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	err := step("RDMA WRITE GPU->NIC->GPU", cli, srv, verbs.OpWrite, membuf.IterSeed(cli.Seed, moveSize, 1))
	if err == nil {
		err = step("RDMA READ GPU<-NIC<-GPU", srv, cli, verbs.OpRead, membuf.IterSeed(cli.Seed, moveSize, 2))
	}
	rc.Report(t, ends)
	if err != nil {
		testenv.Failf(t, "the registration works but data does not arrive intact: check dmesg for the NIC driver and NVRM (Xid) messages, the PCIe path (TOPO-02/03: ACS, IOMMU) and the GPU's writes ordering (GPU-06)",
			"GPU %s via %s (%s): %v", g.dev.PCI, n.name, cli.MR().Path, err)
	}
	testenv.Attr(t, "data_moved", fmt.Sprintf("WRITE and READ of %d bytes each way through %s MRs, verified", xfer, cli.MR().Path))
}

// moveSize is each buffer of moveData; xfer what moves each way, leaving
// room for the guard behind it.
const (
	moveSize = 1 << 20
	xfer     = moveSize - 4096
)

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
	o := tryPeermem(t, g, n)
	testenv.Attr(t, "peermem", o.state)
	switch {
	case o.state == "ok":
		t.Logf("GPU %s -> %s: ibv_reg_mr on %s of device memory works (%s)", g.dev.PCI, n.name, cuda.Size(bufSize), o.why)
		moveData(t, g, n, config.MRPeermem)
	case !judged(t, config.MRPeermem):
		testenv.Attr(t, "peermem_error", o.err.Error())
		t.Logf("peermem path unavailable, and not required (GDR_MR=%s): %v; %s", testenv.Config(t).MR, o.err, o.why)
	case strings.HasPrefix(o.why, "nvidia_peermem is not loaded"):
		// Absent rather than failed: dma-buf is the other way (MREG-04),
		// and MREG-05 fails when neither works.
		testenv.Attr(t, "peermem_error", o.err.Error())
		testenv.Absent(t, "peermem path unavailable: %v; %s", o.err, o.why)
	default:
		testenv.Attr(t, "peermem_error", o.err.Error())
		testenv.Failf(t, o.why, "GPU %s -> %s: %v", g.dev.PCI, n.name, o.err)
	}
}

func TestMREG04Dmabuf(t *testing.T) {
	testenv.Req(t, "MREG-04")
	g, n := setup(t)
	o := tryDmabuf(t, g, n)
	testenv.Attr(t, "dmabuf", o.state)
	switch {
	case o.state == "ok":
		t.Logf("GPU %s -> %s: ibv_reg_dmabuf_mr works (%s)", g.dev.PCI, n.name, o.why)
		moveData(t, g, n, config.MRDmabuf)
	case !judged(t, config.MRDmabuf):
		t.Logf("dma-buf path %s, and not required (GDR_MR=%s): %s", o.state, testenv.Config(t).MR, o.why)
	case o.state == "unsupported":
		testenv.Absent(t, "dma-buf path unsupported here: %s", o.why)
	default:
		testenv.Attr(t, "dmabuf_error", o.err.Error())
		testenv.Failf(t, o.why, "GPU %s -> %s: %v", g.dev.PCI, n.name, o.err)
	}
}

func TestMREG05AnyPath(t *testing.T) {
	testenv.Req(t, "MREG-05")
	g, n := setup(t)
	p := tryPeermem(t, g, n)
	d := tryDmabuf(t, g, n)
	testenv.Attr(t, "peermem", p.state)
	testenv.Attr(t, "dmabuf", d.state)
	t.Logf("GPU %s -> %s: peermem=%s, dmabuf=%s", g.dev.PCI, n.name, p.state, d.state)
	want := testenv.Config(t).MR
	okPeer, okDma := p.state == "ok", d.state == "ok"
	switch {
	case want == config.MRPeermem && okPeer, want == config.MRDmabuf && okDma, want == config.MRAuto && (okPeer || okDma):
		// The path GDR_MR asks for (auto: the first that works) moves data.
		moveData(t, g, n, want)
		return
	}
	pe, de := "", ""
	if p.err != nil {
		pe = p.err.Error() + ": "
	}
	if d.err != nil {
		de = d.err.Error() + ": "
	}
	testenv.Failf(t, "load nvidia_peermem (modprobe nvidia-peermem), or enable dma-buf: NVIDIA open kernel module, Linux >= 5.12, rdma-core >= 34 and a NIC driver with dma-buf MRs; or set GDR_MR to the path this host is meant to use",
		"GPU %s -> %s: GPU memory cannot be registered through the path GDR_MR=%s asks for: peermem: %s%s; dma-buf: %s%s",
		g.dev.PCI, n.name, want, pe, p.why, de, d.why)
}
