package floors

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// The bottleneck of a bandwidth point comes from the path its bytes take:
// which streams run at once and which full-duplex resources (PCIe links,
// the port's wire) each crosses in which direction. A resource direction
// of capacity C that k streams cross gives each stream at most C/k; the
// streams of one point run alike (both ends post the same work, as
// ib_write_bw -b does), so the total is n x the smallest C/k. This is
// what the issue-15 review found missing: loopback crosses the NIC's link
// in both directions at once, so a bidirectional loopback run is bounded
// by one direction of that link, not by twice it.

// Dir is a direction of a full-duplex resource.
type Dir string

// Directions. A PCIe link on the path between a NIC and its buffer is
// crossed toward the NIC when the NIC reads the buffer (the source of a
// WRITE, the target of a READ) and toward the memory when it writes it;
// the port's wire is crossed from one host to the other.
const (
	ToNIC Dir = "toward the NIC (the NIC reads the buffer)"
	ToMem Dir = "toward the memory (the NIC writes the buffer)"
)

// Hop is one resource direction a stream crosses.
type Hop struct {
	Name string  // the resource: "port", "NIC 0000:3b:00.0", "client NIC 0000:3b:00.0"
	Dir  Dir     // "" for a resource that bounds each stream on its own (no shared direction)
	Gbps float64 // its capacity in that direction
	// Req: the hop carries the stream's read requests, not its data: it
	// loads the direction by Load per byte of the stream (ReadReqLoad).
	Req  bool
	Load float64
}

// Stream is one flow of bytes of a bandwidth point, with every hop it
// crosses.
type Stream struct {
	Name string
	Hops []Hop
}

// Path is one host's side of a stream: the PCIe links between its NIC
// and the buffer (for GPU memory the GPU's, the switch ports' and the
// NIC's; for host memory the NIC's and the ports above it), each with its
// payload rate in one direction (links are symmetric). A peer host sends
// only its slowest link (harness/rc.End.PathLimit); that is one Limit.
type Path []Limit

// Layout is what a bandwidth point moves and where.
type Layout struct {
	PortGbps float64
	// PortShare is the share of PortGbps that carries payload at this
	// point's size (Wire.Share: headers and framing at the path MTU, and
	// the line code); nil counts the rate in full (no wire known).
	PortShare *Share
	Loopback  bool // both ends on one NIC (GDR_ROLE unset)
	Bidir     bool // both ends send at once (WRITE-BIDIR)
	// Paths: one in loopback (both buffers are on the rail's GPU or in
	// host memory of one host: rc.Connect allocates both ends' buffers
	// with the same Alloc on the same rail); two hosts: the source's first
	// (the host whose buffer the NIC reads: the client for WRITE, the
	// server for READ), then the destination's.
	Paths []Path
	// Read: the stream is RDMA READ and its outstanding reads bound it
	// (nil: not a READ, or no round trip known).
	Read *ReadBound
	// ReadReq is the Max_Read_Request_Size of each path's NIC, in the
	// order of Paths (missing or 0: AssumedMaxReadReq). The NIC that reads
	// a buffer sends its read requests back along the path, toward the
	// memory, where in loopback and bidirectional runs data also flows.
	ReadReq []int
}

// Streams lays out the streams of l and the hops each crosses:
//   - two hosts, one direction: the sender's path toward its NIC, the
//     wire, the receiver's path toward its memory;
//   - two hosts, both directions: two such streams, opposite ways, so each
//     link direction and each wire direction carries one stream;
//   - loopback, one direction: the NIC reads the source buffer and writes
//     the destination buffer through the same links, one stream per link
//     direction; the loopback happens inside the NIC (no wire), and the
//     stream passes the port's send and receive side once;
//   - loopback, both directions: two streams, each crossing every link in
//     both directions: each link direction carries both, and so does the
//     port (both streams are sent and received by the one port), so the
//     total is min(port, one direction of the slowest link).
//
// Every stream also sends its read requests back along its source path,
// toward the memory (ReadReqLoad of that path's NIC).
func (l Layout) Streams() ([]Stream, error) {
	if !(l.PortGbps > 0) || math.IsInf(l.PortGbps, 0) {
		return nil, fmt.Errorf("port rate %v Gb/s: want a positive rate", l.PortGbps)
	}
	port, portName := l.PortGbps, "port"
	if sh := l.PortShare; sh != nil {
		if !(sh.Fraction > 0 && sh.Fraction <= 1) {
			return nil, fmt.Errorf("port payload share %v: want a fraction above 0 and at most 1", sh.Fraction)
		}
		port = l.PortGbps * sh.Fraction
		portName = fmt.Sprintf("port (%g Gb/s x %.4f: %s)", l.PortGbps, sh.Fraction, sh.Note)
	}
	want := 2
	if l.Loopback {
		want = 1
	}
	if len(l.Paths) != want {
		return nil, fmt.Errorf("%d host paths for a %s run: want %d", len(l.Paths), map[bool]string{true: "loopback", false: "two-host"}[l.Loopback], want)
	}
	loads := make([]float64, len(l.Paths))
	for i := range loads {
		m := AssumedMaxReadReq
		if i < len(l.ReadReq) && l.ReadReq[i] != 0 {
			m = l.ReadReq[i]
		}
		w, err := ReadReqLoad(m)
		if err != nil {
			return nil, fmt.Errorf("path %d's NIC: %w", i+1, err)
		}
		loads[i] = w
	}
	links := func(p Path, d Dir, req float64) []Hop {
		var hs []Hop
		for _, k := range p {
			if k.Gbps > 0 && !math.IsInf(k.Gbps, 0) {
				hs = append(hs, Hop{Name: k.By, Dir: d, Gbps: k.Gbps})
				if req > 0 {
					hs = append(hs, Hop{Name: k.By, Dir: ToMem, Gbps: k.Gbps, Req: true, Load: req})
				}
			}
		}
		return hs
	}
	mk := func(name string, from, to Path, wire Dir, fromLoad float64) Stream {
		s := Stream{Name: name}
		s.Hops = append(s.Hops, links(from, ToNIC, fromLoad)...)
		if l.Loopback {
			// Every loopback stream leaves through the port's send side
			// and re-enters through its receive side: the streams share
			// the port as they share the links (conservative: what the
			// NIC's internal loopback carries is not published, and
			// assuming more would fail healthy hosts).
			s.Hops = append(s.Hops, Hop{Name: portName + " (NIC-internal loopback)", Dir: "send and receive side, shared by every stream", Gbps: port})
		} else {
			s.Hops = append(s.Hops, Hop{Name: portName, Dir: wire, Gbps: port})
		}
		s.Hops = append(s.Hops, links(to, ToMem, 0)...)
		if l.Read != nil {
			if g := l.Read.Gbps(); g > 0 {
				s.Hops = append(s.Hops, Hop{Name: l.Read.String() + " of " + name, Gbps: g})
			}
		}
		return s
	}
	var out []Stream
	if l.Loopback {
		p := l.Paths[0]
		out = append(out, mk("stream 1", p, p, "", loads[0]))
		if l.Bidir {
			out = append(out, mk("stream 2", p, p, "", loads[0]))
		}
		return out, nil
	}
	a, b := l.Paths[0], l.Paths[1]
	out = append(out, mk("stream 1", a, b, "host 1->host 2", loads[0]))
	if l.Bidir {
		out = append(out, mk("stream 2", b, a, "host 2->host 1", loads[1]))
	}
	return out, nil
}

// Derive is the bottleneck of streams running alike: n x the smallest
// C/k over every resource direction (capacity C, crossed by k streams).
// Derived says which resource direction limits, how many streams share
// it, and the sum.
func Derive(portGbps float64, streams []Stream) (Bottleneck, error) {
	if len(streams) == 0 {
		return Bottleneck{}, fmt.Errorf("no stream to derive a bottleneck from")
	}
	type use struct {
		hop        Hop
		k, reqs    int     // streams whose data, and whose read requests, cross it
		load, reqW float64 // their load per byte of one stream: k + the requests' share
	}
	uses := map[string]*use{}
	var keys []string
	for _, s := range streams {
		for _, h := range s.Hops {
			if !(h.Gbps > 0) || math.IsInf(h.Gbps, 0) {
				return Bottleneck{}, fmt.Errorf("%s: capacity %v Gb/s: want a positive rate", h.Name, h.Gbps)
			}
			key := h.Name + "\x00" + string(h.Dir)
			u, ok := uses[key]
			if !ok {
				u = &use{hop: h}
				uses[key] = u
				keys = append(keys, key)
			}
			if h.Req {
				u.reqs++
				u.load += h.Load
				u.reqW = h.Load
			} else {
				u.k++
				u.load++
			}
		}
	}
	sort.Strings(keys) // ties: the same resource every run
	var lim *use
	per := math.Inf(1)
	for _, key := range keys {
		u := uses[key]
		if u.k == 0 {
			continue // requests alone never fill a direction before data does elsewhere
		}
		if r := u.hop.Gbps / u.load; r < per {
			per, lim = r, u
		}
	}
	n := len(streams)
	b := Bottleneck{Gbps: per * float64(n), PortGb: portGbps}
	where := lim.hop.Name
	if lim.hop.Dir != "" {
		where += " " + string(lim.hop.Dir)
	}
	if strings.HasPrefix(lim.hop.Name, "port") {
		b.Limit = "port"
	} else {
		b.Limit = where
	}
	// The slowest link, for the report (bw_limit_*), whatever limits.
	for _, key := range keys {
		h := uses[key].hop
		if h.Dir != "" && !strings.HasPrefix(h.Name, "port") && (b.PCIeGb == 0 || h.Gbps < b.PCIeGb) {
			b.PCIeGb, b.PCIeBy = h.Gbps, h.Name
		}
	}
	shared := fmt.Sprintf("shared by %d stream(s)", lim.k)
	if lim.reqs > 0 {
		shared += fmt.Sprintf(" and the read requests of %d (%.3f each per byte read)", lim.reqs, lim.reqW)
	}
	b.Derived = fmt.Sprintf("%d stream(s); limit: %s, %.1f Gb/s %s = %.1f Gb/s each; total %d x %.1f = %.1f Gb/s",
		n, where, lim.hop.Gbps, shared, per, n, per, b.Gbps)
	return b, nil
}

// FindLayout is the bottleneck of l (Streams, then Derive), with Source
// saying in one line what the floor is a fraction of.
func FindLayout(l Layout) (Bottleneck, error) {
	ss, err := l.Streams()
	if err != nil {
		return Bottleneck{}, err
	}
	b, err := Derive(l.PortGbps, ss)
	if err != nil {
		return b, err
	}
	if l.PortShare != nil {
		b.PortShare = l.PortShare.Fraction
	}
	b.Source = fmt.Sprintf("%s (%.1f Gb/s)", b.Limit, b.Gbps)
	if b.Limit == "port" {
		b.Source = fmt.Sprintf("port %g Gb/s", l.PortGbps)
		if l.PortShare != nil {
			b.Source += " x " + l.PortShare.Short
		}
		if n := len(ss); n > 1 && !l.Loopback {
			b.Source = fmt.Sprintf("%d x %s", n, b.Source)
		}
	}
	return b, nil
}

// PathOf is links reduced to their payload rates, for a Layout.
func PathOf(links []Link) (Path, error) {
	var p Path
	for _, k := range links {
		g, err := k.PayloadGbps()
		if err != nil {
			return nil, err
		}
		p = append(p, Limit{Gbps: g, By: k.Name})
	}
	return p, nil
}

// ReadBound is the rate RDMA READ can reach with Depth reads outstanding
// per queue pair (the responder's max_qp_rd_atom, agreed at connect; 16 on
// ConnectX: ib_read_bw prints "Outstand reads : 16" on mlx5, e.g. in
// openucx/ucx issue 8852) on QPs queue pairs, each read taking RTT from post to
// completion: Depth x QPs x Size bytes per RTT. The round trip is
// measured by the run itself (one READ of the same size in flight at a
// time), so the bound holds on this path whatever the fabric adds; a
// loaded round trip is never shorter, so the bound is an upper limit.
//
// Why this and not a fixed fraction: at 4 KiB one QP with 16 reads
// outstanding moves 64 KiB per round trip; at 2 us that is 262 Gb/s and
// at 3 us 175 Gb/s, under the 0.6 x 400 = 240 Gb/s the size's fraction
// asks on a 400G port. No vendor publishes an ib_read_bw figure at 4 KiB
// to calibrate against (ngc_multinode_perf judges 64 KiB only), while the
// bound follows from the InfiniBand rule that a responder serves at most
// max_qp_rd_atom reads at once (IBTA Vol. 1, RDMA READ resources; rdma-core
// libibverbs/man/ibv_modify_qp.3, max_dest_rd_atomic), which holds on any
// NIC and fabric.
type ReadBound struct {
	Depth, QPs, Size int
	RTT              time.Duration
}

// Gbps is the bound in Gb/s; 0 when a field is not positive (unknown).
func (r ReadBound) Gbps() float64 {
	if r.Depth <= 0 || r.QPs <= 0 || r.Size <= 0 || r.RTT <= 0 {
		return 0
	}
	return float64(r.Depth) * float64(r.QPs) * float64(r.Size) * 8 / r.RTT.Seconds() / 1e9
}

func (r ReadBound) String() string {
	return fmt.Sprintf("outstanding reads (%d x %d QP(s) x %d B per %.2f us measured READ round trip)", r.Depth, r.QPs, r.Size, float64(r.RTT)/float64(time.Microsecond))
}
