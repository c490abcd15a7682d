package install

import (
	"sort"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hosttool"
	"github.com/gdrconf/gdrconf/internal/install"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

const installDriver = "install the NVIDIA data-center driver, preferably the open kernel module (Ubuntu: apt install nvidia-driver-<ver>-server-open or nvidia-open; RHEL: dnf module install nvidia-driver:<ver>-open), then modprobe nvidia; check dmesg for NVRM errors"

// INST-01: the NVIDIA kernel driver is loaded and says which one it is.
func TestINST01DriverLoaded(t *testing.T) {
	testenv.Req(t, "INST-01")
	root := testenv.Root(t)
	km := modules(t, root)
	mod := lookupMod(t, km, "nvidia")
	info, ok := driverInfo(t, root)
	if !ok {
		gpus := nvidiaGPUs(t)
		switch {
		case len(gpus) > 0:
			testenv.Failf(t, installDriver, "NVIDIA GPU(s) %s on the PCI bus but no NVIDIA driver loaded: %s missing, module nvidia %s",
				install.JoinDevs(gpus), root.Host(nvdriver.VersionFile), mod)
		case mod.Loaded():
			testenv.Failf(t, "mount /proc, or reinstall the NVIDIA driver (the module is loaded but does not describe itself)",
				"module nvidia is %s but %s is missing", mod, root.Host(nvdriver.VersionFile))
		}
		testenv.Absent(t, reqs.RemedyNoDriver, "no NVIDIA driver and no NVIDIA GPU: %s missing, module nvidia %s (looked in %s), no PCI device with vendor 0x10de class 0x03xxxx in %s",
			root.Host(nvdriver.VersionFile), mod, km.Sources(), root.Host(pci.DevicesDir))
	}
	testenv.Attr(t, "driver_version", info.Version)
	testenv.Attr(t, "kernel_module", info.Flavour())
	t.Logf("%s", info.Line)
	if mod.Version != "" && !nvdriver.SameVersion(mod.Version, info.Version) {
		testenv.Failf(t, "reload the driver (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia) or reboot",
			"/sys/module/nvidia/version says %s but %s says %s", mod.Version, nvdriver.VersionFile, info.Version)
	}
	if !info.Open {
		t.Logf("the proprietary kernel module is loaded: the dma-buf GPUDirect RDMA path needs the open kernel module (nvidia-driver-<ver>-open); nvidia_peermem works with both")
	}
	uvm := lookupMod(t, km, "nvidia_uvm")
	t.Logf("nvidia_uvm %s (CUDA loads it on first use through nvidia-modprobe)", uvm)
	for _, g := range nvidiaGPUs(t) {
		t.Logf("GPU %s", install.DevString(g))
	}
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
		testenv.Failf(t, "install "+nvml.Package, "NVIDIA driver %s is loaded but %s does not load: %v", info.Version, nvml.Library, err)
	}
	h := nvml.Open(t)
	v, err := h.DriverVersion()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	testenv.Attr(t, "driver_version", v)
	if !nvdriver.SameVersion(v, info.Version) {
		testenv.Failf(t, "user-space driver libraries and kernel module differ: reboot, or install one driver version for both",
			"NVML reports driver %s but the loaded kernel module is %s", v, info.Version)
	}
	devs, err := h.Devices()
	if err != nil {
		testenv.Failf(t, nvml.Remedy(err), "%v", err)
	}
	testenv.Attr(t, "gpu_count", len(devs))
	seen := map[string]bool{}
	for _, d := range devs {
		seen[d.BusID] = true
		t.Logf("NVML GPU %d: %s %s", d.Index, d.BusID, d.Name)
	}
	gpus := nvidiaGPUs(t)
	var missing []string
	for _, g := range gpus {
		if !seen[g.BDF] {
			missing = append(missing, install.DevString(g))
		}
		delete(seen, g.BDF)
	}
	if len(missing) > 0 {
		testenv.Errorf(t, "bind each to the nvidia driver (or leave it out on purpose, e.g. passed through with vfio-pci); check dmesg for NVRM/Xid errors and nvidia-smi -q",
			"NVML sees %d GPU(s) but the PCI bus has %d NVIDIA GPU(s); not seen by NVML: %s", len(devs), len(gpus), strings.Join(missing, ", "))
	}
	if len(seen) > 0 {
		extra := make([]string, 0, len(seen))
		for a := range seen {
			extra = append(extra, a)
		}
		sort.Strings(extra)
		testenv.Errorf(t, "check GDR_HOST_ROOT and that /sys is the host's", "NVML reports GPU(s) %s that are not in %s", strings.Join(extra, ", "), root.Host(pci.DevicesDir))
	}
}

// INST-03: nouveau does not hold an NVIDIA GPU.
func TestINST03NouveauNotBound(t *testing.T) {
	testenv.Req(t, "INST-03")
	root := testenv.Root(t)
	gpus := nvidiaGPUs(t)
	nv := lookupMod(t, modules(t, root), "nouveau")
	if len(gpus) == 0 {
		testenv.Absent(t, reqs.RemedyNoGPU, "no NVIDIA GPU (vendor 0x10de, class 0x03xxxx) in %s; nouveau %s", root.Host(pci.DevicesDir), nv)
	}
	const remedy = nvdriver.NouveauRemedy
	bound := 0
	for _, g := range gpus {
		if g.Driver == "nouveau" {
			bound++
			testenv.Errorf(t, remedy, "GPU %s is bound to nouveau, so the NVIDIA driver cannot use it", g.BDF)
		} else {
			t.Logf("GPU %s", install.DevString(g))
		}
	}
	if nv.Loaded() && bound == 0 {
		t.Logf("nouveau is %s though bound to no NVIDIA GPU; blacklist it so it never claims one at boot", nv)
	}
}

// INST-04: nvidia-smi runs and agrees with the kernel driver.
func TestINST04NvidiaSMI(t *testing.T) {
	testenv.Req(t, "INST-04")
	info := needDriver(t, testenv.Root(t), "nvidia-smi")
	needLive(t, "running nvidia-smi")
	smi, looked := hosttool.Look("nvidia-smi", "/usr/bin", "/usr/local/nvidia/bin", "/opt/nvidia/bin")
	if smi == "" {
		remedy := "install the driver's utilities (Ubuntu: nvidia-utils-<ver>-server; RHEL: nvidia-driver-cuda)"
		if proc(t).Container.In {
			// The NVIDIA container toolkit mounts nvidia-smi into a
			// container only for the utility capability.
			remedy = "in a container the NVIDIA container toolkit mounts nvidia-smi when NVIDIA_DRIVER_CAPABILITIES includes utility (set it to compute,utility, or all); on the host, " + remedy
		}
		testenv.Failf(t, remedy,
			"NVIDIA driver %s is loaded but nvidia-smi is not installed (looked in %s)", info.Version, strings.Join(looked, ", "))
	}
	out, err := runTool(t, "", smi, "--query-gpu=pci.bus_id,name,driver_version", "--format=csv,noheader")
	if err != nil {
		testenv.Failf(t, "follow nvidia-smi's message (driver/library version mismatch: reboot or reinstall; no devices: check dmesg for NVRM/Xid)", "%v:\n%s", err, install.FirstLines(out, 20))
	}
	var n int
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			testenv.Failf(t, "upgrade or reinstall the NVIDIA driver utilities", "nvidia-smi printed %q, want \"<bus id>, <name>, <driver version>\"", line)
		}
		id, err := nvml.NormalizeBusID(f[0])
		if err != nil {
			testenv.Failf(t, "upgrade or reinstall the NVIDIA driver utilities", "nvidia-smi: %v", err)
		}
		ver := strings.TrimSpace(f[2])
		if !nvdriver.SameVersion(ver, info.Version) {
			testenv.Errorf(t, "reboot, or install one driver version for kernel module and utilities", "nvidia-smi reports driver %s for GPU %s but the loaded kernel module is %s", ver, id, info.Version)
		}
		t.Logf("nvidia-smi: %s %s driver %s", id, strings.TrimSpace(f[1]), ver)
		n++
	}
	testenv.Attr(t, "gpu_count", n)
	var bound int
	for _, g := range nvidiaGPUs(t) {
		if g.Driver == "nvidia" {
			bound++
		}
	}
	if n != bound {
		testenv.Errorf(t, "check dmesg for NVRM/Xid errors and nvidia-smi -q", "nvidia-smi lists %d GPU(s) but %d PCI GPU(s) are bound to the nvidia driver", n, bound)
	}
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
	nvcc, looked := hosttool.Look("nvcc", cudaBinDirs...)
	if nvcc == "" {
		testenv.Absent(t, "install the CUDA toolkit (NVIDIA's repository: cuda-toolkit-<major>-<minor>) and put its bin directory in PATH", "CUDA toolkit not installed: no nvcc (looked in %s)", strings.Join(looked, ", "))
	}
	testenv.Attr(t, "nvcc", nvcc)
	out, err := runTool(t, "", nvcc, "-V")
	if err != nil {
		testenv.Failf(t, "reinstall the CUDA toolkit", "%v:\n%s", err, install.FirstLines(out, 20))
	}
	tk, err := nvdriver.ParseNvcc(out)
	if err != nil {
		testenv.Failf(t, "reinstall the CUDA toolkit (nvcc at "+nvcc+")", "%v", err)
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
			if d.CCMajor < 6 {
				testenv.Failf(t, "use a Pascal (6.0) or newer data-center or workstation GPU",
					"GPU %s (%s) has compute capability %s, below 6.0", d.BusID, d.Name, d.CC())
			}
		})
	}
	if ran == 0 {
		if filtered {
			testenv.Failf(t, "check that NVML sees the GPUs sysfs lists (INST-02)", "the selected GPU(s) (GDR_GPU=%q, GDR_RAILS) match none of NVML's %d GPU(s)", testenv.Config(t).GPU, len(devs))
		}
		testenv.Absent(t, "", "NVML sees no GPU although driver %s is loaded (INST-02 compares with the PCI bus)", info.Version)
	}
}
