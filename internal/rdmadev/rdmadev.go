// Package rdmadev is the suite's one reader of /sys/class/infiniband (through
// a hostfs.Root): the PCI function and bound driver behind each device (none
// for software devices such as rxe and siw, which name their netdev in
// `parent`), its user-space verbs node, ports with state, rate and link
// layer, the GID table with GID types and netdevs, and the GID a test uses.
//
// GID tables are read lazily, one port at a time and once: rxe has 1024
// entries per port, and reading them all through sysfs takes seconds under
// qemu's TCG, so Scan and Load read none.
//
// GID rule (PickGID): an explicit index (GDR_GID_INDEX, or on RoCE ports
// NCCL_IB_GID_INDEX: internal/config GIDIndexFor) is used as given and must
// be populated. Automatic: on an ACTIVE Ethernet (RoCE) port the lowest
// RoCE v2 GID with an IPv4-mapped address, else the lowest RoCE v2 GID, else
// index 0; InfiniBand, and ports that are not ACTIVE, use index 0.
package rdmadev

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// ClassDir is where the kernel lists RDMA devices.
const ClassDir = "/sys/class/infiniband"

// VerbsClassDir lists the user-space verbs nodes (uverbsN) ib_uverbs made;
// each names its RDMA device in ibdev.
const VerbsClassDir = "/sys/class/infiniband_verbs"

// Device is one RDMA device. Use it through a pointer: it caches the GID
// tables it has read.
type Device struct {
	Name     string
	SysPath  string // resolved host path
	PCI      string // BDF of the function behind it; "" for software devices
	Software bool   // no PCI device (rxe, siw): rates are fictional, no path class
	Parent   string // software devices: the netdev they sit on
	// Driver is the kernel module of the PCI function's bound driver
	// (device/driver/module, else the driver's name: mlx5_core). Software
	// devices have no driver link; theirs is inferred from the name: siw*
	// is siw, anything else rdma_rxe (DriverInferred is then true).
	Driver         string
	DriverInferred bool
	NodeType       string // as sysfs says: "1: CA"
	// Identity as the driver publishes it: firmware version (fw_ver),
	// board id (board_id: the PSID on NVIDIA/Mellanox cards, which names
	// the card model and its firmware flavour), HCA type (hca_type:
	// "MT4129" is ConnectX-7) and node GUID. Empty when the driver has no
	// such file (rxe has no board_id or hca_type; its fw_ver is empty).
	FWVersion string
	BoardID   string
	HCAType   string
	NodeGUID  string
	Netdevs   []string
	// Uverbs is the user-space verbs node serving the device ("uverbs0"),
	// "" when /sys/class/infiniband_verbs names none: libibverbs cannot
	// open such a device (ib_uverbs not loaded).
	Uverbs string
	// Node is the character device libibverbs opens for Uverbs
	// (/dev/infiniband/uverbs0), as a path on this machine, and NodeState
	// whether it exists there (see NodeState); "" without Uverbs.
	Node      string
	NodeState NodeState
	Ports     []Port
	// Bond is set when a netdev of the device's PCI function is enslaved
	// to a bonding master. With RoCE LAG, mlx5 shows both ports of a
	// dual-port card as one RDMA device (mlx5_bond_N) whose device link is
	// the first PF; the second PF keeps its netdev but has no RDMA device,
	// and the GIDs name the bond master (kernel commit "net/mlx5:
	// Implement RoCE LAG feature"; mlx5_lag_get_roce_netdev).
	Bond *Bond

	root *hostfs.Root
	mu   sync.Mutex
	gids map[int]*gidTable // port -> table, filled as read
}

// DevDir is where libibverbs looks for the verbs nodes (rdma-core
// buildlib/config.h.in RDMA_CDEV_DIR).
const DevDir = "/dev/infiniband"

// NodeState says whether a device's verbs node exists where libibverbs looks
// for it. libibverbs lists a device only if stat() of DevDir/<uverbsN>
// succeeds (rdma-core libibverbs/init.c try_access_device, called for every
// device since rdma-core 32, netlink discovery included: commit "verbs: Try
// access device before adding it to device list"): a device whose node is
// missing is in sysfs but not in ibv_get_device_list, and cannot be opened.
//
// Where the node is looked for (hostfs.Root.Devices): on the running host,
// this process's own /dev, also when GDR_HOST_ROOT mounts the node's "/"
// elsewhere (a pod sees every node of its node under /host/dev, but opens
// only what its own /dev holds); in a recorded tree, the tree's
// /dev/infiniband. A recorded tree without a /dev/infiniband folder was
// recorded without device nodes (or made by hand): its nodes are Unchecked,
// not Missing. The recorder (fixtures/record) always writes the folder, so
// an empty one means the recorded host had no nodes.
type NodeState int

const (
	// NodeUnchecked: not looked at (no Uverbs, or a recorded tree without
	// /dev/infiniband).
	NodeUnchecked NodeState = iota
	// NodePresent: the node exists where libibverbs looks.
	NodePresent
	// NodeMissing: it does not; libibverbs leaves the device out.
	NodeMissing
)

// Port is one port of a device (1-based Num).
type Port struct {
	Num          int
	State        string // ACTIVE, DOWN, INIT, ARMED, ...
	PhysState    string // LinkUp, Disabled, Polling, ...
	RawState     string // the state file as written: "4: ACTIVE"
	RawPhysState string // "5: LinkUp"; "" when sysfs has no phys_state
	Rate         string // as sysfs says: "100 Gb/sec (4X EDR)"
	RateGbps     float64
	LinkLayer    string // InfiniBand or Ethernet
	LID          uint32
	// Speed is the rate file's lane speed name ("EDR", "HDR"; "" when the
	// file names none): on InfiniBand it says which line code the rate is
	// counted before (internal/floors.Wire.LineCode).
	Speed string
}

// Active reports a port in state ACTIVE.
func (p *Port) Active() bool { return p.State == "ACTIVE" }

// NodeTypeName is the node type without its number ("CA", "RNIC"), "" if
// sysfs has none.
func (d *Device) NodeTypeName() string {
	if _, name, err := ParseState(d.NodeType); err == nil {
		return name
	}
	return ""
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
	return g.Addr != nil && g.Addr.To4() != nil && !g.Addr.Equal(net.IPv4zero)
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
// in Gb/s; Mb/sec rates are converted.
func ParseRate(s string) (float64, error) {
	f := strings.Fields(s)
	div := 0.0
	if len(f) >= 2 {
		switch f[1] {
		case "Gb/sec", "Gb/s":
			div = 1
		case "Mb/sec", "Mb/s":
			div = 1000
		}
	}
	if div == 0 {
		return 0, fmt.Errorf("port rate %q: want \"<number> Gb/sec (...)\"", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 || v > 1e5 || v != v {
		return 0, fmt.Errorf("port rate %q: bad number %q", s, f[0])
	}
	return v / div, nil
}

// ParseSpeed is the lane speed name of a port rate ("HDR" of "200 Gb/sec
// (4X HDR)", as the kernel's rate_show in drivers/infiniband/core/sysfs.c
// writes it), "" when the rate names none.
func ParseSpeed(s string) string {
	_, paren, ok := strings.Cut(s, "(")
	if !ok {
		return ""
	}
	inner, _, _ := strings.Cut(paren, ")")
	f := strings.Fields(inner)
	if len(f) != 2 || !strings.HasSuffix(f[0], "X") {
		return ""
	}
	return f[1]
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
	uv := uverbsNodes(r)
	nodes := nodeLookup(r)
	var devs []*Device
	var errs []error
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // not a kernel entry (a fixture's .gitkeep)
		}
		d, err := load(r, n, uv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.Node, d.NodeState = nodes(d.Uverbs)
		devs = append(devs, d)
	}
	return devs, errors.Join(errs...)
}

// Load reads one device by name.
func Load(r *hostfs.Root, name string) (*Device, error) {
	d, err := load(r, name, uverbsNodes(r))
	if err != nil {
		return nil, err
	}
	d.Node, d.NodeState = nodeLookup(r)(d.Uverbs)
	return d, nil
}

// nodeLookup returns where libibverbs would find the node of uverbsN and
// whether it exists there (NodeState).
func nodeLookup(r *hostfs.Root) func(uverbs string) (string, NodeState) {
	dr := r.Devices()
	checked := r.IsLive() || dr.Exists(DevDir)
	return func(uv string) (string, NodeState) {
		if uv == "" {
			return "", NodeUnchecked
		}
		p := DevDir + "/" + uv
		switch {
		case !checked:
			return dr.Host(p), NodeUnchecked
		case dr.Exists(p):
			return dr.Host(p), NodePresent
		}
		return dr.Host(p), NodeMissing
	}
}

// uverbsNodes maps RDMA device name to its uverbsN node.
func uverbsNodes(r *hostfs.Root) map[string]string {
	out := map[string]string{}
	names, _ := r.ReadDir(VerbsClassDir)
	for _, n := range names {
		if !strings.HasPrefix(n, "uverbs") {
			continue
		}
		if ib, err := r.ReadString(VerbsClassDir + "/" + n + "/ibdev"); err == nil && ib != "" {
			if prev, ok := out[ib]; !ok || n < prev {
				out[ib] = n
			}
		}
	}
	return out
}

// CheckName rejects an RDMA device name that would leave ClassDir (or is no
// name at all): callers pass names from the environment and from the peer.
func CheckName(name string) error {
	if !pathSafe(name) {
		return fmt.Errorf("RDMA device name %q is not valid", name)
	}
	return nil
}

// pathSafe: s names one entry of a sysfs directory (neither the kernel's
// device nor its netdev names hold a '/' or a space).
func pathSafe(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/ \x00")
}

// CheckPort rejects what cannot name a port of device dev: a bad device
// name, or a number outside 1..255 (the kernel's u8 port numbers; 0 is a
// switch's management port, which has no ports/0).
func CheckPort(dev string, n int) error {
	if err := CheckName(dev); err != nil {
		return err
	}
	if n < 1 || n > 255 {
		return fmt.Errorf("%s: port %d is not a port number (1..255)", dev, n)
	}
	return nil
}

// PortDir is the sysfs directory of port n of device dev (not checked: see
// CheckPort).
func PortDir(dev string, n int) string {
	return fmt.Sprintf("%s/%s/ports/%d", ClassDir, dev, n)
}

// PortState reads port n's state afresh ("ACTIVE", "DOWN"), cheaper than
// Load for a watch that polls one port while a test runs. Content that is
// not "<number>: <NAME>" is an error naming the file and the value.
func PortState(r *hostfs.Root, dev string, n int) (string, error) {
	if err := CheckPort(dev, n); err != nil {
		return "", err
	}
	p := PortDir(dev, n) + "/state"
	s, err := r.ReadString(p)
	if err != nil {
		return "", err
	}
	_, name, err := ParseState(s)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return name, nil
}

// OperState reads a netdev's operstate ("up", "down", "lowerlayerdown"),
// "" when the kernel leaves it empty.
func OperState(r *hostfs.Root, netdev string) (string, error) {
	if !pathSafe(netdev) {
		return "", fmt.Errorf("netdev name %q is not valid", netdev)
	}
	return r.ReadString(NetClassDir + "/" + netdev + "/operstate")
}

func load(r *hostfs.Root, name string, uverbs map[string]string) (*Device, error) {
	if err := CheckName(name); err != nil {
		return nil, err
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
	d := &Device{Name: name, SysPath: real, Uverbs: uverbs[name], root: r}
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
		d.Bond = readBond(r, dev, d.Netdevs)
		if l, err := r.ReadLink(dev + "/driver/module"); err == nil {
			d.Driver = path.Base(l)
		} else if l, err := r.ReadLink(dev + "/driver"); err == nil {
			d.Driver = path.Base(l)
		}
	} else {
		d.Software = true
		d.Driver, d.DriverInferred = "rdma_rxe", true
		if strings.HasPrefix(name, "siw") {
			d.Driver = "siw"
		}
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
	for f, dst := range map[string]*string{"fw_ver": &d.FWVersion, "board_id": &d.BoardID, "hca_type": &d.HCAType, "node_guid": &d.NodeGUID} {
		if s, err := r.ReadString(real + "/" + f); err == nil && s != "0000:0000:0000:0000" {
			*dst = s
		}
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
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
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
		p.RawState = s
		if _, name, err := ParseState(s); err != nil {
			errs = append(errs, fmt.Errorf("%s/state: %w", dir, err))
		} else {
			p.State = name
		}
	}
	if s, err := r.ReadString(dir + "/phys_state"); err == nil {
		p.RawPhysState = s
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
		p.Speed = ParseSpeed(s)
	}
	p.LinkLayer = read("link_layer")
	if s, err := r.ReadString(dir + "/lid"); err == nil {
		if p.LID, err = ParseLID(s); err != nil {
			errs = append(errs, fmt.Errorf("%s/lid: %w", dir, err))
		}
	}
	return p, errors.Join(errs...)
}

// gidTable is one port's GID table as far as it has been read.
type gidTable struct {
	dir     string      // .../ports/N
	indices []int       // every entry sysfs lists, ascending
	read    map[int]GID // entries read so far; zero GIDs are kept (Addr nil)
	all     bool        // every entry read
}

// table returns port n's table, listing its entries on first use.
func (d *Device) table(n int) (*gidTable, error) {
	if d.root == nil {
		return nil, fmt.Errorf("%s: device not read through rdmadev.Load/Scan: no GID table", d.Name)
	}
	if d.Port(n) == nil {
		return nil, fmt.Errorf("%s has no port %d (ports: %s)", d.Name, n, d.portList())
	}
	if t := d.gids[n]; t != nil {
		return t, nil
	}
	dir := fmt.Sprintf("%s/ports/%d", d.SysPath, n)
	names, err := d.root.ReadDir(dir + "/gids")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	t := &gidTable{dir: dir, read: map[int]GID{}}
	for _, gn := range names {
		if i, err := strconv.Atoi(gn); err == nil && i >= 0 {
			t.indices = append(t.indices, i)
		}
	}
	sort.Ints(t.indices)
	if d.gids == nil {
		d.gids = map[int]*gidTable{}
	}
	d.gids[n] = t
	return t, nil
}

func (d *Device) portList() string {
	var s []string
	for _, p := range d.Ports {
		s = append(s, strconv.Itoa(p.Num))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// entry reads GID index i of t (once). A zero GID comes back with a nil Addr.
func (d *Device) entry(t *gidTable, i int) (GID, error) {
	if g, ok := t.read[i]; ok {
		return g, nil
	}
	s, err := d.root.ReadString(fmt.Sprintf("%s/gids/%d", t.dir, i))
	if err != nil {
		return GID{}, err
	}
	ip, err := ParseGID(s)
	if err != nil {
		return GID{}, fmt.Errorf("%s/gids/%d: %w", t.dir, i, err)
	}
	g := GID{Index: i}
	if !ip.IsUnspecified() {
		g.Addr = ip
		// Attribute reads fail (EINVAL) for entries the kernel does not
		// describe; the entry is still a GID, just of unknown type.
		if ty, err := d.root.ReadString(fmt.Sprintf("%s/gid_attrs/types/%d", t.dir, i)); err == nil {
			g.Type = ty
		}
		if nd, err := d.root.ReadString(fmt.Sprintf("%s/gid_attrs/ndevs/%d", t.dir, i)); err == nil {
			g.Ndev = nd
		}
	}
	t.read[i] = g
	return g, nil
}

// GIDs reads port n's populated GID entries (types and netdevs included), by
// index. The table is read once and kept.
func (d *Device) GIDs(n int) ([]GID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.table(n)
	if err != nil {
		return nil, err
	}
	var errs []error
	var out []GID
	for _, i := range t.indices {
		g, err := d.entry(t, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if g.Addr != nil {
			out = append(out, g)
		}
	}
	if len(errs) == 0 {
		t.all = true
	}
	return out, errors.Join(errs...)
}

// GID reads entry index of port n; ok is false when the entry is absent or
// zero (unpopulated).
func (d *Device) GID(n, index int) (g GID, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.table(n)
	if err != nil {
		return GID{}, false, err
	}
	if i := sort.SearchInts(t.indices, index); i == len(t.indices) || t.indices[i] != index {
		return GID{}, false, nil
	}
	g, err = d.entry(t, index)
	return g, err == nil && g.Addr != nil, err
}

// PickGID chooses the GID a test uses on port n of d, by the package's GID
// rule. index >= 0 selects that entry (it must be populated); -1 is
// automatic (GDR_GID_INDEX unset). netdev (GDR_GID_NETDEV), when not "",
// selects the RoCE v2 GID whose gid_attrs/ndevs entry is that interface
// (IPv4-mapped first), and excludes index. The automatic search reads
// entries in index order and stops at the first RoCE v2 IPv4 one, so an rxe
// port costs a few reads, not 1024.
func PickGID(d *Device, n, index int, netdev string) (GID, error) {
	return PickGIDAs(d, n, index, "GDR_GID_INDEX", netdev)
}

// PickGIDAs is PickGID with the explicit index set by from (the variable
// that set it, "NCCL_IB_GID_INDEX in /etc/nccl.conf"), which its errors
// name.
func PickGIDAs(d *Device, n, index int, from, netdev string) (GID, error) {
	p := d.Port(n)
	if p == nil {
		return GID{}, fmt.Errorf("%s has no port %d (ports: %s)", d.Name, n, d.portList())
	}
	if netdev != "" {
		if index >= 0 {
			return GID{}, fmt.Errorf("GDR_GID_NETDEV=%s and %s=%d both choose the GID of %s port %d: set one of them", netdev, from, index, d.Name, n)
		}
		return d.gidOfNetdev(n, p, netdev)
	}
	if index >= 0 || !roceAuto(p) {
		i := max(index, 0)
		g, ok, err := d.GID(n, i)
		if err != nil {
			return GID{}, err
		}
		if !ok {
			d.mu.Lock()
			set := len(d.gids[n].indices)
			d.mu.Unlock()
			why := from
			if index < 0 {
				why = "automatic choice (" + autoWhy(p) + ")"
			}
			return GID{}, fmt.Errorf("%s port %d: GID index %d (%s) is empty or absent (%d table entries); on RoCE give the netdev an IP address (ip addr add ... dev <netdev>)",
				d.Name, n, i, why, set)
		}
		return g, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.table(n)
	if err != nil {
		return GID{}, err
	}
	var v2, zero *GID
	var errs []error
	for _, i := range t.indices {
		g, err := d.entry(t, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if g.Addr == nil {
			continue
		}
		if g.Type == "RoCE v2" {
			if g.IPv4() {
				return g, nil
			}
			if v2 == nil {
				v2 = &g
			}
		}
		if g.Index == 0 {
			zero = &g
		}
	}
	switch {
	case v2 != nil:
		return *v2, nil
	case zero != nil:
		return *zero, nil
	case len(errs) > 0:
		return GID{}, fmt.Errorf("%s port %d: no usable GID: %w", d.Name, n, errors.Join(errs...))
	}
	return GID{}, fmt.Errorf("%s port %d: no RoCE v2 GID and GID index 0 is empty; give the netdev an IP address (ip addr add ... dev <netdev>)", d.Name, n)
}

// gidOfNetdev is PickGID's choice by netdev: the lowest RoCE v2 GID of
// netdev with an IPv4-mapped address, else its lowest RoCE v2 GID. It stops
// at the first IPv4 one; else it reads the whole table, and a miss names the
// netdevs that do carry RoCE v2 GIDs on the port.
func (d *Device) gidOfNetdev(n int, p *Port, netdev string) (GID, error) {
	why := fmt.Sprintf("%s port %d: GDR_GID_NETDEV=%s", d.Name, n, netdev)
	if p.LinkLayer != "Ethernet" {
		return GID{}, fmt.Errorf("%s: the port's link layer is %s; a GID by netdev exists on RoCE (Ethernet) ports only: unset GDR_GID_NETDEV", why, orUnknown(p.LinkLayer))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.table(n)
	if err != nil {
		return GID{}, err
	}
	var v2 *GID
	var errs []error
	others := map[string]bool{}
	for _, i := range t.indices {
		g, err := d.entry(t, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if g.Addr == nil || g.Type != "RoCE v2" {
			continue
		}
		if g.Ndev != netdev {
			if g.Ndev != "" {
				others[g.Ndev] = true
			}
			continue
		}
		if g.IPv4() {
			return g, nil
		}
		if v2 == nil {
			v2 = &g
		}
	}
	if v2 != nil {
		return *v2, nil
	}
	names := make([]string, 0, len(others))
	for nd := range others {
		names = append(names, nd)
	}
	sort.Strings(names)
	have := "none"
	if len(names) > 0 {
		have = strings.Join(names, ", ")
	}
	err = fmt.Errorf("%s: no RoCE v2 GID of that netdev (%d table entries; netdevs with RoCE v2 GIDs here: %s): check the name, that the interface is up with an IP address, and that it sits on this port",
		why, len(t.indices), have)
	if len(errs) > 0 {
		err = fmt.Errorf("%w; unreadable entries: %w", err, errors.Join(errs...))
	}
	return GID{}, err
}

// PickGIDFrom applies the GID rule to a table read elsewhere (verbs
// ibv_query_gid_ex, a fake): gids are populated entries, state and
// linkLayer the port's ("ACTIVE", "Ethernet").
func PickGIDFrom(gids []GID, state, linkLayer string, index int) (GID, error) {
	p := &Port{State: state, LinkLayer: linkLayer}
	byIndex := append([]GID(nil), gids...)
	sort.Slice(byIndex, func(i, j int) bool { return byIndex[i].Index < byIndex[j].Index })
	find := func(i int) (GID, bool) {
		for _, g := range byIndex {
			if g.Index == i && g.Addr != nil && !g.Addr.IsUnspecified() {
				return g, true
			}
		}
		return GID{}, false
	}
	if index >= 0 {
		if g, ok := find(index); ok {
			return g, nil
		}
		return GID{}, fmt.Errorf("GID index %d (GDR_GID_INDEX) is empty or absent (%d GIDs set)", index, len(gids))
	}
	if roceAuto(p) {
		for _, g := range byIndex {
			if g.Type == "RoCE v2" && g.IPv4() {
				return g, nil
			}
		}
		for _, g := range byIndex {
			if g.Type == "RoCE v2" {
				return g, nil
			}
		}
	}
	if g, ok := find(0); ok {
		return g, nil
	}
	return GID{}, fmt.Errorf("GID index 0 is empty (%s); on RoCE give the netdev an IP address (ip addr add ... dev <netdev>)", autoWhy(p))
}

// roceAuto: the automatic choice searches for RoCE v2 GIDs only on an
// ACTIVE Ethernet port.
func roceAuto(p *Port) bool { return p.State == "ACTIVE" && p.LinkLayer == "Ethernet" }

func autoWhy(p *Port) string {
	switch {
	case p.LinkLayer != "Ethernet":
		return "link layer " + orUnknown(p.LinkLayer) + ": index 0"
	default:
		return "port " + orUnknown(p.State) + ", not ACTIVE: index 0"
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// NetClassDir lists the netdevs.
const NetClassDir = "/sys/class/net"

// Netdev is what the floors need of a network interface under a RoCE GID:
// its MTU (the kernel derives the RoCE path MTU from it) and whether it is
// an 802.1Q VLAN device (every frame then carries a 4-byte tag).
type Netdev struct {
	Name string
	MTU  int // bytes, from /sys/class/net/<name>/mtu
	// VLAN: the netdev's uevent says DEVTYPE=vlan (net/8021q/vlan_dev.c
	// names its device type "vlan"), or /proc/net/vlan lists it (the
	// 8021q module's proc file per VLAN device).
	VLAN bool
}

// ReadNetdev reads netdev name's MTU and VLAN type. An mtu file that is
// not a positive number is an error naming the file and its content; a
// missing uevent is no VLAN.
func ReadNetdev(r *hostfs.Root, name string) (Netdev, error) {
	if !pathSafe(name) {
		return Netdev{}, fmt.Errorf("netdev name %q is not valid", name)
	}
	n := Netdev{Name: name}
	p := NetClassDir + "/" + name + "/mtu"
	s, err := r.ReadString(p)
	if err != nil {
		return n, err
	}
	if n.MTU, err = strconv.Atoi(s); err != nil || n.MTU <= 0 || n.MTU > 1<<20 {
		return Netdev{Name: name}, fmt.Errorf("%s: %q is not an MTU in bytes", p, s)
	}
	if ue, err := r.ReadString(NetClassDir + "/" + name + "/uevent"); err == nil {
		for _, l := range strings.Split(ue, "\n") {
			if strings.TrimSpace(l) == "DEVTYPE=vlan" {
				n.VLAN = true
			}
		}
	}
	if !n.VLAN && r.Exists("/proc/net/vlan/"+name) {
		n.VLAN = true
	}
	return n, nil
}

// Bond is the bonding master over a device's netdev.
type Bond struct {
	Master string   // the bonding netdev ("bond0")
	Slaves []string // its lower netdevs (lower_<name> links), by name
	// PCI are the PCI functions of those slaves, by address: both PFs of a
	// dual-port card under RoCE LAG. Slaves without a PCI function (a
	// virtual netdev) have none.
	PCI []string
}

// readBond finds the bonding master of the first of netdevs (under the PCI
// function dir) that has one: its master link names a netdev with a
// bonding/ directory (drivers/net/bonding/bond_sysfs.c). A master that is
// not a bond (a bridge, OVS) is no bond; nothing here is an error, a
// half-visible bond is reported with what could be read.
func readBond(r *hostfs.Root, dev string, netdevs []string) *Bond {
	for _, nd := range netdevs {
		l, err := r.ReadLink(dev + "/net/" + nd + "/master")
		if err != nil {
			continue
		}
		m := path.Base(l)
		base := NetClassDir + "/" + m
		if !r.Exists(base + "/bonding") {
			continue
		}
		b := &Bond{Master: m}
		names, _ := r.ReadDir(base)
		for _, n := range names {
			slave, ok := strings.CutPrefix(n, "lower_")
			if !ok || slave == "" {
				continue
			}
			b.Slaves = append(b.Slaves, slave)
			// lower_<slave> -> .../<BDF>/net/<slave>
			if t, err := r.Resolve(base + "/" + n); err == nil {
				if bdf := path.Base(path.Dir(path.Dir(t))); pci.IsBDF(bdf) && !slices.Contains(b.PCI, bdf) {
					b.PCI = append(b.PCI, bdf)
				}
			}
		}
		sort.Strings(b.Slaves)
		sort.Strings(b.PCI)
		return b
	}
	return nil
}

// Functions are the PCI functions the device spans: its own, and under a
// bond the other slaves' (by address). None for software devices.
func (d *Device) Functions() []string {
	if d.PCI == "" {
		return nil
	}
	out := []string{d.PCI}
	if d.Bond != nil {
		for _, p := range d.Bond.PCI {
			if p != d.PCI {
				out = append(out, p)
			}
		}
	}
	return out
}
