package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/reqs"
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

// Where the headers and libraries live on the distributions and CUDA layouts
// the suite meets (LAB-NOTES: cuda.h in /usr/local/cuda/include, libcuda in
// /usr/local/nvidia/lib64 on the GPU machine).
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

func existingDirs(globs []string) []string {
	var out []string
	for _, g := range globs {
		ms, _ := filepath.Glob(g)
		for _, d := range ms {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() {
				out = append(out, d)
			}
		}
	}
	return out
}

// INST-14: the GPUDirect RDMA development environment builds and runs the
// brief's program: verbs.h + cuda.h, -libverbs -lcuda.
func TestINST14DevEnvironment(t *testing.T) {
	testenv.Req(t, "INST-14")
	if p := proc(t); p.Container.In {
		// reqs: host only. The image has no compiler on purpose, and the
		// node's is not run from a read-only GDR_HOST_ROOT.
		testenv.HostOnly(t, "INST-14", "compiling and running the GDR probe (verbs.h and cuda.h, -libverbs -lcuda) judges the host's developer environment (a C compiler, the rdma-core and CUDA headers), which this image does not carry and the node's compiler is not run from %s; run the suite on the host for it (%s)",
			testenv.Root(t).Dir(), p.Container)
	}
	root := needLive(t, "compiling and running a test program")
	// Without a driver cuInit cannot succeed, so the environment is only
	// expected on GPU hosts; there, every missing piece is an install step.
	if _, driver := driverInfo(t, root); !driver {
		verbs := "libibverbs.so.1 loads"
		if err := dl.Probe("libibverbs.so.1"); err != nil {
			verbs = err.Error()
		}
		testenv.Absent(t, reqs.RemedyNoDriver, "no NVIDIA driver (%s missing), so a CUDA program cannot run here (rdma-core: %s)", root.Host("/proc/driver/nvidia/version"), verbs)
	}
	cc, looked := lookTool("gcc", "/usr/bin")
	if cc == "" {
		if cc, _ = lookTool("cc"); cc == "" {
			testenv.Failf(t, "install a C compiler (Debian/Ubuntu: build-essential; RHEL: gcc)", "no gcc or cc (looked in %s)", strings.Join(looked, ", "))
		}
	}
	cudaInc := findHeader("cuda.h", envDirs("include", cudaIncludeDirs))
	verbsInc := findHeader("infiniband/verbs.h", verbsIncludeDirs)
	var missing []string
	if verbsInc == "" {
		missing = append(missing, "infiniband/verbs.h not in "+strings.Join(verbsIncludeDirs, ", ")+": install libibverbs-dev (Debian/Ubuntu) or rdma-core-devel (RHEL/SUSE), or MLNX_OFED")
	}
	if cudaInc == "" {
		missing = append(missing, "cuda.h not in "+strings.Join(envDirs("include", cudaIncludeDirs), ", ")+": install the CUDA toolkit (cuda-toolkit-<ver>, or at least cuda-driver-dev-<ver>) or set CUDA_HOME")
	}
	if len(missing) > 0 {
		testenv.Failf(t, "install the development packages named above", "GDR headers missing: %s", strings.Join(missing, "; "))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "gdr_probe.c")
	bin := filepath.Join(dir, "gdr_probe")
	if err := os.WriteFile(src, []byte(gdrProbe), 0o644); err != nil {
		testenv.NotJudgedf(t, "", "write %s: %v", src, err)
	}
	args := []string{src, "-o", bin, "-I" + verbsInc}
	if cudaInc != verbsInc {
		args = append(args, "-I"+cudaInc)
	}
	for _, d := range existingDirs(envDirs("lib64", append(libDirs, stubDirs...))) {
		args = append(args, "-L"+d)
	}
	args = append(args, "-libverbs", "-lcuda")
	testenv.Attr(t, "cc", cc+" "+strings.Join(args, " "))
	out, err := runTool(t, dir, nil, cc, args...)
	if err != nil {
		testenv.Failf(t, "missing -libverbs: install libibverbs-dev / rdma-core-devel; missing -lcuda: install the NVIDIA driver's libcuda.so (libnvidia-compute-<ver>) or the CUDA toolkit's stubs (cuda-driver-dev-<ver>)",
			"%s does not build the GDR probe program: %v:\n%s", cc, err, firstLines(out, 30))
	}
	out, err = runTool(t, dir, nil, bin)
	t.Logf("gdr_probe:\n%s", out)
	if err == nil {
		testenv.Attr(t, "probe", strings.ReplaceAll(out, "\n", " "))
		return
	}
	remedy := "see the program's output"
	switch {
	case strings.Contains(err.Error(), "permission denied"):
		remedy = "the temporary directory is mounted noexec: set TMPDIR to a directory that allows executables"
	case strings.Contains(out, "error while loading shared libraries"):
		remedy = "the loader cannot find a library the program links: add its directory (e.g. /usr/local/nvidia/lib64 for libcuda.so.1) to /etc/ld.so.conf.d/ and run ldconfig"
	case strings.Contains(out, "ibv_get_device_list failed"):
		remedy = "modprobe ib_uverbs (libibverbs finds no /sys/class/infiniband_verbs without it)"
	case strings.Contains(out, "CUDA_ERROR_INSUFFICIENT_DRIVER") || strings.Contains(out, "CUDA_ERROR_COMPAT"):
		remedy = "libcuda and the kernel module disagree: install one NVIDIA driver version (user space and kernel) and reboot"
	case strings.Contains(out, "CUDA_ERROR_NO_DEVICE"):
		remedy = "no usable GPU: check CUDA_VISIBLE_DEVICES, nvidia-smi, and that the nvidia module is bound to the GPU"
	case strings.Contains(out, "cuInit="):
		remedy = "check nvidia-smi, dmesg (NVRM/Xid) and that /dev/nvidia* and /dev/nvidia-uvm exist and are readable (nvidia-modprobe -u)"
	}
	testenv.Failf(t, remedy, "the GDR probe program built but failed: %v", err)
}
