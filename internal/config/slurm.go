package config

import (
	"fmt"
	"strings"
)

// Slurm is what Slurm told this process about its GPUs. A job step's GPUs
// come from its gres/gpu plugin: SLURM_STEP_GPUS (the step's GPU indexes)
// and CUDA_VISIBLE_DEVICES in a step, SLURM_JOB_GPUS in the batch step and
// the prologs, each removed when the step holds no GPU (Slurm 22.05
// src/plugins/gres/common/gres_common.c gres_common_gpu_set_env; for a step
// without GRES src/common/gres.c gres_g_step_set_env calls it with none).
// A step inherits the batch script's environment, so SLURM_JOB_GPUS can be
// there when the step's own are not. The values are taken as Slurm set
// them: they are evidence in messages, not settings of the suite.
type Slurm struct {
	JobID       string // SLURM_JOB_ID: "" outside a Slurm job
	StepID      string // SLURM_STEP_ID
	StepGPUs    string // SLURM_STEP_GPUS
	JobGPUs     string // SLURM_JOB_GPUS
	CUDAVisible string // CUDA_VISIBLE_DEVICES
	// CUDAVisibleSet tells CUDA_VISIBLE_DEVICES= (no device) from unset.
	CUDAVisibleSet bool
}

// ParseSlurm reads Slurm's variables through lookup (os.LookupEnv).
func ParseSlurm(lookup func(string) (string, bool)) Slurm {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	s := Slurm{JobID: get("SLURM_JOB_ID"), StepID: get("SLURM_STEP_ID"), StepGPUs: get("SLURM_STEP_GPUS"),
		JobGPUs: get("SLURM_JOB_GPUS")}
	v, ok := lookup("CUDA_VISIBLE_DEVICES")
	s.CUDAVisible, s.CUDAVisibleSet = strings.TrimSpace(v), ok
	return s
}

// StepWithoutGPUs reports whether this process runs in a Slurm job whose
// step Slurm gave no GPU (SLURM_STEP_GPUS unset or empty). Under
// ConstrainDevices=yes such a step's device cgroup hides every GPU, whatever
// the job holds.
func (s Slurm) StepWithoutGPUs() bool { return s.JobID != "" && s.StepGPUs == "" }

// SlurmNoGPUsRemedy is what to do about a step Slurm gave no GPU: an
// exclusive job holds every GPU of its nodes, yet its steps get none they do
// not ask for (srun(1), --gres: a step gets the job's GRES "except those
// implicitly requested when a job is exclusive").
const SlurmNoGPUsRemedy = "an --exclusive job's step must ask for them (srun --gres=gpu:N or --gpus-per-node); deploy/slurm/gdrconf.sbatch does"

// NoGPUsCause says why CUDA may see no GPU under Slurm, with the
// variables that show it: "the Slurm step was given no GPUs (job 4242 step
// 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES
// unset)". It is "" outside a Slurm job or when the step has GPUs.
func (s Slurm) NoGPUsCause() string {
	if !s.StepWithoutGPUs() {
		return ""
	}
	where := "job " + s.JobID
	if s.StepID != "" {
		where += " step " + s.StepID
	}
	val := func(name, v string, set bool) string {
		if !set {
			return name + " unset"
		}
		return fmt.Sprintf("%s=%s", name, v)
	}
	return fmt.Sprintf("the Slurm step was given no GPUs (%s: %s, %s, %s)", where,
		val("SLURM_STEP_GPUS", s.StepGPUs, s.StepGPUs != ""), val("SLURM_JOB_GPUS", s.JobGPUs, s.JobGPUs != ""),
		val("CUDA_VISIBLE_DEVICES", s.CUDAVisible, s.CUDAVisibleSet))
}
