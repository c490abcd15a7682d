package verbs

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gid(t *testing.T, s string) [16]byte {
	t.Helper()
	ip := net.ParseIP(s)
	require.NotNil(t, ip, s)
	return [16]byte(ip.To16())
}

// When a GRH is sent: RoCE always; InfiniBand when either port's flags
// require one (IBV_QPF_GRH_REQUIRED) or the subnet prefixes differ; plain
// InfiniBand in one subnet never. Both ends of a connection decide alike.
func TestNeedGRH(t *testing.T) {
	a := gid(t, "fe80::248a:703:9a:1234")  // default subnet prefix, port GUID
	b := gid(t, "fe80::248a:703:9a:5678")  // the same subnet
	other := gid(t, "fec0:0:0:2::9a:5678") // another subnet
	roce := gid(t, "::ffff:198.18.0.1")    // RoCE v2, IPv4-mapped
	roce2 := gid(t, "::ffff:198.18.0.2")   // its peer
	var zero [16]byte
	cases := []struct {
		name        string
		ll          string
		local, peer GRHEnd
		use         bool
		why         string
		subnets     bool
	}{
		{"plain IB, one subnet", "InfiniBand", GRHEnd{GID: a, FlagsRead: true}, GRHEnd{GID: b, FlagsRead: true}, false, "", false},
		{"plain IB, peer sent no flags (older suite)", "InfiniBand", GRHEnd{GID: a, FlagsRead: true}, GRHEnd{GID: b}, false, "", false},
		{"IB, this port requires a GRH", "InfiniBand", GRHEnd{GID: a, Required: true, FlagsRead: true}, GRHEnd{GID: b, FlagsRead: true}, true, GRHPortFlags, false},
		{"IB, the peer's port requires a GRH", "InfiniBand", GRHEnd{GID: a, FlagsRead: true}, GRHEnd{GID: b, Required: true, FlagsRead: true}, true, GRHPeerFlags, false},
		{"IB, subnet prefixes differ", "InfiniBand", GRHEnd{GID: a, FlagsRead: true}, GRHEnd{GID: other, FlagsRead: true}, true, GRHSubnets, true},
		{"IB, every reason", "InfiniBand", GRHEnd{GID: a, Required: true, FlagsRead: true}, GRHEnd{GID: other, Required: true}, true,
			"required by port flags, required by the peer's port flags, subnets differ", true},
		{"IB, the peer's GID is all zero: no subnet to compare", "InfiniBand", GRHEnd{GID: a}, GRHEnd{GID: zero}, false, "", false},
		{"RoCE", "Ethernet", GRHEnd{GID: roce, FlagsRead: true}, GRHEnd{GID: roce2, FlagsRead: true}, true, GRHRoCE, false},
		{"RoCE, flags set too: RoCE is the reason", "Ethernet", GRHEnd{GID: roce, Required: true}, GRHEnd{GID: gid(t, "2001:db8::1")}, true, GRHRoCE, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NeedGRH(c.ll, c.local, c.peer)
			assert.Equal(t, c.use, g.Use)
			assert.Equal(t, c.why, g.Why)
			assert.Equal(t, c.subnets, g.Subnets)
			assert.Equal(t, c.ll, g.LinkLayer)
			assert.Equal(t, c.local, g.Local)
			back := NeedGRH(c.ll, c.peer, c.local)
			assert.Equal(t, g.Use, back.Use, "the peer decides alike")
		})
	}
	assert.Equal(t, "fec0:0:0:2::/64", SubnetPrefix(other))
	assert.Equal(t, "fe80::/64", SubnetPrefix(a))
}

// RTR's hint follows the decision: RoCE keeps its GID hint; InfiniBand with
// a GRH names "GRH required" and why; InfiniBand without one that fails
// with EINVAL names the GRH-required port flag before anything else, and
// blames no QPN, LID or subnet manager.
func TestRTRHint(t *testing.T) {
	a := gid(t, "fe80::248a:703:9a:1234")
	b := gid(t, "fe80::248a:703:9a:5678")
	other := gid(t, "fec0:0:0:2::9a:5678")
	read := GRHEnd{GID: a, FlagsRead: true}

	roce := Remote{GID: gid(t, "::ffff:198.18.0.2"), SGIDIdx: 3, MTU: 1024, LID: 0,
		GRH: NeedGRH("Ethernet", GRHEnd{GID: gid(t, "::ffff:198.18.0.1")}, GRHEnd{})}
	assert.Equal(t, "RoCE: GID index 3 must be a valid GID of port 1 with a route to the peer's GID (GDR_GID_INDEX, GDR_GID_NETDEV); path MTU 1024",
		rtrHint(roce, 1, syscall.EINVAL))

	req := Remote{GID: b, LID: 9, MTU: 4096, GRH: NeedGRH("InfiniBand", GRHEnd{GID: a, Required: true, FlagsRead: true}, GRHEnd{GID: b})}
	h := rtrHint(req, 1, syscall.EINVAL)
	assert.Equal(t, "InfiniBand, GRH required (required by port flags): the address carries a GRH from GID index 0 of port 1 (GDR_GID_INDEX; index 0 is the port GID) to the peer's GID fe80::248a:703:9a:5678, and both must be valid GIDs of their ports; path MTU 4096", h)

	peer := Remote{GID: b, LID: 9, MTU: 4096, GRH: NeedGRH("InfiniBand", read, GRHEnd{GID: b, Required: true})}
	assert.Contains(t, rtrHint(peer, 1, syscall.EINVAL), "GRH required (required by the peer's port flags)")

	routed := Remote{GID: other, LID: 9, MTU: 2048, SGIDIdx: 0, GRH: NeedGRH("InfiniBand", read, GRHEnd{GID: other})}
	h = rtrHint(routed, 2, syscall.EINVAL)
	assert.Equal(t, "InfiniBand, GRH required (subnets differ): the address carries a GRH from GID index 0 of port 2 (GDR_GID_INDEX; index 0 is the port GID) to the peer's GID fec0::2:0:0:9a:5678, and both must be valid GIDs of their ports; the subnets differ (fe80::/64 here, fec0:0:0:2::/64 there): an IB router must join them, and the address uses the peer's LID 9; path MTU 2048", h)

	plain := Remote{GID: b, LID: 9, MTU: 4096, RdAtom: 4, GRH: NeedGRH("InfiniBand", read, GRHEnd{GID: b, FlagsRead: true})}
	require.False(t, plain.GRH.Use)
	h = rtrHint(plain, 1, syscall.EINVAL)
	assert.Equal(t, "InfiniBand without a GRH: a port that requires a GRH (IBV_QPF_GRH_REQUIRED: SR-IOV virtual functions, cloud InfiniBand) refuses such an address (kernel rdma_check_ah_attr); port 1 did not report it when queried, so another argument was refused (path MTU 4096, READ depth 4)", h)
	for _, no := range []string{"QPN", "subnet manager", "opensm"} {
		assert.NotContains(t, h, no)
	}

	unread := plain
	unread.GRH = NeedGRH("InfiniBand", GRHEnd{GID: a}, GRHEnd{GID: b})
	unread.LID = 0
	h = rtrHint(unread, 1, syscall.EINVAL)
	assert.Contains(t, h, "IBV_QPF_GRH_REQUIRED")
	assert.Contains(t, h, "could not read the port's flags (rdma-core headers older than 20)")
	assert.Contains(t, h, "the peer's LID is 0 (no subnet manager configured its port)", "a LID of 0 is a fact, said after the GRH")

	// Other errnos on plain InfiniBand keep their hints.
	assert.Equal(t, "InfiniBand without GRH needs the peer's LID, and it is 0: is a subnet manager running (opensm)?", rtrHint(unread, 1, syscall.ENOMEM))
	assert.Equal(t, "check the peer's QPN/GID/LID, the GID index (GDR_GID_INDEX) and the path MTU", rtrHint(plain, 1, syscall.EIO))
}
