//go:build gpu

package cuda

import (
	"strings"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The gpu area's rules (conformance/gpu, GPU-01..08) as findings: each
// carries its cause and remedy, so the tests record them and write none.

// MinDriverVersion is the oldest CUDA driver (cuDriverGetVersion) the suite
// supports: 11.0, R450.
const MinDriverVersion = 11000

// DriverTooOld is GPU-01's rule on cuDriverGetVersion v; nil when it is
// MinDriverVersion or newer.
func DriverTooOld(v int) *verdict.Finding {
	if v >= MinDriverVersion {
		return nil
	}
	return verdict.Failf("upgrade the NVIDIA driver to R450 or newer",
		"CUDA driver %s is older than 11.0, the oldest this suite supports", VersionString(v))
}

// ReadBackMismatch is GPU-01's rule on a pattern written to device memory of
// the GPU at pci and read back; nil when they agree.
func ReadBackMismatch(pci string, want, got []byte) *verdict.Finding {
	if string(got) == string(want) {
		return nil
	}
	return verdict.Failf("check dmesg for Xid errors and reset the GPU", "GPU %s: wrote %q to device memory, read back %q", pci, want, got)
}

// MinCCMajor is the first compute capability GPUDirect RDMA supports fully
// (Pascal).
const MinCCMajor = 6

// CCUnread is GPU-02's failure when the driver does not answer the compute
// capability (err).
func CCUnread(err error) *verdict.Finding {
	return verdict.Failf("upgrade the NVIDIA driver", "%v", err)
}

// JudgeCC is GPU-02's rule on dev's compute capability maj.min; nil when it
// is MinCCMajor or newer.
func JudgeCC(dev Device, maj, min int) *verdict.Finding {
	if maj >= MinCCMajor {
		return nil
	}
	return verdict.Failf("use a Pascal (6.x) or newer GPU for GPUDirect RDMA",
		"GPU %s (%s) has compute capability %d.%d, below 6.0", dev.PCI, dev.Name, maj, min)
}

// attrRemedies are what a GPU needs whose attribute falls short of what
// the suite wants (GPU-03, GPU-04, GPU-05); CheckAttr reads them.
var attrRemedies = map[Attribute]string{
	AttrGPUDirectRDMASupported: "GPUDirect RDMA needs a data-center or professional GPU (Tesla/Quadro/RTX A-series and newer) and a driver that enables it; GeForce boards report 0",
	AttrDMABufSupported:        "dma-buf export needs the open GPU kernel module (nvidia-open / kernel-open flavour, Turing or newer) and a Linux kernel >= 5.12; otherwise use nvidia_peermem (MREG-03)",
	AttrGPUDirectRDMAWithVMM:   "upgrade the NVIDIA driver; until then libraries that allocate with cuMemCreate (NCCL's default) cannot register that memory: set NCCL_CUMEM_ENABLE=0",
}

// AttrUnread is the failure of an attribute the driver does not know (err).
func AttrUnread(err error) *verdict.Finding {
	return verdict.Failf("the driver does not know this attribute: upgrade the NVIDIA driver", "%v", err)
}

// JudgeDmabufDriver is GPU-04's rule on the driver: it exports dma-buf
// (cuMemGetHandleForAddressRange, CUDA 11.7); nil when it does.
func JudgeDmabufDriver(d *Driver) *verdict.Finding {
	if d.Version() >= DmabufVersion && d.HasDmabufExport() {
		return nil
	}
	return verdict.Failf("upgrade the NVIDIA driver to R515 or newer (CUDA 11.7+), or rely on nvidia_peermem (MREG-03)",
		"CUDA driver %s has no dma-buf export (cuMemGetHandleForAddressRange needs 11.7)", VersionString(d.Version()))
}

// JudgeWritesOrdering is GPU-06's rule on dev's writes ordering and flush
// options: RDMA writes into GPU memory are ordered for CUDA, or a flush
// exists; nil when so.
func JudgeWritesOrdering(dev Device, order, flush int) *verdict.Finding {
	if order != WritesOrderingNone || flush != 0 {
		return nil
	}
	return verdict.Failf("upgrade the NVIDIA driver (11.3+ reports OWNER on Ampere and newer)",
		"GPU %s: RDMA writes into GPU memory are not ordered for CUDA (writes ordering NONE) and no flush option exists, so a kernel may read data the NIC has not finished writing", dev.PCI)
}

// NVMLLacksGPU is GPU-07's failure when NVML (which lists seen) has no GPU
// at pci, which CUDA has.
func NVMLLacksGPU(pci string, seen []string) *verdict.Finding {
	return verdict.Failf("CUDA and NVML disagree on the GPUs: reinstall one driver version (check CUDA_VISIBLE_DEVICES is not remapping)",
		"NVML has no GPU at %s (NVML sees %s)", pci, strings.Join(seen, ", "))
}

// JudgeBAR1Free is GPU-07's rule on the BAR1 bytes free of the GPU at pci
// against min, what the suite's registrations need; nil when enough.
func JudgeBAR1Free(pci string, free, min uint64) *verdict.Finding {
	if free >= min {
		return nil
	}
	return verdict.Failf("stop processes that hold GPU registrations (nvidia-smi -q -d MEMORY shows BAR1 use), or enable large BAR in the BIOS",
		"GPU %s: only %d MiB of BAR1 free, below the %d MiB the suite's registrations need", pci, free>>20, min>>20)
}

// NoDmabufExport is GPU-08's absence on a GPU GPU-04 already fails: it
// cannot export (DMA_BUF_SUPPORTED sup, driver CUDA version v).
func NoDmabufExport(pci string, sup, v int) *verdict.Finding {
	return verdict.Absentf("see GPU-04", "GPU %s cannot export dma-buf (DMA_BUF_SUPPORTED=%d, driver CUDA %s)", pci, sup, VersionString(v))
}

// DmabufExportFailed is GPU-08's failure when cuMemGetHandleForAddressRange
// failed (err) on the GPU at pci.
func DmabufExportFailed(pci string, err error) *verdict.Finding {
	return verdict.Failf("dma-buf export needs the open GPU kernel module and a kernel >= 5.12; check dmesg for NVRM messages", "GPU %s: %v", pci, err)
}

// FDUnread is GPU-08's failure when the exported fd could not be inspected.
func FDUnread(pci string, fd int, err error) *verdict.Finding {
	return verdict.Failf("check that /proc is mounted", "GPU %s: exported fd %d: %v", pci, fd, err)
}

// JudgeDmabufFD is GPU-08's rule on what the export of span bytes on the
// GPU at pci returned (fd, as InspectFD read it): a dma-buf at least span
// long where the kernel says its size; nil when so.
func JudgeDmabufFD(pci string, fd int, info DmabufInfo, span int) *verdict.Finding {
	switch {
	case !info.IsDmabuf:
		return verdict.Failf("report this driver to NVIDIA: cuMemGetHandleForAddressRange must return a dma-buf",
			"GPU %s: fd %d from cuMemGetHandleForAddressRange is not a dma-buf (fstatfs type %#x, link %q)", pci, fd, info.FSType, info.Link)
	case info.Size != 0 && info.Size < int64(span):
		return verdict.Failf("report this driver to NVIDIA", "GPU %s: dma-buf of %d bytes exported for a %d-byte range", pci, info.Size, span)
	}
	return nil
}
