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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/report"
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
printf '%s\n' "${GDR_PAIRED_ONLY:-unset}" > "$GDR_REPORTS/paired_only"
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
	root := filepath.Join(t.TempDir(), "reports")
	outs, errs := startTasks(t, script, root, env, []int{0, 1, 2, 3}, args...)
	for i := range 4 {
		require.NoError(t, errs[i], "task %d: %s", i, outs[i])
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
			// The whole suite in a host's first round, the paired packages after.
			b, err := os.ReadFile(filepath.Join(root, h, fmt.Sprintf("round-%d", k), "paired_only"))
			if assert.NoError(t, err) {
				assert.Equal(t, map[int]string{0: "0\n", 1: "1\n"}[k], string(b), "%s round %d", h, k)
			}
		}
	}
	return root
}

// startTasks runs script as the tasks of job 31337 (n1..n4) given by
// index, at once as srun would start them, sharing root; it returns each
// task's output and error.
func startTasks(t *testing.T, script, root string, env []string, tasks []int, args ...string) ([]string, []error) {
	t.Helper()
	return startTasksWith(t, script, root, fakeSuite, env, nil, tasks, args...)
}

// startTasksWith is startTasks with a suite script of its own, and each
// task started after its delay (a pod whose image pull took longer).
func startTasksWith(t *testing.T, script, root, suiteText string, env []string, delay map[int]time.Duration, tasks []int, args ...string) ([]string, []error) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	suite := filepath.Join(t.TempDir(), "suite.sh")
	require.NoError(t, os.WriteFile(suite, []byte(suiteText), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, len(tasks))
	errs := make([]error, len(tasks))
	for j, i := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay[i])
			cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
			cmd.Env = append(append(os.Environ(), "GDRCLUSTER_TEST_AS_MAIN=1", "GDRCLUSTER="+self, "GDR_SUITE="+suite, "GDR_REPORTS="+root,
				"SLURM_JOB_ID=31337", "SLURM_JOB_NODELIST=n[1-4]", "SLURM_NTASKS=4", fmt.Sprintf("SLURM_PROCID=%d", i),
				"GDR_CLUSTER_SECRET=0123456789abcdef0123456789abcdef", "GDR_ROUND_TIMEOUT=1m"), env...)
			cmd.Stdout, cmd.Stderr = &outs[j], &outs[j]
			// A task cut short takes its children with it (a gdrcluster
			// waiting at a barrier, the heartbeat), as srun would.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second
			errs[j] = cmd.Run()
		}()
	}
	wg.Wait()
	out := make([]string, len(tasks))
	for j := range tasks {
		out[j] = outs[j].String()
	}
	return out, errs
}

// A requeued job (same job ID, SLURM_RESTART_COUNT=1) run in the folder of
// its first attempt: the first attempt's done files, n4's included, must
// not satisfy the second's barrier, where n4 never starts; and the folder,
// which now holds two runs, is judged only when told which.
func TestRequeueDoesNotMixWithTheFirstAttempt(t *testing.T) {
	script, err := filepath.Abs("../../deploy/rounds.sh")
	require.NoError(t, err)
	root := runRounds(t, script, nil) // attempt 0: every host, both rounds

	// The start barrier closes without n4 (its files are the first
	// attempt's), and n1..n3 run a ring of three.
	outs, errs := startTasks(t, script, root, []string{"SLURM_RESTART_COUNT=1", "GDR_START_TIMEOUT=3s", "GDR_ROUND_TIMEOUT=20s"}, []int{0, 1, 2})
	all := ""
	for j := range outs {
		require.NoError(t, errs[j], outs[j])
		all += outs[j]
	}
	assert.Contains(t, all, "start: 1 of 4 hosts did not start: n4", "n4's old files are not this run's")
	assert.Contains(t, all, "a done file of another run, not counted: n4 (slurm//31337)")
	b, err := os.ReadFile(filepath.Join(root, "n1", "round-0", "done"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "slurm//31337#1\n"), "a done file names its run: %q", b)

	var out, errb bytes.Buffer
	assert.Equal(t, 1, run([]string{"isolate", "-json"}, lookup(map[string]string{"GDR_REPORTS": root}), &out, &errb))
	assert.Contains(t, errb.String(), "holds 2 runs, which must not be judged together")
	assert.Contains(t, errb.String(), "slurm//31337: 1 host, 2 host rounds (n4/round-0 .. n4/round-1)", "what the first attempt left that the second did not overwrite")
	assert.Contains(t, errb.String(), "slurm//31337#1: 3 hosts, 9 host rounds", "a ring of three: three rounds")

	out.Reset()
	errb.Reset()
	require.Equal(t, 0, run([]string{"isolate", "-json", "-run", "slurm//31337#1"}, lookup(map[string]string{"GDR_REPORTS": root}), &out, &errb), errb.String())
	// The merged report refuses the same way, and takes the run it is told.
	_, err = report.FromDirs([]string{root}, report.Options{})
	assert.ErrorContains(t, err, "holds 2 runs")
	r, err := report.FromDirs([]string{root}, report.Options{Run: "slurm//31337#1"})
	require.NoError(t, err)
	require.Len(t, r.Hosts, 4, "n1..n3, and n4, which did not start in the second attempt")
	assert.Equal(t, "NOT QUALIFIED (did not start: its run did not finish)", r.Hosts[3].Verdict.Line)
	assert.Empty(t, r.Hosts[3].Reqs, "none of the first attempt's results")

	results, _, err := cluster.Load(root, "slurm//31337#1")
	require.NoError(t, err)
	require.NotEmpty(t, results)
	for _, r := range results {
		assert.NotEqual(t, "n4", r.Host, "n4's results are the first attempt's: not read")
	}
}

// A cluster run that asks for a soak soaks in round 0, where both ends of
// every pair start it together; the host idle in round 0 of an odd count
// has its first round later, with a partner that runs pingpong alone by
// then, so rounds.sh runs it without the soak and says why
// (GDR_SOAK_SKIP), which its soak tests report as absent.
func TestRoundsSoakInRoundZeroOnly(t *testing.T) {
	script, err := filepath.Abs("../../deploy/rounds.sh")
	require.NoError(t, err)
	root := filepath.Join(t.TempDir(), "reports")
	suite := fakeSuite + `printf '%s|%s\n' "${GDR_SOAK:-unset}" "${GDR_SOAK_SKIP:-}" > "$GDR_REPORTS/soak"` + "\n"
	outs, errs := startTasksWith(t, script, root, suite, []string{"SLURM_JOB_NODELIST=n[1-3]", "SLURM_NTASKS=3", "GDR_SOAK=1h"}, nil, []int{0, 1, 2})
	for j := range outs {
		require.NoError(t, errs[j], outs[j])
	}
	skipped := 0
	for _, h := range []string{"n1", "n2", "n3"} {
		first := -1
		for k := range 3 {
			if _, err := os.Stat(filepath.Join(root, h, fmt.Sprintf("round-%d", k), "soak")); err == nil {
				first = k
				break
			}
		}
		require.GreaterOrEqual(t, first, 0, "%s ran no round", h)
		b, err := os.ReadFile(filepath.Join(root, h, fmt.Sprintf("round-%d", first), "soak"))
		require.NoError(t, err)
		if first == 0 {
			assert.Equal(t, "1h|\n", string(b), "%s soaks in round 0 as asked", h)
			continue
		}
		skipped++
		assert.Equal(t, fmt.Sprintf("0|this host's first round was round %d, not round 0 (idle then): a cluster run soaks in round 0 only, where both ends of every pair start the soak together\n", first), string(b), h)
	}
	assert.Equal(t, 1, skipped, "a ring of three leaves one host idle in round 0")
}

// With GDR_MERGE=first the task first in the host list merges after the
// last round and exits with the verdict's code, so the job's own status
// (the Kubernetes Job's condition) is the fleet's verdict; the other tasks
// exit 0.
func TestRoundsMergeTask(t *testing.T) {
	script, err := filepath.Abs("../../deploy/rounds.sh")
	require.NoError(t, err)
	dir := t.TempDir()
	stand := filepath.Join(dir, "gdrreport")
	require.NoError(t, os.WriteFile(stand, []byte("#!/bin/sh\necho \"$@\" >"+filepath.Join(dir, "report.args")+"\nexit 1\n"), 0o755))
	root := filepath.Join(dir, "reports")
	outs, errs := startTasks(t, script, root, []string{"GDR_MERGE=first", "GDR_REPORT_BIN=" + stand}, []int{0, 1, 2, 3})
	for j := range outs {
		if j == 0 {
			var ee *exec.ExitError
			require.ErrorAs(t, errs[j], &ee, outs[j])
			assert.Equal(t, 1, ee.ExitCode(), "the merging task exits with the verdict's code")
			assert.Contains(t, outs[j], "cluster verdict in "+root+"/report/summary.txt (exit 1)")
			continue
		}
		assert.NoError(t, errs[j], "task %d: %s", j, outs[j])
		assert.NotContains(t, outs[j], "cluster verdict")
	}
	args, err := os.ReadFile(filepath.Join(dir, "report.args"))
	require.NoError(t, err)
	assert.Equal(t, "-q -run slurm//31337 -out "+root+"/report "+root+"\n", string(args), "the merge takes its own run")
	for _, f := range []string{"isolate.txt", "isolate.json"} {
		_, err := os.Stat(filepath.Join(root, f))
		assert.NoError(t, err, f)
	}

	out, err := exec.Command("bash", "-c", "GDR_MERGE=last GDR_REPORTS=/x GDRCLUSTER=/bin/true GDR_SUITE=/bin/true bash "+script).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "GDR_MERGE=last is not valid: want first, or unset")
}

// stopSuite stands in for dist/run.sh on n1: it runs until a signal, which
// it traps as run.sh does, and writes its report a moment later; n2's
// suite passes at once, so n2 waits at round 0's barrier for n1.
const stopSuite = `#!/usr/bin/env bash
[ "$GDR_HOST_NAME" = n1 ] || exit 0
stop() { kill "$nap" 2>/dev/null; sleep 1; echo "$1" > "$GDR_REPORTS/report"; exit 1; }
trap 'stop TERM' TERM
trap 'stop INT' INT
echo "$GDR_ROUND" > "$GDR_REPORTS/started"
# In the background, where bash ignores SIGINT for it: stop ends it.
sleep 60 &
nap=$!
wait $nap
echo none > "$GDR_REPORTS/report"
`

// A task signalled alone, as the kubelet signals only a pod's PID 1 (which
// rounds.sh is there): rounds.sh passes the signal to its suite, waits for
// the suite's report, starts no further round and exits 143 (SIGTERM) or
// 130 (SIGINT). A task waiting at a round's barrier stops at once too.
func TestRoundsStopOnSignal(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script, err := filepath.Abs("../../deploy/rounds.sh")
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGTERM, "TERM", 143}, {syscall.SIGINT, "INT", 130}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			suite := filepath.Join(dir, "suite.sh")
			require.NoError(t, os.WriteFile(suite, []byte(stopSuite), 0o755))
			root := filepath.Join(dir, "reports")
			type task struct {
				cmd  *exec.Cmd
				out  bytes.Buffer
				done chan error
			}
			tasks := make([]*task, 2)
			for i := range tasks {
				tk := &task{done: make(chan error, 1)}
				tk.cmd = exec.Command("bash", script)
				tk.cmd.Env = append(os.Environ(), "GDRCLUSTER_TEST_AS_MAIN=1", "GDRCLUSTER="+self, "GDR_SUITE="+suite, "GDR_REPORTS="+root,
					"SLURM_JOB_ID=31338", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_NTASKS=2", fmt.Sprintf("SLURM_PROCID=%d", i),
					"GDR_CLUSTER_SECRET=0123456789abcdef0123456789abcdef", "GDR_ROUND_TIMEOUT=1m")
				tk.cmd.Stdout, tk.cmd.Stderr = &tk.out, &tk.out
				// Its own group, which the test never signals but to clean
				// up: the signal goes to rounds.sh alone.
				tk.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				tk.cmd.WaitDelay = 5 * time.Second
				require.NoError(t, tk.cmd.Start())
				go func() { tk.done <- tk.cmd.Wait() }()
				t.Cleanup(func() {
					_ = syscall.Kill(-tk.cmd.Process.Pid, syscall.SIGKILL)
					select {
					case <-tk.done:
					case <-time.After(10 * time.Second):
						t.Errorf("task %d did not end after SIGKILL", i)
					}
				})
				tasks[i] = tk
			}
			// eventually waits, with a deadline, until path exists.
			eventually := func(path string) {
				t.Helper()
				deadline := time.Now().Add(time.Minute)
				for time.Now().Before(deadline) {
					if _, err := os.Stat(path); err == nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Fatalf("%s did not appear within a minute; n1: %s\nn2: %s", path, tasks[0].out.String(), tasks[1].out.String())
			}
			// stopped sends sig to task i's rounds.sh and returns its exit
			// status and how long it took.
			stopped := func(i int) (int, time.Duration) {
				t.Helper()
				start := time.Now()
				require.NoError(t, tasks[i].cmd.Process.Signal(c.sig))
				select {
				case err := <-tasks[i].done:
					tasks[i].done <- err // for the cleanup
					var ee *exec.ExitError
					require.ErrorAs(t, err, &ee, tasks[i].out.String())
					return ee.ExitCode(), time.Since(start)
				case <-time.After(30 * time.Second):
					t.Fatalf("task %d did not end within 30 s of SIG%s: %s", i, c.name, tasks[i].out.String())
				}
				return 0, 0
			}
			n1 := filepath.Join(root, "n1", "round-0")
			eventually(filepath.Join(n1, "started"))
			if c.sig == syscall.SIGTERM {
				// n2 passed round 0 and waits at its barrier for n1.
				eventually(filepath.Join(root, "n2", "round-0", "done"))
				time.Sleep(500 * time.Millisecond) // into gdrcluster wait
				code, took := stopped(1)
				assert.Equal(t, c.code, code, tasks[1].out.String())
				assert.Less(t, took, 10*time.Second, "the barrier's wait ends at once")
				assert.Contains(t, tasks[1].out.String(), "rounds.sh: SIGTERM: the task stopped at round 0's barrier; no further round")
			}
			code, took := stopped(0)
			out := tasks[0].out.String()
			assert.Equal(t, c.code, code, out)
			b, err := os.ReadFile(filepath.Join(n1, "report"))
			require.NoError(t, err, "the suite wrote its report before rounds.sh ended: %s", out)
			assert.Equal(t, c.name+"\n", string(b), "the suite heard the signal")
			assert.GreaterOrEqual(t, took, time.Second, "rounds.sh waited for the suite's report")
			assert.Contains(t, out, "rounds.sh: SIG"+c.name+": the task stopped in round 0, its report in "+n1+"; no further round")
			assert.NotContains(t, out, "the suite reported failures")
			_, err = os.Stat(filepath.Join(n1, "done"))
			assert.ErrorIs(t, err, os.ErrNotExist, "round 0 did not finish")
			_, err = os.Stat(filepath.Join(root, "n1", "round-1"))
			assert.ErrorIs(t, err, os.ErrNotExist, "no further round was planned")
		})
	}
}
