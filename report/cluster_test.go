package report

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

// clusterFolder writes a 4-host, 2-rail ring run (rounds 0 and 1) as
// deploy/rounds.sh leaves it: plan.json from gdrcluster, test.json and
// host.json from the suite. slow[host] is a rail whose pairs crawl.
func clusterFolder(t *testing.T, slow map[string]int) string {
	t.Helper()
	root := t.TempDir()
	hosts := []string{"vm1", "vm2", "vm3", "vm4"}
	rounds := [][][2]int{{{0, 1}, {2, 3}}, {{1, 2}, {3, 0}}} // server, client
	for k, pairs := range rounds {
		for _, p := range pairs {
			for end, i := range p {
				role, peer := "server", hosts[p[1]]
				if end == 1 {
					role, peer = "client", hosts[p[0]]
				}
				me := hosts[i]
				require.NoError(t, cluster.WritePlan(root, cluster.Plan{Round: k, Host: me, Index: i, Hosts: 4, Role: role, Peer: peer,
					PeerAddr: peer, Port: 20000, Pairing: "ring", Job: "slurm/gdrlab/7"}))
				dir := cluster.RoundDir(root, me, k)
				var evs []Event
				pkg := "github.com/gdrconf/gdrconf/conformance/pingpong"
				evs = append(evs, Event{Action: "start", Package: pkg}, Event{Action: "run", Package: pkg, Test: "TestPP08Bandwidth"},
					Event{Action: "attr", Package: pkg, Test: "TestPP08Bandwidth", Key: "gdr.req", Value: "PP-08"})
				for rail := 0; rail < 2; rail++ {
					bw := 0.25 + 0.01*float64(i)
					if r, ok := slow[me]; ok && r == rail {
						bw = 0.01
					}
					if r, ok := slow[peer]; ok && r == rail {
						bw = 0.01
					}
					name := fmt.Sprintf("TestPP08Bandwidth/rail%d/WRITE/65536", rail)
					evs = append(evs, Event{Action: "run", Package: pkg, Test: name})
					for _, kv := range [][2]string{{"gdr.rail", fmt.Sprint(rail)}, {"gdr.role", role}, {"gdr.peer", "198.18.0.9:40000"},
						{"gdr.op", "WRITE"}, {"gdr.size_bytes", "65536"}, {"gdr.bw_gbit_s", fmt.Sprintf("%.3f", bw)}} {
						evs = append(evs, Event{Action: "attr", Package: pkg, Test: name, Key: kv[0], Value: kv[1]})
					}
					evs = append(evs, Event{Action: "pass", Package: pkg, Test: name, Elapsed: 1})
				}
				evs = append(evs, Event{Action: "pass", Package: pkg, Test: "TestPP08Bandwidth"}, Event{Action: "pass", Package: pkg})
				zero := 0
				require.NoError(t, SaveRun(dir, Run{Host: Identity{Host: me, Role: role, Peer: peer, GoTestExit: &zero}, Events: evs}))
			}
		}
	}
	// The lab's own files beside the hosts are not hosts.
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".lab"), 0o755))
	return root
}

func TestClusterMerge(t *testing.T) {
	root := clusterFolder(t, map[string]int{"vm3": 1})
	require.True(t, IsCluster(root))
	assert.False(t, IsCluster(filepath.Join(root, "vm1")), "a host folder is not a cluster folder")

	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5})
	require.NoError(t, err)
	require.Len(t, runs, 4, "one run per host, its rounds merged")
	for i, r := range runs {
		assert.Equal(t, fmt.Sprintf("vm%d", i+1), r.Host.Host)
		assert.Empty(t, r.Host.Role, "a host has a role per round, not one")
	}
	assert.Equal(t, "round-0/github.com/gdrconf/gdrconf/conformance/pingpong", runs[0].Events[0].Package)

	rep := Build(runs)
	rep.SetCluster(a)
	for _, h := range rep.Hosts {
		pp := h.Reqs[0]
		for _, rq := range h.Reqs {
			if rq.ID == "PP-08" {
				pp = rq
			}
		}
		assert.Equal(t, Pass, pp.Status, h.Identity.Host)
		assert.Equal(t, 4, pp.Cases, "%s: 2 rails x 2 rounds", h.Identity.Host)
	}

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var sum struct {
		Hosts []struct {
			Host, Verdict, Fabric string
			BadRails              []int `json:"bad_rails"`
		}
		Pairs []struct {
			Round   int
			A, B    string
			Rail    int
			Status  string
			BWGbitS float64 `json:"bw_gbit_s"`
		}
		Suspects []struct {
			Host    string
			Rail    int
			Verdict string
		}
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &sum))
	require.Len(t, sum.Hosts, 4)
	assert.Equal(t, "bad", sum.Hosts[2].Fabric)
	assert.Equal(t, []int{1}, sum.Hosts[2].BadRails)
	assert.Equal(t, "cleared", sum.Hosts[1].Fabric, "vm2 met the bad rail and passed with vm1")
	assert.Equal(t, "good", sum.Hosts[0].Fabric)
	assert.Len(t, sum.Pairs, 8, "4 pairs x 2 rails")
	slow := 0
	for _, p := range sum.Pairs {
		assert.Positive(t, p.BWGbitS)
		if p.Status == "slow" {
			slow++
			assert.Equal(t, 1, p.Rail)
			assert.True(t, p.A == "vm3" || p.B == "vm3", "%+v", p)
		}
	}
	assert.Equal(t, 2, slow)
	require.Len(t, sum.Suspects, 1)
	assert.Equal(t, "vm3", sum.Suspects[0].Host)
	assert.Equal(t, 1, sum.Suspects[0].Rail)
	assert.Equal(t, "bad", sum.Suspects[0].Verdict)

	var txt, md, html, ju bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "Cluster: 8 pair results on 2 rails in 2 rounds; 1 suspects")
	assert.Contains(t, txt.String(), "BAD      vm3 rail 1")
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| 1 | vm2 | vm3 | 1 | slow |")
	require.NoError(t, rep.WriteHTML(&html))
	assert.Contains(t, html.String(), `id="railheat"`)
	assert.Contains(t, html.String(), "vm2 – vm3 (round 1)")
	assert.Contains(t, html.String(), "✗ slow")
	assert.Contains(t, html.String(), `id="suspect-list"`)
	require.NoError(t, rep.WriteJUnit(&ju))
	assert.Contains(t, ju.String(), `name="TestPP08Bandwidth/rail1/WRITE/65536 (round-1) [vm3]"`, "a test once per round, told apart")
	assert.Equal(t, 1, strings.Count(ju.String(), `name="vm1/pingpong"`), "the rounds share the host's suite")

	// make report / LoadDir: the same hosts, without the analysis.
	runs2, err := LoadDir(root)
	require.NoError(t, err)
	assert.Len(t, runs2, 4)
}

func TestClusterMergeAllGood(t *testing.T) {
	root := clusterFolder(t, nil)
	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5})
	require.NoError(t, err)
	rep := Build(runs)
	rep.SetCluster(a)
	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	assert.Contains(t, js.String(), `"suspects": []`)
	assert.Contains(t, js.String(), `"fabric": "good"`)
}

func TestClusterMissingRound(t *testing.T) {
	root := clusterFolder(t, nil)
	// vm4's round 1 never ran the suite: its pair with vm1 counts as failed.
	require.NoError(t, os.Remove(filepath.Join(cluster.RoundDir(root, "vm4", 1), EventsFile)))
	require.NoError(t, os.Remove(filepath.Join(cluster.RoundDir(root, "vm4", 1), HostFile)))
	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5})
	require.NoError(t, err)
	require.Len(t, runs, 4)
	rep := Build(runs)
	rep.SetCluster(a)
	missing := 0
	for _, p := range rep.Cluster.Pairs {
		if p.Status == isolate.Missing {
			missing++
		}
	}
	assert.Positive(t, missing)
}

func TestClusterClearedButFailed(t *testing.T) {
	c := &isolate.Summary{Hosts: []isolate.Host{
		{Host: "vm1", Verdict: "INCOMPLETE (39 not run)", Fabric: isolate.Good},
		{Host: "vm2", Verdict: "NOT QUALIFIED (1)", Fabric: isolate.Cleared},
		{Host: "vm3", Verdict: "NOT QUALIFIED (2)", Fabric: isolate.Bad},
		{Host: "vm4", Verdict: "INCOMPLETE (39 not run)", Fabric: isolate.Cleared},
	}}
	got := clearedButFailed(c)
	require.Len(t, got, 1, "only a failed host whose fabric was cleared gets the note: %v", got)
	assert.Contains(t, got[0], "vm2 is NOT QUALIFIED (1), but its fabric was cleared")
	assert.Contains(t, got[0], "known-good partner")
}
