package reqs

// PCIe settings on the GPU<->NIC path (issue 10). Registered apart from
// topology.go so the areas' files grow independently; the area is topology
// because conformance/topology checks them.
func init() {
	register(
		Req{ID: "TOPO-08", Area: "topology", Title: "PCIe settings on each rail's GPU<->NIC path: no function's MaxPayload above its MaxPayload Supported, and no endpoint's MaxPayload above any function on the path (PCIe Base Spec 2.2.2: larger TLPs are Malformed); MaxReadReq, Relaxed Ordering, Extended and 10-bit tags, ATS reported; NIC Relaxed Ordering off, tags disabled or 10-bit tags without a completer warned"},
		Req{ID: "TOPO-09", Area: "topology", Level: ReportOnly, Title: "NIC firmware settings for GPUDirect, read with mstconfig/mlxconfig -e query (never set) on each rail's NVIDIA NIC: ADVANCED_PCI_SETTINGS True(1); MAX_ACC_OUT_READ 44 on ConnectX-6, 0 (auto; 44 or 128 accepted) on ConnectX-7; ATS_ENABLED False(0) on bare metal, True(1) in a VM; PCI_WR_ORDERING reported; each value with its source; a value set for the next boot named as pending"},
		Req{ID: "TOPO-10", Area: "topology", Title: "each rail NIC's transceiver and link are within limits: module temperature, voltage and every lit lane's laser bias, Tx and Rx power inside the module's own alarm thresholds (ethtool -m), a transmitting lane not dark; effective (post-FEC) and symbol BER at most 1E-12 (mlxlink/mstlink -m -c); raw BER above 2.4E-4, link-down and recovery events reported; a failure names the cable or optic by vendor, part number and serial"},
	)
}
