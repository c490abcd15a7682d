package pci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Sizes of PCI configuration space as the kernel exposes it in the `config` file.
const (
	HeaderSize   = 64   // what an unprivileged read returns
	StdSize      = 256  // conventional PCI
	ExtendedSize = 4096 // PCIe extended configuration space
)

// ErrNeedRoot says the config file gave only the 64-byte header: the kernel
// returns more only to CAP_SYS_ADMIN, so the capability lists are unreadable.
var ErrNeedRoot = errors.New("extended config not readable (need root)")

// Capability IDs the suite looks at.
const (
	CapIDPCIe   = 0x10   // PCI Express capability (standard list)
	ExtCapIDACS = 0x000D // Access Control Services (extended list)
	ExtCapIDATS = 0x000F // Address Translation Services (extended list)
)

// PCIe device/port types (PCIe capability register bits 7:4).
const (
	TypeEndpoint       = 0x0
	TypeLegacyEndpoint = 0x1
	TypeRootPort       = 0x4
	TypeUpstream       = 0x5
	TypeDownstream     = 0x6
	TypePCIeToPCI      = 0x7
	TypePCIToPCIe      = 0x8
	TypeRCEndpoint     = 0x9
	TypeRCEventColl    = 0xa
)

// PortTypeName names a PCIe device/port type for messages.
func PortTypeName(t int) string {
	switch t {
	case TypeEndpoint:
		return "endpoint"
	case TypeLegacyEndpoint:
		return "legacy endpoint"
	case TypeRootPort:
		return "root port"
	case TypeUpstream:
		return "switch upstream port"
	case TypeDownstream:
		return "switch downstream port"
	case TypePCIeToPCI:
		return "PCIe-to-PCI bridge"
	case TypePCIToPCIe:
		return "PCI-to-PCIe bridge"
	case TypeRCEndpoint:
		return "root complex integrated endpoint"
	case TypeRCEventColl:
		return "root complex event collector"
	}
	return fmt.Sprintf("port type %#x", t)
}

// Cap is one entry of a capability list.
type Cap struct {
	ID      uint16
	Version uint8 // extended capabilities only
	Offset  int
}

// PCIeCap is the part of the PCI Express capability the suite uses.
type PCIeCap struct {
	Offset     int
	PortType   int     // TypeEndpoint, TypeRootPort, ...
	LinkCapGTs float64 // max speed from Link Capabilities (0 = unknown encoding)
	LinkCapW   int
	LinkStaGTs float64 // current speed from Link Status
	LinkStaW   int

	// Version is the capability's version (bits 3:0 of its register):
	// Device Capabilities 2 and Device Control 2 exist from version 2 on.
	Version int
	DevCap  uint32 // Device Capabilities (offset +0x04)
	DevCtl  uint16 // Device Control (+0x08)
	// Has2 reports whether DevCap2 and DevCtl2 were read (version >= 2).
	Has2    bool
	DevCap2 uint32 // Device Capabilities 2 (+0x24)
	DevCtl2 uint16 // Device Control 2 (+0x28)
}

// ACS control/capability bits (PCIe base spec, ACS Capability and Control registers).
const (
	ACSSV = 1 << 0 // Source Validation
	ACSTB = 1 << 1 // Translation Blocking
	ACSRR = 1 << 2 // P2P Request Redirect
	ACSCR = 1 << 3 // P2P Completion Redirect
	ACSUF = 1 << 4 // Upstream Forwarding
	ACSEC = 1 << 5 // P2P Egress Control
	ACSDT = 1 << 6 // Direct Translated P2P
)

// ACSP2PBlocking are the bits that send peer-to-peer traffic up to the root
// complex (or block it) instead of letting a switch route it directly.
const ACSP2PBlocking = ACSRR | ACSCR | ACSUF | ACSEC

// ACS is the Access Control Services extended capability.
type ACS struct {
	Offset int
	Cap    uint16 // ACS Capability register (offset +4)
	Ctrl   uint16 // ACS Control register (offset +6)
}

// CtrlOffset is the offset of the control register in config space, for setpci.
func (a ACS) CtrlOffset() int { return a.Offset + 6 }

// Blocking returns the enabled control bits that break direct P2P.
func (a ACS) Blocking() uint16 { return a.Ctrl & ACSP2PBlocking }

// ACSBits decodes ACS bits as "SV+ TB- RR+ ..." like lspci.
func ACSBits(v uint16) string {
	names := []string{"SV", "TB", "RR", "CR", "UF", "EC", "DT"}
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n)
		if v&(1<<i) != 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// EnabledNames lists the names of the set bits among SV..DT ("RR,CR").
func EnabledNames(v uint16) string {
	names := []string{"SV", "TB", "RR", "CR", "UF", "EC", "DT"}
	var out []string
	for i, n := range names {
		if v&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// Config is a parsed configuration space.
type Config struct {
	Size       int // bytes the file held
	VendorID   uint16
	DeviceID   uint16
	ClassCode  uint32 // base<<16 | sub<<8 | prog-if
	HeaderType uint8  // low 7 bits: 0 endpoint, 1 PCI-PCI bridge, 2 CardBus
	Caps       []Cap
	PCIe       *PCIeCap
	ExtCaps    []Cap
	ACS        *ACS
	ATS        *ATS
}

// Extended reports whether the extended (PCIe) space was readable.
func (c *Config) Extended() bool { return c.Size >= ExtendedSize }

// linkSpeedGTs maps the Link Capabilities/Status speed encoding to GT/s.
func linkSpeedGTs(enc uint32) float64 {
	switch enc {
	case 1:
		return 2.5
	case 2:
		return 5
	case 3:
		return 8
	case 4:
		return 16
	case 5:
		return 32
	case 6:
		return 64
	case 7:
		return 128
	}
	return 0
}

// ParseConfig parses a config space image. An image of fewer than 64 bytes is
// an error (truncated). An image of 64..255 bytes carries only the header: the
// header fields are returned together with ErrNeedRoot (wrapped), because an
// unprivileged read of the kernel's config file stops at 64 bytes. Malformed
// capability lists (pointers out of range or into the header, loops) are
// errors naming the offset.
func ParseConfig(b []byte) (*Config, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("config space truncated: %d bytes, want at least %d", len(b), HeaderSize)
	}
	le := binary.LittleEndian
	c := &Config{
		Size:       len(b),
		VendorID:   le.Uint16(b[0:]),
		DeviceID:   le.Uint16(b[2:]),
		ClassCode:  le.Uint32(b[8:]) >> 8,
		HeaderType: b[0x0e] & 0x7f,
	}
	if c.VendorID == 0xffff {
		return c, fmt.Errorf("config space reads vendor 0xffff: device absent or not responding")
	}
	if len(b) < StdSize {
		return c, fmt.Errorf("config space is %d bytes: %w", len(b), ErrNeedRoot)
	}
	status := le.Uint16(b[0x06:])
	if status&0x10 != 0 { // Capabilities List bit
		ptrOff := 0x34
		if c.HeaderType == 2 {
			ptrOff = 0x14
		}
		seen := map[int]bool{}
		for off := int(b[ptrOff]) &^ 3; off != 0; {
			if off < HeaderSize || off+2 > StdSize {
				return c, fmt.Errorf("capability pointer %#x out of range (want 0x40..0xfc)", off)
			}
			if seen[off] {
				return c, fmt.Errorf("capability list loops back to offset %#x", off)
			}
			seen[off] = true
			id := b[off]
			c.Caps = append(c.Caps, Cap{ID: uint16(id), Offset: off})
			if id == CapIDPCIe && c.PCIe == nil {
				if off+0x14 > StdSize {
					return c, fmt.Errorf("PCIe capability at %#x runs past the end of config space", off)
				}
				lcap := le.Uint32(b[off+0x0c:])
				lsta := le.Uint16(b[off+0x12:])
				c.PCIe = &PCIeCap{
					Offset:     off,
					PortType:   int(b[off+2]>>4) & 0xf,
					LinkCapGTs: linkSpeedGTs(lcap & 0xf),
					LinkCapW:   int(lcap>>4) & 0x3f,
					LinkStaGTs: linkSpeedGTs(uint32(lsta) & 0xf),
					LinkStaW:   int(lsta>>4) & 0x3f,
					Version:    int(b[off+2]) & 0xf,
					DevCap:     le.Uint32(b[off+0x04:]),
					DevCtl:     le.Uint16(b[off+0x08:]),
				}
				// A version 2 capability is 0x3c bytes; one placed too
				// close to the end to hold the "2" registers has none.
				if c.PCIe.Version >= 2 && off+0x2a <= StdSize {
					c.PCIe.Has2 = true
					c.PCIe.DevCap2 = le.Uint32(b[off+0x24:])
					c.PCIe.DevCtl2 = le.Uint16(b[off+0x28:])
				}
			}
			off = int(b[off+1]) &^ 3
		}
	}
	if len(b) < ExtendedSize {
		// Conventional PCI (or a 256-byte image): no extended list to read.
		return c, nil
	}
	seen := map[int]bool{}
	for off := 0x100; off != 0; {
		if off < 0x100 || off+4 > ExtendedSize {
			return c, fmt.Errorf("extended capability pointer %#x out of range (want 0x100..0xffc)", off)
		}
		if seen[off] {
			return c, fmt.Errorf("extended capability list loops back to offset %#x", off)
		}
		seen[off] = true
		h := le.Uint32(b[off:])
		if h == 0 || h == 0xffffffff {
			break // no extended capabilities
		}
		id := uint16(h & 0xffff)
		c.ExtCaps = append(c.ExtCaps, Cap{ID: id, Version: uint8(h>>16) & 0xf, Offset: off})
		if id == ExtCapIDACS && c.ACS == nil {
			if off+8 > ExtendedSize {
				return c, fmt.Errorf("ACS capability at %#x runs past the end of config space", off)
			}
			c.ACS = &ACS{Offset: off, Cap: le.Uint16(b[off+4:]), Ctrl: le.Uint16(b[off+6:])}
		}
		if id == ExtCapIDATS && c.ATS == nil {
			if off+8 > ExtendedSize {
				return c, fmt.Errorf("ATS capability at %#x runs past the end of config space", off)
			}
			c.ATS = &ATS{Offset: off, Cap: le.Uint16(b[off+4:]), Ctrl: le.Uint16(b[off+6:])}
		}
		off = int(h>>20) &^ 3
	}
	return c, nil
}
