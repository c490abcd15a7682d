package reqs

func init() {
	register(
		Req{ID: "GPU-01", Area: "gpu", Title: "the CUDA driver API loads from libcuda.so.1 and initialises (cuInit); driver CUDA version and GPUs reported", EmulatedMust: true},
		Req{ID: "GPU-02", Area: "gpu", Title: "compute capability is 6.0 (Pascal) or newer", EmulatedMust: true},
		Req{ID: "GPU-03", Area: "gpu", Title: "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 1", EmulatedMust: true},
		Req{ID: "GPU-04", Area: "gpu", Title: "dma-buf capable: driver CUDA >= 11.7 with cuMemGetHandleForAddressRange, and DMA_BUF_SUPPORTED is 1"},
		Req{ID: "GPU-05", Area: "gpu", Title: "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 1 (cuMemCreate memory can be registered)"},
		Req{ID: "GPU-06", Area: "gpu", Title: "GPUDirect RDMA writes ordering is OWNER or ALL_DEVICES, or a flush option (FLUSH_WRITES_OPTIONS) exists", EmulatedMust: true},
		Req{ID: "GPU-07", Area: "gpu", Title: "BAR1 aperture (NVML) reported; at least 64 MiB free for registrations (under 1 GiB total is a warning)"},
		Req{ID: "GPU-08", Area: "gpu", Title: "dma-buf export: cuMemGetHandleForAddressRange on cuMemAlloc memory returns a dma-buf fd"},
		Req{ID: "GPU-09", Area: "gpu", Title: "pinned host-to-device copy bandwidth >= GDR_MIN_COPY_FRACTION of the PCIe link's theoretical rate"},
		Req{ID: "GPU-10", Area: "gpu", Title: "pinned device-to-host copy bandwidth >= GDR_MIN_COPY_FRACTION of the PCIe link's theoretical rate"},
		Req{ID: "GPU-11", Area: "gpu", Title: "the GPU's PCIe link runs at its maximum speed and width while the GPU copies (idle downclocking is reported, not failed)"},
		// Multi-GPU hosts (two or more GPUs selected; absent on one).
		Req{ID: "GPU-12", Area: "gpu", Title: "multi-GPU: with every selected GPU copying host-to-device at once (pinned, on each GPU's NUMA node), each GPU keeps >= GDR_MIN_CONCURRENT_FRACTION of its solo rate; per-GPU and aggregate GB/s; a failure names the GPUs sharing its upstream bridges"},
		Req{ID: "GPU-13", Area: "gpu", Title: "multi-GPU: with every selected GPU copying device-to-host at once, each GPU keeps >= GDR_MIN_CONCURRENT_FRACTION of its solo rate; per-GPU and aggregate GB/s; a failure names the GPUs sharing its upstream bridges"},
		Req{ID: "GPU-14", Area: "gpu", Title: "multi-GPU: every GPU pair can access each other's memory (cuDeviceCanAccessPeer), peer access enables (cuCtxEnablePeerAccess) and cuMemcpyPeer delivers a pattern intact each way; link kind reported (NVLink links from NVML, or PCIe path class)"},
		Req{ID: "GPU-15", Area: "gpu", Title: "multi-GPU: cuMemcpyPeer bandwidth of every GPU pair, each way, >= the link kind's floor (NVLink: GDR_MIN_P2P_NVLINK_FRACTION of links x per-link rate; PCIe: GDR_MIN_P2P_PCIE_FRACTION of the slower GPU link), data verified after the timed copies; bidirectional rate reported"},
		Req{ID: "GPU-16", Area: "gpu", Title: "every GPU's identity reads through NVML (UUID, serial, board part number, VBIOS, InfoROM image and OEM versions, HGX module id) for the report's inventory, and its InfoROM validates (nvmlDeviceValidateInforom; a corrupt InfoROM is an RMA)"},
	)
}
