package reqs

// causeRemedies are what to do about the root causes whose messages name
// what is absent but not how to get it (a skip's "no NVIDIA GPU: ..."): the
// report shows these beside the cause. Keyed by the cause's leading "no
// <thing>" phrase, as the report groups causes.
// Recordings made before absences carried their remedy (gdr.remedy on a
// skip) get it here; the engines give the same words (RemedyNoGPU,
// RemedyNoDriver) as the remedy of their absent findings.
var causeRemedies = map[string]string{
	"no NVIDIA GPU":    RemedyNoGPU,
	"no NVIDIA driver": RemedyNoDriver,
}

// What to do when the host has no NVIDIA GPU, or no NVIDIA driver loaded.
const (
	RemedyNoGPU = "run the suite on a host with an NVIDIA data-center GPU on its PCI bus (vendor 0x10de, class 0x03); " +
		"in a VM pass the GPU through (VFIO), in a container give it the GPU and the host's /sys (GDR_HOST_ROOT)"
	RemedyNoDriver = "install and load the NVIDIA data-center driver (distribution packages or NVIDIA's runfile: " +
		"/proc/driver/nvidia/version then exists and nvidia-smi lists the GPUs); on a host without an NVIDIA GPU, run the suite on one that has it"
)

// The remedies of the other absences many checks share, one place each.
const (
	// RemedyNoRDMAStack: no rdma-core or MLNX_OFED, and no RDMA device.
	RemedyNoRDMAStack = "install rdma-core (Debian/Ubuntu: rdma-core ibverbs-providers libibverbs1 librdmacm1; RHEL: rdma-core libibverbs librdmacm) " +
		"or MLNX_OFED, and load the NIC's RDMA driver"
	// RemedyNoRDMADevice: the stack is there, no RDMA device is.
	RemedyNoRDMADevice = "load the NIC's RDMA driver (mlx5_ib, irdma, bnxt_re, ...) or create a Soft-RoCE device (rdma link add rxe0 type rxe netdev <if>)"
	// RemedyHardwareNIC: only software RDMA devices (rxe, siw), which have no PCIe path.
	RemedyHardwareNIC = "run the suite on a host with a hardware RDMA NIC (rxe and siw have no PCIe path and register GPU memory through neither nvidia_peermem nor dma-buf)"
	// RemedyLiveHost: a recorded tree (GDR_HOST_ROOT) cannot answer what only the running host can.
	RemedyLiveHost = "unset GDR_HOST_ROOT and run the suite on the host itself"
)

// CauseRemedy is the remedy for a root cause named by its "no <thing>"
// phrase (e.g. "no NVIDIA GPU"), or "" when the cause's messages carry their own.
func CauseRemedy(cause string) string { return causeRemedies[cause] }
