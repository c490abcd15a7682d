package counters

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func hw(vals map[string]uint64) *Snapshot {
	s := newSnapshot()
	for n, v := range vals {
		s.Values[k("rxe0", HW, "", n)] = v
	}
	return s
}

// A stall's evidence: the likely cause from what rose, and every rise.
func TestStallCause(t *testing.T) {
	before := hw(map[string]uint64{"sent_pkts": 100, "rcvd_pkts": 90, "completer_retry_err": 0, "rcvd_seq_err": 0,
		"retry_exceeded_err": 0, "link_downed": 0, "duplicate_request": 0, "send_err": 0})
	d := Diff(before, before)
	assert.Empty(t, StallCause(d))
	assert.Equal(t, "none rose", d.Rises())

	d = Diff(before, hw(map[string]uint64{"sent_pkts": 900, "rcvd_pkts": 300, "completer_retry_err": 12, "rcvd_seq_err": 3,
		"retry_exceeded_err": 1, "link_downed": 0, "duplicate_request": 0, "send_err": 0}))
	assert.Equal(t, "retry exceeded: the NIC gave up after its retransmissions (retry_exceeded_err +1)", StallCause(d))
	assert.Equal(t, "completer_retry_err +12, rcvd_pkts +210, rcvd_seq_err +3, retry_exceeded_err +1, sent_pkts +800", d.Rises())

	d = Diff(before, hw(map[string]uint64{"sent_pkts": 900, "rcvd_pkts": 300, "completer_retry_err": 5, "duplicate_request": 2}))
	assert.Equal(t, "packets were lost or late and the NIC retransmitted (completer_retry_err +5, duplicate_request +2)", StallCause(d))

	d = Diff(before, hw(map[string]uint64{"sent_pkts": 400, "rcvd_pkts": 300, "link_downed": 1, "send_err": 3}))
	assert.Equal(t, "the link went down and up (link_downed +1); the NIC could not put packets on the wire (send_err +3): its link or route was down", StallCause(d))

	d = Diff(before, hw(map[string]uint64{"sent_pkts": 140, "rcvd_pkts": 90}))
	assert.Equal(t, "the NIC sent 40 packets since the connection and received none: the peer is unreachable or gone", StallCause(d))

	// A counter that went back is shown as such, and its rise since counts.
	d = Diff(before, hw(map[string]uint64{"sent_pkts": 100, "rcvd_pkts": 90, "rcvd_seq_err": 0, "duplicate_request": 0, "completer_retry_err": 0, "retry_exceeded_err": 0, "link_downed": 0, "send_err": 0}))
	assert.Equal(t, "none rose", d.Rises())
	reset := Diff(hw(map[string]uint64{"rcvd_seq_err": 9}), hw(map[string]uint64{"rcvd_seq_err": 2}))
	assert.Equal(t, "rcvd_seq_err +2 since a reset or wrap", reset.Rises())
	assert.Equal(t, "packets were lost or late and the NIC retransmitted (rcvd_seq_err +2 since a reset or wrap)", StallCause(reset))

	// mlx5: port counters and Q counters, a representor's vport_ names.
	mk := func(port, q map[string]uint64) *Snapshot {
		s := newSnapshot()
		for n, v := range port {
			s.Values[k("mlx5_0", Port, "", n)] = v
		}
		for n, v := range q {
			s.Values[k("mlx5_0", HW, "", n)] = v
		}
		s.Values[k("0000:3b:00.0", AER, AERCorrectable, "RxErr")] = port["port_xmit_packets"]
		return s
	}
	m0 := mk(map[string]uint64{"port_xmit_packets": 10, "port_rcv_packets": 10, "link_downed": 0}, map[string]uint64{"vport_req_transport_retries_exceeded": 0, "out_of_sequence": 0})
	m1 := mk(map[string]uint64{"port_xmit_packets": 50, "port_rcv_packets": 10, "link_downed": 0}, map[string]uint64{"vport_req_transport_retries_exceeded": 2, "out_of_sequence": 4})
	d = Diff(m0, m1)
	assert.Equal(t, "retry exceeded: the NIC gave up after its retransmissions (vport_req_transport_retries_exceeded +2); the NIC sent 40 packets since the connection and received none: the peer is unreachable or gone", StallCause(d))
	assert.Equal(t, "port_xmit_packets +40, out_of_sequence +4, vport_req_transport_retries_exceeded +2", d.Rises(), "port counters only, in key order")
}

// The stall roles name counters of the table, as the table classes them.
func TestStallRolesInTable(t *testing.T) {
	for n, r := range stallRoles {
		c := Classify(Key{Source: HW, Name: n})
		if c.Kind == Unknown {
			c = Classify(Key{Source: Port, Name: n})
		}
		assert.NotEqual(t, Unknown, c.Kind, n)
		switch r {
		case roleGaveUp:
			assert.Equal(t, CauseRetrans, c.Cause, n)
			assert.Equal(t, Error, c.Kind, n)
		case roleDowned, roleNotSent:
			assert.Equal(t, CauseLink, c.Cause, n)
		case roleReceived, roleSent:
			assert.Equal(t, Data, c.Kind, n)
		}
	}
}
