//go:build rdma

package rc

import (
	"fmt"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// WireFacts is this end's framing at the path MTU (floors.Wire) and what
// a RoCE path MTU below 4096 is diagnosed with: the netdev under its GID
// and that netdev's MTU.
type WireFacts struct {
	floors.Wire
	Netdev    string
	NetdevMTU int    // 0: not read
	Note      string // what could not be read, "" when all was
}

// WireFacts reads this end's framing after Connect: the link layer and
// the path MTU agreed with the peer, the port's speed name from sysfs,
// and on RoCE the GID's type and address family and its netdev's VLAN
// type and MTU (internal/rdmadev, the one reader of RDMA devices and
// their netdevs).
func (e *End) WireFacts() WireFacts {
	w := WireFacts{Wire: floors.Wire{LinkLayer: e.Port.LinkLayer, PathMTU: e.PathMTU,
		GRH: e.Port.LinkLayer != floors.Ethernet && e.GRH.Use}}
	if e.sysDev == nil {
		w.Note = "the NIC is not in sysfs: line code and netdev not read"
		return w
	}
	if p := e.sysDev.Port(e.Cfg.IBPort); p != nil {
		w.Speed = p.Speed
	}
	if e.Port.LinkLayer != floors.Ethernet {
		return w
	}
	w.GIDType = e.GID.Type
	w.IPv6 = e.GID.Addr != nil && !e.GID.IPv4()
	w.Netdev = e.GID.Ndev
	if w.Netdev == "" && len(e.sysDev.Netdevs) > 0 {
		w.Netdev = e.sysDev.Netdevs[0]
	}
	if w.Netdev == "" {
		w.Note = "no netdev under the GID: a VLAN tag is not counted and the netdev MTU is not known"
		return w
	}
	n, err := rdmadev.ReadNetdev(e.Root, w.Netdev)
	if err != nil {
		w.Note = fmt.Sprintf("netdev %s: %v (a VLAN tag is not counted and the netdev MTU is not known)", w.Netdev, err)
		return w
	}
	w.VLAN, w.NetdevMTU = n.VLAN, n.MTU
	return w
}

// PathLimit is the slowest PCIe link this end's data crosses between its
// NIC and its buffer (internal/floors): for GPU memory the rail's GPU, the
// bridges between and the NIC; for host memory the NIC and the ports above
// it to the root complex. ok is false when no link is known (a software
// NIC, a NIC sysfs does not place); notes name links left out (speed or
// width unknown) and functions sysfs does not list.
func (e *End) PathLimit() (l floors.Limit, ok bool, notes []string, err error) {
	sel := testenv.Selection(e.T)
	var devs []rails.PathDevice
	var missing []string
	switch {
	case e.Software || e.sysDev == nil || e.sysDev.PCI == "":
		return floors.Limit{}, false, nil, nil
	case !e.Host() && e.Rail != nil && e.Rail.HasPath && e.Rail.NIC != nil && e.Rail.NIC.Name == e.Dev:
		devs, missing = sel.PathDevices(e.Rail)
	default:
		devs, missing = sel.UpstreamDevices("NIC", e.sysDev.PCI)
	}
	for _, m := range missing {
		notes = append(notes, m+" is not in sysfs: its link is not counted")
	}
	var links []floors.Link
	for _, d := range devs {
		if d.Dev.CurGTs <= 0 || d.Dev.CurWidth <= 0 {
			notes = append(notes, fmt.Sprintf("%s %s: link speed or width unknown, not counted", d.Role, d.Dev.BDF))
			continue
		}
		lk := floors.LinkOf(d.Dev, d.Role, sel.Index.Device(d.Dev.Parent()))
		if !e.loopback {
			lk.Name = e.Role + " " + lk.Name
		}
		links = append(links, lk)
	}
	l, ok, err = floors.PathLimit(links)
	return l, ok, notes, err
}

// NICReadReq is this end's NIC's Max_Read_Request_Size from its config
// space (internal/pci), the size of the read requests it sends when it
// reads a buffer; 0 when unknown (a software NIC, config space not
// readable), for floors.AssumedMaxReadReq to stand in.
func (e *End) NICReadReq() int {
	if e.Software || e.sysDev == nil || e.sysDev.PCI == "" {
		return 0
	}
	d := testenv.Selection(e.T).Index.Device(e.sysDev.PCI)
	if d == nil || d.Config == nil {
		return 0
	}
	s, ok := d.Config.Settings()
	if !ok {
		return 0
	}
	return s.MaxReadRequest
}

// BWPoint is what one bandwidth point's floor depends on besides the
// paths.
type BWPoint struct {
	Size    int
	Largest bool // the largest GDR_BW_SIZES size: GDR_MIN_BW_GBPS applies there
	Bidir   bool // both ends send at once
	// Read is the outstanding-read bound of an RDMA READ point with its
	// measured round trip; nil for WRITE or when no round trip is known.
	Read *floors.ReadBound
	// ReadOp: the point is RDMA READ (its responses carry AETH, not RETH).
	ReadOp bool
	// Wire is the port's framing at the path MTU: the port counts only
	// its payload share (floors.Wire.Share); nil counts the rate in full.
	Wire *floors.Wire
}

// BWFloor is a point's floor and the bottleneck it came from (zero when
// no floor was derived).
type BWFloor struct {
	floors.Floor
	Limit floors.Bottleneck
}

// BWFloor is the floor at p's size (internal/floors): on hardware NICs the
// size's fraction of the bottleneck of the streams the point runs over the
// links each crosses, per direction (floors.Layout: loopback or two hosts,
// one direction or both, and for READ the outstanding-read bound);
// GDR_MIN_BW_GBPS instead at the largest size; nothing on software
// devices. l holds the port rate both ends share (the lower), the paths
// (this host's in loopback; the source's then the destination's on two
// hosts) and their NICs' read request sizes; BWFloor sets the rest from e
// and p.
func (e *End) BWFloor(p BWPoint, l floors.Layout) BWFloor {
	rate := l.PortGbps
	none := func(why string) BWFloor { return BWFloor{Floor: floors.Floor{Size: p.Size, Why: why}} }
	switch {
	case e.Cfg.MinBWGbps > 0 && p.Largest:
		return BWFloor{Floor: floors.Floor{Size: p.Size, Gbps: e.Cfg.MinBWGbps, Why: fmt.Sprintf("GDR_MIN_BW_GBPS=%g", e.Cfg.MinBWGbps)}}
	case e.Cfg.MinBWGbps > 0:
		return none(fmt.Sprintf("reported only: GDR_MIN_BW_GBPS=%g replaces the derived floors and applies at the largest size of GDR_BW_SIZES", e.Cfg.MinBWGbps))
	case e.Software:
		return none(fmt.Sprintf("no threshold: software device (%s), its port rate is fictional", e.SoftWhy))
	case rate <= 0:
		return none("no threshold: the port rate is unknown")
	}
	l.Loopback, l.Bidir, l.Read = e.loopback, p.Bidir, p.Read
	var unshared string
	if p.Wire != nil {
		sh, err := p.Wire.Share(p.Size, p.ReadOp)
		if err != nil {
			unshared = "; the port's rate counted in full: " + err.Error()
		} else {
			l.PortShare = &sh
		}
	}
	b, err := floors.FindLayout(l)
	if err != nil {
		return none("no threshold: " + err.Error())
	}
	f := BWFloor{Floor: floors.Floors(b, floors.DefaultFractions, []int{p.Size})[0], Limit: b}
	if f.Gbps > 0 {
		f.Why += unshared
	}
	return f
}

// FloorSource is a derived floor in one line, for gdr.floor_source: "0.9
// x port 400 Gb/s x wire efficiency 0.9259 at path MTU 1024 B (RoCE v2,
// 82 B a packet)"; "" when the floor is not a fraction of a bottleneck.
func (f BWFloor) FloorSource() string {
	if f.Gbps <= 0 || f.Fraction.Fraction <= 0 || f.Limit.Source == "" {
		return ""
	}
	return fmt.Sprintf("%g x %s", f.Fraction.Fraction, f.Limit.Source)
}

// LatCeiling is the p50 ceiling of a latency run: US (0: none) with the
// words for the threshold attribute and, for a derived one, which memory
// kind's ceiling applied and its source.
type LatCeiling struct {
	US                float64
	Why, Kind, Source string
}

// LatCeiling is GDR_MAX_LAT_US when set, none on software devices, else
// the ceiling of the path measured (floors.LatCeilingFor): host memory
// polled by the CPU with inline WRITEs (hostPoll), or GPU memory at either
// end (no inline, WRITE_WITH_IMM completions), each with its own number
// and source.
func (e *End) LatCeiling(hostPoll bool) LatCeiling {
	switch {
	case e.Cfg.MaxLatUS > 0:
		return LatCeiling{US: e.Cfg.MaxLatUS, Why: fmt.Sprintf("GDR_MAX_LAT_US=%g", e.Cfg.MaxLatUS)}
	case e.Software:
		return LatCeiling{Why: fmt.Sprintf("no threshold: software device (%s), its timing is not a NIC's", e.SoftWhy)}
	}
	c := floors.LatCeilingFor(hostPoll)
	return LatCeiling{US: c.P50US, Kind: c.Kind, Source: c.Source,
		Why: fmt.Sprintf("default %s-memory ceiling %.1f us for a hardware NIC (%s); set GDR_MAX_LAT_US to change", c.Kind, c.P50US, c.Source)}
}
