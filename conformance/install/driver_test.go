package install

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/install"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// INST-01: the NVIDIA kernel driver is loaded and says which one it is.
func TestINST01DriverLoaded(t *testing.T) {
	testenv.Req(t, "INST-01")
	root := testenv.Root(t)
	record(t, install.DriverLoaded(root, modules(t, root), nvidiaGPUs(t)))
}

// INST-02: NVML loads, reports the kernel driver's version, and sees every
// NVIDIA GPU on the PCI bus.
func TestINST02NVMLAgrees(t *testing.T) {
	testenv.Req(t, "INST-02")
	// The driver's absence is read from files, so it is said first, also
	// on a recorded tree; only then does NVML need the running host.
	info := needDriver(t, testenv.Root(t), "NVML")
	root := needLive(t, "loading NVML")
	// Driver loaded but no NVML is a broken install, not absent software.
	if err := dl.Probe(nvml.Library); err != nil {
		testenv.Fail(t, *install.NVMLMissing(info.Version, nvml.Library, nvml.Package, err))
	}
	h := nvml.Open(t)
	v, err := h.DriverVersion()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	testenv.Attr(t, "driver_version", v)
	if f := install.NVMLVersion(v, info.Version); f != nil {
		testenv.Fail(t, *f)
	}
	devs, err := h.Devices()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	testenv.Attr(t, "gpu_count", len(devs))
	seen := make([]string, len(devs))
	for i, d := range devs {
		seen[i] = d.BusID
		t.Logf("NVML GPU %d: %s %s", d.Index, d.BusID, d.Name)
	}
	record(t, install.NVMLSeesGPUs(seen, nvidiaGPUs(t), root.Host(pci.DevicesDir)))
}

// INST-03: nouveau does not hold an NVIDIA GPU.
func TestINST03NouveauNotBound(t *testing.T) {
	testenv.Req(t, "INST-03")
	gpus := nvidiaGPUs(t)
	root := testenv.Root(t)
	record(t, install.Nouveau(root, modules(t, root), gpus))
}

// INST-04: nvidia-smi runs and agrees with the kernel driver.
func TestINST04NvidiaSMI(t *testing.T) {
	testenv.Req(t, "INST-04")
	info := needDriver(t, testenv.Root(t), "nvidia-smi")
	needLive(t, "running nvidia-smi")
	smi, looked := hostfs.LookTool("nvidia-smi", install.SMIDirs...)
	if smi == "" {
		testenv.Fail(t, *install.NoSMI(info.Version, looked, proc(t).Container.In))
	}
	out, err := runTool(t, "", smi, install.SMIArgs...)
	if err != nil {
		testenv.Fail(t, *install.SMIFailed(err, out))
	}
	record(t, install.JudgeSMI(out, info.Version, nvidiaGPUs(t)))
}

// cudaDirs are where CUDA toolkits install, newest-looking first after the default.
var cudaBinDirs = []string{"/usr/local/cuda/bin", "/usr/local/cuda-*/bin", "/opt/cuda/bin", "/usr/lib/nvidia-cuda-toolkit/bin"}

// INST-05: the CUDA toolkit's nvcc runs and targets a CUDA version the
// driver supports. In a container (reqs: host only where the node has no
// toolkit) the node's toolkit is read as files under GDR_HOST_ROOT
// (version.json; the node's nvcc is not run in the pod).
func TestINST05CUDAToolkit(t *testing.T) {
	testenv.Req(t, "INST-05")
	if p := proc(t); p.Container.In {
		tk, hostOnly, j := install.NodeToolkit(testenv.Root(t), p)
		if hostOnly != "" {
			testenv.HostOnly(t, "INST-05", "%s", hostOnly)
		}
		record(t, j)
		judgeToolkit(t, tk.Version, tk.Dir+"/bin/nvcc")
		return
	}
	needLive(t, "running nvcc")
	nvcc, looked := hostfs.LookTool("nvcc", cudaBinDirs...)
	if nvcc == "" {
		testenv.Fail(t, *install.NoNvcc(looked))
	}
	testenv.Attr(t, "nvcc", nvcc)
	out, err := runTool(t, "", nvcc, "-V")
	if err != nil {
		testenv.Fail(t, *install.NvccFailed(err, out))
	}
	tk, err := nvdriver.ParseNvcc(out)
	if err != nil {
		testenv.Fail(t, *install.NvccUnparsed(nvcc, err))
	}
	judgeToolkit(t, tk, nvcc)
}

// judgeToolkit asks NVML for the CUDA version the driver supports and
// compares the toolkit's with it (install.JudgeToolkit).
func judgeToolkit(t *testing.T, tk nvdriver.CUDAVersion, nvcc string) {
	t.Helper()
	n, err := nvml.Open(t).CUDADriverVersion()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	record(t, install.JudgeToolkit(tk, n, nvcc))
}

// INST-06: every GPU is Pascal (compute capability 6.0) or newer, the
// oldest generation GPUDirect RDMA with current drivers supports.
func TestINST06ComputeCapability(t *testing.T) {
	testenv.Req(t, "INST-06")
	info := needDriver(t, testenv.Root(t), "GPU compute capability")
	needLive(t, "asking NVML for compute capabilities")
	h := nvml.Open(t)
	devs, err := h.Devices()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	// The GPUs GDR_GPU / GDR_RAILS select, by PCI address: NVML's own
	// numbering is not the suite's (PCI bus order).
	sel := testenv.Selection(t)
	chosen := map[string]int{}
	for _, r := range sel.Rails {
		chosen[r.GPU.PCI] = r.GPU.Index
	}
	filtered := len(sel.Rails) < len(sel.All)
	var ran int
	for _, d := range devs {
		idx, ok := chosen[d.BusID]
		if filtered && !ok {
			continue
		}
		ran++
		t.Run(d.BusID, func(t *testing.T) {
			testenv.Req(t, "INST-06")
			testenv.Attr(t, "gpu", d.BusID)
			if ok {
				testenv.Attr(t, "gpu_index", idx)
			}
			testenv.Attr(t, "gpu_name", d.Name)
			testenv.Attr(t, "compute_capability", d.CC())
			if d.BAR1Total > 0 {
				testenv.Attr(t, "bar1_mib", d.BAR1Total>>20)
			}
			if f := install.JudgeCC(d.BusID, d.Name, d.CCMajor, d.CC()); f != nil {
				testenv.Fail(t, *f)
			}
		})
	}
	if ran == 0 {
		if filtered {
			testenv.Fail(t, *install.NoSelectedGPU(testenv.Config(t).GPU, len(devs)))
		}
		testenv.Absent(t, "", "NVML sees no GPU although driver %s is loaded (INST-02 compares with the PCI bus)", info.Version)
	}
}
