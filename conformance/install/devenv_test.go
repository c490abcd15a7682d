package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hosttool"
	"github.com/gdrconf/gdrconf/internal/install"
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
	cc, looked := hosttool.Look("gcc", "/usr/bin")
	if cc == "" {
		if cc, _ = hosttool.Look("cc"); cc == "" {
			testenv.Failf(t, "install a C compiler (Debian/Ubuntu: build-essential; RHEL: gcc)", "no gcc or cc (looked in %s)", strings.Join(looked, ", "))
		}
	}
	b := install.ProbeBuild()
	if len(b.Missing) > 0 {
		testenv.Failf(t, "install the development packages named above", "GDR headers missing: %s", strings.Join(b.Missing, "; "))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "gdr_probe.c")
	bin := filepath.Join(dir, "gdr_probe")
	if err := os.WriteFile(src, []byte(gdrProbe), 0o644); err != nil {
		testenv.NotJudgedf(t, "", "write %s: %v", src, err)
	}
	args := append([]string{src, "-o", bin}, b.Flags...)
	testenv.Attr(t, "cc", cc+" "+strings.Join(args, " "))
	out, err := runTool(t, dir, cc, args...)
	if err != nil {
		testenv.Failf(t, "missing -libverbs: install libibverbs-dev / rdma-core-devel; missing -lcuda: install the NVIDIA driver's libcuda.so (libnvidia-compute-<ver>) or the CUDA toolkit's stubs (cuda-driver-dev-<ver>)",
			"%s does not build the GDR probe program: %v:\n%s", cc, err, install.FirstLines(out, 30))
	}
	out, err = runTool(t, dir, bin)
	t.Logf("gdr_probe:\n%s", out)
	if err == nil {
		testenv.Attr(t, "probe", strings.ReplaceAll(out, "\n", " "))
		return
	}
	testenv.Failf(t, install.ProbeRemedy(err, out), "the GDR probe program built but failed: %v", err)
}
