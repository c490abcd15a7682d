package reqs

func init() {
	register(
		Req{ID: "MREG-01", Area: "memreg", Title: "baseline: ibv_reg_mr on page-aligned host memory succeeds on the chosen NIC", EmulatedMust: true},
		Req{ID: "MREG-02", Area: "memreg", Title: "negative control: the buffer under test is device memory (cuMemAlloc, cuMemCreate), not managed or host memory; cuMemCreate memory reads RDMA-capable exactly when created so; on a GPU coherently attached over NVLink-C2C it proves device memory only (gdr.control_meaning), so a registration there without a peer-memory client is not judged", EmulatedMust: true},
		Req{ID: "MREG-03", Area: "memreg", Title: "peermem path: ibv_reg_mr on cuMemAlloc and cuMemCreate memory (where GPU-05 allows) succeeds, or fails only because nvidia_peermem is not loaded", Level: ReportOnly, EmulatedMust: true},
		Req{ID: "MREG-04", Area: "memreg", Title: "dma-buf path: ibv_reg_dmabuf_mr on exported cuMemAlloc and cuMemCreate memory (where GPU-05 allows) succeeds wherever the kernel, NIC and GPU support dma-buf", Level: ReportOnly},
		Req{ID: "MREG-05", Area: "memreg", Title: "GPU memory (cuMemAlloc; cuMemCreate where GPU-05 allows) registers with the NIC through at least one path (peermem or dma-buf)", EmulatedMust: true},
	)
}
