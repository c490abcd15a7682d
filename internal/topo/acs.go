package topo

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
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
	// For the finding's words: the port's type (pci.PortTypeName), the
	// NIC's RDMA device name, and the guest this host is ("" on bare
	// metal: a VM's switch ports are the hypervisor's to change).
	Type, NICName, Guest string
	// NICSwitch: the port belongs to a switch built into a NIC
	// (pci.Device.IsNICSwitchPort: ConnectX-8, BlueField-3), which the
	// host BIOS does not configure.
	NICSwitch bool
}

// ACSJudged is what one port does to the path's traffic.
type ACSJudged struct {
	// Redirect are the enabled controls that send the path's requests or
	// completions through the root complex: TOPO-03 fails on them.
	Redirect uint16
	// Bypassed are the controls DT overrides for the NIC's translated
	// requests (RR, EC), and Bypass says so as a fact ("" when DT does not
	// apply).
	Bypassed uint16
	Bypass   string
	// Finding is the redirect TOPO-03 fails on (nil when the port
	// redirects none of the path's traffic): the controls enabled, and
	// with DT set, why DT does not help this path; its remedy puts what
	// would make DT work first, then turning ACS redirect off.
	Finding *verdict.Finding
}

// JudgeACS is TOPO-03's rule for one port.
func JudgeACS(p ACSPort) ACSJudged {
	if p.ACS == nil {
		return ACSJudged{}
	}
	bl := p.ACS.Blocking()
	ctrl := p.ACS.Ctrl
	if bl == 0 {
		return ACSJudged{}
	}
	v := ACSJudged{Redirect: bl}
	if ctrl&pci.ACSDT == 0 {
		v.Finding = p.redirects(bl, "", "")
		return v
	}
	nic := p.NIC.ats()
	var noBypass, remedy string
	switch {
	case ctrl&pci.ACSTB != 0:
		noBypass = fmt.Sprintf("Direct Translated P2P (DT) is set on %s, but so is Translation Blocking (TB), which blocks translated requests and voids DT (PCIe Base Specification, ACS Control register)", p.BDF)
		remedy = fmt.Sprintf("clear ACS Translation Blocking on %s (Linux sets it with pci=noats and on external-facing or untrusted ports)", p.BDF)
	case nic != "enabled":
		noBypass = fmt.Sprintf("Direct Translated P2P (DT) is set on %s, but ATS is %s on NIC %s: its requests carry untranslated addresses, which DT does not cover, so Request Redirect still sends them to the root complex", p.BDF, nic, p.NIC.BDF)
		remedy = fmt.Sprintf("enable ATS on NIC %s (ConnectX: mlxconfig or mstconfig -d %s set ATS_ENABLED=true, then reboot the host; the IOMMU driver sets the ATS Enable bit when it translates the NIC's DMA)", p.NIC.BDF, p.NIC.BDF)
		if nic == "unknown" {
			remedy = fmt.Sprintf("run the suite as root so that NIC %s's ATS capability can be read", p.NIC.BDF)
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
		return v
	}
	v.Finding = p.redirects(bl, noBypass, remedy)
	return v
}

// redirects is the finding of port p redirecting the path's traffic with
// the controls bl; noBypass says why its DT bit does not help, and first
// what would ("" without DT). On a VM the port is the hypervisor's, so
// the remedy is its operator's; the guest's setpci changes only the
// emulated register.
func (p ACSPort) redirects(bl uint16, noBypass, first string) *verdict.Finding {
	remedy := fmt.Sprintf("setpci -s %s ECAP_ACS+0x6.w=0000 (as root; lasts until reboot), and disable ACS for the switch in the BIOS or with a boot-time script for a lasting fix", p.BDF)
	if p.NICSwitch {
		// rdma-core's kernel-boot/rdma_topo sets these ports' ACS with
		// setpci (cmd_setpci_acs) or Linux's pci=config_acs= argument
		// (cmd_write_grub_acs), whose flags run from bit 6 (DT) down to
		// bit 0 (SV), 'x' leaving a bit as it is (drivers/pci/pci.c
		// __pci_config_acs): x0000xx clears EC, UF, CR and RR.
		remedy = fmt.Sprintf("%s is a port of the PCIe switch built into the NIC (ConnectX-8 or BlueField-3), which the host BIOS does not configure: setpci -s %s ECAP_ACS+0x6.w=0000 (as root; lasts until reboot), and for a lasting fix the kernel argument pci=config_acs=x0000xx@%s (rdma-core's rdma_topo write-grub-acs writes the settings of the whole GPU/NIC topology)", p.BDF, p.BDF, p.BDF)
	}
	if p.Guest != "" {
		remedy = fmt.Sprintf("this host is a %s: the switch port is the hypervisor's, so have its operator (the cloud, or the VM host's administrator) turn ACS redirect off on the port it emulates and on the physical path; setpci -s %s in the guest changes only the emulated register", p.Guest, p.BDF)
	}
	why := ""
	if noBypass != "" {
		why, remedy = "; "+noBypass, first+"; or turn ACS redirect off instead: "+remedy
	}
	f := verdict.Failf(remedy, "%s %s between GPU %s and NIC %s has ACS %s enabled (control 0x%04x: %s): peer-to-peer traffic is redirected to the root complex%s",
		p.Type, p.BDF, p.GPU.BDF, p.NICName, pci.EnabledNames(bl), p.ACS.Ctrl, pci.ACSBits(p.ACS.Ctrl), why)
	f.Device, f.Part, f.Evidence = p.BDF, "host configuration", []string{"ACSCtl " + pci.ACSBits(p.ACS.Ctrl)}
	return f
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
