package install

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// Driver reads /proc/driver/nvidia/version; ok is false when the file is
// missing (no driver loaded). An unreadable file is not judged; a
// malformed one fell short.
func Driver(root *hostfs.Root) (nvdriver.Info, bool, error) {
	b, err := root.ReadFile(nvdriver.VersionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nvdriver.Info{}, false, nil
	}
	if err != nil {
		return nvdriver.Info{}, false, verdict.NotJudgedf("", "NVIDIA driver: %v", err)
	}
	info, err := nvdriver.ParseVersionFile(b)
	if err != nil {
		return nvdriver.Info{}, false, verdict.Failf("reinstall the NVIDIA driver; the loaded module describes itself in an unknown way", "%v", err)
	}
	return info, true, nil
}

// NoDriver is the absence of a check that needs the NVIDIA driver.
func NoDriver(root *hostfs.Root, why string) *verdict.Finding {
	return verdict.Absentf(reqs.RemedyNoDriver, "no NVIDIA driver loaded (%s missing), so %s cannot be checked; INST-01 says why", root.Host(nvdriver.VersionFile), why)
}

// nvccWhy is why INST-05 is a host's check, not a container's.
const nvccWhy = "nvcc is a developer's tool on the host: GPUDirect RDMA traffic does not use it, and containerised workloads bring their own CUDA toolkit"

// NodeToolkit is INST-05 in a container: the node's toolkit, read as
// files under GDR_HOST_ROOT (version.json; the node's nvcc is not run in
// the pod). hostOnly, when set, is why the check is the host's alone
// (testenv.HostOnly); an absence or an unreadable toolkit is in j.
func NodeToolkit(root *hostfs.Root, p virt.Process) (tk nvdriver.Toolkit, hostOnly string, j Judged) {
	if root.Dir() == "/" {
		return tk, fmt.Sprintf("%s, and the node's toolkit cannot be seen (GDR_HOST_ROOT is unset; this image has none); run the suite on the host to check it (%s)", nvccWhy, p.Container), j
	}
	tk, ok, looked, err := nvdriver.FindToolkit(root)
	if err != nil {
		j.add(verdict.NotJudgedf("check the file named, or run nvcc -V on the host", "the node's CUDA toolkit: %v", err))
		return tk, "", j
	}
	if !ok {
		return tk, fmt.Sprintf("%s, and the node has none under %s (looked in %s; a GPU-operator node carries the driver only); run the suite on the host to check a developer's toolkit there",
			nvccWhy, root.Dir(), strings.Join(looked, ", ")), j
	}
	j.attr("cuda_toolkit_source", "the node's toolkit under "+root.Dir()+" ("+tk.From+", read; nvcc not run)")
	if !root.IsLive() {
		j.attr("cuda_toolkit", tk.Version.Full())
		j.add(verdict.Absentf(reqs.RemedyLiveHost, "the node's CUDA toolkit %s (%s) is compared with the driver's CUDA version through NVML, which needs the running host; GDR_HOST_ROOT=%s is a recorded tree", tk.Version.Full(), tk.From, root.Dir()))
	}
	return tk, "", j
}

// JudgeToolkit compares a toolkit's CUDA version (tk, from nvcc) with the
// CUDA version the driver supports (cudaDriver, NVML's
// nvmlSystemGetCudaDriverVersion: 12040 for 12.4).
func JudgeToolkit(tk nvdriver.CUDAVersion, cudaDriver int, nvcc string) Judged {
	var j Judged
	j.attr("cuda_toolkit", tk.Full())
	drv, err := nvdriver.CUDAFromInt(cudaDriver)
	if err != nil {
		j.add(verdict.Failf("upgrade the NVIDIA driver", "NVML: %v", err))
		return j
	}
	j.attr("cuda_driver", drv.String())
	j.info("nvcc %s: CUDA %s; driver supports CUDA %s", nvcc, tk.Full(), drv)
	switch nvdriver.CUDACompatible(tk, drv) {
	case nvdriver.CUDAUnsupported:
		f := verdict.Failf(fmt.Sprintf("upgrade the NVIDIA driver to a release that supports CUDA %s (CUDA release notes, table 'CUDA Toolkit and Minimum Required Driver Version'), or install a CUDA %d.x toolkit", tk, drv.Major),
			"CUDA toolkit %s (%s) is a newer major version than the driver supports (CUDA %s); minor-version compatibility does not cross majors: programs it builds fail with cudaErrorInsufficientDriver", tk.Full(), nvcc, drv)
		f.Measured, f.Threshold = "cuda_toolkit", "cuda_driver"
		j.add(f)
	case nvdriver.CUDAMinorCompat:
		note := fmt.Sprintf("CUDA toolkit %s is newer than the driver's CUDA %s within major %d: allowed by CUDA minor-version compatibility, but PTX JIT and features new in %s need a newer driver", tk.Full(), drv, tk.Major, tk)
		j.attr("cuda_minor_compat", note)
		j.info("warning: %s", note)
	}
	return j
}

const installDriver = "install the NVIDIA data-center driver, preferably the open kernel module (Ubuntu: apt install nvidia-driver-<ver>-server-open or nvidia-open; RHEL: dnf module install nvidia-driver:<ver>-open), then modprobe nvidia; check dmesg for NVRM errors"

// lookup is km.Lookup as a finding: a module list that cannot be read is
// not judged.
func lookup(km *kmod.Host, name string) (kmod.Status, *verdict.Finding) {
	st, err := km.Lookup(name)
	if err != nil {
		return st, verdict.NotJudgedf("", "kernel module %s: %v", name, err)
	}
	return st, nil
}

// DriverLoaded is INST-01: the NVIDIA kernel driver is loaded and says
// which one it is (/proc/driver/nvidia/version agreeing with
// /sys/module/nvidia/version). gpus are the NVIDIA GPUs on the PCI bus.
func DriverLoaded(root *hostfs.Root, km *kmod.Host, gpus []*pci.Device) Judged {
	var j Judged
	mod, f := lookup(km, "nvidia")
	if f != nil {
		j.add(f)
		return j
	}
	info, ok, err := Driver(root)
	switch {
	case err != nil:
		j.add(verdict.Of(err))
		return j
	case ok:
	case len(gpus) > 0:
		j.add(verdict.Failf(installDriver, "NVIDIA GPU(s) %s on the PCI bus but no NVIDIA driver loaded: %s missing, module nvidia %s",
			JoinDevs(gpus), root.Host(nvdriver.VersionFile), mod))
		return j
	case mod.Loaded():
		j.add(verdict.Failf("mount /proc, or reinstall the NVIDIA driver (the module is loaded but does not describe itself)",
			"module nvidia is %s but %s is missing", mod, root.Host(nvdriver.VersionFile)))
		return j
	default:
		j.add(verdict.Absentf(reqs.RemedyNoDriver, "no NVIDIA driver and no NVIDIA GPU: %s missing, module nvidia %s (looked in %s), no PCI device with vendor 0x10de class 0x03xxxx in %s",
			root.Host(nvdriver.VersionFile), mod, km.Sources(), root.Host(pci.DevicesDir)))
		return j
	}
	j.attr("driver_version", info.Version)
	j.attr("kernel_module", info.Flavour())
	j.info("%s", info.Line)
	if mod.Version != "" && !nvdriver.SameVersion(mod.Version, info.Version) {
		f := verdict.Failf("reload the driver (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia) or reboot",
			"/sys/module/nvidia/version says %s but %s says %s", mod.Version, nvdriver.VersionFile, info.Version)
		f.Evidence = []string{"/sys/module/nvidia/version " + mod.Version, nvdriver.VersionFile + " " + info.Version}
		j.add(f)
		return j
	}
	if !info.Open {
		j.info("the proprietary kernel module is loaded: the dma-buf GPUDirect RDMA path needs the open kernel module (nvidia-driver-<ver>-open); nvidia_peermem works with both")
	}
	uvm, f := lookup(km, "nvidia_uvm")
	if f != nil {
		j.add(f)
		return j
	}
	j.info("nvidia_uvm %s (CUDA loads it on first use through nvidia-modprobe)", uvm)
	for _, g := range gpus {
		j.info("GPU %s", DevString(g))
	}
	return j
}

// Nouveau is INST-03: nouveau does not hold an NVIDIA GPU (gpus, from the
// PCI bus).
func Nouveau(root *hostfs.Root, km *kmod.Host, gpus []*pci.Device) Judged {
	var j Judged
	nv, f := lookup(km, "nouveau")
	if f != nil {
		j.add(f)
		return j
	}
	if len(gpus) == 0 {
		j.add(verdict.Absentf(reqs.RemedyNoGPU, "no NVIDIA GPU (vendor 0x10de, class 0x03xxxx) in %s; nouveau %s", root.Host(pci.DevicesDir), nv))
		return j
	}
	bound := 0
	for _, g := range gpus {
		if g.Driver != "nouveau" {
			j.info("GPU %s", DevString(g))
			continue
		}
		bound++
		f := verdict.Failf(nvdriver.NouveauRemedy, "GPU %s is bound to nouveau, so the NVIDIA driver cannot use it", g.BDF)
		f.Device = g.BDF
		j.add(f)
	}
	if nv.Loaded() && bound == 0 {
		j.info("nouveau is %s though bound to no NVIDIA GPU; blacklist it so it never claims one at boot", nv)
	}
	return j
}

// NoNvcc is INST-05's absence: no nvcc in PATH nor in the toolkit folders
// looked at.
func NoNvcc(looked []string) *verdict.Finding {
	return verdict.Absentf("install the CUDA toolkit (NVIDIA's repository: cuda-toolkit-<major>-<minor>) and put its bin directory in PATH",
		"CUDA toolkit not installed: no nvcc (looked in %s)", strings.Join(looked, ", "))
}

// NvccFailed is INST-05's failure when nvcc -V ran and failed with err,
// printing out.
func NvccFailed(err error, out string) *verdict.Finding {
	return verdict.Failf("reinstall the CUDA toolkit", "%v:\n%s", err, FirstLines(out, 20))
}

// NvccUnparsed is INST-05's failure when nvcc -V (the one at nvcc) ran but
// said no CUDA version the suite could read (err, nvdriver.ParseNvcc's).
func NvccUnparsed(nvcc string, err error) *verdict.Finding {
	return verdict.Failf("reinstall the CUDA toolkit (nvcc at "+nvcc+")", "%v", err)
}
