package gpumr

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// MREG-02's negative controls: the classifiers every registration relies
// on (RequireDevice) must tell device memory from everything else, or a
// registration that works only on managed or host memory could pass as
// GPUDirect RDMA. These rules judge one reading each; the GPU side reads
// them (TypeControls, VMMControl).

// JudgeType judges one allocation's CU_POINTER_ATTRIBUTE_MEMORY_TYPE /
// IS_MANAGED reading (got) against what its allocator makes (want), on a
// GPU coherently attached over NVLink-C2C or not (c2c). seen is what it
// read, for gdr.controls; f is nil when the two agree. On a C2C GPU, memory
// the suite mapped itself (want unknown: not CUDA's) that reads otherwise
// is not judged: the GPU addresses system memory there (ATS), and no public
// source says what the attribute then reads for it (the CUDA driver API
// documents INVALID_VALUE only for memory not allocated or registered with
// CUDA).
func JudgeType(what string, addr uintptr, got, want string, c2c bool) (seen string, f *verdict.Finding) {
	seen = what + "=" + got
	switch {
	case got == want:
	case c2c && want == "unknown":
		f = verdict.NotJudgedf("report the reading with the GPU model and driver version: the control on coherent GPUs needs a documented answer",
			"%s memory at %#x classified %s on a GPU coherently attached over NVLink-C2C: what CU_POINTER_ATTRIBUTE_MEMORY_TYPE reads for system memory on a GPU that addresses it (ATS) is not documented, so this control cannot tell device memory from it", what, addr, got)
	default:
		f = verdict.Failf("report this driver: CU_POINTER_ATTRIBUTE_MEMORY_TYPE/IS_MANAGED misreport memory",
			"%s memory at %#x classified %s, want %s", what, addr, got, want)
	}
	return seen, f
}

// ControlMeaning is gdr.control_meaning: what MREG-02's controls prove on a
// GPU coherently attached over NVLink-C2C (c2c) or on PCIe. On PCIe, device
// memory is memory only a peer-memory client (nvidia_peermem) or a dma-buf
// exporter can register: nothing else can pin a GPU's BAR. On C2C, the
// NVIDIA driver skips its PCI topology check for peer memory and dma-buf
// "since NIC can map over C2C anyway" (open-gpu-kernel-modules nv-pci.c
// nv_grdma_pci_topology_supported), GPU memory may be system RAM of the
// GPU's NUMA node, and no public source says whether plain ibv_reg_mr of
// cuMemAlloc memory fails there without nvidia_peermem: the controls
// prove device memory, not that registering it needs a peer client.
func ControlMeaning(c2c bool) string {
	if c2c {
		return "c2c: the buffer is device memory, nothing more: on a GPU coherently attached over NVLink-C2C a registration of it without nvidia_peermem is not shown to be impossible (unproven), so it is not credited to the peermem path"
	}
	return "pcie: the buffer is device memory, which only a peer-memory client (nvidia_peermem) or a dma-buf exporter can register: a registration of it is GPUDirect RDMA"
}

// JudgePlainRegistration judges a plain ibv_reg_mr of device memory that
// succeeded (MREG-03's path), given whether the GPU is on NVLink-C2C and
// whether nvidia_peermem or the legacy nv_peer_mem is loaded (desc as
// PeermemState words it). With a peer client loaded it is the peermem
// path; on PCIe it is too (only a peer client can pin device memory, so
// one is there: the judgment before C2C existed). On a C2C GPU with
// neither module it is not judged: it may have pinned the memory through
// the CPU's page tables, moving it out of the GPU (a long-term pin of
// ZONE_MOVABLE memory migrates it: Linux mm/gup.c
// check_and_migrate_movable_pages), which is not GPUDirect RDMA.
func JudgePlainRegistration(gpu string, c2c, loaded, legacy bool, a, desc string) *verdict.Finding {
	if !c2c || loaded || legacy {
		return nil
	}
	return verdict.NotJudgedf("load nvidia_peermem (modprobe nvidia-peermem) to test the peermem path on this host, or qualify it through dma-buf (MREG-04)",
		"GPU %s is coherently attached over NVLink-C2C and ibv_reg_mr registered its %s memory with no peer-memory client loaded (%s): whether that registration reaches GPU memory directly or pinned (perhaps migrated) system pages is unknown (no public source), so it is not credited to the peermem path", gpu, a, desc)
}

// JudgeCapable judges one cuMemCreate allocation's
// CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE (got) against the
// gpuDirectRDMACapable flag it was created with (want): RequireDevice
// demands the attribute of cuMemCreate memory, so it must follow the flag
// both ways, or that check could not fail.
func JudgeCapable(what string, addr uintptr, got, want bool) (seen string, f *verdict.Finding) {
	seen = fmt.Sprintf("%s: IS_GPU_DIRECT_RDMA_CAPABLE=%v", what, got)
	if got != want {
		f = verdict.Failf("report this driver: IS_GPU_DIRECT_RDMA_CAPABLE must follow the allocation's gpuDirectRDMACapable flag",
			"%s memory at %#x reads IS_GPU_DIRECT_RDMA_CAPABLE=%v, want %v", what, addr, got, want)
	}
	return seen, f
}

// NoPathRemedy is MREG-05's remedy when no registration path GDR_MR asks
// for works; vmm says the memory was cuMemCreate's, which NCCL allocates
// by default.
func NoPathRemedy(vmm bool) string {
	remedy := "load nvidia_peermem (modprobe nvidia-peermem), or enable dma-buf: NVIDIA open kernel module, Linux >= 5.12, rdma-core >= 34 and a NIC driver with dma-buf MRs; or set GDR_MR to the path this host is meant to use"
	if vmm {
		remedy += "; where only cuMemCreate memory fails, NCCL's default allocations cannot be registered: update the NVIDIA driver (nvidia_peermem with it), or set NCCL_CUMEM_ENABLE=0 until then"
	}
	return remedy
}
