package cluster

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

func opts(root, run, self string, hosts []string, timeout time.Duration) BarrierOptions {
	return BarrierOptions{Root: root, Run: run, Self: self, Hosts: hosts, Timeout: timeout, Poll: 5 * time.Millisecond}
}

// A round's barrier closes once: when the first task's timeout runs out it
// names the hosts missing, and a host that finishes afterwards learns it
// is too late; a round every host finished closes at once.
func TestRoundBarrier(t *testing.T) {
	root := t.TempDir()
	hosts := []string{"a", "b", "c"}
	require.NoError(t, Done(root, "a", 2, "slurm//7"))
	c, err := WaitRound(context.Background(), opts(root, "slurm//7", "a", hosts, 50*time.Millisecond), 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, c.Missing)
	assert.Equal(t, "a", c.By)
	assert.Contains(t, c.Line(), "round 2: 2 of 3 hosts did not finish: b, c (closed by a at ")
	assert.Contains(t, c.Why, "a's deadline passed, 50ms after it arrived")

	require.NoError(t, Done(root, "b", 2, "slurm//7"))
	_, err = WaitRound(context.Background(), opts(root, "slurm//7", "b", hosts, time.Minute), 2)
	var late *LateError
	require.ErrorAs(t, err, &late)
	assert.Equal(t, "b", late.Host)
	assert.Contains(t, err.Error(), "b finished round 2 after its barrier closed at ")
	assert.Contains(t, err.Error(), "the run goes on without b, which stops here")

	for _, h := range hosts {
		require.NoError(t, Done(root, h, 3, "slurm//7"))
	}
	c, err = WaitRound(context.Background(), opts(root, "slurm//7", "c", hosts, time.Minute), 3)
	require.NoError(t, err)
	assert.Empty(t, c.Missing)
	assert.Equal(t, "every host arrived", c.Why)
	assert.Empty(t, c.Line())
	entries, err := os.ReadDir(RoundDir(root, "a", 2))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
	entries, err = os.ReadDir(RunDir(root, "slurm//7"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"round-2", "round-2.json", "round-3", "round-3.json"}, names, "no temporary file of the closed files either")

	live, err := LivenessBefore(root, "slurm//7", -1)
	require.NoError(t, err)
	assert.Empty(t, live.Stopped, "rounds 0 and 1 never closed: the reading stops there")
}

// Another run's files (an earlier attempt of a requeued job, or one from
// before done files named their run) never satisfy a barrier; the closed
// barrier's note names them.
func TestBarrierCountsOnlyItsRun(t *testing.T) {
	root := t.TempDir()
	hosts := []string{"a", "b"}
	require.NoError(t, Done(root, "a", 0, "slurm//7#1"))
	require.NoError(t, Done(root, "b", 0, "slurm//7"))
	c, err := WaitRound(context.Background(), opts(root, "slurm//7#1", "a", hosts, 30*time.Millisecond), 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, c.Missing)
	assert.Equal(t, "a done file of another run, not counted: b (slurm//7)", c.Note(root))

	// The old format: only a time.
	require.NoError(t, os.WriteFile(filepath.Join(RoundDir(root, "b", 0), "done"), []byte("2026-12-01T10:00:00Z\n"), 0o644))
	assert.Equal(t, "a done file of another run, not counted: b (no run named)", c.Note(root))

	// The closed file of another run in this run's place is refused.
	other := filepath.Join(RunDir(root, "slurm//7#2"), "round-0.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(other), 0o755))
	raw, err := os.ReadFile(filepath.Join(RunDir(root, "slurm//7#1"), "round-0.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(other, raw, 0o644))
	_, err = WaitRound(context.Background(), opts(root, "slurm//7#2", "a", hosts, 20*time.Millisecond), 0)
	assert.ErrorContains(t, err, "is the barrier round-0 of run slurm//7#1, not round-0 of slurm//7#2")
}

// The start barrier with tasks that arrive at random moments around the
// first deadline, many times over: every task that goes on saw the same
// closed file, each host in its missing list that shows up is told it is
// too late, and none that the file counts is.
func TestStartBarrierClosesOnceForEveryone(t *testing.T) {
	hosts := []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"}
	for trial := range 12 {
		root := t.TempDir()
		rng := rand.New(rand.NewPCG(uint64(trial), 3))
		var wg sync.WaitGroup
		type out struct {
			c   Closed
			err error
		}
		outs := make([]out, len(hosts))
		for i, h := range hosts {
			delay := time.Duration(rng.IntN(80)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				o := opts(root, "k8s/ns/uid", h, hosts, 40*time.Millisecond)
				o.Poll = time.Duration(1+rng.IntN(5)) * time.Millisecond
				outs[i].c, outs[i].err = Start(context.Background(), o)
			}()
		}
		wg.Wait()
		file, err := readClosedFile(fsys{}, root, "k8s/ns/uid", StartBarrier)
		require.NoError(t, err)
		require.NotNil(t, file)
		for i, h := range hosts {
			var late *LateError
			if slices.Contains(file.Missing, h) {
				require.ErrorAs(t, outs[i].err, &late, "trial %d: %s is in the missing list: too late", trial, h)
				assert.Equal(t, h, late.Host)
				continue
			}
			require.NoError(t, outs[i].err, "trial %d %s", trial, h)
			assert.Equal(t, *file, outs[i].c, "trial %d: %s plans from the file", trial, h)
		}
		assert.Len(t, file.MissingIndex, len(file.Missing))
	}
}

// A host whose heartbeat stopped ends the wait for it early, long before
// the timeout; a host whose heartbeat goes on does not extend the wait
// past it.
func TestHeartbeatsShortenAWaitAndNeverExtendIt(t *testing.T) {
	root := t.TempDir()
	hosts := []string{"a", "b", "c"}
	run := "slurm//9"
	ctx, cancel := context.WithCancel(context.Background())
	hb := make(chan error, 1)
	go func() { hb <- Heartbeat(ctx, root, run, "c", 10*time.Millisecond) }()
	time.Sleep(30 * time.Millisecond)
	cancel() // c dies
	require.NoError(t, <-hb)
	names, err := os.ReadDir(filepath.Join(RunDir(root, run), "alive"))
	require.NoError(t, err)
	require.Len(t, names, 1, "the previous count removed: %v", names)

	require.NoError(t, Done(root, "a", 0, run))
	require.NoError(t, Done(root, "b", 0, run))
	o := opts(root, run, "a", hosts, time.Minute)
	o.Quiet = 200 * time.Millisecond
	start := time.Now()
	c, err := WaitRound(context.Background(), o, 0)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, []string{"c"}, c.Missing)
	assert.Equal(t, "the heartbeats of the hosts missing had not moved for 200ms", c.Why)

	// c beats on through round 1 and never finishes it: the timeout closes
	// the round all the same.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go func() { _ = Heartbeat(ctx2, root, run, "c", 5*time.Millisecond) }()
	require.NoError(t, Done(root, "a", 1, run))
	require.NoError(t, Done(root, "b", 1, run))
	o = opts(root, run, "b", hosts, 300*time.Millisecond)
	o.Quiet = 100 * time.Millisecond
	c, err = WaitRound(context.Background(), o, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"c"}, c.Missing)
	assert.Contains(t, c.Why, "b's deadline passed")

	live, err := LivenessBefore(root, run, -1)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"c": 0}, live.Stopped, "the first round it missed")
	assert.Equal(t, []string{"a", "b"}, Expected(hosts, live, 1))
	assert.Equal(t, hosts, Expected(hosts, live, 0))
}

// What a reader after the run takes for each host: the closed barriers,
// and for a round that never closed, the hosts' done files.
func TestLiveness(t *testing.T) {
	root := t.TempDir()
	run := "slurm//5"
	hosts := []string{"a", "b", "c", "d"}
	c, err := Start(context.Background(), opts(root, run, "a", hosts, 10*time.Millisecond))
	var late *LateError
	require.False(t, errors.As(err, &late))
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c", "d"}, c.Missing)
	assert.Equal(t, []int{1, 2, 3}, c.MissingIndex)
	live, err := LivenessBefore(root, run, 0)
	require.NoError(t, err)
	assert.Equal(t, isolate.Liveness{NotStarted: map[string]bool{"b": true, "c": true, "d": true}}, live)

	// A fleet of two whose round 1 never closed: b has no done file of it.
	root = t.TempDir()
	for _, h := range []string{"a", "b"} {
		for k := range 2 {
			require.NoError(t, WritePlan(root, Plan{Round: k, Host: h, Index: int(h[0] - 'a'), Hosts: 2, Run: run, Role: Idle}))
		}
		require.NoError(t, Done(root, h, 0, run))
	}
	require.NoError(t, Done(root, "a", 1, run))
	for _, h := range []string{"a", "b"} {
		_, err := WaitRound(context.Background(), opts(root, run, h, []string{"a", "b"}, time.Minute), 0)
		require.NoError(t, err)
	}
	live, err = Liveness(root, "")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"b": 1}, live.Stopped)
	assert.Equal(t, "stopped in round 1", live.Of("b"))
}

// A start barrier's missing hosts have no plan: Hosts names them from it.
func TestHostsNamesThoseThatDidNotStart(t *testing.T) {
	root := t.TempDir()
	run := "k8s/ns/u"
	hosts := []string{"gdrconf-0", "gdrconf-1", "gdrconf-2"}
	_, err := Start(context.Background(), opts(root, run, "gdrconf-0", hosts, 10*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, WritePlan(root, Plan{Round: 0, Host: "gdrconf-0", Index: 0, Hosts: 3, Run: run}))
	got, err := Hosts(root, "")
	require.NoError(t, err)
	assert.Equal(t, hosts, got)
}
