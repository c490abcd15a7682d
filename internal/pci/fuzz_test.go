package pci

import (
	"errors"
	"testing"

	"github.com/gdrconf/gdrconf/internal/pci/cfgbuild"
)

// FuzzParseConfig: any byte string gives a config or an error, never a panic
// or a hang (capability loops), and what it returns is self-consistent.
func FuzzParseConfig(f *testing.F) {
	f.Add(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x1000, Device: 0xc010, Class: 0x060400, Bridge: true,
		PortType: TypeDownstream, MaxSpeedEnc: 5, MaxWidth: 16, CurSpeedEnc: 5, CurWidth: 16, ACS: true, ACSCtrl: 0x1d}))
	f.Add(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x2335, Class: 0x030200, Size: 256}))
	f.Add(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x2335, Class: 0x030200, Size: 64}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if len(b) < HeaderSize {
			if err == nil || c != nil {
				t.Fatalf("%d bytes: want a truncation error", len(b))
			}
			return
		}
		if c == nil {
			t.Fatalf("%d bytes: header fields not returned (err %v)", len(b), err)
		}
		if len(b) < StdSize && c.VendorID != 0xffff && !errors.Is(err, ErrNeedRoot) {
			t.Fatalf("%d bytes: want ErrNeedRoot, got %v", len(b), err)
		}
		if c.ACS != nil && (c.ACS.Offset < 0x100 || c.ACS.Offset+8 > len(b)) {
			t.Fatalf("ACS offset %#x outside the image", c.ACS.Offset)
		}
		if c.PCIe != nil && (c.PCIe.Offset < HeaderSize || c.PCIe.Offset+0x14 > StdSize) {
			t.Fatalf("PCIe offset %#x outside the standard space", c.PCIe.Offset)
		}
		if len(c.Caps) > 48 || len(c.ExtCaps) > (ExtendedSize-0x100)/4 {
			t.Fatalf("more capabilities than the space can hold: %d/%d", len(c.Caps), len(c.ExtCaps))
		}
	})
}

// FuzzParseAttr: the sysfs attribute parsers take any string without panic.
func FuzzParseAttr(f *testing.F) {
	for _, s := range []string{"32.0 GT/s PCIe", "8.0 GT/s", "Unknown", "16", "-1", "0x10de", "0x030200", "", "NaN GT/s", "1e309 GT/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseSpeed(s); err == nil && (v < 0 || v != v || v > 1000) {
			t.Fatalf("ParseSpeed(%q) = %v without error", s, v)
		}
		if v, err := ParseWidth(s); err == nil && (v < 0 || v > 32) {
			t.Fatalf("ParseWidth(%q) = %v without error", s, v)
		}
		if v, err := ParseNUMA(s); err == nil && v < -1 {
			t.Fatalf("ParseNUMA(%q) = %v without error", s, v)
		}
		if v, err := ParseHex(s, 16); err == nil && v > 0xffff {
			t.Fatalf("ParseHex(%q, 16) = %#x without error", s, v)
		}
		if root, chain, err := SplitPath(s); err == nil {
			if root == "" || len(chain) == 0 {
				t.Fatalf("SplitPath(%q) = %q %q without error", s, root, chain)
			}
			for _, c := range chain {
				if !IsBDF(c) {
					t.Fatalf("SplitPath(%q): %q in chain", s, c)
				}
			}
		}
	})
}
