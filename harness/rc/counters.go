//go:build rdma

package rc

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// portCounters reads an RDMA port's counters/ and hw_counters/ (rxe has
// only the latter) with internal/counters' reader, keyed
// "counters/<name>" and "hw_counters/<name>" for the stall evidence below.
func portCounters(root *hostfs.Root, dev string, port int) (map[string]uint64, error) {
	snap, err := counters.ReadPort(root, dev, port)
	if err != nil {
		return nil, err
	}
	if len(snap.Values) == 0 {
		why := append(append([]string{}, snap.Absent...), snap.Problems...)
		return nil, fmt.Errorf("no readable counter under %s: %s", counters.PortDir(dev, port), strings.Join(why, "; "))
	}
	out := make(map[string]uint64, len(snap.Values))
	for k, v := range snap.Values {
		out[string(k.Source)+"/"+k.Name] = v
	}
	return out, nil
}

// markCounters takes the port counters a stall's or a completion error's
// evidence is measured from (counters0), or keeps why they are unreadable.
func (e *End) markCounters() error {
	c, err := portCounters(e.Root, e.Dev, e.Cfg.IBPort)
	if err != nil {
		e.countersErr = err
		return err
	}
	e.counters0, e.countersAt, e.countersErr = c, time.Now(), nil
	return nil
}

// counterDelta is how much each counter of the second read rose since the
// first (0 for one that did not, or went back).
type counterDelta map[string]uint64

func diffCounters(before, after map[string]uint64) counterDelta {
	d := counterDelta{}
	for k, a := range after {
		d[k] = 0
		if b := before[k]; a > b {
			d[k] = a - b
		}
	}
	return d
}

// short drops the directory of a key.
func short(k string) string { return k[strings.IndexByte(k, '/')+1:] }

func (d counterDelta) String() string {
	ks := make([]string, 0, len(d))
	for k, v := range d {
		if v > 0 {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return "none rose"
	}
	sort.Strings(ks)
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprintf("%s +%d", short(k), d[k])
	}
	return strings.Join(s, ", ")
}

func (d counterDelta) any(names ...string) []string {
	var out []string
	for k, v := range d {
		for _, n := range names {
			if short(k) == n && v > 0 {
				out = append(out, fmt.Sprintf("%s +%d", n, v))
			}
		}
	}
	sort.Strings(out)
	return out
}

func (d counterDelta) sum(names ...string) (n uint64, seen bool) {
	for k, v := range d {
		for _, m := range names {
			if short(k) == m {
				n += v
				seen = true
			}
		}
	}
	return n, seen
}

// Counter names by what a rise means: rxe's (drivers/infiniband/sw/rxe/
// rxe_hw_counters.c), mlx5's hw_counters and the IBTA port counters.
var (
	gaveUp     = []string{"retry_exceeded_err", "req_transport_retries_exceeded", "local_ack_timeout_err"}
	retransmit = []string{"completer_retry_err", "rcvd_seq_err", "out_of_seq_request", "duplicate_request",
		"packet_seq_err", "out_of_sequence", "implied_nak_seq_err", "retry_exceeded_err", "local_ack_timeout_err",
		"req_transport_retries_exceeded"}
	received = []string{"rcvd_pkts", "port_rcv_packets", "unicast_rcv_packets"}
	sent     = []string{"sent_pkts", "port_xmit_packets", "unicast_xmit_packets"}
	downed   = []string{"link_downed"}
	// rxe counts a packet its netdev refused (link down, no route): the
	// completion then says "local QP operation error".
	notSent = []string{"send_err"}
)

// interpret says what the counters that rose mean for a stalled transfer,
// "" when they say nothing.
func interpret(d counterDelta) string {
	var why []string
	if l := d.any(downed...); len(l) > 0 {
		why = append(why, "the link went down and up ("+strings.Join(l, ", ")+")")
	}
	if l := d.any(gaveUp...); len(l) > 0 {
		why = append(why, "retry exceeded: the NIC gave up after its retransmissions ("+strings.Join(l, ", ")+")")
	} else if l := d.any(retransmit...); len(l) > 0 {
		why = append(why, "packets were lost or late and the NIC retransmitted ("+strings.Join(l, ", ")+")")
	}
	if l := d.any(notSent...); len(l) > 0 {
		why = append(why, "the NIC could not put packets on the wire ("+strings.Join(l, ", ")+"): its link or route was down")
	}
	rx, rxSeen := d.sum(received...)
	tx, _ := d.sum(sent...)
	if rxSeen && rx == 0 && tx > 0 {
		why = append(why, fmt.Sprintf("the NIC sent %d packets since the connection and received none: the peer is unreachable or gone", tx))
	}
	return strings.Join(why, "; ")
}
