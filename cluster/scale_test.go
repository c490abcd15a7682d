package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
)

func hostNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("gpu%04d", i+1)
	}
	return out
}

// opsOf is what counts spent.
type opsOf struct{ opens, lists, entries, writes, bytes int64 }

func snap(o *FileOps) opsOf {
	return opsOf{o.Opens.Load(), o.Lists.Load(), o.Entries.Load(), o.Writes.Load(), o.Bytes.Load()}
}

func (a opsOf) minus(b opsOf) opsOf {
	return opsOf{a.opens - b.opens, a.lists - b.lists, a.entries - b.entries, a.writes - b.writes, a.bytes - b.bytes}
}

// The barrier of one round at 1024 hosts, on paper but with real files:
// hosts finish the round over 30 polls, one never does (it closes the
// round at the first task's deadline, 60 polls in). Every task looks once
// a poll, as gdrcluster wait does, until the barrier closed for it.
// Counted: the file server's requests (opens, listings, files written)
// and bytes. The barrier before this change read every host's done file
// every look (one open and read per host, doneRun); it is counted the
// same way from its own primitive, for the same schedule.
func TestBarrierFileOperationsAt1024(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1024-host fleet's barrier on disk")
	}
	const n, spread, deadline = 1024, 30, 60
	hosts := hostNames(n)
	root := t.TempDir()
	run := "slurm/c/1"
	rng := rand.New(rand.NewPCG(1, 2))
	arrive := make([]int, n)
	for i := range arrive {
		arrive[i] = rng.IntN(spread)
	}
	dead := hosts[n/2]
	arrive[n/2] = -1
	t0 := time.Unix(1e9, 0)
	step := DefaultPoll
	var ops FileOps
	f := fsys{&ops}
	bs := make([]*barrier, n)
	for i, h := range hosts {
		if arrive[i] < 0 {
			continue
		}
		bs[i] = newBarrier(BarrierOptions{Root: root, Run: run, Self: h, Hosts: hosts, Timeout: deadline * step, Ops: &ops},
			RoundBarrier(0), t0.Add(time.Duration(arrive[i])*step))
	}
	done := make([]bool, n)
	var looks, writesArrive int64
	perLook := map[string]opsOf{}
	for s := 0; s <= deadline+spread+2; s++ {
		now := t0.Add(time.Duration(s) * step)
		for i, b := range bs {
			if b == nil || done[i] || s < arrive[i] {
				continue
			}
			if s == arrive[i] {
				before := snap(&ops)
				require.NoError(t, done_(f, root, hosts[i], run, now))
				writesArrive += snap(&ops).minus(before).writes
			}
			before := snap(&ops)
			c, err := b.poll(now)
			require.NoError(t, err)
			looks++
			d := snap(&ops).minus(before)
			if c != nil {
				done[i] = true
				assert.Equal(t, []string{dead}, c.Missing)
				perLook["closing"] = d
			} else {
				perLook["open"] = d
			}
		}
	}
	for i := range done {
		assert.Equal(t, arrive[i] >= 0, done[i], hosts[i])
	}
	after := snap(&ops)
	perTask := float64(after.opens+after.lists) / float64(n-1)
	t.Logf("after: a round at %d hosts (30 polls of arrivals, a dead host closed at the deadline): %d looks; "+
		"fleet: %d opens + %d listings (%d names) + %d files written (%d by arrivals: done file, marker), %d bytes read; "+
		"per task %.1f opens+listings, %.0f names; per look fleet-wide %.0f requests, %.0f names",
		n, looks, after.opens, after.lists, after.entries, after.writes, writesArrive, after.bytes, perTask,
		float64(after.entries)/float64(n-1), float64(after.opens+after.lists)*float64(n-1)/float64(looks), float64(after.entries)*float64(n-1)/float64(looks))
	assert.LessOrEqual(t, perLook["open"].opens+perLook["open"].lists, int64(2), "at most two requests a look, whatever the fleet's size")
	assert.Less(t, after.entries, looks*int64(n)/16, "the names listed grow as N a look, not N²")

	// The barrier before: every look read every host's done file.
	var old FileOps
	of := fsys{&old}
	oldLook := func() {
		for _, h := range hosts {
			_, _ = doneRun(of, filepath.Join(RoundDir(root, h, 0), "done"))
		}
	}
	oldLook()
	one := snap(&old)
	var oldLooks int64
	for i := range hosts { // each waits from its arrival to the deadline (a host never came)
		if arrive[i] >= 0 {
			oldLooks += int64(deadline - arrive[i] + 1)
		}
	}
	t.Logf("before: one look = %d opens, %d bytes (every host's done file); the same round = %d looks = %d opens, %d bytes fleet-wide; per task per look %d opens",
		one.opens, one.bytes, oldLooks, oldLooks*one.opens, oldLooks*one.bytes, one.opens)
	assert.Equal(t, int64(n), one.opens)
}

// done_ is Done with counted file operations.
func done_(f fsys, root, host, run string, now time.Time) error {
	return done(f, root, host, 0, run, now)
}

// Planning a repair round at 1024 hosts after the two ring rounds: what
// one task reads. Before, every host round's test.json (the suite's whole
// event stream; here a recorded one, lab-emulated/client, one rail: a
// real 8-rail run's is larger); now its pairs.json (isolate.Compact, one
// result a rail, 8 rails).
func TestPlanningReadsAt1024(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1024-host fleet's folder on disk")
	}
	const n, rails = 1024, 8
	recorded, err := filepath.Abs("../fixtures/runs/lab-emulated/client/test.json")
	require.NoError(t, err)
	st, err := os.Stat(recorded)
	require.NoError(t, err)
	hosts := hostNames(n)
	root := t.TempDir()
	run := "slurm/c/1"
	// One copy of the recording, hard-linked into every host round: the
	// bytes are read as many times as a reader opens it, the disk holds
	// them once.
	shared := filepath.Join(t.TempDir(), "test.json")
	b, err := os.ReadFile(recorded)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(shared, b, 0o644))
	for k := range 2 {
		for i, h := range hosts {
			peer := hosts[(i+1-2*(i%2)+n)%n]
			if k == 1 {
				peer = hosts[(i+2*(i%2)-1+n)%n]
			}
			require.NoError(t, WritePlan(root, Plan{Round: k, Host: h, Index: i, Hosts: n, Role: "server", Peer: peer, Run: run, Pairing: "ring"}))
			dir := RoundDir(root, h, k)
			require.NoError(t, os.Link(shared, filepath.Join(dir, "test.json")))
			var rs []isolate.Result
			for rail := range rails {
				for _, size := range []int{4096, 65536, 1 << 20} {
					rs = append(rs, isolate.Result{Host: h, Round: k, Rail: rail, Peer: peer, Role: "server", Test: fmt.Sprintf("TestPP08Bandwidth/rail%d/WRITE/%d", rail, size),
						Status: isolate.Pass, BWGbitS: 390, Size: size, Op: "WRITE"})
				}
				rs = append(rs, isolate.Result{Host: h, Round: k, Rail: rail, Peer: peer, Role: "server", Test: fmt.Sprintf("TestPP03Write/rail%d", rail), Status: isolate.Pass})
			}
			require.NoError(t, writePairs(fsys{}, dir, run, h, k, rs))
		}
	}
	var before, after FileOps
	_, _, err = load(fsys{&before}, root, run, false)
	require.NoError(t, err)
	rs, _, err := load(fsys{&after}, root, run, true)
	require.NoError(t, err)
	assert.Len(t, rs, 2*n*rails)
	pb, err := os.Stat(filepath.Join(RoundDir(root, hosts[0], 0), "pairs.json"))
	require.NoError(t, err)
	bo, ao := snap(&before), snap(&after)
	t.Logf("before (test.json, %d bytes a host round): per task %d opens + %d listings, %d bytes; fleet %.1f GB", st.Size(), bo.opens, bo.lists, bo.bytes, float64(bo.bytes)*n/1e9)
	t.Logf("after (pairs.json, %d bytes a host round, 8 rails): per task %d opens + %d listings, %d bytes; fleet %.1f GB", pb.Size(), ao.opens, ao.lists, ao.bytes, float64(ao.bytes)*n/1e9)
	assert.Less(t, ao.bytes*50, bo.bytes, "at least fifty times fewer bytes")
	raw, _ := json.Marshal(rs[0])
	assert.Less(t, len(raw), 400)

	// Only the lead reads them: the others read its plan.
	c := DefaultConfig()
	c.Reports = root
	task := jobenv.Task{Engine: jobenv.Slurm, Scope: "c", JobID: "1", Names: hosts, Addrs: hosts}
	var lead, other FileOps
	_, _, err = RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: time.Minute, Ops: &lead}, 2)
	require.NoError(t, err)
	task.Index = 700
	_, _, err = RepairPlan(context.Background(), RepairOptions{Config: c, Task: task, Wait: time.Minute, Ops: &other}, 2)
	require.NoError(t, err)
	lo, oo := snap(&lead), snap(&other)
	t.Logf("repair plan: the lead %d opens + %d listings, %d bytes; each other task %d opens, %d bytes; fleet %d requests, %.1f MB (was %d requests, %.1f GB)",
		lo.opens, lo.lists, lo.bytes, oo.opens, oo.bytes, lo.opens+lo.lists+(n-1)*(oo.opens+oo.lists), float64(lo.bytes+(n-1)*oo.bytes)/1e6,
		n*(bo.opens+bo.lists), float64(bo.bytes)*n/1e9)
	assert.Equal(t, int64(1), oo.opens+oo.lists)
}
