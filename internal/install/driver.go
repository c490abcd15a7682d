package install

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
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
