// Package rdmadev reads RDMA devices from /sys/class/infiniband (through a
// hostfs.Root): the PCI function behind each (none for software devices such
// as rxe and siw, which name their netdev in `parent`), ports with state,
// rate and link layer, the GID table with GID types and netdevs, and picks the
// GID a test should use.
package rdmadev

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// ClassDir is where the kernel lists RDMA devices.
const ClassDir = "/sys/class/infiniband"

// Device is one RDMA device.
type Device struct {
	Name     string
	SysPath  string // resolved host path
	PCI      string // BDF of the function behind it; "" for software devices
	Software bool   // no PCI device (rxe, siw): rates are fictional, no path class
	Parent   string // software devices: the netdev they sit on
	NodeType string // "1: CA"
	Netdevs  []string
	Ports    []Port
}

// Port is one port of a device (1-based Num).
type Port struct {
	Num       int
	State     string // ACTIVE, DOWN, INIT, ARMED, ...
	PhysState string // LinkUp, Disabled, Polling, ...
	Rate      string // as sysfs says: "100 Gb/sec (4X EDR)"
	RateGbps  float64
	LinkLayer string // InfiniBand or Ethernet
	LID       uint32
	GIDs      []GID // non-zero entries only, by index
}

// GID is one non-zero GID table entry.
type GID struct {
	Index int
	Addr  net.IP
	Type  string // "RoCE v2", "IB/RoCE v1"; "" if the kernel gave none
	Ndev  string // netdev the GID belongs to (RoCE), "" for IB
}

// IPv4 reports whether the GID is an IPv4-mapped address (::ffff:a.b.c.d).
func (g GID) IPv4() bool {
	return g.Addr.To4() != nil && !g.Addr.Equal(net.IPv4zero)
}

func (g GID) String() string { return fmt.Sprintf("%d %s (%s)", g.Index, g.Addr, g.Type) }

// Port returns port n, or nil.
func (d *Device) Port(n int) *Port {
	for i := range d.Ports {
		if d.Ports[i].Num == n {
			return &d.Ports[i]
		}
	}
	return nil
}

// ParseState reads a port state or phys_state file ("4: ACTIVE", "5: LinkUp").
func ParseState(s string) (int, string, error) {
	num, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	name = strings.TrimSpace(name)
	if !ok || err != nil || n < 0 || n > 255 || name == "" || strings.ContainsAny(name, " \n") {
		return 0, "", fmt.Errorf("port state %q: want \"<number>: <NAME>\"", s)
	}
	return n, name, nil
}

// ParseRate reads a port rate ("100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)")
// in Gb/s.
func ParseRate(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "Gb/sec" {
		return 0, fmt.Errorf("port rate %q: want \"<number> Gb/sec (...)\"", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 || v > 1e5 || v != v {
		return 0, fmt.Errorf("port rate %q: bad number %q", s, f[0])
	}
	return v, nil
}

// ParseGID reads a GID table entry ("fe80:0000:0000:0000:0248:...").
func ParseGID(s string) (net.IP, error) {
	t := strings.TrimSpace(s)
	ip := net.ParseIP(t)
	if ip == nil || strings.Count(t, ":") != 7 {
		return nil, fmt.Errorf("GID %q: want 8 colon-separated groups of hex digits", s)
	}
	return ip, nil
}

// ParseLID reads a port's lid file ("0x1a").
func ParseLID(s string) (uint32, error) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "0x") {
		return 0, fmt.Errorf("LID %q: want 0x-prefixed hex", s)
	}
	v, err := strconv.ParseUint(t[2:], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LID %q: bad hex", s)
	}
	return uint32(v), nil
}

// Scan reads every device in /sys/class/infiniband. A missing directory is
// an error satisfying errors.Is(err, fs.ErrNotExist); an empty one is no
// devices and no error. Unreadable devices are left out, errors joined.
func Scan(r *hostfs.Root) ([]*Device, error) {
	names, err := r.ReadDir(ClassDir)
	if err != nil {
		return nil, err
	}
	var devs []*Device
	var errs []error
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // not a kernel entry (a fixture's .gitkeep)
		}
		d, err := Load(r, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		devs = append(devs, d)
	}
	return devs, errors.Join(errs...)
}

// Load reads one device by name.
func Load(r *hostfs.Root, name string) (*Device, error) {
	if name == "" || strings.ContainsAny(name, "/ ") || name == "." || name == ".." {
		return nil, fmt.Errorf("RDMA device name %q is not valid", name)
	}
	base := ClassDir + "/" + name
	real, err := r.Resolve(base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	if fi, err := r.Stat(base); err != nil {
		return nil, fmt.Errorf("%s -> %s: dangling link: %w", base, real, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", base)
	}
	d := &Device{Name: name, SysPath: real}
	if _, err := r.Lstat(real + "/device"); err == nil {
		dev, err := r.Resolve(real + "/device")
		if err != nil {
			return nil, fmt.Errorf("%s/device: %w", base, err)
		}
		if !r.Exists(dev) {
			return nil, fmt.Errorf("%s/device -> %s: dangling link", base, dev)
		}
		bdf := path.Base(dev)
		if !pci.IsBDF(bdf) {
			return nil, fmt.Errorf("%s/device -> %s: not a PCI function", base, dev)
		}
		d.PCI = bdf
		if nds, err := r.ReadDir(dev + "/net"); err == nil {
			d.Netdevs = nds
		}
	} else {
		d.Software = true
		p, err := r.ReadString(real + "/parent")
		switch {
		case err == nil && p != "":
			d.Parent = p
			d.Netdevs = []string{p}
		case err == nil:
			return nil, fmt.Errorf("%s/parent: empty", base)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	if s, err := r.ReadString(real + "/node_type"); err == nil {
		d.NodeType = s
	}
	ports, err := r.ReadDir(real + "/ports")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var errs []error
	for _, pn := range ports {
		n, err := strconv.Atoi(pn)
		if err != nil || n < 1 || n > 255 {
			if !strings.HasPrefix(pn, ".") {
				errs = append(errs, fmt.Errorf("%s/ports/%s: not a port number", base, pn))
			}
			continue
		}
		p, err := loadPort(r, real+"/ports/"+pn, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.Ports = append(d.Ports, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return d, nil
}

func loadPort(r *hostfs.Root, dir string, n int) (Port, error) {
	p := Port{Num: n}
	var errs []error
	read := func(name string) string {
		s, err := r.ReadString(dir + "/" + name)
		if err != nil {
			errs = append(errs, err)
		}
		return s
	}
	if s := read("state"); s != "" || len(errs) == 0 {
		if _, name, err := ParseState(s); err != nil {
			errs = append(errs, fmt.Errorf("%s/state: %w", dir, err))
		} else {
			p.State = name
		}
	}
	if s, err := r.ReadString(dir + "/phys_state"); err == nil {
		if _, name, err := ParseState(s); err != nil {
			errs = append(errs, fmt.Errorf("%s/phys_state: %w", dir, err))
		} else {
			p.PhysState = name
		}
	}
	if s, err := r.ReadString(dir + "/rate"); err == nil {
		p.Rate = s
		if p.RateGbps, err = ParseRate(s); err != nil {
			errs = append(errs, fmt.Errorf("%s/rate: %w", dir, err))
		}
	}
	p.LinkLayer = read("link_layer")
	if s, err := r.ReadString(dir + "/lid"); err == nil {
		if p.LID, err = ParseLID(s); err != nil {
			errs = append(errs, fmt.Errorf("%s/lid: %w", dir, err))
		}
	}
	gids, err := r.ReadDir(dir + "/gids")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, gn := range gids {
		i, err := strconv.Atoi(gn)
		if err != nil || i < 0 {
			continue
		}
		s, err := r.ReadString(dir + "/gids/" + gn)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ip, err := ParseGID(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/gids/%s: %w", dir, gn, err))
			continue
		}
		if ip.IsUnspecified() {
			continue // unused table entry; its gid_attrs read EINVAL
		}
		g := GID{Index: i, Addr: ip}
		// Attribute reads fail (EINVAL) for entries the kernel does not
		// describe; the entry is still a GID, just of unknown type.
		if t, err := r.ReadString(fmt.Sprintf("%s/gid_attrs/types/%d", dir, i)); err == nil {
			g.Type = t
		}
		if nd, err := r.ReadString(fmt.Sprintf("%s/gid_attrs/ndevs/%d", dir, i)); err == nil {
			g.Ndev = nd
		}
		p.GIDs = append(p.GIDs, g)
	}
	sortGIDs(p.GIDs)
	return p, errors.Join(errs...)
}

func sortGIDs(g []GID) {
	for i := 1; i < len(g); i++ {
		for j := i; j > 0 && g[j].Index < g[j-1].Index; j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
}

// PickGID chooses the GID a test uses on port n. index >= 0 selects that
// entry (it must exist). index -1 (automatic, GDR_GID_INDEX unset) takes the
// first RoCE v2 GID with an IPv4-mapped address when the port is ACTIVE, and
// otherwise index 0 (InfiniBand, or RoCE without an IPv4 address).
func PickGID(d *Device, n, index int) (GID, error) {
	p := d.Port(n)
	if p == nil {
		return GID{}, fmt.Errorf("%s has no port %d (ports: %d)", d.Name, n, len(d.Ports))
	}
	if index >= 0 {
		for _, g := range p.GIDs {
			if g.Index == index {
				return g, nil
			}
		}
		return GID{}, fmt.Errorf("%s port %d: GID index %d is empty or absent (%d GIDs set)", d.Name, n, index, len(p.GIDs))
	}
	if p.State == "ACTIVE" {
		for _, g := range p.GIDs {
			if g.Type == "RoCE v2" && g.IPv4() {
				return g, nil
			}
		}
	}
	for _, g := range p.GIDs {
		if g.Index == 0 {
			return g, nil
		}
	}
	return GID{}, fmt.Errorf("%s port %d: GID index 0 is empty", d.Name, n)
}
