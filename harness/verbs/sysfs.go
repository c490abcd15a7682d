package verbs

import (
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// ClassDir is where the kernel lists RDMA devices.
const ClassDir = "/sys/class/infiniband"

// GIDEntry is one populated GID table entry as sysfs shows it.
type GIDEntry struct {
	Index  int
	GID    [16]byte
	Type   string // "IB/RoCE v1", "RoCE v2", or "" when sysfs has no type (IB)
	Netdev string // Ethernet netdev the GID belongs to (RoCE), "" otherwise
}

// IPv4 returns the IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d).
func (g GIDEntry) IPv4() (netip.Addr, bool) {
	a := netip.AddrFrom16(g.GID)
	if a.Is4In6() {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// String is the GID in IPv6 notation.
func (g GIDEntry) String() string { return netip.AddrFrom16(g.GID).String() }

// IsRoCEv2 reports a RoCE v2 GID.
func (g GIDEntry) IsRoCEv2() bool { return g.Type == "RoCE v2" }

// GIDTable reads the populated GIDs of dev's port from sysfs, with each
// entry's type (gid_attrs/types/<i>) and netdev (gid_attrs/ndevs/<i>).
func GIDTable(r *hostfs.Root, dev string, port int) ([]GIDEntry, error) {
	base := fmt.Sprintf("%s/%s/ports/%d", ClassDir, dev, port)
	names, err := r.ReadDir(base + "/gids")
	if err != nil {
		return nil, fmt.Errorf("GID table of %s port %d: %w", dev, port, err)
	}
	var out []GIDEntry
	for _, n := range names {
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 {
			continue
		}
		s, err := r.ReadString(base + "/gids/" + n)
		if err != nil {
			continue // unpopulated entries may fail to read (EINVAL) on some kernels
		}
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil || !a.Is6() {
			return nil, fmt.Errorf("%s/gids/%s: %q is not a GID", base, n, s)
		}
		if a.IsUnspecified() {
			continue
		}
		e := GIDEntry{Index: i, GID: a.As16()}
		// types/ndevs of unpopulated or IB GIDs read as EINVAL: no type.
		if t, err := r.ReadString(base + "/gid_attrs/types/" + n); err == nil {
			e.Type = strings.TrimSpace(t)
		}
		if d, err := r.ReadString(base + "/gid_attrs/ndevs/" + n); err == nil {
			e.Netdev = strings.TrimSpace(d)
		}
		out = append(out, e)
	}
	sortGIDs(out)
	return out, nil
}

func sortGIDs(g []GIDEntry) {
	for i := 1; i < len(g); i++ {
		for j := i; j > 0 && g[j].Index < g[j-1].Index; j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
}

// PickGID chooses the GID index automatically: on Ethernet (RoCE) the lowest
// RoCE v2 GID with an IPv4 address, else the lowest RoCE v2 GID, else the
// lowest populated one; on InfiniBand index 0.
func PickGID(gids []GIDEntry, linkLayer string) (GIDEntry, error) {
	if len(gids) == 0 {
		return GIDEntry{}, fmt.Errorf("no populated GID: on RoCE give the netdev an IP address (ip addr add ... dev <netdev>)")
	}
	if linkLayer != "Ethernet" {
		for _, g := range gids {
			if g.Index == 0 {
				return g, nil
			}
		}
		return gids[0], nil
	}
	for _, g := range gids {
		if _, ok := g.IPv4(); ok && g.IsRoCEv2() {
			return g, nil
		}
	}
	for _, g := range gids {
		if g.IsRoCEv2() {
			return g, nil
		}
	}
	return gids[0], nil
}

// SysDevices lists the RDMA device names in /sys/class/infiniband.
func SysDevices(r *hostfs.Root) ([]string, error) {
	if !r.Exists(ClassDir) {
		return nil, nil
	}
	names, err := r.ReadDir(ClassDir)
	if err != nil {
		return nil, err
	}
	// The kernel never names a device with a leading dot; a recorded tree
	// may hold a .gitkeep there.
	out := names[:0]
	for _, n := range names {
		if !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out, nil
}

// IsSoftware reports a software RDMA device (rxe, siw): no PCI device behind
// it, so its port rate is fictional. The driver name, when sysfs has one
// (the parent netdev otherwise), comes back for messages.
func IsSoftware(r *hostfs.Root, dev string) (bool, string) {
	base := ClassDir + "/" + dev
	if _, err := r.Lstat(base + "/device"); err == nil {
		return false, ""
	}
	for _, p := range []string{"rxe", "siw"} {
		if strings.HasPrefix(dev, p) {
			return true, p
		}
	}
	if parent, err := r.ReadString(base + "/parent"); err == nil {
		return true, "software device on " + strings.TrimSpace(parent)
	}
	return true, "no PCI device"
}

// PortRate reads sysfs's rate string of dev's port ("100 Gb/sec (4X EDR)").
func PortRate(r *hostfs.Root, dev string, port int) (string, error) {
	s, err := r.ReadString(path.Join(ClassDir, dev, "ports", strconv.Itoa(port), "rate"))
	return strings.TrimSpace(s), err
}
