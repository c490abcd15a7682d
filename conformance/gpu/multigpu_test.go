//go:build gpu

package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpucopy"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Multi-GPU checks (GPU-12..15): what only shows with several GPUs busy.
// GPUs behind one PCIe switch uplink each pass a solo copy test and slow
// each other down when they copy at once (GPU-12/13); GPU<->GPU peer copies
// are what NCCL uses inside a node (GPU-14/15). harness/gpucopy measures.

// peerDataSize is what GPU-14 moves each way to prove the data path.
const peerDataSize = 4 << 20

// multiGPU starts a multi-GPU check: the selected GPUs the CUDA driver
// sees, at least two; one is absent, saying which GPU and why only one.
func multiGPU(t *testing.T, id string) []cuda.Device {
	t.Helper()
	testenv.Req(t, id)
	d := cuda.Open(t)
	devs := cuda.GPUs(t, d) // absent without any GPU
	testenv.Attr(t, "gpu_count", len(devs))
	if len(devs) < 2 {
		all, err := d.Devices()
		if err != nil {
			testenv.Failf(t, cuda.InitRemedy(err), "listing GPUs: %v", err)
		}
		testenv.Absent(t, "", "%s needs two or more GPUs: the selection has one, %s (%s); %s", id, devs[0].PCI, devs[0].Name, oneGPUWhy(len(all), testenv.Config(t)))
	}
	return devs
}

// oneGPUWhy says why the selection has one GPU: how many the driver sees,
// and the GDR_GPU/GDR_RAILS that narrow them.
func oneGPUWhy(seen int, cfg config.Config) string {
	why := fmt.Sprintf("the CUDA driver sees %d GPU(s)", seen)
	var sel []string
	if cfg.GPU != "" {
		sel = append(sel, "GDR_GPU="+cfg.GPU)
	}
	if cfg.Rails != nil {
		sel = append(sel, "GDR_RAILS="+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cfg.Rails)), ","), "[]"))
	}
	if len(sel) > 0 {
		why += " and " + strings.Join(sel, " ") + " selects one"
	}
	return why
}

// railAttrs records the rail facts of dev's rail (gdr.gpu, gdr.rail, ...).
func railAttrs(t *testing.T, dev cuda.Device) {
	t.Helper()
	for _, r := range testenv.Selection(t).Rails {
		if r.GPU != nil && r.GPU.PCI == dev.PCI {
			testenv.RailAttrs(t, r)
			return
		}
	}
	testenv.Attr(t, "gpu", dev.PCI)
}

// ---- GPU-12/13: every GPU copying at once ----

// concurrentCheck times pinned copies in direction dir on every selected
// GPU alone, then on all at once, and fails a GPU that reaches less than
// GDR_MIN_CONCURRENT_FRACTION of its rate alone.
func concurrentCheck(t *testing.T, id string, dir cuda.Direction) {
	devs := multiGPU(t, id)
	copies(t, devs...)
	frac := testenv.Config(t).MinConcurrentFraction
	r := gpucopy.MeasureConcurrent(t, devs, dir, gpucopy.BufSize(devs[0]))
	r.Record(t, frac)
	t.Log(r.Summary())
	for _, g := range r.Copiers {
		t.Run(g.Dev.PCI, func(t *testing.T) { concurrentVerdict(t, id, r, g, frac) })
	}
}

// concurrentVerdict judges one GPU of a concurrent run in its subtest.
func concurrentVerdict(t *testing.T, id string, r *gpucopy.Concurrent, g *gpucopy.HostCopier, frac float64) {
	testenv.Req(t, id)
	railAttrs(t, g.Dev)
	share := r.RecordGPU(t, g, frac)
	if g.Dev.Emulated {
		testenv.Absent(t, "", "GPU %s is the lab's emulated GPU: its copies are CPU memcpy, which shares no PCIe uplink; %.2f of its solo rate with %d GPUs copying at once is reported, not judged",
			g.Dev.PCI, r.Fraction[g.Dev.PCI], len(r.Copiers))
	}
	if err := r.Shortfall(g, cuda.GPUName(t, g.Dev), frac, share); err != nil {
		testenv.Fail(t, verdict.Finding{Cause: err.Error(),
			Remedy:   "GPUs behind one PCIe switch uplink share it: check the upstream port's link (lspci -vvv: LnkSta) and that each GPU has the uplink the platform is built with; check that pinned buffers sit on each GPU's NUMA node (gdr.pinned_numa) and that every memory channel is populated",
			Measured: "gdr.concurrent_fraction", Threshold: "gdr.min_concurrent_fraction", Source: "GDR_MIN_CONCURRENT_FRACTION of its rate alone"})
	}
}

func TestGPU12ConcurrentHtoD(t *testing.T) { concurrentCheck(t, "GPU-12", cuda.HtoD) }

func TestGPU13ConcurrentDtoH(t *testing.T) { concurrentCheck(t, "GPU-13", cuda.DtoH) }

// ---- GPU-14/15: GPU<->GPU peer to peer ----

// forEachPair runs check once per pair of selected GPUs, in a subtest named
// "<a>-<b>", with the pair's link found and recorded.
func forEachPair(t *testing.T, id string, check func(t *testing.T, a, b cuda.Device, link gpucopy.P2PLink, h *nvml.Handle)) {
	t.Helper()
	devs := multiGPU(t, id)
	h, nvErr := nvml.TryOpen(t)
	if nvErr != nil {
		t.Logf("NVML not available (%v): NVLink cannot be told from PCIe", nvErr)
	}
	for i, a := range devs {
		for _, b := range devs[i+1:] {
			t.Run(a.PCI+"-"+b.PCI, func(t *testing.T) {
				pairAttrs(t, id, a, b)
				link := gpucopy.LinkOf(t, h, nvErr, a, b)
				link.Record(t)
				check(t, a, b, link, h)
			})
		}
	}
}

// pairAttrs records a pair's requirement, a's rail and the peer.
func pairAttrs(t *testing.T, id string, a, b cuda.Device) {
	t.Helper()
	testenv.Req(t, id)
	railAttrs(t, a)
	testenv.Attr(t, "gpu_peer", b.PCI)
	testenv.Attr(t, "gpu_name", a.Name)
	testenv.Attr(t, "mem", a.MemLabel())
}

// noPeerAccess ends a pair that cannot reach each other: absent where the
// platform offers no peer access across CPU sockets (SYS), a failure
// elsewhere. NVML's P2P read status says why, where NVML is there.
func noPeerAccess(t *testing.T, a, b cuda.Device, ab, ba bool, link gpucopy.P2PLink, h *nvml.Handle) {
	t.Helper()
	status := "NVML not available"
	if h != nil {
		status, _ = h.P2PStatus(a.PCI, b.PCI, gonvml.P2P_CAPS_INDEX_READ)
	}
	testenv.Attr(t, "p2p_status", status)
	msg := fmt.Sprintf("%s and %s cannot reach each other's memory (cuDeviceCanAccessPeer %s->%s %v, %s->%s %v; NVML P2P read status %s)",
		cuda.GPUName(t, a), cuda.GPUName(t, b), a.PCI, b.PCI, ab, b.PCI, a.PCI, ba, status)
	if link.Kind == "PCIe" && link.Path.Class == topo.SYS {
		testenv.Absent(t, "", "%s: they sit on different CPU sockets (SYS), where most platforms offer no PCIe peer-to-peer; CUDA and NCCL copy through host memory there", msg)
	}
	testenv.Failf(t, cuda.PeerRemedy(&cuda.Error{Code: cuda.ErrPeerAccessUnsupported}), "%s", msg)
}

// peerDataRemedy is the remedy for peer copied data that is not intact.
const peerDataRemedy = "check dmesg for Xid errors and NVLink/PCIe error counters (nvidia-smi nvlink -e; AER in dmesg); reset the GPUs"

func TestGPU14PeerAccess(t *testing.T) {
	forEachPair(t, "GPU-14", func(t *testing.T, a, b cuda.Device, link gpucopy.P2PLink, h *nvml.Handle) {
		ab, ba := gpucopy.PeerAccess(t, a, b)
		if !ab || !ba {
			noPeerAccess(t, a, b, ab, ba, link, h)
		}
		ca, cb := gpucopy.EnablePeers(t, a, b)
		ps := []gpucopy.PeerBuffers{gpucopy.NewPeerBuffers(t, ca, cb, peerDataSize, 0x1400+1), gpucopy.NewPeerBuffers(t, cb, ca, peerDataSize, 0x1400+2)}
		var errs []error
		for _, p := range ps {
			if err := p.CopyOnce(); err != nil {
				testenv.Failf(t, cuda.PeerRemedy(err), "%s: %v", p.Dir(), err)
			}
			if err := p.Verify(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Dir(), err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			testenv.Failf(t, peerDataRemedy, "%s of peer copied data: %v", cuda.Size(peerDataSize), gpucopy.OneLine(err))
		}
		testenv.Attr(t, "p2p_data", "intact both ways")
		t.Logf("%s <-> %s: peer access both ways, %s copied intact each way; link %s %s", a.PCI, b.PCI, cuda.Size(peerDataSize), link.KindOrUnknown(), link.How+link.Why)
	})
}

// p2pFloor is GPU-15's floor for a link kind: the fraction of the link's
// rate, the variable that sets it, and the remedy when a copy falls short.
func p2pFloor(cfg config.Config, kind string) (frac float64, name, remedy string) {
	switch kind {
	case "NVLink":
		return cfg.MinP2PNVLinkFraction, "GDR_MIN_P2P_NVLINK_FRACTION", "check that every NVLink link is up at full speed (nvidia-smi nvlink -s) and its error counters (nvidia-smi nvlink -e); on NVSwitch systems check nvidia-fabricmanager and the fabric state (nvidia-smi -q: Fabric); check for clock throttling (nvidia-smi -q -d PERFORMANCE)"
	case "PCIe":
		return cfg.MinP2PPCIeFraction, "GDR_MIN_P2P_PCIE_FRACTION", "check both GPUs' links (GPU-11; lspci -vvv: LnkSta), ACS on the switch ports between them (redirected P2P goes through the root complex), the IOMMU mode (TOPO-05) and BIOS PCIe P2P settings"
	}
	return 0, "", ""
}

func TestGPU15PeerBandwidth(t *testing.T) {
	cfg := testenv.Config(t)
	forEachPair(t, "GPU-15", func(t *testing.T, a, b cuda.Device, link gpucopy.P2PLink, h *nvml.Handle) {
		ab, ba := gpucopy.PeerAccess(t, a, b)
		if !ab || !ba {
			testenv.Absent(t, "", "%s and %s have no peer access (cuDeviceCanAccessPeer %v/%v): GPU-14 judges that; a copy without it would time host staging, not the link", a.PCI, b.PCI, ab, ba)
		}
		ca, cb := gpucopy.EnablePeers(t, a, b)
		copies(t, a, b)
		n := gpucopy.BufSize(a)
		r := gpucopy.MeasurePeers(t, []gpucopy.PeerBuffers{gpucopy.NewPeerBuffers(t, ca, cb, n, 0x1500+1), gpucopy.NewPeerBuffers(t, cb, ca, n, 0x1500+2)})
		// The data of the last timed copies, read back through the host.
		if err := gpucopy.VerifyAll(r.Bufs); err != nil {
			testenv.Failf(t, peerDataRemedy, "after the timed copies: %v", gpucopy.OneLine(err))
		}
		testenv.Attr(t, "p2p_data", "intact both ways")
		t.Log(r.Summary(link))

		frac, name, remedy := p2pFloor(cfg, link.Kind)
		if a.Emulated {
			testenv.Absent(t, "", "%s is the lab's emulated GPU: its peer copies are CPU memcpy, and neither NVLink nor a PCIe path is emulated; the rates are reported, not judged", a.PCI)
		}
		if link.Rate == 0 {
			testenv.Absent(t, "", "no floor for %s <-> %s: the link's theoretical rate is unknown (%s)", a.PCI, b.PCI, link.Why)
		}
		floor := frac * link.Rate
		testenv.Attr(t, "min_p2p_fraction", frac)
		testenv.Attr(t, "min_p2p_gbyte_s", floor)
		testenv.Attr(t, "p2p_fraction", min(r.Best[0], r.Best[1])/link.Rate)
		if slow := r.Slow(floor, link.Rate); len(slow) > 0 {
			testenv.Failf(t, remedy, "%s <-> %s over %s (%s): %s, below %s=%.2f (%.2f GB/s)",
				cuda.GPUName(t, a), cuda.GPUName(t, b), link.Kind, link.How, strings.Join(slow, "; "), name, frac, floor)
		}
	})
}
