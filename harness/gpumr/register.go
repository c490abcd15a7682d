//go:build gpu && rdma

package gpumr

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// HostMRRemedy is MREG-01's remedy for a host registration that failed
// where verbs named no remedy of its own.
const HostMRRemedy = "raise the locked-memory limit (ulimit -l unlimited; LimitMEMLOCK=infinity for services) and check the NIC driver in dmesg"

// RegisterHost registers host buffer buf on n's protection domain, MREG-01's
// baseline. A failure is a finding: verbs' own remedy where it names one
// (the locked-memory limit it met, harness/verbs memlock.go), else
// HostMRRemedy; the host fell short either way.
func RegisterHost(n *NIC, buf *membuf.HostBuffer) (*verbs.MR, error) {
	mr, err := n.PD.RegMR(buf.Addr(), buf.Len(), rc.Access, membuf.Host)
	if err == nil {
		return mr, nil
	}
	remedy := HostMRRemedy
	if f, ok := verdict.As(err); ok && f.Remedy != "" {
		remedy = f.Remedy
	}
	return nil, verdict.Failf(remedy, "%s: registering %s of host memory: %v", n.Name, cuda.Size(buf.Len()), err)
}

// TryPeermem registers GPU memory from allocator a with plain ibv_reg_mr,
// the path nvidia_peermem serves, and records the module state
// (gdr.nvidia_peermem).
func TryPeermem(t *testing.T, g *GPU, n *NIC, a cuda.Allocator) Outcome {
	t.Helper()
	m := cuda.AllocBy(t, g.Ctx, a, BufSize)
	RequireDevice(t, g, m)
	mr, err := n.PD.RegMR(m.Addr(), m.Len(), rc.Access, membuf.GPU)
	loaded, legacy, desc := PeermemState(testenv.Root(t))
	testenv.Attr(t, "nvidia_peermem", desc)
	if err != nil {
		return peermemFailure(err, loaded, legacy, a == cuda.CuMemCreate, desc)
	}
	CloseAtEnd(t, n.Name, mr)
	return Outcome{State: OK, Detail: desc, Unproven: JudgePlainRegistration(g.Dev.PCI, g.C2C, loaded, legacy, string(a), desc)}
}

// TryDmabuf probes dma-buf MR support, then registers an exported GPU buffer
// from allocator a.
func TryDmabuf(t *testing.T, g *GPU, n *NIC, a cuda.Allocator) Outcome {
	t.Helper()
	probe, o, ok := dmabufReady(t, g, n)
	if !ok {
		return o
	}
	m := cuda.AllocBy(t, g.Ctx, a, BufSize)
	RequireDevice(t, g, m)
	// The PCIe mapping type where NCCL asks for it (a GPU on NVLink-C2C
	// whose NIC is not P2C); a driver that refuses it gets flags 0.
	x, note, _, err := rc.ExportDmabuf(t, m, n.Name)
	testenv.Attr(t, "dmabuf_mapping", note)
	if err != nil {
		return failed(err, "check dmesg for NVRM errors (see GPU-08)", "the GPU claims dma-buf support but export of %s memory failed", a)
	}
	fd := x.FD
	t.Cleanup(func() { _ = unix.Close(fd) }) // after the MR is gone (cleanups run last-in first-out)
	mr, err := n.PD.RegDmabufMR(x.Offset, m.Span(), uint64(m.Addr()), fd, rc.Access)
	if refusedAsUnsupported(probe.Inconclusive, err) {
		return unsupported(err, dmabufRemedy, "the probe was inconclusive and registering an exported GPU buffer on %s failed with %v: the kernel or the NIC driver does not support dma-buf MRs", n.Name, err)
	}
	if err != nil {
		return failed(err, "check dmesg for the NIC driver's and NVRM's messages, and that the GPU is not behind an IOMMU that blocks peer-to-peer (ACS)",
			"kernel, %s and GPU %s all claim dma-buf support but the registration of exported %s memory failed", n.Name, g.Dev.PCI, a)
	}
	CloseAtEnd(t, n.Name, mr)
	return Outcome{State: OK, Detail: fmt.Sprintf("fd %d, %s, lkey %#x rkey %#x", fd, cuda.Size(m.Span()), mr.LKey, mr.RKey)}
}

// dmabufReady asks whether rdma-core, the kernel with the NIC driver, and
// the GPU with its driver can do dma-buf MRs (gdr.dmabuf_probe); ok false
// with the outcome where one cannot.
func dmabufReady(t *testing.T, g *GPU, n *NIC) (probe verbs.DmabufSupport, o Outcome, ok bool) {
	t.Helper()
	if !verbs.HasDmabuf() {
		return probe, unsupported(verbs.ErrNoDmabufSymbol, "", "%v", verbs.ErrNoDmabufSymbol), false
	}
	probe, err := n.PD.ProbeDmabuf()
	if err != nil {
		return probe, failed(err, "", "the kernel's answer to a dma-buf MR probe was unexpected"), false
	}
	testenv.Attr(t, "dmabuf_probe", probe.Reason)
	if !probe.Supported && !probe.Inconclusive {
		return probe, unsupported(nil, dmabufRemedy, "%s", probe.Reason), false
	}
	sup, aerr := g.Dev.Attr(cuda.AttrDMABufSupported)
	if aerr != nil || sup != 1 || !g.Drv.HasDmabufExport() {
		return probe, unsupported(nil, "see GPU-04", "GPU %s cannot export dma-buf (DMA_BUF_SUPPORTED=%d, driver CUDA %s)", g.Dev.PCI, sup, cuda.VersionString(g.Drv.Version())), false
	}
	return probe, Outcome{}, true
}

// unsupported is a path this host cannot offer: absent, with what it needs.
func unsupported(err error, remedy, format string, args ...any) Outcome {
	return Outcome{State: Unsupported, Err: err, Finding: *verdict.Absentf(remedy, format, args...)}
}

// dmabufRemedy is what dma-buf MRs need of the host.
const dmabufRemedy = "dma-buf MRs need Linux >= 5.12 and a NIC driver with dma-buf MRs (mlx5, irdma, efa, bnxt_re)"
