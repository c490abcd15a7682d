//go:build gpu

package gpucopy

import (
	"fmt"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// What the copy checks (conformance/gpu GPU-09..15) come to, as findings
// the test records, and the pair iteration GPU-14/15 share.

// Finding is GPU-09/10's judgement of s: nil when the best rate reaches
// GDR_MIN_COPY_FRACTION of the link's rate.
func (s Solo) Finding() *verdict.Finding {
	err := s.Shortfall()
	if err == nil {
		return nil
	}
	return &verdict.Finding{Cause: err.Error(),
		Remedy:   "check the GPU link (GPU-11, lspci -vvv: LnkSta), run pinned to the GPU's NUMA node (numactl --cpunodebind), and check IOMMU/ACS settings and BIOS PCIe options (Max Payload Size, relaxed ordering)",
		Measured: "gdr.copy_fraction", Threshold: "gdr.min_copy_fraction", Source: "GDR_MIN_COPY_FRACTION of the link's rate"}
}

// Judge is GPU-12/13's judgement of GPU g in r: nil when its rate with
// every GPU copying reaches frac of its rate alone. name is how the GPU is
// called, share who it shares an uplink with. The lab's emulated GPU is
// absent: its copies are CPU memcpy, which shares no PCIe uplink.
func (r *Concurrent) Judge(g *HostCopier, name string, frac float64, share string) *verdict.Finding {
	if g.Dev.Emulated {
		return verdict.Absentf("", "GPU %s is the lab's emulated GPU: its copies are CPU memcpy, which shares no PCIe uplink; %.2f of its solo rate with %d GPUs copying at once is reported, not judged",
			g.Dev.PCI, r.Fraction[g.Dev.PCI], len(r.Copiers))
	}
	err := r.Shortfall(g, name, frac, share)
	if err == nil {
		return nil
	}
	return &verdict.Finding{Cause: err.Error(),
		Remedy:   "GPUs behind one PCIe switch uplink share it: check the upstream port's link (lspci -vvv: LnkSta) and that each GPU has the uplink the platform is built with; check that pinned buffers sit on each GPU's NUMA node (gdr.pinned_numa) and that every memory channel is populated",
		Measured: "gdr.concurrent_fraction", Threshold: "gdr.min_concurrent_fraction", Source: "GDR_MIN_CONCURRENT_FRACTION of its rate alone"}
}

// EachPair runs check once per pair of selected GPUs (at least two:
// cuda.Multi; t is tagged with id by the test), in a subtest named "<a>-<b>" with the requirement, a's rail
// (gdr.gpu, ...), the peer (gdr.gpu_peer) and the pair's link found and
// recorded. h is NVML, nil where it did not open.
func EachPair(t *testing.T, id string, check func(t *testing.T, a, b cuda.Device, link P2PLink, h *nvml.Handle)) {
	t.Helper()
	devs := cuda.Multi(t, id)
	h, nvErr := nvml.TryOpen(t)
	if nvErr != nil {
		t.Logf("NVML not available (%v): NVLink cannot be told from PCIe", nvErr)
	}
	for i, a := range devs {
		for _, b := range devs[i+1:] {
			t.Run(a.PCI+"-"+b.PCI, func(t *testing.T) {
				testenv.Req(t, id)
				testenv.GPURailAttrs(t, a.PCI)
				testenv.Attr(t, "gpu_peer", b.PCI)
				testenv.Attr(t, "gpu_name", a.Name)
				testenv.Attr(t, "mem", a.MemLabel())
				link := LinkOf(t, h, nvErr, a, b)
				link.Record(t)
				check(t, a, b, link, h)
			})
		}
	}
}

// P2PStatus is NVML's P2P read status of GPUs a and b, which says why
// they cannot reach each other; h nil: NVML is not available.
func P2PStatus(h *nvml.Handle, a, b string) string {
	if h == nil {
		return "NVML not available"
	}
	status, _ := h.P2PStatus(a, b, gonvml.P2P_CAPS_INDEX_READ)
	return status
}

// NoPeerAccess is GPU-14's finding for GPUs a and b (called aName, bName)
// that cannot reach each other (cuDeviceCanAccessPeer ab, ba): absent
// where the platform offers no peer access across CPU sockets (a PCIe path
// of class SYS), a failure elsewhere. status is NVML's (P2PStatus).
func NoPeerAccess(a, b cuda.Device, aName, bName string, ab, ba bool, link P2PLink, status string) *verdict.Finding {
	msg := fmt.Sprintf("%s and %s cannot reach each other's memory (cuDeviceCanAccessPeer %s->%s %v, %s->%s %v; NVML P2P read status %s)",
		aName, bName, a.PCI, b.PCI, ab, b.PCI, a.PCI, ba, status)
	if link.Kind == "PCIe" && link.Path.Class == topo.SYS {
		return verdict.Absentf("", "%s: they sit on different CPU sockets (SYS), where most platforms offer no PCIe peer-to-peer; CUDA and NCCL copy through host memory there", msg)
	}
	return verdict.Failf(cuda.PeerRemedy(&cuda.Error{Code: cuda.ErrPeerAccessUnsupported}), "%s", msg)
}

// P2PFloor is GPU-15's floor for a link kind: the fraction of the link's
// rate, the variable that sets it, and the remedy when a copy falls short;
// an unknown kind has none.
func P2PFloor(cfg config.Config, kind string) (frac float64, name, remedy string) {
	switch kind {
	case "NVLink":
		return cfg.MinP2PNVLinkFraction, "GDR_MIN_P2P_NVLINK_FRACTION", "check that every NVLink link is up at full speed (nvidia-smi nvlink -s) and its error counters (nvidia-smi nvlink -e); on NVSwitch systems check nvidia-fabricmanager and the fabric state (nvidia-smi -q: Fabric); check for clock throttling (nvidia-smi -q -d PERFORMANCE)"
	case "PCIe":
		return cfg.MinP2PPCIeFraction, "GDR_MIN_P2P_PCIE_FRACTION", "check both GPUs' links (GPU-11; lspci -vvv: LnkSta), ACS on the switch ports between them (redirected P2P goes through the root complex), the IOMMU mode (TOPO-05) and BIOS PCIe P2P settings"
	}
	return 0, "", ""
}
