// Package cfgbuild writes PCI configuration space images with a real
// capability chain (power management, PCIe, MSI-X; extended: AER, ACS, ATS), for
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

	// PCI Express capability registers written as given (0: all clear,
	// which decodes as 128-byte MaxPayload and MaxReadReq, nothing enabled).
	DevCap  uint32 // Device Capabilities
	DevCtl  uint16 // Device Control
	DevCap2 uint32 // Device Capabilities 2
	DevCtl2 uint16 // Device Control 2
	ATS     bool   // add an ATS extended capability
	ATSCap  uint16 // ATS Capability register
	ATSCtrl uint16 // ATS Control register
}

// DevCtl composes a Device Control value: payload and read request sizes
// in bytes (128..4096), Relaxed Ordering, Extended Tag and No Snoop enables.
func DevCtl(payload, readReq int, relaxed, extTag, noSnoop bool) uint16 {
	v := uint16(enc(payload))<<5 | uint16(enc(readReq))<<12
	if relaxed {
		v |= 0x0010
	}
	if extTag {
		v |= 0x0100
	}
	if noSnoop {
		v |= 0x0800
	}
	return v
}

// DevCap composes a Device Capabilities value: Max_Payload_Size Supported in
// bytes and Extended Tag Field Supported.
func DevCap(payloadSupported int, extTag bool) uint32 {
	v := uint32(enc(payloadSupported))
	if extTag {
		v |= 0x20
	}
	return v
}

// enc is the 3-bit size encoding of n bytes (128 << enc).
func enc(n int) int {
	e := 0
	for 128<<e < n && e < 7 {
		e++
	}
	return e
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
	le.PutUint32(b[p+0x04:], s.DevCap)
	le.PutUint16(b[p+0x08:], s.DevCtl)
	le.PutUint32(b[p+0x24:], s.DevCap2)
	le.PutUint16(b[p+0x28:], s.DevCtl2)
	// Extended: 0x100 AER (id 1, v2) -> 0x148 ACS (id 0xd, v1) -> 0x160 ATS
	// (id 0xf, v1), the ones present, in that order.
	var chain []int
	if s.ACS {
		chain = append(chain, 0x148)
	}
	if s.ATS {
		chain = append(chain, 0x160)
	}
	next := func(i int) uint32 {
		if i < len(chain) {
			return uint32(chain[i]) << 20
		}
		return 0
	}
	le.PutUint32(b[0x100:], 0x0001|2<<16|next(0))
	for i, off := range chain {
		switch off {
		case 0x148:
			le.PutUint32(b[0x148:], 0x000d|1<<16|next(i+1))
			le.PutUint16(b[0x14c:], s.ACSCap)
			le.PutUint16(b[0x14e:], s.ACSCtrl)
		case 0x160:
			le.PutUint32(b[0x160:], 0x000f|1<<16|next(i+1))
			le.PutUint16(b[0x164:], s.ATSCap)
			le.PutUint16(b[0x166:], s.ATSCtrl)
		}
	}
	size := s.Size
	if size == 0 {
		size = 4096
	}
	return b[:size]
}
