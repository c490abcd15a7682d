package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jstemmer/go-junit-report/v2/gtr"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/report"
)

// The batch script the cluster lab submits (LAB_SBATCH).
const (
	SbatchShipped = "shipped" // deploy/slurm/gdrconf.sbatch as it ships
	// SbatchOld is the shipped script with its GPU request taken out
	// (OldSbatch): the script before it asked for the GPUs, whose steps
	// got none under ConstrainDevices. The lab must fail on it, naming
	// the missing request.
	SbatchOld = "old"
)

// Guest paths of the batch job.
const (
	clusterSubmit = clusterShared + "/submit"       // sbatch's working folder: the script's reports/ land under it
	clusterJob    = clusterLogs + "/job.json"       // what Slurm said of the job (JobResult)
	clusterSbatch = clusterDist + "/gdrconf.sbatch" // make dist's copy of the script
)

// SbatchJob is the controller's submission of the batch script, as a user
// submits it: sbatch --wait from the submit folder, the user's settings in
// its environment (docs/clusters.md: GDR_DIST, GDR_*).
type SbatchJob struct {
	Step   Step   `json:"step"`   // ID "sbatch": argv, environment, limit
	Dir    string `json:"dir"`    // the submit folder
	Result string `json:"result"` // where the agent writes the JobResult
}

// JobResult is what Slurm said of the batch job: sbatch --wait's exit
// status (the job's, sbatch(1) --wait) and scontrol show job's JobState
// and ExitCode ("1:0": status and signal) while slurmctld keeps the job
// (MinJobAge; the lab has no accounting for sacct).
type JobResult struct {
	JobID      string `json:"job_id"`
	SbatchExit int    `json:"sbatch_exit"`
	State      string `json:"state"`
	ExitCode   string `json:"exit_code"`
	Scontrol   string `json:"scontrol"` // scontrol -o show job's line, or why there is none
}

// sbatchJob is the controller's submission: the shipped script, copied
// into make dist's layout at /lab/dist on every node (GDR_DIST), with -N
// and --time on sbatch's command line.
func (r *runner) sbatchJob(host string) *SbatchJob {
	c := r.o.Cluster
	argv := []string{"/usr/bin/sbatch", "--wait", "--parsable", fmt.Sprintf("--nodes=%d", c.Hosts),
		fmt.Sprintf("--time=%d", int(c.SrunTimeout.Minutes()+0.999)), clusterSbatch}
	env := append([]string{"GDR_DIST=" + clusterDist}, r.clusterEnv()...)
	return &SbatchJob{Dir: clusterSubmit, Result: clusterJob,
		Step: Step{ID: "sbatch", Host: host, Pkg: "slurm", Kind: "tool", Timeout: c.SrunTimeout + 2*time.Minute, Argv: argv, Env: env}}
}

// Steps of the device probes.
const (
	probeNoGPU = "devices-no-gpu"
	probeGPU   = "devices-gpu"
)

// deviceProbes are the controller's two srun steps that show what
// ConstrainDevices gives a step of an exclusive job: every node runs
// `/init gpu-devices` (GPUDevicesMain), once without a GPU request (the
// old script's step: its GPUs' files must be denied, EPERM) and once with
// --gres=gpu:<n> (the shipped script's: ENXIO, no driver behind them). None
// without GPUs.
func (r *runner) deviceProbes(host string) []Step {
	gpus := r.clusterGPUs()
	if gpus == 0 {
		return nil
	}
	c := r.o.Cluster
	base := []string{"/usr/bin/srun", fmt.Sprintf("--nodes=%d", c.Hosts), "--ntasks-per-node=1", "--exclusive", "--time=5", "--job-name=gdrlab-devices"}
	step := func(id string, extra ...string) Step {
		argv := append(append(append([]string(nil), base...), extra...), "/init", "gpu-devices")
		return Step{ID: id, Host: host, Pkg: "slurm", Kind: "tool", Timeout: 5 * time.Minute, Argv: argv}
	}
	return []Step{step(probeNoGPU), step(probeGPU, fmt.Sprintf("--gres=gpu:%d", gpus))}
}

// oldGPURequest is the shipped script's GPU request on its srun line.
const oldGPURequest = ` "${gpu_opt[@]}"`

// OldSbatch is the shipped batch script with the GPU request taken out of
// its srun line: the script as it was before it asked for the GPUs. It
// fails when the shipped script has no such request (then there is no old
// case to plant).
func OldSbatch(shipped []byte) ([]byte, error) {
	lines := strings.SplitAfter(string(shipped), "\n")
	n := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "srun ") && strings.Contains(l, oldGPURequest) {
			lines[i] = strings.Replace(l, oldGPURequest, "", 1)
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("LAB_SBATCH=old: the shipped script has %d srun lines asking for GPUs with %s, want 1", n, strings.TrimSpace(oldGPURequest))
	}
	return []byte(strings.Join(lines, "")), nil
}

// sbatchScript is the batch script the lab submits for LAB_SBATCH.
func (r *runner) sbatchScript() ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(r.o.RepoDir, "deploy", "slurm", "gdrconf.sbatch"))
	if err != nil {
		return nil, err
	}
	switch r.o.Cluster.Sbatch {
	case "", SbatchShipped:
		return b, nil
	case SbatchOld:
		return OldSbatch(b)
	}
	return nil, fmt.Errorf("LAB_SBATCH=%q: want %s or %s", r.o.Cluster.Sbatch, SbatchShipped, SbatchOld)
}

// runSbatch is the controller's sbatch step: it submits the script and
// waits for the job, then asks scontrol for the job's state, and writes
// both to s.Result. The job's exit status is the host's to judge; only a
// submission that did not happen is this step's error.
func runSbatch(w io.Writer, deadline time.Time, s SbatchJob) error {
	if err := os.MkdirAll(s.Dir, 0o777); err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, s.Step.Argv[0], s.Step.Argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = append(append([]string(nil), guestEnv...), s.Step.Env...)
	cmd.Stdout, cmd.Stderr = io.MultiWriter(w, &out), w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(w, "+ (cd %s && %s)\n", s.Dir, strings.Join(s.Step.Argv, " "))
	res := JobResult{}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ctx.Err() == nil:
		res.SbatchExit = ee.ExitCode()
	case err != nil:
		return fmt.Errorf("sbatch: %w", err)
	}
	// --parsable: "<job id>[;<cluster>]" on the first line.
	res.JobID, _, _ = strings.Cut(strings.TrimSpace(strings.SplitN(out.String(), "\n", 2)[0]), ";")
	if _, err := strconv.Atoi(res.JobID); err != nil {
		return fmt.Errorf("sbatch exited %d and printed no job ID (%q)", res.SbatchExit, strings.TrimSpace(out.String()))
	}
	fmt.Fprintf(w, "sbatch --wait: job %s exited %d\n", res.JobID, res.SbatchExit)
	sc, err := exec.CommandContext(ctx, "/usr/bin/scontrol", "-o", "show", "job", res.JobID).CombinedOutput()
	res.Scontrol = strings.TrimSpace(string(sc))
	if err != nil {
		res.Scontrol = fmt.Sprintf("scontrol -o show job %s: %v: %s", res.JobID, err, res.Scontrol)
	}
	res.State, res.ExitCode = scontrolJob(res.Scontrol)
	fmt.Fprintf(w, "scontrol: JobState=%s ExitCode=%s\n", res.State, res.ExitCode)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return os.WriteFile(s.Result, append(b, '\n'), 0o644)
}

var (
	jobStateRe = regexp.MustCompile(`(?:^|\s)JobState=(\S+)`)
	exitCodeRe = regexp.MustCompile(`(?:^|\s)ExitCode=(\d+:\d+)`)
)

// scontrolJob reads JobState and ExitCode from scontrol -o show job's line
// ("" where absent).
func scontrolJob(line string) (state, exit string) {
	if m := jobStateRe.FindStringSubmatch(line); m != nil {
		state = m[1]
	}
	if m := exitCodeRe.FindStringSubmatch(line); m != nil {
		exit = m[1]
	}
	return state, exit
}

// readJobResult reads the controller's JobResult.
func readJobResult(path string) (*JobResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the batch job's result: %w", err)
	}
	var j JobResult
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("the batch job's result %s: %w", path, err)
	}
	return &j, nil
}

// JobFolder is the batch job's reports folder under the submit folder, as
// the script names it for a first attempt (reports/cluster-<job id>).
func JobFolder(submit, jobID string) string {
	return filepath.Join(submit, "reports", "cluster-"+jobID)
}

// SbatchVerdict checks that the batch job's own status is the verdict:
// sbatch --wait's exit status, the script's own report's exit code
// (report/exit-code in the job's folder, scriptExit; -1 when it wrote none)
// and scontrol's ExitCode all equal the exit status of the lab's merge of
// the job's folder, and JobState is COMPLETED exactly when that is 0.
func SbatchVerdict(j *JobResult, mergeExit, scriptExit int) []string {
	var p []string
	if j.SbatchExit != mergeExit {
		p = append(p, fmt.Sprintf("batch job %s: sbatch --wait exited %d, the merged verdict's exit status is %d: the job's status must be the verdict", j.JobID, j.SbatchExit, mergeExit))
	}
	if scriptExit != mergeExit {
		p = append(p, fmt.Sprintf("batch job %s: the script's own report says exit %d (report/exit-code), the lab's merge of the same folder %d", j.JobID, scriptExit, mergeExit))
	}
	if want := fmt.Sprintf("%d:0", mergeExit); j.ExitCode != want {
		p = append(p, fmt.Sprintf("batch job %s: scontrol's ExitCode=%s, want %s (the verdict's status, no signal): %s", j.JobID, orNone(j.ExitCode), want, j.Scontrol))
	}
	want := "COMPLETED"
	if mergeExit != 0 {
		want = "FAILED"
	}
	if j.State != want {
		p = append(p, fmt.Sprintf("batch job %s: scontrol's JobState=%s, want %s for exit %d", j.JobID, orNone(j.State), want, mergeExit))
	}
	return p
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// readExitCode reads a report folder's exit-code file; -1 when it has none.
func readExitCode(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, report.ExitCodeFile))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// DeviceProbe is what one task of a probe step saw: Slurm's GPU variables
// and open(2) of each GPU device file (ok, or the errno's name).
type DeviceProbe struct {
	Node        string            `json:"node"`
	StepGPUs    *string           `json:"slurm_step_gpus"` // nil: unset
	CUDAVisible *string           `json:"cuda_visible_devices"`
	Open        map[string]string `json:"open"` // nvidiactl, nvidia0, ...
}

const probeMark = "GDR-DEVICES "

// GPUDevicesMain is `gdrlab gpu-devices` (as /init in a VM, under srun):
// it opens every GPU device file under /dev as the driver does (O_RDWR)
// and prints what it saw as one line for the host.
func GPUDevicesMain(lookup func(string) (string, bool), out io.Writer) int {
	host, _ := os.Hostname()
	return gpuDevicesIn("/dev", host, lookup, out)
}

// gpuDevicesIn is GPUDevicesMain on the device files in dir.
func gpuDevicesIn(dir, host string, lookup func(string) (string, bool), out io.Writer) int {
	p := DeviceProbe{Node: host, Open: map[string]string{}}
	if v, ok := lookup("SLURM_STEP_GPUS"); ok {
		p.StepGPUs = &v
	}
	if v, ok := lookup("CUDA_VISIBLE_DEVICES"); ok {
		p.CUDAVisible = &v
	}
	nodes, _ := filepath.Glob(filepath.Join(dir, nvidiaNodePrefix+"*"))
	for _, n := range nodes {
		name := filepath.Base(n)
		if name != nvidiaCtlNode && strings.TrimLeft(strings.TrimPrefix(name, nvidiaNodePrefix), "0123456789") != "" {
			continue // nvidia-uvm and such: not the driver's numbered nodes
		}
		p.Open[name] = openErrno(n)
	}
	b, err := json.Marshal(p)
	if err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	fmt.Fprintf(out, "%s%s\n", probeMark, b)
	return 0
}

// openErrno opens path O_RDWR and names the outcome: ok, or the errno.
func openErrno(path string) string {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EPERM:
			return "EPERM"
		case syscall.ENXIO:
			return "ENXIO"
		case syscall.ENOENT:
			return "ENOENT"
		case syscall.EACCES:
			return "EACCES"
		}
		return errno.Error()
	}
	return err.Error()
}

// ParseProbes reads the probe lines of a step's output.
func ParseProbes(output []byte) ([]DeviceProbe, error) {
	var out []DeviceProbe
	sc := bufio.NewScanner(bytes.NewReader(output))
	for sc.Scan() {
		_, js, ok := strings.Cut(sc.Text(), probeMark)
		if !ok {
			continue
		}
		var p DeviceProbe
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			return nil, fmt.Errorf("probe line %q: %w", sc.Text(), err)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, sc.Err()
}

// DevicesVerdict checks the two probe steps on every host: without a GPU
// request (noGPU) the step's tasks may not open any GPU's device file
// (EPERM: the device cgroup of ConstrainDevices) and Slurm gives them no
// SLURM_STEP_GPUS; with --gres=gpu:<gpus> (withGPU) they may (ENXIO: no
// driver behind the lab's nodes) and SLURM_STEP_GPUS lists them. The
// driver's control device is not a GRES file, so Slurm leaves it open
// either way.
func DevicesVerdict(noGPU, withGPU []DeviceProbe, hosts []string, gpus int) []string {
	var p []string
	check := func(what string, probes []DeviceProbe, want string, stepGPUs bool) {
		seen := map[string]bool{}
		for _, pr := range probes {
			seen[pr.Node] = true
			if c := pr.Open[nvidiaCtlNode]; c != "ENXIO" {
				p = append(p, fmt.Sprintf("%s: a step %s opened %s with %s, want ENXIO (Slurm does not constrain the control device; no driver serves it)", pr.Node, what, nvidiaCtlNode, orNone(c)))
			}
			for i := 0; i < gpus; i++ {
				n := fmt.Sprintf("%s%d", nvidiaNodePrefix, i)
				if c := pr.Open[n]; c != want {
					p = append(p, fmt.Sprintf("%s: a step %s opened /dev/%s with %s, want %s", pr.Node, what, n, orNone(c), want))
				}
			}
			if got := pr.StepGPUs != nil && *pr.StepGPUs != ""; got != stepGPUs {
				p = append(p, fmt.Sprintf("%s: a step %s has SLURM_STEP_GPUS=%s", pr.Node, what, strOrUnset(pr.StepGPUs)))
			}
		}
		for _, h := range hosts {
			if !seen[h] {
				p = append(p, fmt.Sprintf("%s: no probe result from the step %s", h, what))
			}
		}
	}
	check("without a GPU request", noGPU, "EPERM", false)
	check(fmt.Sprintf("with --gres=gpu:%d", gpus), withGPU, "ENXIO", true)
	return p
}

func strOrUnset(s *string) string {
	if s == nil {
		return "(unset)"
	}
	return *s
}

// ClusterGPUVerdict checks that the suite's rounds ran on the emulated
// GPU's memory: on every host some pingpong test passed on gdr.mem
// gpu-emulated, and none passed on other memory (PP-09's host half aside,
// as in EmulatedVerdict). A host whose step could not see its GPUs falls
// back to host memory, and gdr.mem_choice says why: quoted here, it names
// the missing GPU request when Slurm gave the step none. A host in gone
// that did not start (LAB_LATE) ran nothing.
func ClusterGPUVerdict(rep *report.Report, gone map[string]string) []string {
	var p []string
	for _, h := range rep.Hosts {
		if gone[h.Identity.Host] == isolate.DidNotStart {
			continue
		}
		gpu, other := 0, 0
		why, first := "", ""
		for _, c := range h.AllCases() {
			mem, has := c.Own["gdr.mem"]
			if c.Area != "pingpong" || !has || c.Result != gtr.Pass {
				continue
			}
			if mem == "gpu-emulated" {
				gpu++
				continue
			}
			if strings.HasSuffix(c.Name, "/host") || strings.Contains(c.Name, "/host/") {
				continue
			}
			other++
			if first == "" {
				first, why = c.Name, c.Attrs["gdr.mem_choice"]
			}
		}
		name := h.Identity.Host
		switch {
		case other > 0:
			p = append(p, fmt.Sprintf("%s: %d pingpong tests passed on memory other than the emulated GPU's (%s: %s)", name, other, first, orNone(why)))
		case gpu == 0:
			p = append(p, fmt.Sprintf("%s: no pingpong test passed on the emulated GPU's memory", name))
		}
	}
	return p
}

// sbatchName says which script the lab submitted.
func (r *runner) sbatchName() string {
	if r.o.Cluster.Sbatch == SbatchOld {
		return "LAB_SBATCH=old: deploy/slurm/gdrconf.sbatch without its GPU request"
	}
	return "deploy/slurm/gdrconf.sbatch as shipped"
}

// clusterDevices reads the controller's probe steps and checks what
// ConstrainDevices gave them (DevicesVerdict); nothing without probes.
func (r *runner) clusterDevices(plan []Job, vms map[string]*clusterVM) []string {
	ctl := plan[0]
	v := vms[ctl.Role]
	if len(ctl.Cluster.Probes) == 0 || v == nil || v.res == nil {
		return nil
	}
	probes := map[string][]DeviceProbe{}
	var p []string
	for _, st := range ctl.Cluster.Probes {
		s := v.res.Step(st.ID)
		if s == nil {
			continue // clusterSteps names it
		}
		got, err := ParseProbes(s.Output)
		if err != nil {
			p = append(p, fmt.Sprintf("%s: step %s: %v", ctl.Role, st.ID, err))
		}
		probes[st.ID] = got
	}
	p = append(p, DevicesVerdict(probes[probeNoGPU], probes[probeGPU], ctl.Cluster.Hosts, ctl.GPUs)...)
	if len(p) == 0 {
		fmt.Fprintf(r.o.Out, "ConstrainDevices: a step without a GPU request gets EPERM for /dev/nvidia0..%d on every node, one with --gres=gpu:%d ENXIO (reachable; no driver behind the lab's nodes)\n", ctl.GPUs-1, ctl.GPUs)
	}
	return p
}
