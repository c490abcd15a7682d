// Package pcie turns a PCIe link's sysfs description (speed in GT/s, width in
// lanes) into the theoretical data rate the copy-bandwidth checks compare
// against, and normalises PCI addresses. It is pure and reads sysfs only
// through a hostfs.Root.
package pcie

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Efficiency is the fraction of the raw bit rate that carries data after line
// encoding: 8b/10b for 2.5 and 5 GT/s (gen1/2), 128b/130b for 8, 16 and
// 32 GT/s (gen3-5). Gen6 (64 GT/s) has no line code but runs in FLIT mode,
// where 14 of every 256 bytes are CRC and FEC; 242/256 is used for it.
// TLP/DLLP protocol overhead is not counted: it depends on payload size, and
// the copy-bandwidth floor (a fraction of this rate) absorbs it.
func Efficiency(gts float64) (float64, error) {
	switch {
	case gts <= 0 || math.IsNaN(gts) || math.IsInf(gts, 0):
		return 0, fmt.Errorf("link speed %g GT/s is not a PCIe rate", gts)
	case gts <= 5.0:
		return 8.0 / 10.0, nil
	case gts <= 32.0:
		return 128.0 / 130.0, nil
	default:
		return 242.0 / 256.0, nil
	}
}

// GBps is the theoretical data rate of a link in one direction, in GB/s
// (10^9 bytes per second): speed x lanes x encoding efficiency / 8 bits.
// Gen5 x16 gives 63.02 GB/s; gen4 x16 31.51; gen3 x16 15.75.
func GBps(gts float64, width int) (float64, error) {
	eff, err := Efficiency(gts)
	if err != nil {
		return 0, err
	}
	if width < 1 || width > 32 {
		return 0, fmt.Errorf("link width x%d is not a PCIe width", width)
	}
	return gts * float64(width) * eff / 8, nil
}

// Generation names the PCIe generation of a speed (for messages).
func Generation(gts float64) string {
	for _, g := range []struct {
		gts float64
		gen int
	}{{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}, {128, 7}} {
		if math.Abs(gts-g.gts) < 0.01 {
			return fmt.Sprintf("gen%d", g.gen)
		}
	}
	return fmt.Sprintf("%g GT/s", gts)
}

// ErrUnknown is returned for a speed sysfs reports as unknown (a link that is
// down, or a virtual function).
var ErrUnknown = errors.New("link speed unknown")

// ParseSpeed reads a sysfs current_link_speed/max_link_speed value:
// "32.0 GT/s PCIe" (kernels >= 4.19), "8 GT/s" or "2.5 GT/s" (older),
// "Unknown" / "Unknown speed" for a link that is down.
func ParseSpeed(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty link speed")
	}
	if strings.HasPrefix(strings.ToLower(s), "unknown") {
		return 0, fmt.Errorf("%s: %w", clip.Quote(s), ErrUnknown)
	}
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "GT/s" {
		return 0, fmt.Errorf("link speed %s: want \"<number> GT/s [PCIe]\"", clip.Quote(s))
	}
	// sysfs prints plain decimals; ParseFloat alone would also take "NaN",
	// "Inf" and hex floats, and NaN slips through any range comparison.
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || strings.Trim(f[0], "0123456789.") != "" || !(v > 0 && v <= 1000) {
		return 0, fmt.Errorf("link speed %s: bad number %s", clip.Quote(s), clip.Quote(f[0]))
	}
	return v, nil
}

// ParseWidth reads current_link_width/max_link_width ("16"). 0 means the link
// is down and is returned as such; the caller decides.
func ParseWidth(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 32 {
		return 0, fmt.Errorf("link width %s: want a lane count from 0 to 32", clip.Quote(s))
	}
	return n, nil
}

// Link is one PCI function's link state as sysfs shows it.
type Link struct {
	Addr     string  // dddd:bb:dd.f
	CurGTs   float64 // current speed, GT/s (0 when unknown)
	MaxGTs   float64
	CurWidth int
	MaxWidth int
}

// MaxGBps is the theoretical rate the link is built for (max speed, max width).
func (l Link) MaxGBps() (float64, error) { return GBps(l.MaxGTs, l.MaxWidth) }

// CurGBps is the theoretical rate at the current speed and width.
func (l Link) CurGBps() (float64, error) { return GBps(l.CurGTs, l.CurWidth) }

// String is "32 GT/s x16 (max 32 GT/s x16)".
func (l Link) String() string {
	return fmt.Sprintf("%g GT/s x%d (max %g GT/s x%d)", l.CurGTs, l.CurWidth, l.MaxGTs, l.MaxWidth)
}

// ReadLink reads /sys/bus/pci/devices/<addr>/{current,max}_link_{speed,width}
// through root. A device without link files (some VMs' emulated buses) gives
// an error wrapping fs.ErrNotExist.
func ReadLink(root *hostfs.Root, addr string) (Link, error) {
	a, err := NormalizeAddr(addr)
	if err != nil {
		return Link{}, err
	}
	l := Link{Addr: a}
	dir := "/sys/bus/pci/devices/" + a + "/"
	read := func(name string) (string, error) {
		s, err := root.ReadString(dir + name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", root.Host(dir+name), err)
		}
		return s, nil
	}
	var errs []error
	if s, err := read("max_link_speed"); err != nil {
		errs = append(errs, err)
	} else if l.MaxGTs, err = ParseSpeed(s); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", root.Host(dir+"max_link_speed"), err))
	}
	if s, err := read("max_link_width"); err != nil {
		errs = append(errs, err)
	} else if l.MaxWidth, err = ParseWidth(s); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", root.Host(dir+"max_link_width"), err))
	}
	if len(errs) > 0 {
		return l, errors.Join(errs...)
	}
	cur, err := ReadCurrent(root, a)
	l.CurGTs, l.CurWidth = cur.CurGTs, cur.CurWidth
	return l, err
}

// ReadCurrent reads only the current speed and width (cheap enough to poll
// during a copy). An unknown current speed is returned as 0 without error.
func ReadCurrent(root *hostfs.Root, addr string) (Link, error) {
	a, err := NormalizeAddr(addr)
	if err != nil {
		return Link{}, err
	}
	l := Link{Addr: a}
	dir := "/sys/bus/pci/devices/" + a + "/"
	s, err := root.ReadString(dir + "current_link_speed")
	if err != nil {
		return l, fmt.Errorf("%s: %w", root.Host(dir+"current_link_speed"), err)
	}
	if l.CurGTs, err = ParseSpeed(s); err != nil && !errors.Is(err, ErrUnknown) {
		return l, fmt.Errorf("%s: %w", root.Host(dir+"current_link_speed"), err)
	}
	s, err = root.ReadString(dir + "current_link_width")
	if err != nil {
		return l, fmt.Errorf("%s: %w", root.Host(dir+"current_link_width"), err)
	}
	if l.CurWidth, err = ParseWidth(s); err != nil {
		return l, fmt.Errorf("%s: %w", root.Host(dir+"current_link_width"), err)
	}
	return l, nil
}

// IsNotExist reports whether err means the link files are not there.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// NormalizeAddr turns the PCI address spellings drivers use
// ("0000:3B:00.0" from CUDA, "00000000:3B:00.0" from NVML, "3b:00.0" from
// lspci) into sysfs's lowercase dddd:bb:dd.f.
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
