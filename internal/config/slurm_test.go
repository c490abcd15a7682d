package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Slurm's GPU variables as its gres/gpu plugin leaves them: a step that
// asked for GPUs has SLURM_STEP_GPUS; a step of an exclusive job that did
// not has none (the batch script's SLURM_JOB_GPUS may still be there), and
// the message then names the missing request and the variables.
func TestSlurmStepWithoutGPUs(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"outside Slurm", nil, ""},
		{"a step with GPUs", []string{"SLURM_JOB_ID", "4242", "SLURM_STEP_ID", "0", "SLURM_STEP_GPUS", "0,1", "CUDA_VISIBLE_DEVICES", "0,1"}, ""},
		{"an exclusive job's step without a request", []string{"SLURM_JOB_ID", "4242", "SLURM_STEP_ID", "0", "SLURM_JOB_GPUS", "0,1"},
			"the Slurm step was given no GPUs (job 4242 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES unset)"},
		{"a cluster without GPU GRES", []string{"SLURM_JOB_ID", "7", "CUDA_VISIBLE_DEVICES", ""},
			"the Slurm step was given no GPUs (job 7: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS unset, CUDA_VISIBLE_DEVICES=)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(env(c.env...))
			require.NoError(t, err, "Slurm's variables are evidence, never a bad setting")
			assert.Equal(t, c.want, cfg.Slurm.NoGPUsCause(), "the cause; the remedy is SlurmNoGPUsRemedy")
			assert.Equal(t, c.want != "", cfg.Slurm.StepWithoutGPUs())
		})
	}
}
