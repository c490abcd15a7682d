package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// sixHosts writes the two ring rounds of six hosts as Done leaves them
// (plan.json, pairs.json), with rail 0 of n4 and n5 dead: neighbours,
// each has one partner that passed elsewhere, so round 2 re-pairs them.
func sixHosts(t *testing.T) (root string, task jobenv.Task, c Config) {
	t.Helper()
	root = t.TempDir()
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	task = jobenv.Task{Engine: jobenv.Slurm, JobID: "5", Names: names, Addrs: names}
	c = DefaultConfig()
	c.Reports = root
	for k, r := range pairing.Base(pairing.Ring, len(names))[:2] {
		for _, p := range r.Pairs {
			for _, e := range [][3]int{{p.Server, p.Client, 0}, {p.Client, p.Server, 1}} {
				h, peer := names[e[0]], names[e[1]]
				require.NoError(t, WritePlan(root, Plan{Round: k, Host: h, Index: e[0], Hosts: 6, Role: []string{"server", "client"}[e[2]], Peer: peer, Run: task.Run()}))
				var rs []isolate.Result
				for rail := range 2 {
					st := isolate.Pass
					if rail == 0 && (h == "n4" || peer == "n4" || h == "n5" || peer == "n5") {
						st = isolate.Fail
					}
					rs = append(rs, isolate.Result{Host: h, Round: k, Rail: rail, Peer: peer, Status: st, BWGbitS: 100})
				}
				require.NoError(t, writePairs(fsys{}, RoundDir(root, h, k), task.Run(), h, k, rs))
			}
		}
	}
	return root, task, c
}

// The lead computes the repair round and writes it once; another task
// reads that file (one open), and plans the same round.
func TestRepairPlanByTheLead(t *testing.T) {
	_, task, c := sixHosts(t)
	var leadOps, otherOps FileOps
	task.Index = 0
	r, done, err := RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: time.Minute, Ops: &leadOps}, 2)
	require.NoError(t, err)
	require.False(t, done)
	want, _ := isolate.Round(pairing.Ring, task.Names, 2, 2, mustLoad(t, c.Reports, task.Run()), isolate.Options{MinFraction: c.MinFraction})
	assert.Equal(t, want.Pairs, r.Pairs)
	assert.Len(t, r.Pairs, 2, "n4 and n5 each meet a clean host")

	task.Index = 3
	r2, done2, err := RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: time.Minute, Ops: &otherOps}, 2)
	require.NoError(t, err)
	assert.Equal(t, r, r2)
	assert.Equal(t, done, done2)
	assert.Equal(t, int64(1), otherOps.Opens.Load(), "the plan file only")
	assert.Zero(t, otherOps.Lists.Load())
	assert.Greater(t, leadOps.Opens.Load(), int64(12), "the lead reads every host round")

	s := PlanFrom(task, c, []byte("0123456789abcdef"), 2, r2, done2, isolate.Liveness{})
	assert.True(t, s.Plan.Repair)
}

// A lead that never writes it (it died): the others wait RepairWait, then
// compute the round themselves; the first file written counts for all.
func TestRepairPlanWithoutTheLead(t *testing.T) {
	root, task, c := sixHosts(t)
	task.Index = 2
	start := time.Now()
	r, _, err := RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: 50 * time.Millisecond, Poll: 10 * time.Millisecond}, 2)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	b, err := os.ReadFile(filepath.Join(RunDir(root, task.Run()), "round-2.plan.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"by":"n3"`)
	task.Index = 0
	r0, _, err := RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: time.Minute}, 2)
	require.NoError(t, err)
	assert.Equal(t, r, r0, "the lead, late, plans from the file")

	require.NoError(t, os.WriteFile(filepath.Join(RunDir(root, task.Run()), "round-3.plan.json"), []byte(`{"run":"slurm//5","round":3,"pairs":[{"Server":0,"Client":9}]}`), 0o644))
	_, _, err = RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: time.Minute}, 3)
	assert.ErrorContains(t, err, "pairs host 0 with host 9: the job has 6 hosts")
}

func mustLoad(t *testing.T, root, run string) []isolate.Result {
	t.Helper()
	rs, err := LoadCompact(root, run)
	require.NoError(t, err)
	return rs
}
