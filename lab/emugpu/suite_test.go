package emugpu_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/lab/emugpu"
)

// The multi-GPU requirements (GPU-12..15) run here, in the unit tests, on
// the emulated GPU with several devices: conformance/gpu is built with the
// gpu tag and run with the emulated libcuda.so.1 first on the loader's path.
// What the emulator cannot be (a link, PCIe contention) must come out absent
// and every result labelled gpu-emulated; what it can (peer access, data
// through cuMemcpyPeer) must pass, and fail when peer access is taken away.
// GPU-05, MREG-02 (conformance/memreg, tags gpu,rdma) and harness/cuda's VMM
// tests run the same way for cuMemCreate memory.

type outcome struct {
	action string // pass, fail, skip
	output strings.Builder
	attrs  map[string]string
}

var (
	suiteOnce sync.Once
	suiteDir  string
	suiteErr  error
)

// buildSuite compiles the emulated driver and the gpu test binary once.
func buildSuite(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"go", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here to build the emulated GPU and the gpu suite: %v", tool, err)
		}
	}
	// A host with real NVIDIA GPUs in sysfs selects those, which the
	// emulated driver does not see.
	root, err := hostfs.New("/")
	require.NoError(t, err)
	if gpus := rails.Discover(root).GPUs; len(gpus) > 0 {
		t.Skipf("this host has NVIDIA GPUs in sysfs (%s): the suite runs on them, not on the emulated GPU", gpus[0])
	}
	suiteOnce.Do(func() {
		if suiteDir, suiteErr = os.MkdirTemp("", "gdr-emugpu-suite-"); suiteErr != nil {
			return
		}
		if _, suiteErr = emugpu.Build(suiteDir); suiteErr != nil {
			return
		}
		build := exec.Command("go", "test", "-c", "-tags", "gpu", "-o", filepath.Join(suiteDir, "gpu.test"), "./conformance/gpu")
		build.Dir = "../.."
		if out, err := build.CombinedOutput(); err != nil {
			suiteErr = fmt.Errorf("go test -c -tags gpu ./conformance/gpu: %w\n%s", err, out)
		}
	})
	require.NoError(t, suiteErr)
	return suiteDir
}

var (
	extraMu    sync.Mutex
	extraBuilt = map[string]error{}
)

// extraSuite compiles package pkg's tests with tags into name beside the
// gpu test binary, once per name; without the rdma-core headers (tag rdma)
// it skips.
func extraSuite(t *testing.T, name, tags, pkg string) string {
	t.Helper()
	dir := buildSuite(t)
	extraMu.Lock()
	err, done := extraBuilt[name]
	if !done {
		build := exec.Command("go", "test", "-c", "-tags", tags, "-o", filepath.Join(dir, name), pkg)
		build.Dir = "../.."
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go test -c -tags %s %s: %w\n%s", tags, pkg, berr, out)
		}
		extraBuilt[name] = err
	}
	extraMu.Unlock()
	if err != nil && strings.Contains(err.Error(), "infiniband/verbs.h") {
		t.Skipf("no rdma-core headers to build %s: %v", pkg, err)
	}
	require.NoError(t, err)
	return name
}

// runSuite runs the multi-GPU tests on the emulated GPU with env (GDR_*
// from the caller's environment dropped) and folds test2json's events.
func runSuite(t *testing.T, env ...string) map[string]*outcome {
	t.Helper()
	return runBinary(t, "gpu.test", "^TestGPU1[2-5]", env...)
}

// runBinary runs the tests of test binary bin (built by buildSuite or
// extraSuite; an absolute path is taken as is) that match run, on the
// emulated GPU, as runSuite does.
func runBinary(t *testing.T, bin, run string, env ...string) map[string]*outcome {
	t.Helper()
	return fold(t, runEvents(t, bin, run, env...))
}

// runEvents is runBinary's run: test2json's events as they came.
func runEvents(t *testing.T, bin, run string, env ...string) []byte {
	t.Helper()
	dir := buildSuite(t)
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(dir, bin)
	}
	cmd := exec.Command("go", "tool", "test2json", "-t", bin,
		"-test.v=test2json", "-test.count=1", "-test.timeout=5m", "-test.run", run)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GDR_") && !strings.HasPrefix(kv, "FAKE_CUDA_") && !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+dir, "FAKE_CUDA_DEV_DIR="+os.Getenv("FAKE_CUDA_DEV_DIR"))
	// A lock of its own: a make conformance running beside the unit tests
	// holds the host's, and would make these not judged.
	cmd.Env = append(cmd.Env, "GDR_SUITE_LOCK="+filepath.Join(t.TempDir(), "suite.lock"))
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = "../.." // go tool needs the module
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // a failing test exits non-zero; the events say which
	require.NotEmpty(t, out, "no test events; stderr:\n%s", stderr.String())
	return out
}

// fold gathers test2json's events by test.
func fold(t *testing.T, out []byte) map[string]*outcome {
	t.Helper()
	res := map[string]*outcome{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Test, Output, Key, Value string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), "%s", sc.Text())
		if ev.Test == "" {
			continue
		}
		o := res[ev.Test]
		if o == nil {
			o = &outcome{attrs: map[string]string{}}
			res[ev.Test] = o
		}
		switch ev.Action {
		case "pass", "fail", "skip":
			o.action = ev.Action
		case "output":
			o.output.WriteString(ev.Output)
		case "attr":
			o.attrs[ev.Key] = ev.Value
		}
	}
	require.NotEmpty(t, res, "no test events in:\n%s", out)
	return res
}

func get(t *testing.T, res map[string]*outcome, name string) *outcome {
	t.Helper()
	o := res[name]
	require.NotNil(t, o, "test %s did not run; ran: %v", name, keys(res))
	return o
}

func keys(m map[string]*outcome) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

const pair = "0000:3b:00.0-0000:4b:00.0" // the first two emulated devices

func TestMultiGPUOnEmulatedGPU(t *testing.T) {
	res := runSuite(t, "FAKE_CUDA_DEVICES=2")
	for _, top := range []string{"TestGPU12ConcurrentHtoD", "TestGPU13ConcurrentDtoH"} {
		parent := get(t, res, top)
		assert.Equal(t, "pass", parent.action, "%s", parent.output.String())
		assert.Equal(t, "2", parent.attrs["gdr.gpu_count"])
		assert.NotEmpty(t, parent.attrs["gdr.copy_gbyte_s_aggregate"], "the aggregate rate is reported")
		for _, gpu := range []string{"0000:3b:00.0", "0000:4b:00.0"} {
			sub := get(t, res, top+"/"+gpu)
			assert.Equal(t, "skip", sub.action, "%s: the emulator has no PCIe uplink to contend for\n%s", gpu, sub.output.String())
			assert.Contains(t, sub.attrs["gdr.skip"], "is the lab's emulated GPU")
			assert.Equal(t, "gpu-emulated", sub.attrs["gdr.mem"])
			assert.NotEmpty(t, sub.attrs["gdr.copy_gbyte_s_solo"])
			assert.NotEmpty(t, sub.attrs["gdr.concurrent_fraction"])
			assert.Contains(t, sub.attrs["gdr.shares_upstream"], "not in sysfs")
		}
	}
	access := get(t, res, "TestGPU14PeerAccess/"+pair)
	assert.Equal(t, "pass", access.action, "%s", access.output.String())
	assert.Equal(t, "intact both ways", access.attrs["gdr.p2p_data"])
	assert.Equal(t, "gpu-emulated", access.attrs["gdr.mem"])
	assert.Equal(t, "unknown", access.attrs["gdr.p2p_link"], "NVLink is not emulated")
	assert.Contains(t, access.attrs["gdr.peer_access_enabled"], "enabled by the suite")

	bw := get(t, res, "TestGPU15PeerBandwidth/"+pair)
	assert.Equal(t, "skip", bw.action, "%s", bw.output.String())
	assert.Contains(t, bw.attrs["gdr.skip"], "neither NVLink nor a PCIe path is emulated")
	assert.Equal(t, "intact both ways", bw.attrs["gdr.p2p_data"], "data verified before the rates are set aside")
	for _, k := range []string{"gdr.p2p_gbyte_s", "gdr.p2p_gbyte_s_reverse"} {
		assert.NotEmpty(t, bw.attrs[k], "%s reported", k)
	}
	// The two-way rate needs the two copies to overlap; on a loaded 2-core
	// machine the emulated ones may not, and the suite then says so instead.
	assert.True(t, bw.attrs["gdr.p2p_bidir_gbyte_s"] != "" || bw.attrs["gdr.p2p_bidir_note"] != "",
		"a bidirectional rate or the reason there is none: %v", bw.attrs)
}

func TestMultiGPUWithoutPeerAccess(t *testing.T) {
	res := runSuite(t, "FAKE_CUDA_DEVICES=2", "FAKE_CUDA_PEER=0")
	access := get(t, res, "TestGPU14PeerAccess/"+pair)
	assert.Equal(t, "fail", access.action)
	assert.Contains(t, access.output.String(), "cannot reach each other's memory (cuDeviceCanAccessPeer 0000:3b:00.0->0000:4b:00.0 false")
	assert.Contains(t, access.output.String(), "remedy: the GPUs cannot reach each other directly")
	bw := get(t, res, "TestGPU15PeerBandwidth/"+pair)
	assert.Equal(t, "skip", bw.action)
	assert.Contains(t, bw.attrs["gdr.skip"], "GPU-14 judges that")
}

func TestMultiGPUOnOneGPU(t *testing.T) {
	res := runSuite(t, "FAKE_CUDA_DEVICES=1")
	for _, top := range []string{"TestGPU12ConcurrentHtoD", "TestGPU13ConcurrentDtoH", "TestGPU14PeerAccess", "TestGPU15PeerBandwidth"} {
		o := get(t, res, top)
		assert.Equal(t, "skip", o.action, top)
		assert.Contains(t, o.attrs["gdr.skip"], "needs two or more GPUs: the selection has one, 0000:3b:00.0", top)
	}
	// Two GPUs, one selected: the reason names the selector.
	res = runSuite(t, "FAKE_CUDA_DEVICES=2", "GDR_GPU=1")
	assert.Contains(t, get(t, res, "TestGPU14PeerAccess").attrs["gdr.skip"],
		"the selection has one, 0000:4b:00.0 (GDR emulated GPU 1); the CUDA driver sees 2 GPU(s) and GDR_GPU=1 selects one")
	// Strict: absent is a failure.
	res = runSuite(t, "FAKE_CUDA_DEVICES=1", "GDR_STRICT=1")
	o := get(t, res, "TestGPU14PeerAccess")
	assert.Equal(t, "fail", o.action)
	assert.Contains(t, o.output.String(), "GDR_STRICT=1: GPU-14 needs two or more GPUs")
}

// The suite under a Slurm step that was given no GPU, its device files
// hidden (an empty device tree: what ConstrainDevices leaves a step of an
// exclusive job that did not ask), on a host whose PCI bus lists no NVIDIA
// GPU (this machine, the lab's VMs): the GPU tests are absent and say why,
// naming the missing GPU request; GDR_STRICT=1 fails them with it. With
// GPUs on the bus they are not judged (TestHiddenGPUsSlurmStep).
func TestSlurmStepWithoutGPUsInTheSuite(t *testing.T) {
	slurm := []string{"FAKE_CUDA_DEV_DIR=" + t.TempDir(), "FAKE_CUDA_DEVICES=2", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0",
		"SLURM_JOB_GPUS=0,1", "SLURM_STEP_GPUS=", "CUDA_VISIBLE_DEVICES="}
	const (
		want   = "the Slurm step was given no GPUs (job 4242 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES=)"
		remedy = "an --exclusive job's step must ask for them (srun --gres=gpu:N or --gpus-per-node); deploy/slurm/gdrconf.sbatch does"
	)
	res := runBinary(t, "gpu.test", "^TestGPU01", slurm...)
	o := get(t, res, "TestGPU01Driver")
	assert.Equal(t, "skip", o.action, "%s", o.output.String())
	assert.Contains(t, o.attrs["gdr.skip"], "no GPU: cuInit(0): CUDA_ERROR_NO_DEVICE")
	assert.Contains(t, o.attrs["gdr.skip"], want)
	assert.Equal(t, remedy, o.attrs["gdr.remedy"])

	res = runBinary(t, "gpu.test", "^TestGPU01", append(slurm, "GDR_STRICT=1")...)
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "fail", o.action)
	assert.Contains(t, o.attrs["gdr.cause"], want)
	assert.Equal(t, remedy, o.attrs["gdr.remedy"])

	// Given its GPUs, the same step runs on them.
	res = runBinary(t, "gpu.test", "^TestGPU01", "FAKE_CUDA_DEVICES=2", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0",
		"SLURM_STEP_GPUS=0,1", "CUDA_VISIBLE_DEVICES=0,1")
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "pass", o.action, "%s", o.output.String())
}

// cuMemCreate memory (NCCL's allocator) on the emulated GPU through the
// suite: GPU-05 reads the attribute that lets a NIC register it, and
// MREG-02's controls find it device memory, RDMA-capable exactly when
// created so. With the attribute at 0 GPU-05 is absent (the emulator's) and
// MREG-02 says it left cuMemCreate unchecked, naming the attribute.
func TestVMMOnEmulatedGPU(t *testing.T) {
	bin := extraSuite(t, "memreg.test", "gpu,rdma", "./conformance/memreg")
	res := runBinary(t, "gpu.test", "^TestGPU05")
	vmm := get(t, res, "TestGPU05VMM/0000:3b:00.0")
	assert.Equal(t, "pass", vmm.action, "%s", vmm.output.String())
	assert.Equal(t, "1", vmm.attrs["gdr.gdr_vmm_supported"])
	assert.Equal(t, "gpu-emulated", vmm.attrs["gdr.mem"])

	res = runBinary(t, bin, "^TestMREG02")
	ctl := get(t, res, "TestMREG02DeviceMemoryControl")
	assert.Equal(t, "pass", ctl.action, "%s", ctl.output.String())
	for _, want := range []string{"cuMemCreate=device", "cuMemCreate gpuDirectRDMACapable=1: IS_GPU_DIRECT_RDMA_CAPABLE=true",
		"cuMemCreate gpuDirectRDMACapable=0: IS_GPU_DIRECT_RDMA_CAPABLE=false", "cuMemAllocManaged=managed"} {
		assert.Contains(t, ctl.attrs["gdr.controls"], want)
	}
	assert.Equal(t, "true", ctl.attrs["gdr.gdr_capable"], "cuMemAlloc memory reads RDMA-capable")
	// No numa_status file for it: a PCIe GPU's meaning. (The C2C meaning
	// needs the driver's directory under GDR_HOST_ROOT, and the emulated
	// GPU joins the selection on the live root only: harness/gpumr's unit
	// tests hold that rule.)
	assert.True(t, strings.HasPrefix(ctl.attrs["gdr.control_meaning"], "pcie: "), "%q", ctl.attrs["gdr.control_meaning"])

	res = runBinary(t, "gpu.test", "^TestGPU05", "FAKE_CUDA_VMM_RDMA=0")
	vmm = get(t, res, "TestGPU05VMM/0000:3b:00.0")
	assert.Equal(t, "skip", vmm.action)
	assert.Equal(t, "0", vmm.attrs["gdr.gdr_vmm_supported"])
	res = runBinary(t, bin, "^TestMREG02", "FAKE_CUDA_VMM_RDMA=0")
	ctl = get(t, res, "TestMREG02DeviceMemoryControl")
	assert.Equal(t, "pass", ctl.action, "%s", ctl.output.String())
	assert.Contains(t, ctl.attrs["gdr.controls"], "cuMemCreate not checked: GPU 0000:3b:00.0: GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 0")
}

// harness/cuda's own GPU tests of VMM memory (TestVMMOnGPU, the one for a
// GPU machine, and the driver's answers to misuse) pass on the emulated GPU
// too: what they assert holds for the emulator, and the test code runs
// before it meets a GPU.
func TestHarnessVMMTestsOnEmulatedGPU(t *testing.T) {
	bin := extraSuite(t, "cuda.test", "gpu", "./harness/cuda")
	res := runBinary(t, bin, "^TestVMM")
	for _, name := range []string{"TestVMMOnGPU", "TestVMMMisuseOnGPU"} {
		o := get(t, res, name)
		assert.Equal(t, "pass", o.action, "%s", o.output.String())
	}
	assert.Contains(t, get(t, res, "TestVMMOnGPU").output.String(), "minimum 2 MiB, recommended 2 MiB")
}
