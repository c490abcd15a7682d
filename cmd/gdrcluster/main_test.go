package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// evalShell reads the export/unset lines plan prints, and its one
// assignment.
func evalShell(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		switch {
		case strings.HasPrefix(line, "export "):
			k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			require.True(t, ok, line)
			require.True(t, strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'"), line)
			out[k] = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		case strings.HasPrefix(line, "unset "):
		case strings.HasPrefix(line, "GDR_PLAN_SOAK_SKIP="): // rounds.sh's own, not exported
			k, v, _ := strings.Cut(line, "=")
			require.True(t, strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'"), line)
			out[k] = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
		default:
			t.Fatalf("plan printed %q, not shell", line)
		}
	}
	return out
}

// suiteRound writes the test.json a two-host suite run would leave: one
// bandwidth test per rail, failing when the peer is dead.
func suiteRound(t *testing.T, env map[string]string, rails int, dead map[string]bool, slow [2]any) {
	t.Helper()
	self, peer := env["GDR_HOST_NAME"], env["GDR_PEER_NAME"]
	var b strings.Builder
	ev := func(action, test string, kv ...string) {
		m := map[string]string{"Action": action, "Package": "github.com/gdrconf/gdrconf/conformance/pingpong", "Test": test}
		if len(kv) == 2 {
			m["Key"], m["Value"] = kv[0], kv[1]
		}
		if action == "output" {
			m["Output"] = kv[0]
			delete(m, "Key")
			delete(m, "Value")
		}
		j, _ := json.Marshal(m)
		b.Write(append(j, '\n'))
	}
	for rail := range rails {
		test := fmt.Sprintf("TestPP08Bandwidth/rail%d/WRITE/1048576", rail)
		ev("run", test)
		for _, kv := range [][2]string{{"gdr.rail", fmt.Sprint(rail)}, {"gdr.peer", peer}, {"gdr.role", env["GDR_ROLE"]}, {"gdr.size", "1048576"}, {"gdr.op", "WRITE"}} {
			ev("attr", test, kv[0], kv[1])
		}
		if dead[peer] {
			ev("output", test, "    end_test.go:290: client: oob: "+peer+": no answer within 30s\n")
			ev("fail", test)
			continue
		}
		bw := 100.0
		if (self == slow[0] || peer == slow[0]) && rail == slow[1] {
			bw = 10
		}
		ev("attr", test, "gdr.bw_gbps", fmt.Sprintf("%.3f", bw))
		ev("pass", test)
	}
	require.NoError(t, os.WriteFile(filepath.Join(env["GDR_ROUND_REPORTS"], "test.json"), []byte(b.String()), 0o644))
}

// Six Slurm tasks run the ring and its re-pairing rounds through the command
// alone: n3's rail 1 is slow, n5 dies in round 0 (plans, never reports,
// never finishes). Round 0's barrier closes without n5, its partner of
// round 1 idles, and the merged judgement names n3's rail bad and n5 as
// stopped in round 0, not as bad hardware.
func TestSlurmRunEndToEnd(t *testing.T) {
	root := t.TempDir()
	base := map[string]string{"SLURM_JOB_ID": "777", "SLURM_JOB_NODELIST": "n[1-6]", "SLURM_NTASKS": "6", "SLURM_STEP_ID": "0",
		"GDR_REPORTS": root, "GDR_CLUSTER_SECRET": "0123456789abcdef0123456789abcdef", "GDR_PEER_SUFFIX": "-ib"}
	dead := map[string]bool{"n5": true}
	rounds := 0
	task := func(i int) map[string]string {
		e := map[string]string{"SLURM_PROCID": fmt.Sprint(i), "SLURMD_NODENAME": fmt.Sprintf("n%d", i+1)}
		for kk, v := range base {
			e[kk] = v
		}
		return e
	}
	var idled []string
	for k := 0; k < 10; k++ {
		var plans []string
		for i := range 6 {
			if dead[fmt.Sprintf("n%d", i+1)] && k > 0 {
				continue
			}
			e := task(i)
			var out, errb bytes.Buffer
			require.Equal(t, 0, run([]string{"plan", "-round", fmt.Sprint(k)}, lookup(e), &out, &errb), errb.String())
			env := evalShell(t, out.String())
			plans = append(plans, env["GDR_PLAN"])
			if env["GDR_PLAN"] == "idle" {
				if k < 2 { // a repair round idles whoever needs no re-pairing
					idled = append(idled, fmt.Sprintf("round %d %s", k, env["GDR_HOST_NAME"]))
				}
				require.Equal(t, 0, run([]string{"done", "-round", fmt.Sprint(k)}, lookup(e), &out, &errb), errb.String())
			}
			if env["GDR_PLAN"] == "done" {
				assert.Equal(t, "n1", env["GDR_MERGE_HOST"])
			}
			if env["GDR_PLAN"] != "run" {
				continue
			}
			if env["GDR_ROLE"] == "client" {
				assert.True(t, strings.HasPrefix(env["GDR_PEER"], env["GDR_PEER_NAME"]+"-ib:"), env["GDR_PEER"])
			} else {
				assert.Regexp(t, `^:\d+$`, env["GDR_LISTEN"])
			}
			if dead[env["GDR_HOST_NAME"]] {
				continue
			}
			suiteRound(t, env, 2, dead, [2]any{"n3", 1})
			require.Equal(t, 0, run([]string{"done", "-round", fmt.Sprint(k)}, lookup(e), &out, &errb), errb.String())
		}
		if plans[0] == "done" {
			for _, p := range plans {
				assert.Equal(t, "done", p, "every task agrees the run is over")
			}
			break
		}
		// The barrier: the first task's timeout closes it without n5.
		for i := range 6 {
			if dead[fmt.Sprintf("n%d", i+1)] {
				continue
			}
			var out, errb bytes.Buffer
			require.Equal(t, 0, run([]string{"wait", "-round", fmt.Sprint(k), "-timeout", "20ms"}, lookup(task(i)), &out, &errb), errb.String())
			if k == 0 && i == 0 {
				assert.Contains(t, errb.String(), "round 0: 1 of 6 hosts did not finish: n5 (closed by n1 at ")
				assert.Contains(t, errb.String(), "they stopped in it; the run goes on without them")
			}
			if k > 0 {
				assert.Empty(t, errb.String(), "round %d waits for the five: every one came", k)
			}
		}
		rounds++
	}
	assert.Equal(t, 3, rounds, "two ring rounds and one re-pairing round")
	assert.Equal(t, []string{"round 1 n4"}, idled, "n5's partner of round 1 idles")
	b, err := os.ReadFile(filepath.Join(cluster.RoundDir(root, "n4", 1), "plan.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"peer_stopped": "n5"`)

	// n5 comes back: it is too late.
	var out, errb bytes.Buffer
	assert.Equal(t, exitLate, run([]string{"wait", "-round", "0"}, lookup(task(4)), &out, &errb))
	assert.Contains(t, errb.String(), "n5 finished round 0 after its barrier closed at ")

	// Judged outside the job: hosts come from the plans.
	out.Reset()
	outside := lookup(map[string]string{"GDR_REPORTS": root})
	require.Equal(t, 0, run([]string{"isolate", "-json"}, outside, &out, &errb), errb.String())
	var sum isolate.Summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &sum))
	var got []string
	for _, s := range sum.Suspects {
		got = append(got, fmt.Sprintf("%s/%d %s", s.Host, s.Rail, s.Verdict))
	}
	assert.Equal(t, []string{"n3/1 bad"}, got)
	assert.Empty(t, sum.Links)
	require.Len(t, sum.Hosts, 6)
	assert.Equal(t, "stopped in round 0", sum.Hosts[4].Liveness)
	assert.Empty(t, sum.Hosts[4].BadRails)

	out.Reset()
	require.Equal(t, 0, run([]string{"isolate"}, outside, &out, &errb), errb.String())
	assert.Contains(t, out.String(), "6 hosts, 2 rails")
	assert.Contains(t, out.String(), "BAD      n3 rail 1: n3 rail 1 failed with 3 partners that passed with others")
	assert.Contains(t, out.String(), "slow 10 < 50 Gbit/s")
	assert.Contains(t, out.String(), "LEFT     n5 stopped in round 0: its run did not finish (no hardware verdict)")

	// Plans on disk carry no secret.
	b, err = os.ReadFile(filepath.Join(cluster.RoundDir(root, "n1", 0), "plan.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "0123456789abcdef")
}

func TestCommandErrors(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(nil, lookup(nil), &out, &errb))
	assert.Equal(t, 2, run([]string{"frobnicate"}, lookup(nil), &out, &errb))
	errb.Reset()
	assert.Equal(t, 1, run([]string{"plan"}, lookup(nil), &out, &errb))
	assert.Contains(t, errb.String(), "plan needs -round K")
	errb.Reset()
	assert.Equal(t, 1, run([]string{"plan", "-round", "0"}, lookup(nil), &out, &errb))
	assert.Contains(t, errb.String(), "neither SLURM_JOB_ID (srun) nor JOB_COMPLETION_INDEX")
	errb.Reset()
	k8s := map[string]string{"JOB_COMPLETION_INDEX": "0", "GDR_K8S_COMPLETIONS": "2", "GDR_K8S_JOB_NAME": "gdr", "GDR_K8S_SERVICE": "gdr"}
	assert.Equal(t, 1, run([]string{"plan", "-round", "0"}, lookup(k8s), &out, &errb))
	assert.Contains(t, errb.String(), "GDR_CLUSTER_SECRET (or GDR_CLUSTER_SECRET_FILE) is not set")
	errb.Reset()
	k8s["GDR_PAIRING"] = "mesh"
	assert.Equal(t, 1, run([]string{"hosts"}, lookup(k8s), &out, &errb))
	assert.Contains(t, errb.String(), `GDR_PAIRING="mesh"`)
	delete(k8s, "GDR_PAIRING")
	out.Reset()
	assert.Equal(t, 0, run([]string{"hosts", "-addrs"}, lookup(k8s), &out, &errb))
	assert.Equal(t, "gdr-0.gdr\ngdr-1.gdr\n", out.String())
}

// plan decides whether a round soaks with the suite's own parser of
// GDR_SOAK (config.ParseSoak): every spelling of zero is no soak, and a
// host idle in round 0 of a ring of three runs its first round without a
// soak that was asked for, and says why; a bad value fails plan.
func TestPlanSoakSkip(t *testing.T) {
	skip := "this host's first round was round 1, not round 0 (idle then): a cluster run soaks in round 0 only, where both ends of every pair start the soak together"
	for _, c := range []struct {
		soak string // "unset": not set; "empty": set to ""
		asks bool
	}{{"00", false}, {"0.0h", false}, {"0", false}, {"unset", false}, {"empty", false}, {"0m0s", false}, {"90s", true}, {"2h", true}, {"bogus", false}} {
		t.Run(c.soak, func(t *testing.T) {
			root := t.TempDir()
			task := func(i int) map[string]string {
				e := map[string]string{"SLURM_JOB_ID": "778", "SLURM_JOB_NODELIST": "n[1-3]", "SLURM_NTASKS": "3", "SLURM_PROCID": fmt.Sprint(i),
					"GDR_REPORTS": root, "GDR_CLUSTER_SECRET": "0123456789abcdef0123456789abcdef"}
				switch c.soak {
				case "unset":
				case "empty":
					e["GDR_SOAK"] = ""
				default:
					e["GDR_SOAK"] = c.soak
				}
				return e
			}
			if c.soak == "bogus" {
				var out, errb bytes.Buffer
				assert.Equal(t, 1, run([]string{"plan", "-round", "0"}, lookup(task(0)), &out, &errb))
				assert.Contains(t, errb.String(), `GDR_SOAK="bogus" is not valid`)
				assert.Empty(t, out.String())
				return
			}
			idle := -1
			for k := range 2 {
				for i := range 3 {
					var out, errb bytes.Buffer
					require.Equal(t, 0, run([]string{"plan", "-round", fmt.Sprint(k)}, lookup(task(i)), &out, &errb), errb.String())
					env := evalShell(t, out.String())
					got, ok := env["GDR_PLAN_SOAK_SKIP"]
					require.True(t, ok, "always assigned: %s", out.String())
					if k == 0 && env["GDR_PLAN"] == "idle" {
						idle = i
					}
					want := ""
					if c.asks && k == 1 && i == idle {
						want = skip
					}
					assert.Equal(t, want, got, "round %d task %d (idle in round 0: task %d)", k, i, idle)
				}
			}
			require.GreaterOrEqual(t, idle, 0, "a ring of three leaves one host idle in round 0")
		})
	}
}
