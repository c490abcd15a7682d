// Package deploy holds the tests of what ships to clusters: the Slurm batch
// script and the Kubernetes manifests, run or rendered as a cluster would.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sbatchRun is one run of slurm/gdrconf.sbatch against stand-ins for
// Slurm's commands (srun, scontrol) and dist/'s programs, in a submit
// folder of its own.
type sbatchRun struct {
	out      string   // what the script printed
	rc       int      // its exit status
	srunArgs []string // srun's arguments
	reports  string   // the folder the report was asked to read
}

// runSbatch runs the shipped script with env added to a job's variables;
// gres is what scontrol prints as the node's Gres, srunRC and verdict the
// exit statuses of srun and of gdrreport.
func runSbatch(t *testing.T, gres string, srunRC, verdict int, env ...string) sbatchRun {
	t.Helper()
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake")
	dist := filepath.Join(dir, "dist")
	for _, d := range []string{fake, filepath.Join(dist, "bin")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	log := filepath.Join(dir, "log")
	script := func(p, body string) {
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	}
	script(filepath.Join(fake, "srun"), "printf '%s\\n' \"$@\" >"+log+".srun\nexit "+itoa(srunRC)+"\n")
	script(filepath.Join(fake, "scontrol"), "echo 'NodeName=n1 Arch=x86_64 CoresPerSocket=56 Gres="+gres+" NodeAddr=n1'\n")
	script(filepath.Join(dist, "rounds.sh"), "exit 0\n")
	script(filepath.Join(dist, "run.sh"), "exit 0\n")
	script(filepath.Join(dist, "bin", "gdrreport"), "echo \"$@\" >"+log+".report\nexit "+itoa(verdict)+"\n")
	// gdrcluster: the real one, for gres-gpus; isolate is a stand-in.
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "gdrcluster.real"), "../cmd/gdrcluster")
	b, err := build.CombinedOutput()
	require.NoError(t, err, "%s", b)
	script(filepath.Join(dist, "gdrcluster"), "case \"$1\" in gres-gpus) exec "+filepath.Join(dir, "gdrcluster.real")+" \"$@\";; isolate) echo isolate;; esac\n")

	cmd := exec.Command("bash", "slurm/gdrconf.sbatch")
	cmd.Env = append(os.Environ(), "PATH="+fake+":"+os.Getenv("PATH"), "SLURM_SUBMIT_DIR="+dir,
		"SLURM_JOB_ID=4242", "SLURM_JOB_NUM_NODES=16", "SLURMD_NODENAME=n1")
	cmd.Env = append(cmd.Env, env...)
	outb, err := cmd.CombinedOutput()
	r := sbatchRun{out: string(outb)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.rc = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	if b, err := os.ReadFile(log + ".srun"); err == nil {
		r.srunArgs = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	if b, err := os.ReadFile(log + ".report"); err == nil {
		f := strings.Fields(string(b))
		r.reports = f[len(f)-1]
	}
	return r
}

func itoa(n int) string { return strconv.Itoa(n) }

// The step asks for the node's GPUs: an exclusive job's GRES are not the
// step's unless it asks (srun(1), --gres), and ConstrainDevices=yes then
// hides every GPU. A dead node does not kill the job.
func TestSbatchAsksForTheGPUs(t *testing.T) {
	r := runSbatch(t, "gpu:h100:8(S:0-1),nic:mlx5:8", 0, 0)
	assert.Equal(t, 0, r.rc, r.out)
	assert.Contains(t, r.srunArgs, "--gres=gpu:8")
	assert.Contains(t, r.srunArgs, "--no-kill")
	assert.Contains(t, r.srunArgs, "--nodes=16")

	r = runSbatch(t, "gpu:h100:8(S:0-1)", 0, 0, "GDR_GPUS_PER_NODE=4")
	assert.Contains(t, r.srunArgs, "--gres=gpu:4", "the user's count wins")

	r = runSbatch(t, "(null)", 0, 0)
	assert.NotContains(t, strings.Join(r.srunArgs, " "), "--gres")
	assert.Contains(t, r.out, "the nodes have no gpu GRES", "a cluster without GPU GRES is told what follows")

	r = runSbatch(t, "gpu:8", 0, 0, "GDR_GPUS_PER_NODE=eight")
	assert.Equal(t, 2, r.rc)
	assert.Contains(t, r.out, "GDR_GPUS_PER_NODE=eight is not a number")
	assert.Nil(t, r.srunArgs, "nothing runs on a bad setting")

	sb, err := os.ReadFile("slurm/gdrconf.sbatch")
	require.NoError(t, err)
	assert.Contains(t, string(sb), "\n#SBATCH --no-kill\n")
}

// The job's exit status is the merged verdict's, whatever srun returned:
// isolation and the report run after a failed step too.
func TestSbatchExitsWithTheVerdict(t *testing.T) {
	for _, c := range []struct{ srun, verdict int }{{0, 0}, {0, 1}, {1, 1}, {1, 3}, {0, 2}} {
		r := runSbatch(t, "gpu:8", c.srun, c.verdict)
		assert.Equal(t, c.verdict, r.rc, "srun %d, verdict %d:\n%s", c.srun, c.verdict, r.out)
		assert.Contains(t, r.out, "isolate", "isolation ran")
		if c.srun != 0 {
			assert.Contains(t, r.out, "srun exited 1 (a task or node failed); judging what the hosts left")
		}
	}
}

// A requeued job keeps its job ID: its restart count gives it a folder of
// its own, so the first attempt's barrier files cannot satisfy its rounds.
func TestSbatchRequeueGetsItsOwnFolder(t *testing.T) {
	r := runSbatch(t, "gpu:8", 0, 0)
	assert.True(t, strings.HasSuffix(r.reports, "/reports/cluster-4242"), r.reports)
	r = runSbatch(t, "gpu:8", 0, 0, "SLURM_RESTART_COUNT=2")
	assert.True(t, strings.HasSuffix(r.reports, "/reports/cluster-4242-2"), r.reports)
	r = runSbatch(t, "gpu:8", 0, 0, "GDR_REPORTS=/shared/gdr")
	assert.Equal(t, "/shared/gdr", r.reports, "the user's folder wins")
}
