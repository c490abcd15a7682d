//go:build rdma

package traffic

import (
	"fmt"

	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// ZeroSend proves connected ends carry a message: a zero-length SEND from
// the client, received by the server as a RECV of 0 bytes (the path, not
// just the state machine). It records the queue pair numbers.
func ZeroSend(ends []*rc.End) []error { return rc.Each(ends, zeroSend) }

func zeroSend(e *rc.End) error {
	if e.Role == "server" {
		if err := e.QP.PostRecv(verbs.RecvWR{ID: 1}); err != nil {
			return err
		}
	}
	if err := e.Sess.Barrier("recv posted", 0); err != nil {
		return err
	}
	if err := zeroTrip(e); err != nil {
		return err
	}
	e.Attr("qpn", e.QP.Num)
	e.Attr("peer_qpn", e.Peer.QPN)
	return e.Settle("connect", false, nil)
}

// zeroTrip is this end's part of the SEND: post and complete it (client),
// or receive it with opcode RECV and no bytes (server).
func zeroTrip(e *rc.End) error {
	if e.Role == "client" {
		if err := e.QP.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpSend, Signaled: true}); err != nil {
			return err
		}
		_, err := e.SCQ.Wait(1, "zero-length SEND", e.Timeout())
		return err
	}
	wc, err := e.RCQ.Wait(1, "receive of the zero-length SEND", e.Timeout())
	if err != nil {
		return err
	}
	if wc[0].Opcode != verbs.WCRecv || wc[0].ByteLen != 0 {
		return fmt.Errorf("receive completion has opcode %d and %d bytes, want RECV and 0", wc[0].Opcode, wc[0].ByteLen)
	}
	return nil
}
