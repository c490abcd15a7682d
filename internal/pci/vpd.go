package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// VPD is a function's Vital Product Data (PCI Express Base Specification,
// "Vital Product Data" section): the identifier string and the read-only
// keywords. NICs carry their part number (PN), engineering change level
// (EC), serial (SN) and vendor fields (V0..VZ) there; NVIDIA ConnectX cards
// and most server NICs fill it, GPUs rarely.
type VPD struct {
	Name     string            `json:"name,omitempty"`     // identifier string (large resource tag 0x82)
	Keywords map[string]string `json:"keywords,omitempty"` // VPD-R keywords except RV, printable only
	// ChecksumOK is false when the RV checksum did not sum to zero: the
	// values were read but the card's VPD is damaged or was cut short.
	ChecksumOK bool `json:"checksum_ok"`
}

// PartNumber, Serial and EC are the keywords every vendor uses the same way.
func (v *VPD) PartNumber() string { return v.Keywords["PN"] }
func (v *VPD) Serial() string     { return v.Keywords["SN"] }
func (v *VPD) EC() string         { return v.Keywords["EC"] }

// ErrNoVPD is returned when the function has no vpd file (no VPD capability).
var ErrNoVPD = errors.New("no VPD")

// ErrVPDNotReadable is returned when the vpd file exists but the process may
// not read it: the kernel makes it mode 0600, so only root reads it.
var ErrVPDNotReadable = errors.New("VPD not readable (the kernel lets only root read it)")

// maxVPD is the largest VPD the format can address (15-bit address space).
const maxVPD = 32 << 10

// ReadVPD reads and parses the VPD of function bdf through root.
func ReadVPD(root *hostfs.Root, bdf string) (*VPD, error) {
	if !IsBDF(bdf) {
		return nil, fmt.Errorf("VPD: %q is not a PCI address", bdf)
	}
	p := DevicesDir + "/" + bdf + "/vpd"
	b, err := root.ReadFileMax(p, maxVPD)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ErrNoVPD
	case errors.Is(err, fs.ErrPermission):
		return nil, ErrVPDNotReadable
	case err != nil:
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	v, err := ParseVPD(b)
	if err != nil {
		return v, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// Resource tags of the VPD format.
const (
	tagIDString = 0x82 // large resource, item 0x02
	tagVPDR     = 0x90 // large resource, item 0x10: read-only keywords
	tagVPDW     = 0x91 // large resource, item 0x11: read-write keywords
	tagEnd      = 0x78 // small resource, item 0x0f, length 0
)

// ParseVPD parses a VPD image. It stops at the end tag; bytes after it
// (the kernel returns the whole addressable window on some devices, padded
// with 0xff or 0x00) are ignored. An image that is cut short or malformed
// returns what parsed before the fault with an error naming its offset.
func ParseVPD(b []byte) (*VPD, error) {
	v := &VPD{Keywords: map[string]string{}}
	sawR := false
	for off := 0; off < len(b); {
		tag := b[off]
		if tag&0x80 == 0 { // small resource
			if tag == tagEnd || tag&0xf8 == tagEnd {
				if !sawR {
					return v, errors.New("VPD has no read-only (VPD-R) section")
				}
				return v, nil
			}
			if tag == 0 || tag == 0xff {
				break // unprogrammed
			}
			off += 1 + int(tag&0x07)
			continue
		}
		if off+3 > len(b) {
			return v, fmt.Errorf("VPD cut short at offset %d: large resource header needs 3 bytes", off)
		}
		n := int(b[off+1]) | int(b[off+2])<<8
		start, end := off+3, off+3+n
		if end > len(b) {
			return v, fmt.Errorf("VPD cut short at offset %d: resource 0x%02x says %d bytes, %d remain", off, tag, n, len(b)-start)
		}
		switch tag {
		case tagIDString:
			v.Name = printable(b[start:end])
		case tagVPDR:
			sawR = true
			ok, err := parseKeywords(b, start, end, v.Keywords)
			v.ChecksumOK = ok
			if err != nil {
				return v, err
			}
		case tagVPDW: // writable scratch fields: not identity
		case 0xff:
			return v, fmt.Errorf("VPD unprogrammed at offset %d", off)
		}
		off = end
	}
	if !sawR {
		if len(b) == 0 {
			return v, errors.New("VPD is empty")
		}
		return v, errors.New("VPD has no read-only (VPD-R) section")
	}
	return v, errors.New("VPD has no end tag")
}

// parseKeywords reads the keywords of a VPD-R section b[start:end] into kw
// and checks RV: the sum of every byte from the image's start through RV's
// first data byte is zero.
func parseKeywords(b []byte, start, end int, kw map[string]string) (checksumOK bool, err error) {
	for off := start; off < end; {
		if off+3 > end {
			return checksumOK, fmt.Errorf("VPD keyword at offset %d cut short", off)
		}
		key := string(b[off : off+2])
		n := int(b[off+2])
		ds, de := off+3, off+3+n
		if de > end {
			return checksumOK, fmt.Errorf("VPD keyword %q at offset %d says %d bytes, %d remain", printable([]byte(key)), off, n, end-ds)
		}
		if key == "RV" {
			if n < 1 {
				return false, fmt.Errorf("VPD keyword RV at offset %d has no checksum byte", off)
			}
			var sum byte
			for _, c := range b[:ds+1] {
				sum += c
			}
			return sum == 0, nil // RV ends the section; what follows is reserved
		}
		if validKeyword(key) {
			if s := printable(b[ds:de]); s != "" {
				kw[key] = s
			}
		}
		off = de
	}
	return false, errors.New("VPD read-only section has no RV checksum")
}

func validKeyword(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// printable keeps the printable ASCII of a field, trimmed: VPD strings are
// padded with spaces or NULs, and a report must not carry control bytes.
func printable(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		if c >= 0x20 && c < 0x7f {
			s.WriteByte(c)
		}
	}
	return strings.TrimSpace(s.String())
}

// KeywordList is the keywords as "K=v" in key order, for messages.
func (v *VPD) KeywordList() []string {
	keys := make([]string, 0, len(v.Keywords))
	for k := range v.Keywords {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + v.Keywords[k]
	}
	return out
}
