package reqs

import (
	"fmt"
	"strings"
)

// Why a requirement is absent in make lab-k8s's VMs: the VMs' own reasons.
const (
	labNoDriver = "no NVIDIA kernel driver in the VM: no /proc/driver/nvidia (the emulated GPU is a libcuda.so.1 only, lab/emugpu)"
	labNoGPU    = "no NVIDIA GPU on the VM's PCI bus: the emulated GPU exists only to the CUDA driver"
	labNoNVML   = "no NVML (libnvidia-ml.so.1) in the lab's image: the emulated GPU is a libcuda.so.1 only"
	labNoLink   = "no PCIe link registers: the emulated GPU is not on the PCI bus"
	labNoDmabuf = "the emulated GPU reports DMA_BUF_SUPPORTED 0: rxe has no dma-buf MRs to emulate it with (ibv_reg_dmabuf_mr gives EOPNOTSUPP)"
	labMemcpy   = "the emulated GPUs copy with CPU memcpy: no PCIe uplink or GPU link to judge (rates reported, not judged)"
)

// LabVMAbsent are the requirements absent in make lab-k8s's VMs for the
// VMs' own reasons (no PCI GPU, no NVIDIA kernel driver or NVML, Soft-RoCE
// instead of an mlx5 NIC), each with the reason: with GDR_STRICT=1 these
// fail there as absences ("GDR_STRICT=1: ..."), and nothing else may.
// INST-05 and INST-14 are not here: in the lab's pods they are host only
// (container.go), which GDR_STRICT=1 does not fail. The install and
// topology entries are pinned by fixtures/pod_test.go on the pod-lab-vm
// tree; the gpu and memreg entries are read from the code and the lab's
// recorded runs (fixtures/runs/lab-emulated), for a lab-k8s run under
// GDR_STRICT=1 to confirm. docs/lab.md's table is generated from it.
var LabVMAbsent = map[string]string{
	"INST-01": labNoDriver + ", and " + labNoGPU,
	"INST-02": labNoDriver,
	"INST-03": labNoGPU,
	"INST-04": labNoDriver,
	"INST-06": labNoDriver,
	"INST-13": labNoDriver,
	"TOPO-01": labNoGPU, "TOPO-02": labNoGPU, "TOPO-03": labNoGPU, "TOPO-04": labNoGPU, "TOPO-05": labNoGPU,
	"TOPO-06": labNoGPU, "TOPO-07": labNoGPU, "TOPO-08": labNoGPU, "TOPO-09": labNoGPU, "TOPO-10": labNoGPU,
	"GPU-04":  labNoDmabuf,
	"GPU-07":  labNoNVML,
	"GPU-08":  labNoDmabuf,
	"GPU-09":  labNoLink,
	"GPU-10":  labNoLink,
	"GPU-11":  labNoLink,
	"GPU-12":  labMemcpy,
	"GPU-13":  labMemcpy,
	"GPU-15":  labMemcpy,
	"GPU-16":  labNoNVML,
	"MREG-04": labNoDmabuf,
}

// LabPinned reports whether a LabVMAbsent entry is checked on the
// pod-lab-vm tree (the no-tag packages a tree can run), not only read.
func LabPinned(id string) bool {
	r, ok := Lookup(id)
	return ok && (r.Area == "install" || r.Area == "topology")
}

// LabMarkdown renders LabVMAbsent as docs/lab.md's table.
func LabMarkdown() string {
	var b strings.Builder
	b.WriteString("| ID | level | why it is absent in the lab's VMs | checked by |\n| --- | --- | --- | --- |\n")
	for _, r := range All() {
		why, ok := LabVMAbsent[r.ID]
		if !ok {
			continue
		}
		by := "code and fixtures/runs/lab-emulated; a lab-k8s run confirms"
		if LabPinned(r.ID) {
			by = "fixtures/pod_test.go on pod-lab-vm"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.ID, r.Level, why, by)
	}
	return b.String()
}
