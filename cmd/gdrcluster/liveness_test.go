package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// meetingSuite stands in for the two-host suite where it matters here: the
// two ends must be there at once. Each marks itself in its round folder and
// waits FAKE_MEET_S seconds (4: tasks leave a barrier up to a poll, 2 s,
// apart) for its peer's mark; one that gives up says so
// (gone), and a peer that finds that fails too, as the suite's out-of-band
// session does (GDR_TIMEOUT). FAKE_DIE=<host>/<round> kills that host's
// task (rounds.sh, the suite's parent) in that round.
const meetingSuite = `#!/usr/bin/env bash
set -eu
if [ "${FAKE_DIE:-}" = "$GDR_HOST_NAME/$GDR_ROUND" ]; then kill -9 "$PPID"; exit 1; fi
peer="$(dirname "$(dirname "$GDR_REPORTS")")/$GDR_PEER_NAME/round-$GDR_ROUND"
touch "$GDR_REPORTS/here"
ok=0
for _ in $(seq 1 $((${FAKE_MEET_S:-4} * 20))); do
  [ -e "$peer/gone" ] && break
  if [ -e "$peer/here" ]; then ok=1; break; fi
  sleep 0.05
done
[ "$ok" = 1 ] || touch "$GDR_REPORTS/gone"
for rail in 0 1; do
  t="TestPP08Bandwidth/rail$rail/WRITE/1048576"
  for kv in "gdr.rail $rail" "gdr.peer $GDR_PEER_NAME" "gdr.role $GDR_ROLE" "gdr.size 1048576" "gdr.op WRITE"; do
    set -- $kv
    printf '{"Action":"attr","Package":"p","Test":"%s","Key":"%s","Value":"%s"}\n' "$t" "$1" "$2"
  done
  if [ "$ok" = 1 ]; then
    printf '{"Action":"attr","Package":"p","Test":"%s","Key":"gdr.bw_gbps","Value":"100"}\n' "$t"
    printf '{"Action":"pass","Package":"p","Test":"%s"}\n' "$t"
  else
    printf '{"Action":"output","Package":"p","Test":"%s","Output":"    end_test.go:290: oob: %s: no answer within 4s\\n"}\n' "$t" "$GDR_PEER_NAME"
    printf '{"Action":"fail","Package":"p","Test":"%s"}\n' "$t"
  fi
done > "$GDR_REPORTS/test.json"
`

func roundsScript(t *testing.T) string {
	t.Helper()
	script, err := filepath.Abs("../../deploy/rounds.sh")
	require.NoError(t, err)
	return script
}

func isolateJSON(t *testing.T, root string) isolate.Summary {
	t.Helper()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"isolate", "-json"}, lookup(map[string]string{"GDR_REPORTS": root}), &out, &errb), errb.String())
	var sum isolate.Summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &sum))
	return sum
}

// The failure a late pod caused: n2 starts 9 s after the others, longer
// than its round-0 partner waits for it (4 s here, GDR_TIMEOUT on a real
// fleet). Without a start barrier n1 gave up, n2 found it gone, and the
// pair's two rails were judged bad links. The start barrier holds the
// fleet until n2 is there: every pair passes, nothing is found.
func TestLateTaskStartsWithTheFleet(t *testing.T) {
	root := filepath.Join(t.TempDir(), "reports")
	outs, errs := startTasksWith(t, roundsScript(t), root, meetingSuite, []string{"GDR_START_TIMEOUT=1m"},
		map[int]time.Duration{1: 9 * time.Second}, []int{0, 1, 2, 3})
	for i := range outs {
		require.NoError(t, errs[i], "task %d: %s", i, outs[i])
		assert.NotContains(t, outs[i], "did not start", "n2 came within GDR_START_TIMEOUT")
	}
	sum := isolateJSON(t, root)
	assert.Empty(t, sum.Links, "no bad link from a late start")
	assert.Empty(t, sum.Suspects)
	assert.Empty(t, sum.LinkSuspects)
	assert.Empty(t, sum.Flaky)
	for _, p := range sum.Pairs {
		assert.Equal(t, isolate.Pass, p.Status, "%+v", p)
	}
	assert.Len(t, sum.Pairs, 8)
}

// n4 never starts: the start barrier closes without it after
// GDR_START_TIMEOUT, n1..n3 make a ring of three (three rounds), nobody
// fails with n4, and the judgement names it as not started, not as bad.
// When it does come, it is told it is too late and stops, naming itself.
func TestHostThatNeverStartsIsPlannedAround(t *testing.T) {
	root := filepath.Join(t.TempDir(), "reports")
	env := []string{"GDR_START_TIMEOUT=2s"}
	outs, errs := startTasksWith(t, roundsScript(t), root, meetingSuite, env, nil, []int{0, 1, 2})
	for i := range outs {
		require.NoError(t, errs[i], "task %d: %s", i, outs[i])
	}
	assert.Contains(t, outs[0]+outs[1]+outs[2], "start: 1 of 4 hosts did not start: n4")
	sum := isolateJSON(t, root)
	assert.Empty(t, sum.Suspects)
	assert.Empty(t, sum.Links)
	assert.Empty(t, sum.LinkSuspects)
	require.Len(t, sum.Hosts, 4)
	assert.Equal(t, isolate.Host{Host: "n4", Fabric: isolate.Untested, Liveness: isolate.DidNotStart}, sum.Hosts[3])
	assert.Len(t, sum.Pairs, 6, "three rounds of one pair on two rails")
	for _, p := range sum.Pairs {
		assert.Equal(t, isolate.Pass, p.Status, "%+v", p)
	}

	outs, errs = startTasksWith(t, roundsScript(t), root, meetingSuite, env, nil, []int{3})
	var ee *exec.ExitError
	require.ErrorAs(t, errs[0], &ee, outs[0])
	assert.Equal(t, exitLate, ee.ExitCode())
	assert.Contains(t, outs[0], "n4 reached the start after its barrier closed at ")
	assert.Contains(t, outs[0], "the run goes on without n4, which stops here")
	_, err := os.Stat(filepath.Join(root, "n4"))
	assert.ErrorIs(t, err, os.ErrNotExist, "it ran no round")
}

// n1 dies in round 1 (its task is killed): round 1's barrier closes
// without it once its heartbeat has stood still for a quarter of
// GDR_ROUND_TIMEOUT, while n4, its partner, still waits for it in the
// suite (alive: waited for); n4's failure with it is not held against n4,
// and the next host in the list merges (GDR_MERGE=first) with n1 named as
// stopped in round 1.
func TestHostThatDiesMidRunIsNamedAndTheRestJudged(t *testing.T) {
	dir := t.TempDir()
	stand := filepath.Join(dir, "gdrreport")
	require.NoError(t, os.WriteFile(stand, []byte("#!/bin/sh\necho \"$@\" >"+filepath.Join(dir, "report.args")+"\nexit 0\n"), 0o755))
	root := filepath.Join(dir, "reports")
	outs, errs := startTasksWith(t, roundsScript(t), root, meetingSuite,
		[]string{"FAKE_DIE=n1/1", "GDR_ROUND_TIMEOUT=24s", "GDR_MERGE=first", "GDR_REPORT_BIN=" + stand}, nil, []int{0, 1, 2, 3})
	require.Error(t, errs[0], "n1 was killed")
	for i := 1; i < 4; i++ {
		require.NoError(t, errs[i], "task %d: %s", i, outs[i])
	}
	assert.Contains(t, outs[1], "round 1: 1 of 4 hosts did not finish: n1")
	assert.Contains(t, outs[1], "the heartbeats of the hosts missing had not moved for 6s")
	assert.Contains(t, outs[1], "cluster verdict in "+root+"/report/summary.txt (exit 0)", "n2 merges: n1 stopped")
	for _, i := range []int{2, 3} {
		assert.NotContains(t, outs[i], "cluster verdict")
	}
	_, err := os.Stat(filepath.Join(dir, "report.args"))
	require.NoError(t, err)

	sum := isolateJSON(t, root)
	assert.Empty(t, sum.Suspects, "n1's partner of round 1 (n4) is not suspect")
	assert.Empty(t, sum.Links)
	assert.Empty(t, sum.LinkSuspects)
	assert.Equal(t, "stopped in round 1", sum.Hosts[0].Liveness)
	for _, p := range sum.Pairs {
		if p.Round == 1 && (p.A == "n1" || p.B == "n1") {
			assert.Equal(t, isolate.Stopped, p.Status, "%+v", p)
		} else {
			assert.Equal(t, isolate.Pass, p.Status, "%+v", p)
		}
	}
	for _, h := range sum.Hosts[1:] {
		assert.Contains(t, []isolate.State{isolate.Good}, h.Fabric, h.Host)
	}
}
