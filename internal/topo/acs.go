package topo

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/pci"
)

// TOPO-03's rule for one switch port where a GPU<->NIC path turns
// (TurnPorts): which of its enabled ACS controls send this path's traffic
// through the root complex.
//
// ACS P2P Request Redirect (RR), Completion Redirect (CR), Upstream
// Forwarding (UF) and Egress Control (EC) redirect or block peer-to-peer
// traffic (pci.ACSP2PBlocking). ACS Direct Translated P2P (DT) makes an
// exception: a port with DT set routes a Request whose Address Type is
// Translated "to the peer Egress Port without redirection, regardless of
// ACS P2P Request Redirect and ACS P2P Egress Control" (PCIe Base
// Specification r7.0, 6.12.3, as Linux quotes it in drivers/pci/p2pdma.c
// pci_acs_p2pdma_request), unless ACS Translation Blocking (TB) is set, which
// blocks translated requests and makes DT void. Requests are translated
// only when their requester has ATS enabled and asked the IOMMU for the
// translation: in GPUDirect RDMA the requester is the NIC (it writes into
// and reads from GPU memory; the GPU only completes), so DT helps exactly
// when the NIC's ATS Control Enable bit is set. That is how an
// IOMMU-translated host is set up for GPUDirect RDMA (NVIDIA AI Enterprise,
// "ATS and ACS configuration": ATS enabled on the NIC, ACS on the switch
// ports set to allow ATS; Linux pci=config_acs= sets DT per port, bit 6).
// What DT does not change is reported with the bypass: CR still redirects
// read completions whose Relaxed Ordering attribute is clear; UF acts only on
// traffic already redirected; and a NIC sends translated requests only for
// the memory it was told to (mlx5: dma-buf registrations with relaxed
// ordering, mlx5_umem_needs_ats in drivers/infiniband/hw/mlx5/mlx5_ib.h),
// so peermem registrations stay untranslated and redirected.

// Endpoint is one end of the path: its address and config space (nil when
// it could not be read).
type Endpoint struct {
	BDF    string
	Config *pci.Config
}

// ats says what the end's ATS capability is: "enabled", "disabled",
// "absent", or "unknown" when the extended config space was not read.
func (e Endpoint) ats() string {
	switch {
	case e.Config == nil || !e.Config.Extended():
		return "unknown"
	case e.Config.ATS == nil:
		return "absent"
	case e.Config.ATS.Enabled():
		return "enabled"
	}
	return "disabled"
}

// ACSPort is one switch port where the path turns, with the path's ends.
type ACSPort struct {
	BDF      string
	ACS      *pci.ACS // nil: no ACS capability, nothing redirects
	NIC, GPU Endpoint
}

// ACSVerdict is what one port does to the path's traffic.
type ACSVerdict struct {
	// Redirect are the enabled controls that send the path's requests or
	// completions through the root complex: TOPO-03 fails on them.
	Redirect uint16
	// Bypassed are the controls DT overrides for the NIC's translated
	// requests (RR, EC), and Bypass says so as a fact ("" when DT does not
	// apply).
	Bypassed uint16
	Bypass   string
	// NoBypass says why a DT bit set on the port does not help this path
	// ("" when DT is clear or it applies), and Remedy what would make it.
	NoBypass, Remedy string
}

// JudgeACS is TOPO-03's rule for one port.
func JudgeACS(p ACSPort) ACSVerdict {
	if p.ACS == nil {
		return ACSVerdict{}
	}
	bl := p.ACS.Blocking()
	ctrl := p.ACS.Ctrl
	if bl == 0 || ctrl&pci.ACSDT == 0 {
		return ACSVerdict{Redirect: bl}
	}
	v := ACSVerdict{Redirect: bl}
	nic := p.NIC.ats()
	switch {
	case ctrl&pci.ACSTB != 0:
		v.NoBypass = fmt.Sprintf("Direct Translated P2P (DT) is set on %s, but so is Translation Blocking (TB), which blocks translated requests and voids DT (PCIe Base Specification, ACS Control register)", p.BDF)
		v.Remedy = fmt.Sprintf("clear ACS Translation Blocking on %s (Linux sets it with pci=noats and on external-facing or untrusted ports)", p.BDF)
	case nic != "enabled":
		v.NoBypass = fmt.Sprintf("Direct Translated P2P (DT) is set on %s, but ATS is %s on NIC %s: its requests carry untranslated addresses, which DT does not cover, so Request Redirect still sends them to the root complex", p.BDF, nic, p.NIC.BDF)
		v.Remedy = fmt.Sprintf("enable ATS on NIC %s (ConnectX: mlxconfig or mstconfig -d %s set ATS_ENABLED=true, then reboot the host; the IOMMU driver sets the ATS Enable bit when it translates the NIC's DMA)", p.NIC.BDF, p.NIC.BDF)
		if nic == "unknown" {
			v.Remedy = fmt.Sprintf("run the suite as root so that NIC %s's ATS capability can be read", p.NIC.BDF)
		}
	default:
		v.Bypassed = bl & (pci.ACSRR | pci.ACSEC)
		v.Redirect = 0
		v.Bypass = fmt.Sprintf("%s: Direct Translated P2P (DT) with ATS enabled on NIC %s: its translated requests go straight to the peer regardless of %s (PCIe r7.0 6.12.3); GPU %s's ATS is %s (it only completes)",
			p.BDF, p.NIC.BDF, orNone(pci.EnabledNames(v.Bypassed)), p.GPU.BDF, p.GPU.ats())
		if rest := bl &^ v.Bypassed; rest != 0 {
			v.Bypass += fmt.Sprintf("; still on: %s (CR redirects read completions whose Relaxed Ordering bit is clear; UF acts only on traffic already redirected)", pci.EnabledNames(rest))
		}
		v.Bypass += "; untranslated requests (mlx5 translates only dma-buf registrations with relaxed ordering: GDR_MR=dmabuf) are still redirected"
	}
	return v
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
