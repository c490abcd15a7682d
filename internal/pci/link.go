package pci

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

// Link is a PCIe link's speed (GT/s) and width (lanes), as trained now and
// at most. 0 means the attribute is absent or "Unknown".
type Link struct {
	CurGTs   float64
	CurWidth int
	MaxGTs   float64
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

// The sysfs link attributes of a PCI function.
const (
	curSpeedFile = "current_link_speed"
	curWidthFile = "current_link_width"
	maxSpeedFile = "max_link_speed"
	maxWidthFile = "max_link_width"
)

// set parses the content s of link attribute file name into l. An
// "Unknown" speed leaves the field 0 and returns an error wrapping
// ErrUnknown, for the caller to decide.
func (l *Link) set(name, s string) error {
	var err error
	switch name {
	case curSpeedFile:
		l.CurGTs, err = parseSpeed(s)
	case maxSpeedFile:
		l.MaxGTs, err = parseSpeed(s)
	case curWidthFile:
		l.CurWidth, err = ParseWidth(s)
	case maxWidthFile:
		l.MaxWidth, err = ParseWidth(s)
	default:
		err = fmt.Errorf("%s is not a link attribute", name)
	}
	return err
}

// ReadLink reads addr's {current,max}_link_{speed,width} under DevicesDir
// through root, for a check that needs the link: absent max files are an
// error wrapping fs.ErrNotExist (some VMs' emulated buses have none), an
// unknown max speed one wrapping ErrUnknown. Load reads the same files
// leniently along with everything else.
func ReadLink(root *hostfs.Root, addr string) (Link, error) {
	a, err := NormalizeAddr(addr)
	if err != nil {
		return Link{}, err
	}
	var l Link
	var errs []error
	for _, name := range []string{maxSpeedFile, maxWidthFile} {
		if err := readLinkFile(root, a, name, &l); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return l, errors.Join(errs...)
	}
	cur, err := ReadCurrent(root, a)
	l.CurGTs, l.CurWidth = cur.CurGTs, cur.CurWidth
	return l, err
}

// ReadCurrent reads only the current speed and width: the poll a check
// makes while it loads the link (GPUs lower their link speed when idle). An
// unknown current speed is 0 without error.
func ReadCurrent(root *hostfs.Root, addr string) (Link, error) {
	a, err := NormalizeAddr(addr)
	if err != nil {
		return Link{}, err
	}
	var l Link
	for _, name := range []string{curSpeedFile, curWidthFile} {
		if err := readLinkFile(root, a, name, &l); err != nil && !errors.Is(err, ErrUnknown) {
			return l, err
		}
	}
	return l, nil
}

// readLinkFile reads and parses one link attribute of the function at
// canonical address a; errors name the file as the host sees it.
func readLinkFile(root *hostfs.Root, a, name string, l *Link) error {
	p := DevicesDir + "/" + a + "/" + name
	s, err := root.ReadString(p)
	if err == nil {
		err = l.set(name, s)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", root.Host(p), err)
	}
	return nil
}

// IsNotExist reports whether err means the link files are not there.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

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

// ParseSpeed reads current_link_speed/max_link_speed: "32.0 GT/s PCIe",
// "8.0 GT/s", "2.5 GT/s"; "Unknown" (link down, or a virtual function) is 0.
func ParseSpeed(s string) (float64, error) {
	v, err := parseSpeed(s)
	if errors.Is(err, ErrUnknown) {
		return 0, nil
	}
	return v, err
}

// parseSpeed is ParseSpeed with "Unknown" / "Unknown speed" an error
// wrapping ErrUnknown. sysfs prints "32.0 GT/s PCIe" (kernels >= 4.19),
// "8 GT/s" or "2.5 GT/s" (older).
func parseSpeed(s string) (float64, error) {
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
