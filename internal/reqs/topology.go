package reqs

func init() {
	register(
		Req{ID: "TOPO-01", Area: "topology", Title: "GPUs and RDMA NICs are found in sysfs and every (GPU, NIC) pair has a PCIe path class (PIX/PXB/PHB/NODE/SYS) and NUMA nodes"},
		Req{ID: "TOPO-02", Area: "topology", Title: "Each GPU's nearest RDMA NIC is no farther than GDR_MAX_PATH (default PXB; P2C for a GPU on NVLink-C2C, as NCCL), by the NCCL topology file where NCCL would load one; in a VM the failure names the signs and the cloud's topology file"},
		Req{ID: "TOPO-03", Area: "topology", Title: "ACS P2P Request/Completion Redirect, Upstream Forwarding and Egress Control are off on the switch ports where the path between each GPU and its nearest NIC turns (ports it only passes through are listed, not judged), or the port has ACS Direct Translated P2P on, Translation Blocking off and the NIC ATS enabled (its translated requests then bypass them; reported)"},
		Req{ID: "TOPO-04", Area: "topology", Title: "PCIe links of GPUs, NICs and bridges between them are trained to full width and speed (idle GPU speed reported, not failed)"},
		Req{ID: "TOPO-05", Area: "topology", Title: "GPU and NIC DMA is not translated by the IOMMU (passthrough or off), unless GDR_ALLOW_IOMMU=1"},
		Req{ID: "TOPO-06", Area: "topology", Title: "NVML's GetTopologyCommonAncestor agrees with the sysfs path class for every GPU pair", Level: ReportOnly},
		Req{ID: "TOPO-07", Area: "topology", Title: "nvidia-smi topo -m agrees with the sysfs path class for every GPU and NIC pair it lists"},
	)
}
