//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Access is what every MR of the suite asks for. Relaxed ordering is an
// optional flag (rdma-core drops it where the device or kernel lacks it);
// NCCL and perftest request it too, since PCIe writes into GPU memory may
// then pass each other, which GPUDirect RDMA throughput depends on.
const Access = verbs.AccessRW | verbs.AccessRelaxed

// register registers the buffer: host memory once; GPU memory through the
// paths GDR_MR allows (auto: peermem, then dma-buf; every one that works is
// kept, so the data checks run on each).
func (e *End) register() error {
	t := e.T
	if e.Buf.Kind() == membuf.Host {
		mr, err := e.PD.RegMR(e.Buf.Addr(), e.Buf.Len(), Access, membuf.Host)
		if err != nil {
			return fmt.Errorf("registering the host buffer: %w", err)
		}
		cleanup(t, "memory region", mr)
		e.MRs = []*verbs.MR{mr}
		if r := verbs.MemlockRaised(); r != "" {
			e.Attr("gdr.memlock", r) // the suite changed the process's limit: say so
		}
		return nil
	}
	var tried []string
	for _, path := range mrPaths(e.mrPolicy) {
		mr, err := e.registerGPU(path)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		e.MRs = append(e.MRs, mr)
	}
	if len(e.MRs) == 0 {
		return verdict.Failf("load nvidia_peermem (modprobe nvidia-peermem) for the peermem path, or use dma-buf (open GPU kernel module, Linux >= 5.12, rdma-core >= 34, a NIC driver with dma-buf MRs); see MREG-03/04/05",
			"GPU memory could not be registered with %s (GDR_MR=%s): %s", e.Dev, e.mrPolicy, strings.Join(tried, "; "))
	}
	e.MRNotes = tried
	return nil
}

// mrPaths is the order GDR_MR tries the registration paths in.
func mrPaths(m config.MRPath) []string {
	switch m {
	case config.MRPeermem:
		return []string{verbs.PathPeermem}
	case config.MRDmabuf:
		return []string{verbs.PathDmabuf}
	}
	return []string{verbs.PathPeermem, verbs.PathDmabuf}
}

// registerGPU registers the GPU buffer through one path. A dma-buf MR uses
// the buffer's own address as iova, so work requests address every
// registration alike.
func (e *End) registerGPU(path string) (*verbs.MR, error) {
	if path == verbs.PathPeermem {
		mr, err := e.PD.RegMR(e.Buf.Addr(), e.Buf.Len(), Access, membuf.GPU)
		if err != nil {
			return nil, err
		}
		cleanup(e.T, "peermem memory region", mr)
		return mr, nil
	}
	if !verbs.HasDmabuf() {
		return nil, verbs.ErrNoDmabufSymbol
	}
	x, note, ok, err := ExportDmabuf(e.T, e.Buf, e.Dev)
	if note != "" {
		e.Attr("gdr.dmabuf_mapping", note)
	}
	if err != nil {
		return nil, fmt.Errorf("exporting the GPU buffer as dma-buf: %w", err)
	}
	if !ok {
		return nil, errors.New("this memory cannot be exported as dma-buf")
	}
	// The fd outlives the MR: cleanups run last-in first-out.
	e.T.Cleanup(func() { _ = unix.Close(x.FD) })
	mr, err := e.PD.RegDmabufMR(x.Offset, e.Buf.Len(), uint64(e.Buf.Addr()), x.FD, Access)
	if err != nil {
		return nil, err
	}
	cleanup(e.T, "dma-buf memory region", mr)
	return mr, nil
}

// Probe finds the RDMA device this host uses: the primary rail's NIC of
// the suite's one selection (testenv.Selection: GDR_RDMA_DEVICE, else the
// NIC of GDR_GPU's rail, else rail 0's, else the first candidate NIC), and
// records the rail's facts on t. stop, when not nil, is why no test can
// run on it: absent naming where the suite looked, or fell short (NICs
// there, none usable: a DOWN port is named before any connection is
// tried).
func Probe(t testing.TB) (r *rails.Rail, stop *verdict.Finding) {
	t.Helper()
	r = testenv.Selection(t).Primary
	if r == nil {
		return nil, noNIC(t)
	}
	return r, checkRail(t, r)
}

// StopIf ends t on stop, Probe's reason (nil does nothing).
func StopIf(t testing.TB, stop *verdict.Finding) {
	t.Helper()
	if stop != nil {
		testenv.Fail(t, *stop)
	}
}

// checkRail records rail r's facts on t and says why it cannot carry a
// test here (no NIC, or no libibverbs); nil when it can.
func checkRail(t testing.TB, r *rails.Rail) *verdict.Finding {
	t.Helper()
	testenv.RailAttrs(t, r)
	if r.NIC == nil {
		return noNIC(t)
	}
	var le *verbs.LoadError
	if err := verbs.Load(); errors.As(err, &le) {
		return verdict.Absentf(verbs.LoadRemedy, "%s does not load (%s)", verbs.Library, le.Msg)
	} else if err != nil {
		return verdict.Absentf("", "%v", err)
	}
	return nil
}

// noNIC says why no NIC can carry the test: none there is an absence (a
// skip naming where the suite looked and what is loaded); NICs there but
// none usable (a DOWN port, no uverbs node) is a failure, named before any
// connection is tried.
func noNIC(t testing.TB) *verdict.Finding {
	sel := testenv.Selection(t)
	if len(sel.NICs) > 0 {
		return verdict.Failf("bring the port's link up (cable, switch port, `ip link set <netdev> up`; on InfiniBand a running subnet manager), load ib_uverbs, or choose the port with GDR_IB_PORT",
			"%s", sel.NoCandidate())
	}
	root := testenv.Root(t)
	remedy := reqs.RemedyNoRDMADevice
	mods := "kernel modules unknown"
	if km, err := kmod.New(root); err != nil {
		mods += " (" + err.Error() + ")"
	} else {
		mods = km.Summary(kmod.RDMA)
		if !km.Has("ib_core") {
			mods += "; ib_core is not loaded"
			remedy = reqs.RemedyNoRDMAStack
		}
	}
	return verdict.Absentf(remedy, "%s under %s; RDMA kernel modules %s", sel.NoCandidate(), root.Dir(), mods)
}
