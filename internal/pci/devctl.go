package pci

import (
	"fmt"
	"strings"
)

// Device Capabilities / Control bits (PCIe Base Specification, PCI Express
// Capability structure: Device Capabilities, Device Control, Device
// Capabilities 2, Device Control 2 registers; the same bits as Linux's
// include/uapi/linux/pci_regs.h PCI_EXP_DEVCAP*, PCI_EXP_DEVCTL*).
const (
	DevCapPayload      = 0x00000007 // Max_Payload_Size Supported
	DevCapExtTag       = 0x00000020 // Extended Tag Field Supported (8-bit tags)
	DevCtlRelaxedOrder = 0x0010     // Enable Relaxed Ordering
	DevCtlPayload      = 0x00e0     // Max_Payload_Size
	DevCtlExtTag       = 0x0100     // Extended Tag Field Enable
	DevCtlNoSnoop      = 0x0800     // Enable No Snoop
	DevCtlReadRequest  = 0x7000     // Max_Read_Request_Size
	DevCap2TenBitComp  = 0x00010000 // 10-Bit Tag Completer Supported
	DevCap2TenBitReq   = 0x00020000 // 10-Bit Tag Requester Supported
	DevCtl2TenBitReq   = 0x1000     // 10-Bit Tag Requester Enable
	ATSCtrlEnable      = 0x8000     // ATS Control: Enable
)

// sizeEnc decodes the 3-bit size encoding of Max_Payload_Size and
// Max_Read_Request_Size: 128 << n bytes for n = 0..5; 6 and 7 are reserved.
func sizeEnc(n int) (int, bool) {
	if n < 0 || n > 5 {
		return 0, false
	}
	return 128 << n, true
}

// MaxPayloadSupported is Max_Payload_Size Supported in bytes (false for a
// reserved encoding).
func (p *PCIeCap) MaxPayloadSupported() (int, bool) { return sizeEnc(int(p.DevCap & DevCapPayload)) }

// MaxPayload is the programmed Max_Payload_Size in bytes.
func (p *PCIeCap) MaxPayload() (int, bool) { return sizeEnc(int(p.DevCtl&DevCtlPayload) >> 5) }

// MaxReadRequest is the programmed Max_Read_Request_Size in bytes.
func (p *PCIeCap) MaxReadRequest() (int, bool) { return sizeEnc(int(p.DevCtl&DevCtlReadRequest) >> 12) }

// RelaxedOrdering reports Enable Relaxed Ordering: the function may set the
// Relaxed Ordering attribute on the requests it issues.
func (p *PCIeCap) RelaxedOrdering() bool { return p.DevCtl&DevCtlRelaxedOrder != 0 }

// NoSnoop reports Enable No Snoop.
func (p *PCIeCap) NoSnoop() bool { return p.DevCtl&DevCtlNoSnoop != 0 }

// ExtTagSupported reports 8-bit Tag support.
func (p *PCIeCap) ExtTagSupported() bool { return p.DevCap&DevCapExtTag != 0 }

// ExtTag reports Extended Tag Field Enable (8-bit tags: 256 outstanding
// non-posted requests instead of 32).
func (p *PCIeCap) ExtTag() bool { return p.DevCtl&DevCtlExtTag != 0 }

// TenBitCompleter reports 10-Bit Tag Completer Supported.
func (p *PCIeCap) TenBitCompleter() bool { return p.Has2 && p.DevCap2&DevCap2TenBitComp != 0 }

// TenBitRequesterSupported reports 10-Bit Tag Requester Supported.
func (p *PCIeCap) TenBitRequesterSupported() bool { return p.Has2 && p.DevCap2&DevCap2TenBitReq != 0 }

// TenBitRequester reports 10-Bit Tag Requester Enable.
func (p *PCIeCap) TenBitRequester() bool { return p.Has2 && p.DevCtl2&DevCtl2TenBitReq != 0 }

// ATS is the Address Translation Services extended capability.
type ATS struct {
	Offset int
	Cap    uint16 // ATS Capability register (+4)
	Ctrl   uint16 // ATS Control register (+6)
}

// Enabled reports the ATS Control Enable bit.
func (a ATS) Enabled() bool { return a.Ctrl&ATSCtrlEnable != 0 }

// SmallestTranslationUnit is the STU field: translations are at least 4096 << STU bytes.
func (a ATS) SmallestTranslationUnit() int { return int(a.Ctrl & 0x1f) }

// Settings is what one function's config space says about the settings that
// shape peer-to-peer traffic, decoded for reports.
type Settings struct {
	MaxPayload, MaxPayloadSupported int // bytes; 0 = reserved encoding
	MaxReadRequest                  int // bytes; 0 = reserved encoding
	RelaxedOrdering, NoSnoop        bool
	ExtTagSupported, ExtTag         bool
	Has2                            bool // the 10-bit tag fields below were readable
	TenBitCompleter                 bool
	TenBitRequesterSupported        bool
	TenBitRequester                 bool
	ATS                             bool // ATS capability present
	ATSEnabled                      bool
}

// Settings decodes the function's settings. ok is false when the PCIe
// capability was not readable (no config space, a 64-byte unprivileged
// read, or a conventional PCI function).
func (c *Config) Settings() (s Settings, ok bool) {
	if c == nil || c.PCIe == nil {
		return s, false
	}
	p := c.PCIe
	s.MaxPayload, _ = p.MaxPayload()
	s.MaxPayloadSupported, _ = p.MaxPayloadSupported()
	s.MaxReadRequest, _ = p.MaxReadRequest()
	s.RelaxedOrdering, s.NoSnoop = p.RelaxedOrdering(), p.NoSnoop()
	s.ExtTagSupported, s.ExtTag = p.ExtTagSupported(), p.ExtTag()
	s.Has2 = p.Has2
	s.TenBitCompleter, s.TenBitRequesterSupported, s.TenBitRequester = p.TenBitCompleter(), p.TenBitRequesterSupported(), p.TenBitRequester()
	if c.ATS != nil {
		s.ATS, s.ATSEnabled = true, c.ATS.Enabled()
	}
	return s, true
}

func pm(b bool) string {
	if b {
		return "+"
	}
	return "-"
}

func sizeStr(v int) string {
	if v == 0 {
		return "reserved"
	}
	return fmt.Sprint(v)
}

// String is lspci-like: "MaxPayload 256 (max 512) MaxReadReq 4096 RlxdOrd+ NoSnoop+ ExtTag+ 10BitTagReq- 10BitTagComp+ ATS- ".
func (s Settings) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "MaxPayload %s (max %s) MaxReadReq %s RlxdOrd%s NoSnoop%s ExtTag%s",
		sizeStr(s.MaxPayload), sizeStr(s.MaxPayloadSupported), sizeStr(s.MaxReadRequest), pm(s.RelaxedOrdering), pm(s.NoSnoop), pm(s.ExtTag))
	if !s.ExtTagSupported {
		b.WriteString("(unsupported)")
	}
	if s.Has2 {
		fmt.Fprintf(&b, " 10BitTagReq%s", pm(s.TenBitRequester))
		if !s.TenBitRequesterSupported {
			b.WriteString("(unsupported)")
		}
		fmt.Fprintf(&b, " 10BitTagComp%s", pm(s.TenBitCompleter))
	}
	switch {
	case !s.ATS:
		b.WriteString(" ATS(none)")
	default:
		fmt.Fprintf(&b, " ATS%s", pm(s.ATSEnabled))
	}
	return b.String()
}
