package reqs

func init() {
	register(
		Req{ID: "INST-01", Area: "install", Title: "NVIDIA kernel driver loaded (/proc/driver/nvidia/version); version and open/proprietary module reported"},
		Req{ID: "INST-02", Area: "install", Title: "NVML (libnvidia-ml.so.1) loads, agrees with the kernel driver's version and sees every NVIDIA GPU on the PCI bus"},
		Req{ID: "INST-03", Area: "install", Title: "nouveau is not bound to any NVIDIA GPU"},
		Req{ID: "INST-04", Area: "install", Title: "nvidia-smi runs and lists every GPU with the loaded driver's version"},
		Req{ID: "INST-05", Area: "install", Title: "CUDA toolkit: nvcc -V runs and its CUDA version is one the driver supports"},
		Req{ID: "INST-06", Area: "install", Title: "every GPU is Pascal or newer (CUDA compute capability >= 6.0)"},
		Req{ID: "INST-07", Area: "install", Title: "rdma-core user space: libibverbs.so.1 and librdmacm.so.1 load"},
		Req{ID: "INST-08", Area: "install", Title: "a libibverbs provider (driver plug-in) is installed"},
		Req{ID: "INST-09", Area: "install", Title: "MLNX_OFED (ofed_info -s) or inbox rdma-core identified; openibd/rdma service not failed"},
		Req{ID: "INST-10", Area: "install", Title: "kernel modules ib_core, ib_uverbs, rdma_ucm and each RDMA device's driver are loaded"},
		Req{ID: "INST-11", Area: "install", Title: "/dev/infiniband/uverbs* (one per RDMA device) and rdma_cm exist and open read-write"},
		Req{ID: "INST-12", Area: "install", Title: "an RDMA device has an ACTIVE port (what ibv_devinfo shows)"},
		Req{ID: "INST-13", Area: "install", Title: "GPU peer memory: nvidia_peermem loaded (not with legacy nv_peer_mem), or the dma-buf path available"},
		Req{ID: "INST-14", Area: "install", Title: "GDR development environment: a C program using verbs.h and cuda.h compiles, links with -libverbs -lcuda and runs"},
	)
}
