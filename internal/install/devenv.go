package install

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// gdrProbe is the brief's smallest GPUDirect RDMA program: both headers, one
// verbs call and one CUDA driver call. Exit codes tell the test which failed.
const gdrProbe = `#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <cuda.h>

int main(void) {
	int n = -1;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		printf("ibv_get_device_list failed: errno %d (%s)\n", errno, strerror(errno));
		return 2;
	}
	printf("ibv_devices=%d\n", n);
	ibv_free_device_list(list);
	CUresult r = cuInit(0);
	const char *name = 0;
	if (cuGetErrorName(r, &name) != CUDA_SUCCESS)
		name = "unknown";
	printf("cuInit=%d %s\n", (int)r, name);
	if (r != CUDA_SUCCESS)
		return 3;
	int count = 0, drv = 0;
	cuDeviceGetCount(&count);
	cuDriverGetVersion(&drv);
	printf("cuda_devices=%d cuda_driver=%d\n", count, drv);
	return 0;
}
`

// Where the headers and libraries of INST-14's probe program live on the
// distributions and CUDA layouts the suite meets (LAB-NOTES: cuda.h in
// /usr/local/cuda/include, libcuda in /usr/local/nvidia/lib64 on the GPU
// machine).
var (
	cudaIncludeDirs  = []string{"/usr/local/cuda/include", "/usr/local/cuda-*/include", "/opt/cuda/include", "/usr/include", "/usr/local/include"}
	verbsIncludeDirs = []string{"/usr/include", "/usr/local/include"}
	libDirs          = []string{"/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64", "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib"}
	// The toolkit's link-only stub of libcuda, last so a real one wins.
	stubDirs = []string{"/usr/local/cuda/lib64/stubs", "/usr/local/cuda-*/lib64/stubs", "/usr/local/cuda/targets/*/lib/stubs"}
)

// envDirs adds $CUDA_HOME / $CUDA_PATH layouts in front of the defaults.
func envDirs(sub string, dirs []string) []string {
	var out []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			out = append(out, filepath.Join(d, sub))
		}
	}
	return append(out, dirs...)
}

// findHeader returns the first include directory (globs allowed) holding rel.
func findHeader(rel string, dirs []string) string {
	for _, g := range dirs {
		ms, _ := filepath.Glob(g)
		for _, d := range ms {
			if _, err := os.Stat(filepath.Join(d, rel)); err == nil {
				return d
			}
		}
	}
	return ""
}

// Build is how INST-14 compiles its probe program: the compiler's
// arguments after the source and output, or what is missing.
type Build struct {
	// Flags are -I, -L and -l arguments; nil when a header is missing.
	Flags []string
	// Missing names each missing header with the package that installs it.
	Missing []string
}

// ProbeBuild finds the verbs and CUDA headers and the library
// directories, this process's view of the host (INST-14 runs on the live
// host only).
func ProbeBuild() Build {
	var b Build
	cudaDirs := envDirs("include", cudaIncludeDirs)
	cudaInc, verbsInc := findHeader("cuda.h", cudaDirs), findHeader("infiniband/verbs.h", verbsIncludeDirs)
	if verbsInc == "" {
		b.Missing = append(b.Missing, "infiniband/verbs.h not in "+strings.Join(verbsIncludeDirs, ", ")+": install libibverbs-dev (Debian/Ubuntu) or rdma-core-devel (RHEL/SUSE), or MLNX_OFED")
	}
	if cudaInc == "" {
		b.Missing = append(b.Missing, "cuda.h not in "+strings.Join(cudaDirs, ", ")+": install the CUDA toolkit (cuda-toolkit-<ver>, or at least cuda-driver-dev-<ver>) or set CUDA_HOME")
	}
	if len(b.Missing) > 0 {
		return b
	}
	b.Flags = []string{"-I" + verbsInc}
	if cudaInc != verbsInc {
		b.Flags = append(b.Flags, "-I"+cudaInc)
	}
	for _, g := range envDirs("lib64", append(libDirs, stubDirs...)) {
		ms, _ := filepath.Glob(g)
		for _, d := range ms {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				b.Flags = append(b.Flags, "-L"+d)
			}
		}
	}
	b.Flags = append(b.Flags, "-libverbs", "-lcuda")
	return b
}

// ProbeRemedy is what to do when INST-14's probe program built but failed
// to run: runErr is how it ended, out what it printed (its exit codes and
// lines are the program's, conformance/install gdrProbe).
func ProbeRemedy(runErr error, out string) string {
	switch {
	case strings.Contains(runErr.Error(), "permission denied"):
		return "the temporary directory is mounted noexec: set TMPDIR to a directory that allows executables"
	case strings.Contains(out, "error while loading shared libraries"):
		return "the loader cannot find a library the program links: add its directory (e.g. /usr/local/nvidia/lib64 for libcuda.so.1) to /etc/ld.so.conf.d/ and run ldconfig"
	case strings.Contains(out, "ibv_get_device_list failed"):
		return "modprobe ib_uverbs (libibverbs finds no /sys/class/infiniband_verbs without it)"
	case strings.Contains(out, "CUDA_ERROR_INSUFFICIENT_DRIVER") || strings.Contains(out, "CUDA_ERROR_COMPAT"):
		return "libcuda and the kernel module disagree: install one NVIDIA driver version (user space and kernel) and reboot"
	case strings.Contains(out, "CUDA_ERROR_NO_DEVICE"):
		return "no usable GPU: check CUDA_VISIBLE_DEVICES, nvidia-smi, and that the nvidia module is bound to the GPU"
	case strings.Contains(out, "cuInit="):
		return "check nvidia-smi, dmesg (NVRM/Xid) and that /dev/nvidia* and /dev/nvidia-uvm exist and are readable (nvidia-modprobe -u)"
	}
	return "see the program's output"
}

// DevEnv is INST-14 on the running host: a C compiler builds gdrProbe in
// dir against the verbs and CUDA headers (ProbeBuild) and the program
// runs. What is missing or fails is the install step to take.
func (r Tools) DevEnv(dir string) Judged {
	var j Judged
	cc, looked := hostfs.LookTool("gcc", "/usr/bin")
	if cc == "" {
		if cc, _ = hostfs.LookTool("cc"); cc == "" {
			j.add(verdict.Failf("install a C compiler (Debian/Ubuntu: build-essential; RHEL: gcc)", "no gcc or cc (looked in %s)", strings.Join(looked, ", ")))
			return j
		}
	}
	b := ProbeBuild()
	if len(b.Missing) > 0 {
		j.add(verdict.Failf("install the development packages named above", "GDR headers missing: %s", strings.Join(b.Missing, "; ")))
		return j
	}
	src, bin := filepath.Join(dir, "gdr_probe.c"), filepath.Join(dir, "gdr_probe")
	if err := os.WriteFile(src, []byte(gdrProbe), 0o644); err != nil {
		j.add(verdict.NotJudgedf("", "write %s: %v", src, err))
		return j
	}
	args := append([]string{src, "-o", bin}, b.Flags...)
	j.attr("cc", cc+" "+strings.Join(args, " "))
	out, err := hostfs.Run(r.Timeout, dir, nil, cc, args...)
	if err != nil {
		j.add(verdict.Failf("missing -libverbs: install libibverbs-dev / rdma-core-devel; missing -lcuda: install the NVIDIA driver's libcuda.so (libnvidia-compute-<ver>) or the CUDA toolkit's stubs (cuda-driver-dev-<ver>)",
			"%s does not build the GDR probe program: %v:\n%s", cc, err, FirstLines(out, 30)))
		return j
	}
	out, err = hostfs.Run(r.Timeout, dir, nil, bin)
	j.info("gdr_probe:\n%s", out)
	if err != nil {
		j.add(verdict.Failf(ProbeRemedy(err, out), "the GDR probe program built but failed: %v", err))
		return j
	}
	j.attr("probe", strings.ReplaceAll(out, "\n", " "))
	return j
}
