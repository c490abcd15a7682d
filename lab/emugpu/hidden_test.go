//go:build gpu

package emugpu_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/report"
)

// gpuHost plants a host root whose PCI bus lists n NVIDIA GPUs (display
// class 0x0302, vendor 0x10de) at the emulated GPU's addresses
// (0000:3b:00.0, 0000:4b:00.0, ...), bound to driver ("" for none). Its
// proc is this kernel's procfs, so hostfs takes it for the running host
// mounted elsewhere, as a pod's /host: the suite judges it as the live host
// and asks the CUDA driver (the emulated one) about it. A recorded tree
// would not do: what CUDA sees is judged on the live host only.
func gpuHost(t *testing.T, driver string, n int) string {
	t.Helper()
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skipf("no /proc/sys/kernel/random/boot_id here (%v): a planted tree cannot stand for the running host", err)
	}
	dir := t.TempDir()
	mk := func(p, content string) {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	ln := func(target, p string) {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.Symlink(target, full))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/bus/pci/devices"), 0o755))
	for i := 0; i < n; i++ {
		bdf := gpuAddr(i)
		fn := "sys/devices/pci0000:" + bdf[5:7] + "/" + bdf
		mk(fn+"/vendor", "0x10de\n")
		mk(fn+"/device", "0x2335\n")
		mk(fn+"/class", "0x030200\n")
		if driver != "" {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/bus/pci/drivers", driver), 0o755))
			ln("../../../bus/pci/drivers/"+driver, fn+"/driver")
		}
		ln("../../../devices/pci0000:"+bdf[5:7]+"/"+bdf, "sys/bus/pci/devices/"+bdf)
	}
	ln("/proc", "proc")
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	require.True(t, r.IsLive(), "the planted root's proc is this kernel's procfs")
	return dir
}

// gpuAddr is the PCI address of emulated GPU i (src/libcuda.c bus_of).
func gpuAddr(i int) string { return "0000:" + []string{"3b", "4b", "5b", "6b"}[i] + ":00.0" }

const hiddenHeadline = "the PCI bus lists 2 NVIDIA GPU(s) (0000:3b:00.0, 0000:4b:00.0) but CUDA sees none; cuInit(0): CUDA_ERROR_NO_DEVICE"

// GPU-01 on a host whose PCI bus lists two NVIDIA GPUs that CUDA does not
// show this process (the emulated driver's device files hidden: an empty
// FAKE_CUDA_DEV_DIR) fails naming both counts and the addresses; it is no
// skip. The same GPUs visible pass, one of them hidden in a container is
// a subset left out, and a host without them skips as before.
func TestHiddenGPUsInTheSuite(t *testing.T) {
	hidden := []string{"FAKE_CUDA_DEVICES=2", "FAKE_CUDA_DEV_DIR=" + t.TempDir()}

	res := runBinary(t, "gpu.test", "^TestGPU01", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "nvidia", 2))...)
	o := get(t, res, "TestGPU01Driver")
	assert.Equal(t, "fail", o.action, "GPUs on the PCI bus that CUDA cannot see are not absent\n%s", o.output.String())
	assert.Empty(t, o.attrs["gdr.skip"])
	assert.Contains(t, o.attrs["gdr.cause"], hiddenHeadline)
	assert.NotEmpty(t, o.attrs["gdr.outcome"])
	assert.NotEmpty(t, o.attrs["gdr.remedy"])

	// Bound to nouveau: the host fell short, with the remedy INST-03 gives.
	res = runBinary(t, "gpu.test", "^TestGPU01", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "nouveau", 2))...)
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "fail", o.action, "%s", o.output.String())
	assert.Equal(t, "fell_short", o.attrs["gdr.outcome"])
	assert.Contains(t, o.attrs["gdr.cause"], hiddenHeadline)
	assert.Contains(t, o.attrs["gdr.cause"], "0000:3b:00.0, 0000:4b:00.0 bound to nouveau, not to the nvidia driver")
	assert.Equal(t, nvdriver.NouveauRemedy, o.attrs["gdr.remedy"])

	// The same host with the GPUs' device files there: CUDA sees both.
	res = runBinary(t, "gpu.test", "^TestGPU01", "FAKE_CUDA_DEVICES=2", "GDR_HOST_ROOT="+gpuHost(t, "nvidia", 2))
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "pass", o.action, "%s", o.output.String())
	assert.Equal(t, "0=0000:3b:00.0 GDR emulated GPU 0, 1=0000:4b:00.0 GDR emulated GPU 1", o.attrs["gdr.gpus"])

	// One of the two hidden (its device file missing) in what reads as a
	// container (the planted root is this host mounted elsewhere): a
	// subset handed over on purpose, left out as before.
	one := t.TempDir()
	require.NoError(t, plantDevices(one, 2))
	require.NoError(t, os.Remove(filepath.Join(one, "nvidia1")))
	res = runBinary(t, "gpu.test", "^TestGPU01", "FAKE_CUDA_DEVICES=2", "FAKE_CUDA_DEV_DIR="+one, "GDR_HOST_ROOT="+gpuHost(t, "nvidia", 2))
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "pass", o.action, "%s", o.output.String())
	assert.Equal(t, "GPU 1 (0000:4b:00.0)", o.attrs["gdr.gpus_not_visible"])
	assert.Contains(t, o.output.String(), "left out, not visible to CUDA (a subset handed to this process on purpose: the GPUs given to this container")

	// No NVIDIA GPU on the PCI bus: absent, as on the lab's VMs, with the
	// emulated driver hiding its GPUs and without any driver.
	res = runBinary(t, "gpu.test", "^TestGPU01", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "", 0))...)
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "skip", o.action, "%s", o.output.String())
	assert.Contains(t, o.attrs["gdr.skip"], "no GPU: cuInit(0): CUDA_ERROR_NO_DEVICE")
	assert.Equal(t, "check nvidia-smi, /dev/nvidia*, CUDA_VISIBLE_DEVICES, and the container's GPU runtime", o.attrs["gdr.remedy"], "cuInit's remedy (cuda.InitRemedy), not the test's")
	res = runBinary(t, "gpu.test", "^TestGPU01", "GDR_HOST_ROOT="+gpuHost(t, "", 0), "LD_LIBRARY_PATH="+t.TempDir())
	o = get(t, res, "TestGPU01Driver")
	assert.Equal(t, "skip", o.action, "%s", o.output.String())
	assert.Contains(t, o.attrs["gdr.skip"], "no CUDA driver: libcuda.so.1 does not open")
}

// A Slurm step without a GPU request on a host whose PCI bus lists GPUs:
// not judged, with Slurm's cause and remedy; never absent, so the report
// is NOT QUALIFIED and GDR_STRICT=1 is not needed to stop the run passing.
func TestHiddenGPUsSlurmStep(t *testing.T) {
	slurm := []string{"FAKE_CUDA_DEV_DIR=" + t.TempDir(), "FAKE_CUDA_DEVICES=2", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0",
		"SLURM_JOB_GPUS=0,1", "SLURM_STEP_GPUS=", "CUDA_VISIBLE_DEVICES=", "GDR_HOST_ROOT=" + gpuHost(t, "nvidia", 2)}
	const cause = "the Slurm step was given no GPUs (job 4242 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES=)"
	for _, strict := range []string{"GDR_STRICT=0", "GDR_STRICT=1"} {
		evs := runEvents(t, "gpu.test", "^TestGPU01", append(slurm, strict)...)
		res := fold(t, evs)
		o := get(t, res, "TestGPU01Driver")
		assert.Equal(t, "fail", o.action, "%s: %s", strict, o.output.String())
		assert.Equal(t, "not_judged", o.attrs["gdr.outcome"], strict)
		assert.Empty(t, o.attrs["gdr.skip"], strict)
		assert.Empty(t, o.attrs["gdr.absent"], strict)
		assert.Contains(t, o.attrs["gdr.cause"], hiddenHeadline, strict)
		assert.Contains(t, o.attrs["gdr.cause"], cause, strict)
		assert.Equal(t, config.SlurmNoGPUsRemedy, o.attrs["gdr.remedy"], strict)

		// The report: NOT QUALIFIED (exit status 1), never INCOMPLETE,
		// which exits 0 without GDR_STRICT=1.
		parsed, err := report.ReadEvents(bytes.NewReader(evs))
		require.NoError(t, err)
		for i := range parsed {
			parsed[i].Package = "github.com/gdrconf/gdrconf/conformance/gpu"
		}
		rep := report.Build([]report.Run{{Host: report.Identity{Host: "gpu01"}, Events: parsed}})
		assert.Equal(t, report.NotQualified, rep.Verdict.Verdict, "%s: %s", strict, rep.Verdict.Line)
		assert.Equal(t, 1, rep.ExitCode(), strict)
		for _, r := range rep.Hosts[0].Reqs {
			if r.ID == "GPU-01" {
				assert.Equal(t, report.OutcomeNotJudged, r.Outcome, strict)
			}
		}
	}
}

// MREG-02 (GPU memory, no NIC needed) on such a host: not judged, "CUDA
// unusable: <why>", never absent; without GPUs on the bus still absent.
func TestHiddenGPUsMemreg(t *testing.T) {
	bin := extraSuite(t, "memreg.test", "gpu,rdma", "./conformance/memreg")
	hidden := []string{"FAKE_CUDA_DEVICES=2", "FAKE_CUDA_DEV_DIR=" + t.TempDir()}
	res := runBinary(t, bin, "^TestMREG02", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "nvidia", 2))...)
	o := get(t, res, "TestMREG02DeviceMemoryControl")
	assert.Equal(t, "fail", o.action, "%s", o.output.String())
	assert.Equal(t, "not_judged", o.attrs["gdr.outcome"])
	assert.True(t, strings.HasPrefix(o.attrs["gdr.cause"], "CUDA unusable: "+hiddenHeadline), "%s", o.attrs["gdr.cause"])

	res = runBinary(t, bin, "^TestMREG02", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "", 0))...)
	o = get(t, res, "TestMREG02DeviceMemoryControl")
	assert.Equal(t, "skip", o.action, "%s", o.output.String())
}

// pingpong's memory with GDR_MEM unset (cuda.HostFallback, which its
// newBuffer asks; pingpong itself needs an RDMA device, which this machine
// lacks): on a host whose PCI bus lists GPUs that CUDA does not show, the
// test runs on host memory but is recorded not judged, once however many
// buffers it takes; on a host without them host memory is no finding.
func TestHiddenGPUsHostFallback(t *testing.T) {
	if os.Getenv("GDR_EMU_FALLBACK") != "" {
		for end := 0; end < 2; end++ { // loopback: both ends take a buffer
			why, ok := cuda.HostFallback(t)
			t.Logf("host fallback %v: %s", ok, why)
		}
		return
	}
	self, err := filepath.Abs(os.Args[0])
	require.NoError(t, err)
	hidden := []string{"GDR_EMU_FALLBACK=1", "FAKE_CUDA_DEVICES=2", "FAKE_CUDA_DEV_DIR=" + t.TempDir()}
	const name = "TestHiddenGPUsHostFallback"

	res := runBinary(t, self, "^"+name+"$", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "nvidia", 2))...)
	o := get(t, res, name)
	assert.Equal(t, "fail", o.action, "%s", o.output.String())
	assert.Equal(t, "not_judged", o.attrs["gdr.outcome"])
	assert.True(t, strings.HasPrefix(o.attrs["gdr.cause"], "CUDA unusable: "+hiddenHeadline), "%s", o.attrs["gdr.cause"])
	assert.Contains(t, o.attrs["gdr.cause"], "the test ran on host memory (gdr.mem=host), so its GPU-memory path is not judged")
	assert.Empty(t, o.attrs["gdr.failures_count"], "recorded once per test")
	assert.Equal(t, 2, strings.Count(o.output.String(), "host fallback true: GDR_MEM unset and CUDA unusable"), "%s", o.output.String())

	res = runBinary(t, self, "^"+name+"$", append(hidden, "GDR_HOST_ROOT="+gpuHost(t, "", 0))...)
	o = get(t, res, name)
	assert.Equal(t, "pass", o.action, "%s", o.output.String())
	assert.Contains(t, o.output.String(), "host fallback false: ")
}
