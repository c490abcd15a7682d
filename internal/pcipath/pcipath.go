// Package pcipath judges the PCIe settings of the functions on a GPU<->NIC
// peer-to-peer path: Max_Payload_Size, Max_Read_Request_Size, Relaxed
// Ordering, Extended and 10-bit tags, ATS. Each rule names where it comes
// from; a rule fails only where the specification makes the setting wrong
// (a TLP the receiver must reject), warns where vendors document a
// performance cost, and otherwise reports.
package pcipath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Role of a function on the path.
type Role string

const (
	GPU    Role = "GPU"
	NIC    Role = "NIC"
	Bridge Role = "bridge"
)

// Member is one function on the path.
type Member struct {
	Dev  *pci.Device
	Role Role
}

// Path is GPU first, the bridges between in order, then the NIC. Without a
// NIC (a GPU-only host) it is the GPU and the bridges above it.
type Path []Member

// The levels of this package's findings (verdict.Finding). A setting
// that could not be read is a Fail-level finding whose outcome is absent
// (Result.Unread): nothing was judged.
const (
	Report = verdict.Info // facts, nothing wrong
	Warn   = verdict.Warn // a documented performance cost; does not fail
	Fail   = verdict.Fail // a setting the specification makes wrong for this path
)

// Rule identifies a check, with its source.
type Rule struct {
	ID     string
	What   string
	Source string
}

// The rules. Their sources are what the manual (docs/) and the requirement texts cite.
var (
	RuleReadable = Rule{"readable", "the PCI Express capability must be readable to judge the settings",
		"Linux returns config space beyond 64 bytes to CAP_SYS_ADMIN only"}
	RuleMPSSupported = Rule{"mps-supported", "Max_Payload_Size must not exceed the function's Max_Payload_Size Supported, and must be a defined encoding",
		"PCIe Base Specification, Device Control register: Max_Payload_Size (software must not program a value above Max_Payload_Size Supported; encodings 110b and 111b are reserved)"}
	RuleMPSPath = Rule{"mps-path", "a TLP of the sender's Max_Payload_Size must be accepted by every function it crosses and by the receiver: no endpoint's MaxPayload may exceed that of any other function on the peer-to-peer path",
		"PCIe Base Specification 2.2.2 (a TLP's data payload must not exceed the receiver's Max_Payload_Size; a receiver treats a violation as a Malformed TLP); Linux Documentation/admin-guide/kernel-parameters.txt, pci=pcie_bus_peer2peer (one MPS everywhere is what allows peer-to-peer DMA between any pair of devices) and pcie_bus_perf (per-parent MPS, not safe for peer-to-peer)"}
	RuleMRRS = Rule{"mrrs", "Max_Read_Request_Size is per function and limits only the reads it issues: reported, with reserved encodings failed",
		"PCIe Base Specification, Device Control register: Max_Read_Request_Size"}
	RuleRelaxedOrdering = Rule{"relaxed-ordering", "the NIC may issue Relaxed Ordering writes only with Enable Relaxed Ordering set; mlx5 uses it for memory registered with IBV_ACCESS_RELAXED_ORDERING, which NCCL requests (NCCL_IB_PCI_RELAXED_ORDERING)",
		"Linux commit 17347d5430c4 'net/mlx5e: Add support for PCI relaxed ordering' (RO gated on pcie_relaxed_ordering_enabled(), i.e. this bit; 10 -> 40 GB/s on an ARM host), commit d6de0bb1850f 'RDMA/mlx5: Set relaxed ordering when requested'; the kernel clears the bit below root complexes with broken RO (PCI_DEV_FLAGS_NO_RELAXED_ORDERING quirks)"}
	RuleExtTag = Rule{"ext-tag", "with Extended Tag Field Enable clear a requester has 32 outstanding reads instead of 256, which caps read bandwidth on fast links",
		"PCIe Base Specification, Device Control: Extended Tag Field Enable; Linux pci_configure_extended_tags() enables it wherever supported unless the host bridge has no_ext_tags"}
	RuleTenBitTag = Rule{"10bit-tag", "a requester must not send 10-bit-tag requests to a completer that does not support them; for requests to another endpoint only an implementation-specific mechanism may decide",
		"PCIe Base Specification 4.0+ 2.2.6.2 (10-Bit Tag rules); the Linux P2PDMA check proposed on linux-pci in 2021 refuses peer-to-peer between a 10-bit requester and a peer without 10-Bit Tag Completer"}
	RuleVF = Rule{"vf", "a virtual function's Max_Payload_Size, Max_Read_Request_Size, Relaxed Ordering, Extended Tag, No Snoop and 10-Bit Tag Requester enables are reserved (they read 0: 128 B, all off) and its PF's govern: judged on the PF where it is visible, reported otherwise, never failed",
		"PCI-SIG Single Root I/O Virtualization and Sharing Specification, PCI Express Capability changes for VFs (Device Control and Device Control 2 fields RsvdP, PCIe Base Specification 9.3.5); Linux drivers/pci/probe.c pci_configure_mps() (MPS and MRRS are RsvdP for VFs: it leaves them alone)"}
	RuleATS = Rule{"ats", "ATS lets the NIC cache IOMMU translations (and, with ACS Direct Translated P2P, send translated peer-to-peer requests straight across a switch); reported",
		"PCIe Base Specification, Address Translation Services chapter"}
)

// finding is one judged setting of the function bdf under rule r: the
// rule's ID and its source travel with it (verdict.Finding Rule, Source).
func finding(r Rule, bdf string, l verdict.Level, remedy, format string, args ...any) verdict.Finding {
	return verdict.Finding{Level: l, Rule: r.ID, Source: r.Source, Device: bdf, Remedy: remedy, Cause: fmt.Sprintf(format, args...)}
}

// Result is the settings of every readable member and the findings.
type Result struct {
	Settings map[string]pci.Settings // by BDF
	Findings []verdict.Finding
	// HeaderOnly are the functions whose config file gave only its 64-byte
	// header (pci.ErrNeedRoot): a capability, not the device, is what is
	// missing.
	HeaderOnly []string
}

// Worst is the most severe level among the judged findings (Report if
// none); Unread says whether settings went unread.
func (r Result) Worst() verdict.Level {
	w := Report
	for _, f := range r.Findings {
		if f.Kind() != verdict.Absent && f.Level.AtLeast(w) {
			w = f.Level
		}
	}
	return w
}

// Of returns the judged findings of level l.
func (r Result) Of(l verdict.Level) []verdict.Finding {
	var out []verdict.Finding
	for _, f := range r.Findings {
		if f.Level == l && f.Kind() != verdict.Absent {
			out = append(out, f)
		}
	}
	return out
}

// Unread returns the findings of settings that could not be read.
func (r Result) Unread() []verdict.Finding {
	var out []verdict.Finding
	for _, f := range r.Findings {
		if f.Kind() == verdict.Absent {
			out = append(out, f)
		}
	}
	return out
}

func name(m Member) string { return fmt.Sprintf("%s %s", m.Role, m.Dev.BDF) }

// Check judges the path.
func Check(p Path) Result {
	res := Result{Settings: map[string]pci.Settings{}}
	add := func(f verdict.Finding) { res.Findings = append(res.Findings, f) }
	var ok []Member
	for _, m := range p {
		if m.Dev.IsVF() {
			// Reserved fields read as 128 B and all off: judging them
			// would fail a working function (conformance/topology judges the
			// PF instead where it is visible).
			add(finding(RuleVF, m.Dev.BDF, Report, "",
				"%s is an SR-IOV virtual function%s: MaxPayload, MaxReadReq, Relaxed Ordering, Extended Tags and 10-bit tags not reported by a virtual function (reserved; the PF's settings govern and the PF is not visible here)", name(m), vfOf(m.Dev)))
			continue
		}
		s, readable := m.Dev.Config.Settings()
		if !readable {
			why := "no PCI Express capability"
			if m.Dev.ConfigErr != nil {
				why = m.Dev.ConfigErr.Error()
			}
			header := errors.Is(m.Dev.ConfigErr, pci.ErrNeedRoot)
			if header {
				why = "only the 64-byte header is readable (the kernel returns more only to CAP_SYS_ADMIN)"
			}
			f := finding(RuleReadable, m.Dev.BDF, Fail, "", "%s: settings not checked: %s", name(m), why)
			f.Outcome = verdict.Absent
			add(f)
			if header {
				res.HeaderOnly = append(res.HeaderOnly, m.Dev.BDF)
			}
			continue
		}
		res.Settings[m.Dev.BDF] = s
		ok = append(ok, m)
		if s.MaxPayload == 0 || s.MaxPayloadSupported == 0 || s.MaxPayload > s.MaxPayloadSupported {
			add(finding(RuleMPSSupported, m.Dev.BDF, Fail, "the firmware or kernel programmed an invalid MaxPayload: update the BIOS, or boot with pci=pcie_bus_safe",
				"%s: MaxPayload %s with MaxPayload Supported %s (Device Control %#04x, Device Capabilities %#08x)",
				name(m), size(s.MaxPayload), size(s.MaxPayloadSupported), m.Dev.Config.PCIe.DevCtl, m.Dev.Config.PCIe.DevCap))
		}
		if s.MaxReadRequest == 0 {
			add(finding(RuleMRRS, m.Dev.BDF, Fail, "update the BIOS or the device firmware; setpci can set a valid size",
				"%s: Max_Read_Request_Size uses a reserved encoding (Device Control %#04x)", name(m), m.Dev.Config.PCIe.DevCtl))
		}
	}
	mpsPath(ok, add)
	endpoints(ok, add)
	return res
}

// vfOf is " of <PF>" for a VF whose PF sysfs links.
func vfOf(d *pci.Device) string {
	if d.PhysFn == "" {
		return ""
	}
	return " of " + d.PhysFn
}

func size(v int) string {
	if v == 0 {
		return "(reserved encoding)"
	}
	return fmt.Sprintf("%d B", v)
}

// mpsPath: every endpoint's payload must fit every other function on the path.
func mpsPath(ms []Member, add func(verdict.Finding)) {
	for _, e := range ms {
		if e.Role == Bridge {
			continue
		}
		se, _ := e.Dev.Config.Settings()
		if se.MaxPayload == 0 {
			continue
		}
		var small []string
		for _, o := range ms {
			if o.Dev == e.Dev {
				continue
			}
			so, _ := o.Dev.Config.Settings()
			if so.MaxPayload != 0 && so.MaxPayload < se.MaxPayload {
				small = append(small, fmt.Sprintf("%s (%d B)", name(o), so.MaxPayload))
			}
		}
		if len(small) == 0 {
			continue
		}
		add(finding(RuleMPSPath, e.Dev.BDF, Fail, "give every function on the path one MaxPayload: boot with pci=pcie_bus_safe (or pcie_bus_peer2peer) instead of pcie_bus_perf, or set it in the BIOS",
			"%s sends TLPs of up to %d B (MaxPayload), more than %s on its path accepts: its peer-to-peer writes and read completions arrive as Malformed TLPs",
			name(e), se.MaxPayload, strings.Join(small, ", ")))
	}
}

// endpoints: Relaxed Ordering, Extended Tags and 10-bit tags of the GPU and
// the NIC, ATS reported.
func endpoints(ms []Member, add func(verdict.Finding)) {
	var gpu, nic *Member
	for i := range ms {
		switch ms[i].Role {
		case GPU:
			gpu = &ms[i]
		case NIC:
			nic = &ms[i]
		}
	}
	for _, e := range []*Member{gpu, nic} {
		if e == nil {
			continue
		}
		s, _ := e.Dev.Config.Settings()
		if s.ExtTagSupported && !s.ExtTag {
			add(finding(RuleExtTag, e.Dev.BDF, Warn, fmt.Sprintf("check the BIOS and the kernel (a no_ext_tags quirk of the host bridge?); setpci -s %s CAP_EXP+8.w=0100:0100 enables it until reboot", e.Dev.BDF),
				"%s supports Extended Tags but has them disabled: at most 32 outstanding reads", name(*e)))
		}
		if s.ATS {
			add(finding(RuleATS, e.Dev.BDF, Report, "",
				"%s has ATS, %s", name(*e), map[bool]string{true: "enabled", false: "disabled"}[s.ATSEnabled]))
		}
	}
	if nic != nil {
		s, _ := nic.Dev.Config.Settings()
		if !s.RelaxedOrdering {
			add(finding(RuleRelaxedOrdering, nic.Dev.BDF, Warn, fmt.Sprintf("unless the kernel cleared it for a root complex with broken Relaxed Ordering (dmesg), enable it: setpci -s %s CAP_EXP+8.w=0010:0010, and check the BIOS's PCIe Relaxed Ordering option", nic.Dev.BDF),
				"%s has Relaxed Ordering disabled: relaxed-ordering memory registrations (NCCL's default where supported) fall back to strict ordering, which limits GPUDirect RDMA bandwidth on some platforms", name(*nic)))
		}
	}
	if gpu != nil && nic != nil {
		tenBit(*nic, *gpu, add)
		tenBit(*gpu, *nic, add)
	}
}

func tenBit(req, comp Member, add func(verdict.Finding)) {
	sr, _ := req.Dev.Config.Settings()
	sc, _ := comp.Dev.Config.Settings()
	if !sr.TenBitRequester || !sc.Has2 || sc.TenBitCompleter {
		return
	}
	add(finding(RuleTenBitTag, req.Dev.BDF, Warn, fmt.Sprintf("if peer-to-peer reads fail (AER UnxCmplt/CmpltTO), clear 10-Bit Tag Requester Enable: setpci -s %s CAP_EXP+28.w=0000:1000", req.Dev.BDF),
		"%s has 10-Bit Tag Requester enabled but %s does not support 10-Bit Tag Completer: unless %s limits itself for peer-to-peer requests, its reads of the peer can fail",
		name(req), name(comp), req.Dev.BDF))
}
