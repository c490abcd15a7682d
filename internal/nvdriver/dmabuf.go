package nvdriver

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// VerbsDmabuf is what the live host's libibverbs offers for dma-buf memory
// regions: Err when it could not be opened, else whether it exports
// ibv_reg_dmabuf_mr (rdma-core >= 34). The caller opens the library.
type VerbsDmabuf struct {
	Err error
	Has bool
}

// Dmabuf says whether the dma-buf registration path can work, and why (what
// it has) or why not (what it lacks): the open kernel module, Linux >= 5.12
// and, where verbs is not nil (the live host), libibverbs with
// ibv_reg_dmabuf_mr.
func Dmabuf(root *hostfs.Root, km *kmod.Host, info Info, verbs *VerbsDmabuf) (bool, string) {
	var have, lack []string
	if info.Open {
		have = append(have, "open kernel module "+info.Version)
	} else {
		lack = append(lack, "proprietary kernel module "+info.Version+" (dma-buf needs the open one)")
	}
	rel := km.Release()
	if rel == "" {
		lack = append(lack, "kernel release unknown ("+root.Host(kmod.ReleaseFile)+" missing)")
	} else if ok, err := kmod.AtLeast(rel, 5, 12); err != nil {
		lack = append(lack, err.Error())
	} else if ok {
		have = append(have, "Linux "+rel)
	} else {
		lack = append(lack, "Linux "+rel+" (dma-buf MRs need 5.12)")
	}
	switch {
	case verbs == nil:
	case verbs.Err != nil:
		lack = append(lack, verbs.Err.Error())
	case !verbs.Has:
		lack = append(lack, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)")
	default:
		have = append(have, "libibverbs with ibv_reg_dmabuf_mr")
	}
	if len(lack) > 0 {
		return false, strings.Join(lack, "; ")
	}
	return true, strings.Join(have, ", ")
}

// DmabufFlagPCIe is CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE, a flag of
// cuMemGetHandleForAddressRange (value 1, cuda.h CUmemRangeFlags; "mapped
// via PCIe BAR1" in NVIDIA/cuda-python's MemRangeFlags). NCCL passes it
// only when built with CUDA 12.8 or later (src/transport/net.cc
// getHandleForAddressRangeFlags).
const DmabufFlagPCIe = 1

// DmabufMapping is how a GPU buffer is exported as a dma-buf for one NIC:
// the flags of cuMemGetHandleForAddressRange and why, for gdr.dmabuf_mapping.
type DmabufMapping struct {
	Flags int    // 0 or DmabufFlagPCIe
	Why   string // the rule that chose Flags, naming its inputs
}

// PCIe reports whether the export asks for the PCIe (BAR1) mapping type.
func (m DmabufMapping) PCIe() bool { return m.Flags&DmabufFlagPCIe != 0 }

// ChooseDmabufMapping decides the export flags as NCCL does: the PCIe
// mapping type exactly when the GPU reaches its CPU over NVLink-C2C and the
// NIC is not on that CPU's PCIe (NCCL's P2C), i.e. the NIC reaches the GPU
// through a PCIe path of its own (a ConnectX-8 switch shared with the GPU:
// PIX or PXB). NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr: gdrMode PCI
// when the GPU's path to its CPU is C2C and the NIC's distance is not P2C;
// src/transport/net.cc getHandleForAddressRangeFlags: gdrMode PCI exports
// with the flag, every other mode with 0, so the NIC reaches a C2C GPU's
// memory over C2C. class is the rail's path class (topo.Class.ViaC2C
// applied); Unknown (a software NIC, a GPU only the driver sees) keeps
// flags 0: no PCIe path is known for the flag to pick.
func ChooseDmabufMapping(c2c bool, class topo.Class) DmabufMapping {
	switch {
	case !c2c:
		return DmabufMapping{Why: "flags 0: the GPU is not attached to its CPU over NVLink-C2C (a PCIe GPU has one mapping)"}
	case class == topo.Unknown:
		return DmabufMapping{Why: "flags 0: the GPU is on NVLink-C2C but its path to the NIC is unknown"}
	case class == topo.P2C:
		return DmabufMapping{Why: "flags 0: the GPU is on NVLink-C2C and the NIC on its CPU's PCIe (P2C): the NIC reaches GPU memory over C2C, as NCCL exports it"}
	}
	return DmabufMapping{Flags: DmabufFlagPCIe, Why: fmt.Sprintf("CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: the GPU is on NVLink-C2C and the NIC on a PCIe path of its own (%s), as NCCL's gdrMode PCI exports it", class)}
}

// DmabufMappingNote is gdr.dmabuf_mapping: the flags an export carries and
// why. refused is the driver's answer to the flags m asked for when the
// export fell back to flags 0 (NCCL's getDmaBufFd retries so, in
// src/rma/rma_proxy.cc and src/gin/gin_host_proxy.cc; its net transport,
// src/transport/net.cc, does not, so its connection setup would fail).
func DmabufMappingNote(m DmabufMapping, refused error) string {
	if refused == nil || !m.PCIe() {
		return m.Why
	}
	return fmt.Sprintf("flags 0 after the driver refused CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (%v): retried as NCCL's getDmaBufFd does, while NCCL's net transport would fail its export here; asked for because %s",
		refused, strings.TrimPrefix(m.Why, "CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: "))
}
