package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// The test binary doubles as gdrcluster for deploy/rounds.sh.
func TestMain(m *testing.M) {
	if os.Getenv("GDRCLUSTER_TEST_AS_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// fakeSuite stands in for dist/run.sh: one bandwidth test per rail with the
// attributes the suite will set; n3's rail 1 is slow.
const fakeSuite = `#!/usr/bin/env bash
set -eu
printf '%s\n' "$*" > "$GDR_REPORTS/args"
for rail in 0 1; do
  bw=100
  if [ "$rail" = 1 ] && { [ "$GDR_HOST_NAME" = n3 ] || [ "$GDR_PEER_NAME" = n3 ]; }; then bw=10; fi
  t="TestPP08Bandwidth/rail$rail/WRITE/1048576"
  for kv in "gdr.rail $rail" "gdr.peer $GDR_PEER_NAME" "gdr.role $GDR_ROLE" "gdr.bw_gbps $bw" "gdr.size 1048576" "gdr.op WRITE"; do
    set -- $kv
    printf '{"Action":"attr","Package":"p","Test":"%s","Key":"%s","Value":"%s"}\n' "$t" "$1" "$2"
  done
  printf '{"Action":"pass","Package":"p","Test":"%s"}\n' "$t"
done > "$GDR_REPORTS/test.json"
`

// Four tasks run deploy/rounds.sh at once, as srun would start them; the
// barrier keeps their rounds in step, and the result names n3's rail 1.
func TestRoundsScript(t *testing.T) {
	script, err := filepath.Abs("../../deploy/rounds.sh")
	require.NoError(t, err)
	runRounds(t, script, nil)
}

// make dist's layout: srun -N4 --ntasks-per-node=1 dist/run.sh goes to
// rounds.sh beside it (every task runs the schedule), and the arguments
// reach the suite of each round.
func TestDistRunUnderSrun(t *testing.T) {
	dist := filepath.Join(t.TempDir(), "dist")
	require.NoError(t, os.MkdirAll(dist, 0o755))
	for src, dst := range map[string]string{"../../deploy/rounds.sh": "rounds.sh", "../../build/dist/run.sh": "run.sh"} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dist, dst), b, 0o755))
	}
	root := runRounds(t, filepath.Join(dist, "run.sh"), []string{"SLURM_STEP_NUM_TASKS=4"}, "-test.run=TestPP08")
	b, err := os.ReadFile(filepath.Join(root, "n1", "round-0", "args"))
	require.NoError(t, err)
	assert.Equal(t, "-test.run=TestPP08\n", string(b))

	// Alone (no srun step of several tasks) it runs the one host's suite,
	// here missing: the failure names gotestsum, not rounds.sh.
	cmd := exec.Command("bash", filepath.Join(dist, "run.sh"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "GDR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GDR_REPORTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "bin/gotestsum")
	assert.NotContains(t, string(out), "unbound variable")
	assert.NotContains(t, string(out), "rounds.sh")
}

// runRounds starts script as four Slurm tasks of one job and checks the
// merged result; it returns the shared folder.
func runRounds(t *testing.T, script string, env []string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite.sh")
	require.NoError(t, os.WriteFile(suite, []byte(fakeSuite), 0o755))
	root := filepath.Join(dir, "reports")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
			cmd.Env = append(append(os.Environ(), env...), "GDRCLUSTER_TEST_AS_MAIN=1", "GDRCLUSTER="+self, "GDR_SUITE="+suite, "GDR_REPORTS="+root,
				"SLURM_JOB_ID=31337", "SLURM_JOB_NODELIST=n[1-4]", "SLURM_NTASKS=4", fmt.Sprintf("SLURM_PROCID=%d", i),
				"GDR_CLUSTER_SECRET=0123456789abcdef0123456789abcdef", "GDR_ROUND_TIMEOUT=1m")
			cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
			errs[i] = cmd.Run()
		}()
	}
	wg.Wait()
	for i := range 4 {
		require.NoError(t, errs[i], "task %d: %s", i, outs[i].String())
	}
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"isolate", "-json"}, lookup(map[string]string{"GDR_REPORTS": root}), &out, &errb), errb.String())
	var sum isolate.Summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &sum))
	require.Len(t, sum.Suspects, 1, out.String())
	assert.Equal(t, "n3", sum.Suspects[0].Host)
	assert.Equal(t, 1, sum.Suspects[0].Rail)
	assert.Equal(t, isolate.Bad, sum.Suspects[0].Verdict)
	assert.Len(t, sum.Pairs, 8, "two ring rounds x two pairs x two rails")
	for _, h := range []string{"n1", "n2", "n3", "n4"} {
		for k := range 2 {
			_, err := os.Stat(filepath.Join(root, h, fmt.Sprintf("round-%d", k), "done"))
			assert.NoError(t, err)
		}
	}
	return root
}
