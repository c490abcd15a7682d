package jobenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config/configtest"
)

var env = configtest.Env

func slurm(extra ...string) func(string) (string, bool) {
	return env(append([]string{"SLURM_JOB_ID", "4242", "SLURM_JOB_NODELIST", "gpu[001-003,017]", "SLURM_NTASKS", "4",
		"SLURM_PROCID", "2", "SLURM_STEP_ID", "0", "SLURM_CLUSTER_NAME", "c1"}, extra...)...)
}

func TestSlurm(t *testing.T) {
	task, found, err := Detect(slurm(), "-ib")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, Slurm, task.Engine)
	assert.Equal(t, []string{"gpu001", "gpu002", "gpu003", "gpu017"}, task.Names)
	assert.Equal(t, "gpu017-ib", task.Addrs[3])
	assert.Equal(t, 2, task.Index)
	assert.Equal(t, "gpu003", task.Self())
	assert.Equal(t, "slurm/c1/4242", task.Key())
	assert.Equal(t, "0", task.Step)

	// The node name places the task, even against the rank.
	task, err = FromSlurm(slurm("SLURMD_NODENAME", "gpu017"), "")
	require.NoError(t, err)
	assert.Equal(t, 3, task.Index)
	assert.Equal(t, "gpu017", task.Addrs[3])

	// Older variable names.
	task, err = FromSlurm(env("SLURM_JOB_ID", "7", "SLURM_NODELIST", "a,b", "SLURM_NPROCS", "2", "SLURM_PROCID", "0"), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, task.Names)
	assert.Equal(t, "slurm//7", task.Key())
}

func TestSlurmErrors(t *testing.T) {
	for _, c := range []struct {
		lookup func(string) (string, bool)
		want   string
	}{
		{env("SLURM_JOB_ID", ""), "SLURM_JOB_ID is not set"},
		{slurm("SLURM_JOB_ID", "12a"), `SLURM_JOB_ID="12a" is not valid`},
		{slurm("SLURM_JOB_NODELIST", "gpu[1-2"), `SLURM_JOB_NODELIST: hostlist "gpu[1-2"`},
		{slurm("SLURM_JOB_NODELIST", "gpu1,gpu1,gpu2,gpu3"), "names gpu1 twice"},
		{slurm("SLURM_NTASKS", "8"), "SLURM_NTASKS=8 but SLURM_JOB_NODELIST=\"gpu[001-003,017]\" has 4 nodes"},
		{slurm("SLURM_NTASKS", "four"), `SLURM_NTASKS="four" is not valid`},
		{slurm("SLURM_PROCID", "4"), `SLURM_PROCID="4" is not valid: want a whole number from 0 to 3`},
		{slurm("SLURM_PROCID", "-1"), `SLURM_PROCID="-1"`},
		{slurm("SLURM_PROCID", ""), "SLURM_PROCID is not set"},
		{slurm("SLURMD_NODENAME", "cpu9"), `SLURMD_NODENAME="cpu9" is not in SLURM_JOB_NODELIST`},
		{env("SLURM_JOB_ID", "1", "SLURM_JOB_NODELIST", "a", "SLURM_PROCID", "0"), "SLURM_NTASKS is not set"},
	} {
		_, err := FromSlurm(c.lookup, "")
		require.Error(t, err, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

func k8s(extra ...string) func(string) (string, bool) {
	return env(append([]string{EnvIndex, "1", EnvCompletions, "4", EnvJobName, "gdrconf", EnvService, "gdrconf",
		EnvNamespace, "qual", EnvJobUID, "0b4e-11"}, extra...)...)
}

func TestKubernetes(t *testing.T) {
	task, found, err := Detect(k8s(), "-ignored")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, Kubernetes, task.Engine)
	assert.Equal(t, []string{"gdrconf-0", "gdrconf-1", "gdrconf-2", "gdrconf-3"}, task.Names)
	assert.Equal(t, "gdrconf-3.gdrconf", task.Addrs[3])
	assert.Equal(t, 1, task.Index)
	assert.Equal(t, "kubernetes/qual/0b4e-11", task.Key())

	task, err = FromKubernetes(k8s(EnvJobUID, ""))
	require.NoError(t, err)
	assert.Equal(t, "kubernetes/qual/gdrconf", task.Key(), "the name stands in for a missing UID")
}

func TestKubernetesErrors(t *testing.T) {
	for _, c := range []struct {
		lookup func(string) (string, bool)
		want   string
	}{
		{k8s(EnvIndex, ""), "JOB_COMPLETION_INDEX is not set"},
		{k8s(EnvIndex, "4"), `JOB_COMPLETION_INDEX="4" is not valid: want a whole number from 0 to 3 (GDR_K8S_COMPLETIONS=4)`},
		{k8s(EnvCompletions, "0"), `GDR_K8S_COMPLETIONS="0" is not valid`},
		{k8s(EnvCompletions, ""), "GDR_K8S_COMPLETIONS is not set"},
		{k8s(EnvJobName, "GDR"), `GDR_K8S_JOB_NAME="GDR" is not valid`},
		{k8s(EnvService, "a.b"), `GDR_K8S_SERVICE="a.b" is not valid`},
		{k8s(EnvService, ""), "GDR_K8S_SERVICE is not set"},
		{k8s(EnvJobName, "j2345678901234567890123456789012345678901234567890123456789012"), "longer than 63"},
	} {
		_, err := FromKubernetes(c.lookup)
		require.Error(t, err, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

func TestDetectNone(t *testing.T) {
	_, found, err := Detect(env(), "")
	require.NoError(t, err)
	assert.False(t, found)
}

func TestGresGPUs(t *testing.T) {
	for gres, want := range map[string]int{
		"":                                0,
		"(null)":                          0,
		"gpu:8":                           8,
		"gpu:h100:8(S:0-1)":               8,
		"gpu:a100:4(S:0),gpu:a100:4(S:1)": 8,
		"nic:mlx5:8,gpu:h200:8(S:0-1)":    8,
		"gpu:tesla":                       1, // gres.conf: a count left out is 1
		"shard:32,gpu:2":                  2,
	} {
		got, err := GresGPUs(gres)
		require.NoError(t, err, gres)
		assert.Equal(t, want, got, gres)
	}
	for _, bad := range []string{"gpu:h100:x:y", "gpu:2000"} {
		_, err := GresGPUs(bad)
		assert.ErrorContains(t, err, bad, "names the value")
	}
}

// A requeued Slurm job keeps its ID: its restart count makes the run's
// identity differ from the first attempt's.
func TestSlurmRestartCount(t *testing.T) {
	env := map[string]string{"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_CLUSTER_NAME": "c"}
	get := func(extra ...string) (Task, error) {
		m := map[string]string{}
		for k, v := range env {
			m[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return FromSlurm(func(k string) (string, bool) { v, ok := m[k]; return v, ok }, "")
	}
	tk, err := get()
	require.NoError(t, err)
	assert.Equal(t, "slurm/c/77", tk.Run())
	tk, err = get("SLURM_RESTART_COUNT", "0")
	require.NoError(t, err)
	assert.Equal(t, "slurm/c/77", tk.Run(), "count 0 is the first attempt")
	tk, err = get("SLURM_RESTART_COUNT", "2")
	require.NoError(t, err)
	assert.Equal(t, "slurm/c/77#2", tk.Run())
	assert.Equal(t, tk.Key(), "slurm/c/77", "ports and tokens stay the job's")
	_, err = get("SLURM_RESTART_COUNT", "two")
	assert.ErrorContains(t, err, `SLURM_RESTART_COUNT="two"`)
}
