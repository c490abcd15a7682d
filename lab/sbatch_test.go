package lab

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/report"
)

// LAB_SBATCH=old is the shipped script with the GPU request taken off its
// srun line, and nothing else changed; a shipped script without that
// request has no old case to plant.
func TestOldSbatch(t *testing.T) {
	shipped, err := os.ReadFile("../deploy/slurm/gdrconf.sbatch")
	require.NoError(t, err)
	old, err := OldSbatch(shipped)
	require.NoError(t, err)
	var srun []string
	for _, l := range strings.Split(string(old), "\n") {
		if strings.HasPrefix(l, "srun ") {
			srun = append(srun, l)
		}
	}
	require.Len(t, srun, 1)
	assert.NotContains(t, srun[0], "gpu_opt", "the old script's step asks for no GPU")
	assert.Contains(t, srun[0], `"$dist/rounds.sh"`)
	assert.Equal(t, len(shipped)-len(oldGPURequest), len(old), "only the request is gone")
	assert.Equal(t, strings.Replace(string(shipped), oldGPURequest, "", 1), string(old))

	_, err = OldSbatch(old)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has 0 srun lines asking for GPUs")

	r := &runner{o: Options{RepoDir: "..", Cluster: ClusterOptions{Sbatch: SbatchOld}}}
	b, err := r.sbatchScript()
	require.NoError(t, err)
	assert.Equal(t, old, b)
	r.o.Cluster.Sbatch = SbatchShipped
	b, err = r.sbatchScript()
	require.NoError(t, err)
	assert.Equal(t, shipped, b, "the lab submits the shipped script unmodified")
	r.o.Cluster.Sbatch = "new"
	_, err = r.sbatchScript()
	assert.EqualError(t, err, `LAB_SBATCH="new": want shipped or old`)
}

func TestScontrolJob(t *testing.T) {
	line := "JobId=7 JobName=gdrconf UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=1:0 DerivedExitCode=0:0 RunTime=00:06:12"
	state, exit := scontrolJob(line)
	assert.Equal(t, "FAILED", state)
	assert.Equal(t, "1:0", exit, "not DerivedExitCode")
	state, exit = scontrolJob("slurm_load_jobs error: Invalid job id specified")
	assert.Empty(t, state)
	assert.Empty(t, exit)
}

// The batch job's status is the verdict: sbatch --wait, scontrol's state
// and exit code, and the script's own report agree with the lab's merge.
func TestSbatchVerdict(t *testing.T) {
	failed := &JobResult{JobID: "7", SbatchExit: 1, State: "FAILED", ExitCode: "1:0"}
	assert.Empty(t, SbatchVerdict(failed, 1, 1), "NOT QUALIFIED: exit 1 everywhere")
	ok := &JobResult{JobID: "8", SbatchExit: 0, State: "COMPLETED", ExitCode: "0:0"}
	assert.Empty(t, SbatchVerdict(ok, 0, 0))

	p := strings.Join(SbatchVerdict(ok, 1, 1), "\n")
	assert.Contains(t, p, "sbatch --wait exited 0, the merged verdict's exit status is 1")
	assert.Contains(t, p, "scontrol's ExitCode=0:0, want 1:0")
	assert.Contains(t, p, "JobState=COMPLETED, want FAILED for exit 1")
	p = strings.Join(SbatchVerdict(failed, 1, -1), "\n")
	assert.Contains(t, p, "the script's own report says exit -1 (report/exit-code), the lab's merge of the same folder 1")
	killed := &JobResult{JobID: "9", SbatchExit: 1, State: "TIMEOUT", ExitCode: "0:15", Scontrol: "JobState=TIMEOUT ExitCode=0:15"}
	p = strings.Join(SbatchVerdict(killed, 1, 1), "\n")
	assert.Contains(t, p, "ExitCode=0:15, want 1:0")
	assert.Contains(t, p, "JobState=TIMEOUT, want FAILED")

	dir := t.TempDir()
	assert.Equal(t, -1, readExitCode(dir))
	require.NoError(t, os.WriteFile(filepath.Join(dir, report.ExitCodeFile), []byte("3\n"), 0o644))
	assert.Equal(t, 3, readExitCode(dir))
	assert.Equal(t, "/s/submit/reports/cluster-42", JobFolder("/s/submit", "42"))
}

func probe(node, step string, open map[string]string) DeviceProbe {
	p := DeviceProbe{Node: node, Open: open}
	if step != "-" {
		p.StepGPUs = &step
	}
	return p
}

// The probes' lines come back from srun's output, and the device cgroup is
// judged: EPERM without a GPU request, ENXIO with one, on every node.
func TestDevicesVerdict(t *testing.T) {
	var out bytes.Buffer
	out.WriteString("srun: job 3 queued and waiting for resources\n")
	for _, n := range []string{"vm2", "vm1"} {
		b := bytes.Buffer{}
		require.Equal(t, 0, gpuDevicesIn(t.TempDir(), n, func(string) (string, bool) { return "", false }, &b))
		out.WriteString(strings.Replace(b.String(), `"open":{}`, `"open":{"nvidiactl":"ENXIO","nvidia0":"EPERM","nvidia1":"EPERM"}`, 1))
	}
	no, err := ParseProbes(out.Bytes())
	require.NoError(t, err)
	require.Len(t, no, 2)
	assert.Equal(t, "vm1", no[0].Node, "sorted by node")
	assert.Nil(t, no[0].StepGPUs)
	gpu := []DeviceProbe{
		probe("vm1", "0,1", map[string]string{"nvidiactl": "ENXIO", "nvidia0": "ENXIO", "nvidia1": "ENXIO"}),
		probe("vm2", "0,1", map[string]string{"nvidiactl": "ENXIO", "nvidia0": "ENXIO", "nvidia1": "ENXIO"}),
	}
	hosts := []string{"vm1", "vm2"}
	assert.Empty(t, DevicesVerdict(no, gpu, hosts, 2))

	// Nothing constrained (no ConstrainDevices): the step without a
	// request opens the GPUs.
	open := []DeviceProbe{probe("vm1", "-", gpu[0].Open), probe("vm2", "-", gpu[1].Open)}
	p := strings.Join(DevicesVerdict(open, gpu, hosts, 2), "\n")
	assert.Contains(t, p, "vm1: a step without a GPU request opened /dev/nvidia0 with ENXIO, want EPERM")
	// The request's GPUs denied, a node missing, a step given GPUs it did not ask for.
	p = strings.Join(DevicesVerdict([]DeviceProbe{probe("vm1", "0", no[0].Open)}, []DeviceProbe{probe("vm1", "-", no[0].Open)}, hosts, 2), "\n")
	assert.Contains(t, p, "vm1: a step with --gres=gpu:2 opened /dev/nvidia1 with EPERM, want ENXIO")
	assert.Contains(t, p, "vm2: no probe result from the step without a GPU request")
	assert.Contains(t, p, "vm1: a step without a GPU request has SLURM_STEP_GPUS=0")
	assert.Contains(t, p, "vm1: a step with --gres=gpu:2 has SLURM_STEP_GPUS=(unset)")

	_, err = ParseProbes([]byte(probeMark + "{not json\n"))
	assert.Error(t, err)
}

// The probe opens the driver's numbered nodes only, and reports the
// kernel's answer for each.
func TestGPUDevicesProbe(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidiactl"), nil, 0o666))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia0"), nil, 0o666))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-uvm"), nil, 0o666))
	var out bytes.Buffer
	env := map[string]string{"SLURM_STEP_GPUS": "0", "CUDA_VISIBLE_DEVICES": "0"}
	require.Equal(t, 0, gpuDevicesIn(dir, "vm3", func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &out))
	got, err := ParseProbes(out.Bytes())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, map[string]string{"nvidiactl": "ok", "nvidia0": "ok"}, got[0].Open, "nvidia-uvm is not a GPU's node")
	assert.Equal(t, "0", *got[0].StepGPUs)
	assert.Equal(t, "vm3", got[0].Node)
	assert.Equal(t, "ENOENT", openErrno(filepath.Join(dir, "nvidia1")))
}

// ClusterGPUVerdict: the rounds ran on the emulated GPU's memory, or the
// lab quotes why not (gdr.mem_choice, which names a missing GPU request).
func TestClusterGPUVerdict(t *testing.T) {
	const pkg = "github.com/gdrconf/gdrconf/conformance/pingpong"
	run := func(host, mem, choice string) report.Run {
		ev := func(a, test, k, v string) report.Event {
			return report.Event{Action: a, Package: pkg, Test: test, Key: k, Value: v}
		}
		return report.Run{Host: report.Identity{Host: host}, Events: []report.Event{
			ev("run", "TestPP03Write", "", ""), ev("attr", "TestPP03Write", "gdr.req", "PP-03"),
			ev("attr", "TestPP03Write", "gdr.mem", mem), ev("attr", "TestPP03Write", "gdr.mem_choice", choice),
			ev("pass", "TestPP03Write", "", ""),
			ev("run", "TestPP09HostVsGPU", "", ""), ev("attr", "TestPP09HostVsGPU", "gdr.req", "PP-09"),
			ev("run", "TestPP09HostVsGPU/host", "", ""), ev("attr", "TestPP09HostVsGPU/host", "gdr.mem", "host"),
			ev("pass", "TestPP09HostVsGPU/host", "", ""), ev("pass", "TestPP09HostVsGPU", "", ""),
		}}
	}
	rep := report.Build([]report.Run{run("vm1", "gpu-emulated", "GDR_MEM unset, GPU present"), run("vm2", "gpu-emulated", "")})
	assert.Empty(t, ClusterGPUVerdict(rep, nil), "PP-09's host half is host memory by design")

	why := "GDR_MEM unset and no usable CUDA driver (cuInit(0): CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected); " +
		"the Slurm step was given no GPUs (job 2 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS unset, CUDA_VISIBLE_DEVICES unset): " +
		"an --exclusive job's step must ask for them (srun --gres=gpu:N or --gpus-per-node); deploy/slurm/gdrconf.sbatch does)"
	rep = report.Build([]report.Run{run("vm1", "gpu-emulated", ""), run("vm2", "host", why)})
	assert.Equal(t, []string{"vm2: 1 pingpong tests passed on memory other than the emulated GPU's (TestPP03Write: " + why + ")"}, ClusterGPUVerdict(rep, nil))

	empty := report.Build([]report.Run{{Host: report.Identity{Host: "vm4"}, Events: []report.Event{{Action: "start", Package: pkg, Time: &time.Time{}}}}})
	assert.Equal(t, []string{"vm4: no pingpong test passed on the emulated GPU's memory"}, ClusterGPUVerdict(empty, nil))
	assert.Empty(t, ClusterGPUVerdict(empty, map[string]string{"vm4": isolate.DidNotStart}), "a host that did not start ran nothing")
}
