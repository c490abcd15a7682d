package floors

import (
	"fmt"
	"strings"
)

// What a port carries of RDMA payload: every packet adds headers and, on
// Ethernet, framing around at most path-MTU bytes of payload, and on older
// InfiniBand speeds the rate file counts the line code too. The bandwidth
// floors are a fraction of what the path can carry in payload, so the
// port's share is counted here as the PCIe side's TLP overhead is in
// TLPEfficiency.

// Bytes per packet, each from its specification. The InfiniBand Architecture
// Specification (Vol. 1, the packet formats of the link and transport
// layers) and its RoCE v2 annex (A17) define the headers; the byte counts
// are as Linux states them in include/rdma/ib_pack.h (IB_LRH_BYTES,
// IB_GRH_BYTES, IB_BTH_BYTES, IB_ICRC_BYTES, IB_ETH_BYTES, IB_VLAN_BYTES,
// IB_IP4_BYTES, IB_UDP_BYTES) and rxe builds them in
// drivers/infiniband/sw/rxe/rxe_hdr.h and rxe_opcode.c.
const (
	LRHBytes = 8  // Local Route Header: every InfiniBand packet
	GRHBytes = 40 // Global Route Header: InfiniBand between subnets; every RoCE v1 packet
	BTHBytes = 12 // Base Transport Header: every packet
	// RETHBytes: the RDMA Extended Transport Header (virtual address 8,
	// R_Key 4, DMA length 4: rxe_hdr.h struct rxe_reth) rides on the first
	// (or only) packet of an RDMA WRITE (rxe_opcode.c
	// IB_OPCODE_RC_RDMA_WRITE_FIRST/ONLY: RXE_BTH_BYTES + RXE_RETH_BYTES).
	RETHBytes = 16
	// AETHBytes: the ACK Extended Transport Header rides on the first and
	// last (or only) RDMA READ response packet (rxe_opcode.c
	// IB_OPCODE_RC_RDMA_READ_RESPONSE_FIRST/LAST/ONLY; MIDDLE has none).
	AETHBytes = 4
	ICRCBytes = 4 // Invariant CRC: every packet, InfiniBand and RoCE
	// VCRCBytes: the Variant CRC closes every InfiniBand link packet
	// (Wireshark epan/dissectors/packet-infiniband.c: "Variant CRC"
	// FT_UINT16 beside the FT_UINT32 "Invariant CRC"); RoCE has none, the
	// Ethernet FCS stands in.
	VCRCBytes = 2

	// Ethernet (IEEE 802.3): a frame occupies the wire for its preamble
	// and start-of-frame delimiter and the minimum inter-frame gap as
	// well (DPDK lib/ethdev/rte_tm.h: RTE_TM_ETH_FRAMING_OVERHEAD 20 =
	// preamble 7 + SFD 1 + IFG 12; RTE_TM_ETH_FRAMING_OVERHEAD_FCS 24 with
	// the FCS).
	PreambleSFDBytes = 8
	IFGBytes         = 12
	EthHeaderBytes   = 14 // destination, source, EtherType (IB_ETH_BYTES)
	VLANTagBytes     = 4  // 802.1Q tag (IB_VLAN_BYTES)
	FCSBytes         = 4  // Frame Check Sequence
	IPv4Bytes        = 20 // RoCE v2 over IPv4 (IB_IP4_BYTES)
	IPv6Bytes        = 40 // RoCE v2 over IPv6 (the same 40 bytes as a GRH)
	UDPBytes         = 8  // RoCE v2: UDP, destination port 4791 (IB_UDP_BYTES)
)

// RoCEHeaderReserve is what Linux subtracts from a netdev's MTU to find the
// largest InfiniBand MTU a RoCE port can use (include/rdma/ib_addr.h
// iboe_get_mtu: IB_GRH_BYTES + IB_UDP_BYTES + IB_BTH_BYTES +
// IB_EXT_XRC_BYTES + IB_EXT_ATOMICETH_BYTES + IB_ICRC_BYTES = 40 + 8 + 12 +
// 4 + 28 + 4); mlx5 takes the port's active MTU as the lower of that and
// the port's maximum.
const RoCEHeaderReserve = 96

// NetdevMTUFor4096 is the smallest netdev MTU that gives a RoCE port an
// active MTU of 4096 B.
const NetdevMTUFor4096 = 4096 + RoCEHeaderReserve

// RoCEMTU is the InfiniBand MTU Linux derives from a netdev MTU for RoCE
// (iboe_get_mtu): the largest of 4096, 2048, 1024, 512, 256 that fits
// after RoCEHeaderReserve; 0 when none does.
func RoCEMTU(netdevMTU int) int {
	m := netdevMTU - RoCEHeaderReserve
	for ib := 4096; ib >= 256; ib /= 2 {
		if m >= ib {
			return ib
		}
	}
	return 0
}

// Link layers as sysfs' link_layer and verbs name them.
const (
	InfiniBand = "InfiniBand"
	Ethernet   = "Ethernet"
)

// Wire is how a port frames RDMA payload at the path MTU.
type Wire struct {
	LinkLayer string // InfiniBand or Ethernet (the port's link_layer)
	// GIDType is the RoCE GID's type as the kernel names it ("RoCE v2",
	// "IB/RoCE v1"); "" on InfiniBand or when unknown (RoCE v2 assumed:
	// the automatic GID rule picks it).
	GIDType string
	IPv6    bool // RoCE v2: the GID is not IPv4-mapped, so packets carry IPv6
	VLAN    bool // RoCE: the GID's netdev is an 802.1Q VLAN device
	GRH     bool // InfiniBand: packets carry a GRH (a port that requires one, or subnets that differ)
	// Speed is the port's lane speed name from its rate file ("HDR"):
	// on InfiniBand it decides the line code (LineCode).
	Speed   string
	PathMTU int // payload bytes per packet (256 to 4096)
}

// Item is one header or framing field and its bytes.
type Item struct {
	Name  string
	Bytes int
}

// Kind names the framing: "InfiniBand", "RoCE v1", "RoCE v2".
func (w Wire) Kind() string {
	switch {
	case w.LinkLayer != Ethernet:
		return "InfiniBand"
	case strings.Contains(w.GIDType, "v1"):
		return "RoCE v1"
	}
	return "RoCE v2"
}

// Items are the bytes every packet adds to its payload, in wire order.
func (w Wire) Items() []Item {
	if w.LinkLayer != Ethernet {
		it := []Item{{"LRH", LRHBytes}}
		if w.GRH {
			it = append(it, Item{"GRH", GRHBytes})
		}
		return append(it, Item{"BTH", BTHBytes}, Item{"ICRC", ICRCBytes}, Item{"VCRC", VCRCBytes})
	}
	it := []Item{{"preamble+SFD", PreambleSFDBytes}, {"Ethernet", EthHeaderBytes}}
	if w.VLAN {
		it = append(it, Item{"VLAN tag", VLANTagBytes})
	}
	switch {
	case w.Kind() == "RoCE v1":
		it = append(it, Item{"GRH", GRHBytes})
	case w.IPv6:
		it = append(it, Item{"IPv6", IPv6Bytes}, Item{"UDP", UDPBytes})
	default:
		it = append(it, Item{"IPv4", IPv4Bytes}, Item{"UDP", UDPBytes})
	}
	return append(it, Item{"BTH", BTHBytes}, Item{"ICRC", ICRCBytes}, Item{"FCS", FCSBytes}, Item{"IFG", IFGBytes})
}

// Overhead is the bytes every packet adds to its payload.
func (w Wire) Overhead() int {
	n := 0
	for _, it := range w.Items() {
		n += it.Bytes
	}
	return n
}

// OverheadNote itemises Overhead: "RoCE v2: preamble+SFD 8, Ethernet 14,
// IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4, IFG 12 = 82 B a packet".
func (w Wire) OverheadNote() string {
	parts := make([]string, 0, 10)
	for _, it := range w.Items() {
		parts = append(parts, fmt.Sprintf("%s %d", it.Name, it.Bytes))
	}
	s := fmt.Sprintf("%s: %s = %d B a packet", w.Kind(), strings.Join(parts, ", "), w.Overhead())
	if w.Kind() == "RoCE v2" && w.GIDType == "" {
		s += " (GID type unknown: RoCE v2 assumed)"
	}
	return s
}

// lineCodes: on InfiniBand the kernel's rate file (rate_show in
// drivers/infiniband/core/sysfs.c: 25, 50, 100, 100, 140, 250, 500, 1000,
// 2000 deci-Gb/s a lane for SDR..XDR) gives SDR, DDR and QDR at their
// signalling rate, whose 8b/10b code carries 8 data bits in 10, and FDR at
// 14 Gb/s a lane where 14.0625 Gbaud of 64b/66b carries 13.64; FDR10
// (10.3125 Gbaud, 64b/66b), EDR (25.78125) and HDR, NDR, XDR (whose
// 53.125, 106.25 and 212.5 Gb/s signalling includes the FEC) are written
// at their data rate.
var lineCodes = map[string]struct {
	data float64 // data bits per bit the rate file counts
	why  string
}{
	"SDR":   {0.8, "SDR's 8b/10b: 2 of the rate file's 2.5 Gb/s a lane carry data"},
	"DDR":   {0.8, "DDR's 8b/10b: 4 of the rate file's 5 Gb/s a lane carry data"},
	"QDR":   {0.8, "QDR's 8b/10b: 8 of the rate file's 10 Gb/s a lane carry data"},
	"FDR10": {1, "FDR10: 10.3125 Gbaud of 64b/66b, 10 Gb/s of data a lane, as the rate file says"},
	"FDR":   {14.0625 * 64 / 66 / 14, "FDR's 64b/66b: 13.64 of the rate file's 14 Gb/s a lane carry data (14.0625 Gbaud)"},
	"EDR":   {1, "EDR: 25.78125 Gbaud of 64b/66b, 25 Gb/s of data a lane, as the rate file says"},
	"HDR":   {1, "HDR: 50 Gb/s of data a lane, as the rate file says (53.125 Gb/s signalling with FEC)"},
	"NDR":   {1, "NDR: 100 Gb/s of data a lane, as the rate file says (106.25 Gb/s signalling with FEC)"},
	"XDR":   {1, "XDR: 200 Gb/s of data a lane, as the rate file says (212.5 Gb/s signalling with FEC)"},
}

// LineCode is the share of the port's rate that carries bits of packets,
// with the reason. RoCE ports report their Ethernet speed, the MAC's data
// rate after the PCS line code (mlx5 maps each Ethernet mode to an
// InfiniBand width and speed: translate_eth_legacy_proto_oper in
// drivers/infiniband/hw/mlx5/main.c, 40GBASE-CR4 as 4X QDR, 400 GbE as 4X
// NDR or 8X HDR), so the share is 1 there whatever speed name the rate
// file shows.
func (w Wire) LineCode() (float64, string) {
	if w.LinkLayer == Ethernet {
		return 1, "Ethernet: the rate is the MAC's data rate"
	}
	if c, ok := lineCodes[w.Speed]; ok {
		return c.data, c.why
	}
	return 1, fmt.Sprintf("InfiniBand speed %q not known: the rate is taken as the data rate", w.Speed)
}

// checkMTU accepts the InfiniBand MTUs (256 to 4096 bytes).
func checkMTU(mtu int) error {
	if mtu < 256 || mtu > 4096 || mtu&(mtu-1) != 0 {
		return fmt.Errorf("path MTU %d B: want 256, 512, 1024, 2048 or 4096", mtu)
	}
	return nil
}

// Share is the payload share of a port's rate for one point: Fraction of
// the rate carries payload; Efficiency is the framing's part of it (the
// line code's is Fraction/Efficiency).
type Share struct {
	Fraction   float64
	Efficiency float64 // payload / (payload + headers and framing), at this size
	Overhead   int     // bytes a packet
	Note       string  // for the floor's derivation
	Short      string  // for gdr.floor_source
}

// Share is what w leaves of the port's rate for size-byte messages: each
// message is ceil(size/PathMTU) packets of Overhead bytes beside their
// payload, plus RETH on the first packet of a WRITE, or AETH on the first
// and last packet of a READ response (read). ACKs travel the other way
// and are not counted against the direction that carries the data.
func (w Wire) Share(size int, read bool) (Share, error) {
	if err := checkMTU(w.PathMTU); err != nil {
		return Share{}, err
	}
	if size <= 0 {
		return Share{}, fmt.Errorf("message size %d B: want a positive size", size)
	}
	pkts := (size + w.PathMTU - 1) / w.PathMTU
	perMsg := RETHBytes
	if read {
		perMsg = AETHBytes
		if pkts > 1 {
			perMsg = 2 * AETHBytes
		}
	}
	oh := w.Overhead()
	eff := float64(size) / float64(size+pkts*oh+perMsg)
	code, why := w.LineCode()
	s := Share{Fraction: eff * code, Efficiency: eff, Overhead: oh}
	s.Note = fmt.Sprintf("wire efficiency %.4f at path MTU %d B (%s)", eff, w.PathMTU, w.OverheadNote())
	s.Short = fmt.Sprintf("wire efficiency %.4f at path MTU %d B (%s, %d B a packet)", eff, w.PathMTU, w.Kind(), oh)
	if code != 1 {
		s.Note += fmt.Sprintf(" x line code %.4f (%s)", code, why)
		s.Short += fmt.Sprintf(" x line code %.4f", code)
	}
	return s, nil
}

// MTUEnd is one host's side of a RoCE path MTU.
type MTUEnd struct {
	Who       string // "this host" or "the peer (10.0.0.2)"
	ActiveMTU int    // its port's active MTU (0 unknown)
	Netdev    string // the netdev under its GID ("" unknown)
	NetdevMTU int    // that netdev's MTU (0 unknown)
}

// MTUCause says why a RoCE path MTU is below 4096 when a netdev MTU is
// the reason: the host whose netdev MTU, less RoCEHeaderReserve, allows
// no more than the path MTU (RoCEMTU), or else the host whose port's
// active MTU is the path MTU (on RoCE the kernel derives it from the
// netdev MTU). ok is false on InfiniBand, at 4096, and when no host's
// MTU explains it.
func (w Wire) MTUCause(ends []MTUEnd) (cause string, ok bool) {
	if w.LinkLayer != Ethernet || w.PathMTU >= 4096 || checkMTU(w.PathMTU) != nil {
		return "", false
	}
	var by []string
	for _, e := range ends {
		if e.NetdevMTU > 0 && RoCEMTU(e.NetdevMTU) <= w.PathMTU {
			name := ""
			if e.Netdev != "" {
				name = " " + e.Netdev
			}
			by = append(by, fmt.Sprintf("%s's netdev%s has MTU %d, which leaves a RoCE MTU of %d B (Linux iboe_get_mtu: the netdev MTU less %d B of RoCE headers; %d or more gives 4096)",
				e.Who, name, e.NetdevMTU, RoCEMTU(e.NetdevMTU), RoCEHeaderReserve, NetdevMTUFor4096))
		}
	}
	if len(by) == 0 {
		for _, e := range ends {
			if e.ActiveMTU == w.PathMTU && e.NetdevMTU == 0 {
				by = append(by, fmt.Sprintf("%s's port has active MTU %d B (on RoCE the kernel derives it from the netdev MTU, not read here)", e.Who, e.ActiveMTU))
			}
		}
	}
	if len(by) == 0 {
		return "", false
	}
	cause = fmt.Sprintf("the RoCE path MTU is %d B: %s", w.PathMTU, strings.Join(by, "; "))
	at := w
	at.PathMTU = 4096
	now, err1 := w.Share(1<<20, false)
	best, err2 := at.Share(1<<20, false)
	if err1 == nil && err2 == nil {
		cause += fmt.Sprintf("; %d B packets carry %.1f%% of the port's rate in payload, 4096 B packets %.1f%%", w.PathMTU, 100*now.Fraction, 100*best.Fraction)
	}
	return cause, true
}

// MTURemedy is the remedy of a bandwidth failure whose path MTU MTUCause
// explains: the MTU first, then what BWRemedy lists.
const MTURemedy = "raise the netdev MTU to 4200 or more (9000 is usual) on both hosts and on every switch port between them (ip link set dev <netdev> mtu 9000, and the switch interfaces' MTU) so that the RoCE path MTU becomes 4096"
