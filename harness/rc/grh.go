//go:build rdma

package rc

import (
	"fmt"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// portGRH is what this end's endpoint says of its port's GRH flag: nil
// where the flags could not be read (the peer then reads "not required").
func portGRH(p verbs.PortAttr) *bool {
	if !p.FlagsRead {
		return nil
	}
	req := p.GRHRequired
	return &req
}

// grhPlan decides whether the address vectors from port (whose GID this end
// uses is gid) towards peer carry a GRH (verbs.NeedGRH: RoCE always;
// InfiniBand when either port requires one or the subnets differ). A GRH
// towards an all-zero GID could reach nobody: that peer endpoint is refused
// here, naming it, rather than at RTR.
func grhPlan(port verbs.PortAttr, gid [16]byte, peer oob.Endpoint) (verbs.GRH, error) {
	var peerGID [16]byte
	copy(peerGID[:], peer.GID)
	g := verbs.NeedGRH(port.LinkLayer,
		verbs.GRHEnd{GID: gid, Required: port.GRHRequired, FlagsRead: port.FlagsRead},
		verbs.GRHEnd{GID: peerGID, Required: peer.PeerGRHRequired(), FlagsRead: peer.GRHRequired != nil})
	if g.Use && peerGID == ([16]byte{}) {
		return g, fmt.Errorf("the peer's endpoint carries an all-zero GID (its GID index %d), and this connection needs a GRH (%s): the peer's GID table entry is empty; set GDR_GID_INDEX there to a populated entry",
			peer.GIDIndex, g.Why)
	}
	return g, nil
}

// tcNote is gdr.ib_tc_note: where the traffic class goes on InfiniBand
// ("" on RoCE, where it is always the GRH's, i.e. the IP header's).
func tcNote(g verbs.GRH) string {
	switch {
	case g.LinkLayer == "Ethernet":
		return ""
	case g.Use:
		return fmt.Sprintf("InfiniBand with GRH (%s): the traffic class is sent in the GRH, the service level selects the virtual lane", g.Why)
	}
	return "InfiniBand without GRH: the traffic class is not sent, the service level selects the virtual lane"
}
