// When an address vector carries a GRH, the peer's address (Remote), and why RTR failed.

package verbs

import (
	"fmt"
	"net"
	"strings"
	"syscall"
)

// When an RC queue pair's address vector carries a GRH (ah_attr.is_global).
//
// RoCE always: the kernel refuses a RoCE address without one (Linux
// drivers/infiniband/core/verbs.c, rdma_check_ah_attr: EINVAL when the
// address type is RoCE and IB_AH_GRH is not set).
//
// InfiniBand when the port requires one: rdma_check_ah_attr refuses an
// address without a GRH on a port where rdma_is_grh_required() holds
// (include/rdma/ib_verbs.h: RDMA_CORE_PORT_IB_GRH_REQUIRED in the port's
// core_cap_flags). mlx5 sets it from the grh_required bit of the vport's
// HCA vport context (drivers/infiniband/hw/mlx5/main.c, get_core_cap_flags;
// drivers/net/ethernet/mellanox/mlx5/core/vport.c,
// mlx5_query_hca_vport_context): SR-IOV virtual functions and cloud
// InfiniBand, where a port is addressed by its GID. User space sees it as
// IBV_QPF_GRH_REQUIRED in ibv_port_attr.flags (the kernel's
// copy_port_attr_to_resp in drivers/infiniband/core/uverbs_std_types_device.c;
// rdma-core 20, commit "verbs: Expose IBV_QPF_GRH_REQUIRED port flag":
// "the applications must create all AH with GRH configured").
//
// InfiniBand when the two GIDs' subnet prefixes (their first 8 bytes)
// differ: the peer is behind a router, which forwards on the GRH. UCX
// compares the whole 64-bit prefix (src/uct/ib/base/ib_iface.c,
// uct_ib_iface_fill_ah_attr_from_gid_lid); NCCL only its low 16 bits
// (src/transport/net_ib/connect.cc, ncclIbQpRtr and
// ncclIbExtractLocalSubnetPrefix, because fabrics with FLIDs put the FLID
// into the upper bits). The whole prefix is taken here: where only the upper
// bits differ a GRH is sent that was not needed, and a GRH inside one subnet
// is valid IB.
//
// The peer's port requiring one counts too. The kernel checks only the local
// port, and NCCL and UCX look only at their own flags; but a port that
// requires a GRH is one addressed by its GID (the rdma-core commit above:
// "an environment which is based on GID addressing, such as SR-IOV IB
// Virtualization"), so packets to it carry one, and both ends of a
// connection then decide alike. The flag travels in the out-of-band
// endpoint (oob.Endpoint.GRHRequired); a peer that sends none is taken as
// not requiring one.

// QPFGRHRequired is IBV_QPF_GRH_REQUIRED (rdma-core libibverbs/verbs_api.h,
// the kernel's IB_UVERBS_QPF_GRH_REQUIRED), a bit of ibv_port_attr.flags.
const QPFGRHRequired = 1 << 0

// Why a GRH is sent, as gdr.grh records it (several are joined by ", ").
const (
	GRHRoCE      = "RoCE"
	GRHPortFlags = "required by port flags"
	GRHPeerFlags = "required by the peer's port flags"
	GRHSubnets   = "subnets differ"
)

// GRHEnd is what the GRH decision needs of one end of a connection.
type GRHEnd struct {
	GID [16]byte // the GID the end uses (the peer's: as it sent it)
	// Required: the port's flags carry IBV_QPF_GRH_REQUIRED.
	Required bool
	// FlagsRead: the flags were read (this host: headers of rdma-core 20
	// or later; the peer: it sent them).
	FlagsRead bool
}

// GRH is the decision for one connection's address vectors.
type GRH struct {
	Use       bool
	Why       string // the reasons, "" without a GRH
	LinkLayer string // the local port's: InfiniBand or Ethernet
	// Local is this end's port (for RTR's error hint).
	Local GRHEnd
	// Subnets is set when the subnet prefixes differ.
	Subnets bool
}

// NeedGRH decides whether the address vectors towards peer carry a GRH, on a
// local port of linkLayer.
func NeedGRH(linkLayer string, local, peer GRHEnd) GRH {
	g := GRH{LinkLayer: linkLayer, Local: local}
	var why []string
	if linkLayer == "Ethernet" {
		why = append(why, GRHRoCE)
	} else {
		if local.Required {
			why = append(why, GRHPortFlags)
		}
		if peer.Required {
			why = append(why, GRHPeerFlags)
		}
		// An all-zero GID says nothing about a subnet.
		if !zeroGID(local.GID) && !zeroGID(peer.GID) && [8]byte(local.GID[:8]) != [8]byte(peer.GID[:8]) {
			g.Subnets = true
			why = append(why, GRHSubnets)
		}
	}
	g.Use = len(why) > 0
	g.Why = strings.Join(why, ", ")
	return g
}

func zeroGID(g [16]byte) bool { return g == [16]byte{} }

// SubnetPrefix is a GID's first 8 bytes in IPv6 notation (fe80::/64).
func SubnetPrefix(g [16]byte) string {
	var p [16]byte
	copy(p[:8], g[:8])
	return net.IP(p[:]).String() + "/64"
}

// Remote is what RTR needs about the peer.
type Remote struct {
	QPN uint32
	PSN uint32
	LID uint16
	GID [16]byte
	// GRH is NeedGRH's decision: with Use, the address carries a GRH to GID
	// from our GID SGIDIdx.
	GRH     GRH
	MTU     int // path MTU in bytes: min of both ends' active MTU
	RdAtom  int // outstanding RDMA READs we accept as responder
	SGIDIdx int // our GID index (with GRH)
	// SL and TC are the fabric class both hosts agreed (GDR_IB_SL 0..15,
	// GDR_IB_TC 0..255): ah_attr.sl, and grh.traffic_class with GRH.
	SL int
	TC int
}

// rtrHint is what an RTR towards r on port that failed with errno most
// likely means.
func rtrHint(r Remote, port int, errno syscall.Errno) string {
	g := r.GRH
	switch {
	case g.LinkLayer == "Ethernet":
		return fmt.Sprintf("RoCE: GID index %d must be a valid GID of port %d with a route to the peer's GID (GDR_GID_INDEX, GDR_GID_NETDEV); path MTU %d", r.SGIDIdx, port, r.MTU)
	case g.Use:
		s := fmt.Sprintf("InfiniBand, GRH required (%s): the address carries a GRH from GID index %d of port %d (GDR_GID_INDEX; index 0 is the port GID) to the peer's GID %s, and both must be valid GIDs of their ports",
			g.Why, r.SGIDIdx, port, net.IP(r.GID[:]))
		if g.Subnets {
			s += fmt.Sprintf("; the subnets differ (%s here, %s there): an IB router must join them, and the address uses the peer's LID %d",
				SubnetPrefix(g.Local.GID), SubnetPrefix(r.GID), r.LID)
		}
		return s + fmt.Sprintf("; path MTU %d", r.MTU)
	case errno == syscall.EINVAL:
		// The kernel's GRH check (rdma_check_ah_attr) is the refusal an
		// address without a GRH meets first; the flag says whether it
		// applies.
		s := "InfiniBand without a GRH: a port that requires a GRH (IBV_QPF_GRH_REQUIRED: SR-IOV virtual functions, cloud InfiniBand) refuses such an address (kernel rdma_check_ah_attr)"
		if g.Local.FlagsRead {
			s += fmt.Sprintf("; port %d did not report it when queried, so another argument was refused (path MTU %d, READ depth %d)", port, r.MTU, clampRd(r.RdAtom))
		} else {
			s += "; this build could not read the port's flags (rdma-core headers older than 20): rebuild against newer libibverbs-dev headers"
		}
		if r.LID == 0 {
			s += "; the peer's LID is 0 (no subnet manager configured its port)"
		}
		return s
	case r.LID == 0:
		return "InfiniBand without GRH needs the peer's LID, and it is 0: is a subnet manager running (opensm)?"
	}
	return "check the peer's QPN/GID/LID, the GID index (GDR_GID_INDEX) and the path MTU"
}

// clampRd bounds an RDMA READ depth to 1..16.
func clampRd(n int) int {
	if n < 1 {
		return 1
	}
	if n > 16 {
		return 16
	}
	return n
}
