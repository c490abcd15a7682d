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
// IS_MANAGED reading (got) against what its allocator makes (want). seen
// is what it read, for gdr.controls; f is nil when the two agree.
func JudgeType(what string, addr uintptr, got, want string) (seen string, f *verdict.Finding) {
	seen = what + "=" + got
	if got != want {
		f = verdict.Failf("report this driver: CU_POINTER_ATTRIBUTE_MEMORY_TYPE/IS_MANAGED misreport memory",
			"%s memory at %#x classified %s, want %s", what, addr, got, want)
	}
	return seen, f
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
