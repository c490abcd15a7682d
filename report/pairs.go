package report

import (
	"net"
	"sort"
	"strconv"
	"strings"
)

// PairBW is the RDMA WRITE bandwidth between two hosts at the largest size
// of the sweep (PP-08), as the client measured it.
type PairBW struct {
	Client, Server string
	Gbits          float64
	Status         Status
	// Floor is the case's gdr.min_bw_gbit_s, 0 when it recorded none: the
	// heatmap colours against it.
	Floor float64
}

// resolvePeer names the host a gdr.peer value seen on host from points at:
// by host name (full or short) or by one of the host's addresses
// (host.json's addrs). When several hosts have that address (the lab runs
// pingpong twice on the same VMs, as server and server-hostmem), the one
// whose name ends most like from's wins (client-hostmem -> server-hostmem).
func resolvePeer(peer, from string, hs []*HostResult) string {
	h := peer
	if host, _, err := net.SplitHostPort(peer); err == nil {
		h = host
	}
	best, bestScore := "", -1
	for _, x := range hs {
		id := x.Identity
		short, _, _ := strings.Cut(id.Host, ".")
		match := h == id.Host || h == short
		for _, a := range id.Addrs {
			match = match || a == h
		}
		if match && id.Host != from {
			if sc := commonSuffix(id.Host, from); sc > bestScore {
				best, bestScore = id.Host, sc
			}
		}
	}
	if best == "" {
		return h
	}
	return best
}

func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// Pairs lists the host pairs that ran pingpong's bandwidth test against each
// other: the client's PP-08 WRITE at its largest size, else the server's
// record of it. Loopback runs are not pairs.
func Pairs(hs []*HostResult) []PairBW {
	type key struct{ c, s string }
	best := map[key]PairBW{}
	var order []key
	for _, h := range hs {
		largest := map[string]float64{}
		for _, c := range h.Cases() {
			if c.Req == "PP-08" {
				sz, _ := strconv.ParseFloat(c.Attrs["gdr.size_bytes"], 64)
				largest[c.Attrs["gdr.role"]] = max(largest[c.Attrs["gdr.role"]], sz)
			}
		}
		for _, c := range h.Cases() {
			role, peer := c.Attrs["gdr.role"], c.Attrs["gdr.peer"]
			if c.Req != "PP-08" || peer == "" || role != "client" && role != "server" || c.Attrs["gdr.op"] != "WRITE" && c.Attrs["gdr.op"] != "" {
				continue
			}
			sz, _ := strconv.ParseFloat(c.Attrs["gdr.size_bytes"], 64)
			if sz != largest[role] {
				continue
			}
			other := resolvePeer(peer, h.Identity.Host, hs)
			k := key{h.Identity.Host, other}
			if role == "server" {
				k = key{other, h.Identity.Host}
			}
			bw, _ := strconv.ParseFloat(c.Attrs["gdr.bw_gbit_s"], 64)
			floor, _ := strconv.ParseFloat(c.Attrs["gdr.min_bw_gbit_s"], 64)
			p, seen := best[k]
			if !seen {
				order = append(order, k)
			}
			if !seen || role == "client" {
				nb := PairBW{Client: k.c, Server: k.s, Gbits: bw, Status: c.Status(), Floor: max(floor, p.Floor)}
				if seen && p.Status == Fail {
					nb.Status = Fail // the server's record failed first: a failure stays
				}
				best[k] = nb
			}
			if seen && c.Status() == Fail {
				p = best[k]
				p.Status = Fail
				best[k] = p
			}
		}
	}
	out := make([]PairBW, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Client != out[j].Client {
			return out[i].Client < out[j].Client
		}
		return out[i].Server < out[j].Server
	})
	return out
}
