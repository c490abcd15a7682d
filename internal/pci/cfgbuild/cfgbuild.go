// Package cfgbuild writes PCI configuration space images with a real
// capability chain (power management, PCIe, MSI-X; extended: AER, ACS), for
// constructed fixture trees and parser tests. It is the inverse of
// pci.ParseConfig for the fields the suite reads.
package cfgbuild

import "encoding/binary"

// Spec describes one function's config space.
type Spec struct {
	Vendor, Device uint16
	Class          uint32 // 0xBBSSPP
	Bridge         bool   // type 1 header
	PortType       int    // PCIe device/port type (pci.Type*)
	MaxSpeedEnc    int    // Link Capabilities speed encoding: 1=2.5 ... 5=32 GT/s
	MaxWidth       int
	CurSpeedEnc    int
	CurWidth       int
	ACS            bool   // add an ACS extended capability
	ACSCap         uint16 // ACS Capability register
	ACSCtrl        uint16 // ACS Control register
	Size           int    // image size: 64, 256 or 4096 (0 = 4096)
}

// Build returns the image.
func Build(s Spec) []byte {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint16(b[0:], s.Vendor)
	le.PutUint16(b[2:], s.Device)
	le.PutUint16(b[4:], 0x0547)       // command: io, mem, bus master, parity, serr
	le.PutUint16(b[6:], 0x0010)       // status: capabilities list
	le.PutUint32(b[8:], s.Class<<8|1) // revision 1
	b[0x0e] = 0
	if s.Bridge {
		b[0x0e] = 1
	}
	b[0x34] = 0x40
	// 0x40: power management -> 0x50
	b[0x40], b[0x41] = 0x01, 0x50
	le.PutUint16(b[0x42:], 0x0003)
	// 0x50: MSI-X -> 0x60 (an MSI capability on bridges would do as well)
	b[0x50], b[0x51] = 0x11, 0x60
	// 0x60: PCI Express, end of list
	p := 0x60
	b[p], b[p+1] = 0x10, 0x00
	le.PutUint16(b[p+2:], uint16(s.PortType&0xf)<<4|0x2) // version 2
	le.PutUint32(b[p+0x0c:], uint32(s.MaxSpeedEnc&0xf)|uint32(s.MaxWidth&0x3f)<<4)
	le.PutUint16(b[p+0x12:], uint16(s.CurSpeedEnc&0xf)|uint16(s.CurWidth&0x3f)<<4)
	// Extended: 0x100 AER (id 1, v2) -> 0x148 ACS (id 0xd, v1) or end.
	next := 0
	if s.ACS {
		next = 0x148
	}
	le.PutUint32(b[0x100:], 0x0001|2<<16|uint32(next)<<20)
	if s.ACS {
		le.PutUint32(b[0x148:], 0x000d|1<<16)
		le.PutUint16(b[0x14c:], s.ACSCap)
		le.PutUint16(b[0x14e:], s.ACSCtrl)
	}
	size := s.Size
	if size == 0 {
		size = 4096
	}
	return b[:size]
}
