package pci

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// NormalizeAddr is the one reader of PCI addresses as users and drivers
// write them: it returns sysfs's lowercase dddd:bb:dd.f. It accepts any
// case and surrounding space, a domain of 1 to 8 hex digits up to ffff or
// none ("0000:3B:00.0" from CUDA, "00000000:3B:00.0" from NVML, "3b:00.0"
// from lspci), and fields of any width up to bus ff, device 1f, function 7.
// Anything else is an error that quotes the value.
func NormalizeAddr(s string) (string, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	var dom, bus, devfn string
	switch len(parts) {
	case 2:
		dom, bus, devfn = "0", parts[0], parts[1]
	case 3:
		dom, bus, devfn = parts[0], parts[1], parts[2]
	default:
		return "", fmt.Errorf("PCI address %s: want dddd:bb:dd.f", clip.Quote(orig))
	}
	df := strings.Split(devfn, ".")
	if len(df) != 2 {
		return "", fmt.Errorf("PCI address %s: want dddd:bb:dd.f", clip.Quote(orig))
	}
	parse := func(h string, max uint64) (uint64, bool) {
		if h == "" || len(h) > 8 {
			return 0, false
		}
		v, err := strconv.ParseUint(h, 16, 32)
		return v, err == nil && v <= max
	}
	d, ok1 := parse(dom, 0xffff)
	b, ok2 := parse(bus, 0xff)
	dv, ok3 := parse(df[0], 0x1f)
	fn, ok4 := parse(df[1], 0x7)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", fmt.Errorf("PCI address %s: a field is out of range (domain <= ffff, bus <= ff, device <= 1f, function <= 7)", clip.Quote(orig))
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, dv, fn), nil
}
