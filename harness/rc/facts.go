//go:build rdma

package rc

import "fmt"

// DeviceFacts records the RDMA device and port this end uses, with its GID
// (PP-01), and fails on what makes the port unusable: an InfiniBand port
// without a LID (no subnet manager).
func (e *End) DeviceFacts() error {
	e.Attr("port_state", e.Port.StateName)
	e.Attr("active_mtu", e.Port.ActiveMTU)
	e.Attr("lid", e.Port.LID)
	e.Attr("gid_index", e.GID.Index)
	e.Attr("gid", e.GID.Addr.String())
	if e.GID.Type != "" {
		e.Attr("gid_type", e.GID.Type)
	}
	if e.GID.Ndev != "" {
		e.Attr("netdev", e.GID.Ndev)
	}
	e.Attr("rate_gbit_s", e.RateGbps())
	// IBV_QPF_GRH_REQUIRED (SR-IOV virtual functions, cloud InfiniBand):
	// every connection from this port carries a GRH. Absent where the
	// flags could not be read.
	if e.Port.FlagsRead {
		e.Attr("port_grh_required", e.Port.GRHRequired)
	}
	e.Attr("software", e.Software)
	e.Attr("fw_ver", e.Ctx.Attr().FWVer)
	e.Attr("max_qp_rd_atom", e.Ctx.Attr().MaxQPRdAtom)
	e.Attr("max_qp_init_rd_atom", e.Ctx.Attr().MaxQPInitRdAtom)
	// A fact for the memreg area's dma-buf path, not a check here.
	if d, err := e.PD.ProbeDmabuf(); err != nil {
		e.Attr("dmabuf_mr", "probe failed: "+err.Error())
	} else {
		e.Attr("dmabuf_mr", fmt.Sprintf("supported=%v (%s)", d.Supported, d.Reason))
	}
	if w := gidWarning(e.Port.LinkLayer, e.GID.Type, e.GID.Index); w != "" {
		e.Attr("warning", w)
	}
	return lidProblem(e.Port.LinkLayer, e.Port.LID, e.Dev, e.Cfg.IBPort)
}

// gidWarning warns of a RoCE GID that is not v2 ("" when fine).
func gidWarning(linkLayer, gidType string, index int) string {
	if linkLayer == "Ethernet" && gidType != "RoCE v2" && gidType != "" {
		return fmt.Sprintf("GID %d is %s, not RoCE v2: RoCE v1 is not routable", index, gidType)
	}
	return ""
}

// lidProblem is the error of an ACTIVE InfiniBand port with LID 0.
func lidProblem(linkLayer string, lid uint16, dev string, port int) error {
	if linkLayer == "InfiniBand" && lid == 0 {
		return fmt.Errorf("%s port %d is ACTIVE on InfiniBand but has LID 0: start a subnet manager (opensm)", dev, port)
	}
	return nil
}
