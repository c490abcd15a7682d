package install

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/install"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

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
	record(t, install.Tools{Timeout: testenv.Config(t).Timeout}.DevEnv(t.TempDir()))
}
