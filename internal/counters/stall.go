package counters

import (
	"fmt"
	"sort"
	"strings"
)

// A stall (a transfer that timed out or ended in a completion error) is
// explained from one RDMA port's counters since the connection. The table
// says what each counter means; stallRoles adds what a rise says about the
// one transfer that failed. Retransmission is the table's own: every Error
// counter whose cause is CauseRetrans.
type stallRole int

const (
	roleGaveUp   stallRole = iota + 1 // the NIC stopped retrying: the QP failed
	roleDowned                        // the link went down (and up)
	roleNotSent                       // the netdev refused a packet
	roleReceived                      // packets received
	roleSent                          // packets sent
)

// stallRoles by counter name, in ports/<p>/counters or hw_counters (rxe's
// drivers/infiniband/sw/rxe/rxe_hw_counters.c, mlx5's hw_counters, IBTA).
// local_ack_timeout_err counts as giving up: a stalled QP's ACK timer ran
// out, and with the transfer failed no retry recovered it.
var stallRoles = map[string]stallRole{
	"retry_exceeded_err":             roleGaveUp,
	"req_transport_retries_exceeded": roleGaveUp,
	"local_ack_timeout_err":          roleGaveUp,
	"link_downed":                    roleDowned,
	// rxe counts a packet its netdev refused (link down, no route): the
	// completion then says "local QP operation error".
	"send_err":             roleNotSent,
	"rcvd_pkts":            roleReceived,
	"port_rcv_packets":     roleReceived,
	"unicast_rcv_packets":  roleReceived,
	"sent_pkts":            roleSent,
	"port_xmit_packets":    roleSent,
	"unicast_xmit_packets": roleSent,
}

// portChange: a change of an RDMA port counter (stalls read no AER).
func portChange(c Change) bool { return c.Key.Source == Port || c.Key.Source == HW }

// rise is one change as an evidence line shows it: "rcvd_seq_err +3".
func rise(c Change) string {
	if c.Reset {
		// After is a lower bound of the rise (as Diff says); the words keep
		// the list's commas and the cause's parentheses unambiguous.
		return fmt.Sprintf("%s +%d since a reset or wrap", c.Key.Name, c.Delta)
	}
	return fmt.Sprintf("%s +%d", c.Key.Name, c.Delta)
}

// Rises lists the port counters of d that rose, in key order, for an
// evidence line: "completer_retry_err +12, rcvd_pkts +210"; "none rose"
// when none did.
func (d Delta) Rises() string {
	var s []string
	for _, c := range d.Changes {
		if portChange(c) && c.Rose() {
			s = append(s, rise(c))
		}
	}
	if len(s) == 0 {
		return "none rose"
	}
	return strings.Join(s, ", ")
}

// rose lists the port counters of d that rose and match, by name.
func (d Delta) rose(match func(Change) bool) []string {
	var out []string
	for _, c := range d.Changes {
		if portChange(c) && c.Rose() && match(c) {
			out = append(out, rise(c))
		}
	}
	sort.Strings(out)
	return out
}

// roleOf is c's stall role; mlx5 representors' vport_ counters are the
// same counters, as in Classify.
func roleOf(c Change) stallRole {
	return stallRoles[strings.TrimPrefix(c.Key.Name, "vport_")]
}

func hasRole(r stallRole) func(Change) bool {
	return func(c Change) bool { return roleOf(c) == r }
}

func retransmitted(c Change) bool {
	return c.Class.Kind == Error && c.Class.Cause == CauseRetrans
}

// packets sums the rises of role r's counters; seen: one of them is in the
// second snapshot.
func (d Delta) packets(r stallRole) (n uint64, seen bool) {
	for _, c := range d.Changes {
		if portChange(c) && !c.Gone && roleOf(c) == r {
			n += c.Delta
			seen = true
		}
	}
	return n, seen
}

// StallCause says what the port counters that rose in d mean for a
// transfer that stalled or ended in error, "" when they say nothing.
func StallCause(d Delta) string {
	var why []string
	if l := d.rose(hasRole(roleDowned)); len(l) > 0 {
		why = append(why, "the link went down and up ("+strings.Join(l, ", ")+")")
	}
	if l := d.rose(hasRole(roleGaveUp)); len(l) > 0 {
		why = append(why, "retry exceeded: the NIC gave up after its retransmissions ("+strings.Join(l, ", ")+")")
	} else if l := d.rose(retransmitted); len(l) > 0 {
		why = append(why, "packets were lost or late and the NIC retransmitted ("+strings.Join(l, ", ")+")")
	}
	if l := d.rose(hasRole(roleNotSent)); len(l) > 0 {
		why = append(why, "the NIC could not put packets on the wire ("+strings.Join(l, ", ")+"): its link or route was down")
	}
	rx, rxSeen := d.packets(roleReceived)
	tx, _ := d.packets(roleSent)
	if rxSeen && rx == 0 && tx > 0 {
		why = append(why, fmt.Sprintf("the NIC sent %d packets since the connection and received none: the peer is unreachable or gone", tx))
	}
	return strings.Join(why, "; ")
}
