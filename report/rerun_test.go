package report

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/pairing"
)

// clusterRun writes one cluster run into root as deploy/rounds.sh leaves
// it: for each round of the schedule the planner gives hosts (groups
// order it, as GDR_TOPOLOGY_FILE does), each host's plan.json, test.json
// (PP-08 on two rails; slow[host] is a rail whose pairs crawl) and
// host.json (one machine-id per host across runs, started at at; the
// machine's own name node[host], a Kubernetes pod's node, where given).
func clusterRun(t *testing.T, root, run string, hosts []string, groups pairing.Groups, slow map[string]int, at time.Time, node ...map[string]string) {
	t.Helper()
	for k := 0; ; k++ {
		r, done := isolate.Round(pairing.Ring, hosts, k, 0, nil, isolate.Options{Groups: groups})
		if done {
			break
		}
		for _, p := range r.Pairs {
			for end, i := range []int{p.Server, p.Client} {
				me, peer, role := hosts[i], hosts[p.Client], "server"
				if end == 1 {
					peer, role = hosts[p.Server], "client"
				}
				require.NoError(t, cluster.WritePlan(root, cluster.Plan{Round: k, Host: me, Index: i, Hosts: len(hosts), Role: role, Peer: peer,
					PeerAddr: peer, Port: 20000, Pairing: "ring", Job: run, Run: run}))
				pkg := "github.com/gdrconf/gdrconf/conformance/pingpong"
				evs := []Event{{Action: "start", Package: pkg}, {Action: "run", Package: pkg, Test: "TestPP08Bandwidth"},
					{Action: "attr", Package: pkg, Test: "TestPP08Bandwidth", Key: "gdr.req", Value: "PP-08"}}
				for rail := 0; rail < 2; rail++ {
					bw := 390.0
					if r, ok := slow[me]; ok && r == rail {
						bw = 12
					}
					if r, ok := slow[peer]; ok && r == rail {
						bw = 12
					}
					name := fmt.Sprintf("TestPP08Bandwidth/rail%d/WRITE/1048576", rail)
					evs = append(evs, Event{Action: "run", Package: pkg, Test: name})
					for _, kv := range [][2]string{{"gdr.rail", fmt.Sprint(rail)}, {"gdr.role", role}, {"gdr.peer", peer},
						{"gdr.op", "WRITE"}, {"gdr.size_bytes", "1048576"}, {"gdr.bw_gbit_s", fmt.Sprint(bw)}} {
						evs = append(evs, Event{Action: "attr", Package: pkg, Test: name, Key: kv[0], Value: kv[1]})
					}
					evs = append(evs, Event{Action: "pass", Package: pkg, Test: name, Elapsed: 1})
				}
				evs = append(evs, Event{Action: "pass", Package: pkg, Test: "TestPP08Bandwidth"}, Event{Action: "pass", Package: pkg})
				zero := 0
				machine := me
				if len(node) > 0 {
					machine = node[0][me]
				}
				id := Identity{Host: machine, MachineID: "machine-" + machine, Time: at.Add(time.Duration(k) * time.Minute).UTC().Format(time.RFC3339), GoTestExit: &zero}
				require.NoError(t, SaveRun(cluster.RoundDir(root, me, k), Run{Host: id, Events: evs}))
			}
		}
	}
}

func byHost(r *Report) map[string]*HostResult {
	m := map[string]*HostResult{}
	for _, h := range r.Hosts {
		m[h.Identity.Host] = h
	}
	return m
}

// A first run finds n3's rail 1 bad; its actions.txt prints the rerun of
// n3 alone with two known-good nodes of that run, the topology file that
// puts n3 between them, and the -latest merge. Merged with the rerun, n3
// is judged by its latest run (repaired: passed; not repaired: bad again,
// with the rerun's evidence), its earlier run shown apart, and every node
// the rerun did not touch keeps the first run's verdict.
func TestRerunOnlyTheFailedNodes(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	hosts := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	first := filepath.Join(t.TempDir(), "cluster-100")
	clusterRun(t, first, "slurm/c/100", hosts, nil, map[string]int{"n3": 1}, t0)

	r1, err := FromDirs([]string{first}, Options{Isolate: isolate.Options{MinFraction: 0.5}})
	require.NoError(t, err)
	before := byHost(r1)
	require.Equal(t, NotQualified, before["n3"].Verdict.Verdict, before["n3"].Verdict.Line)
	for _, h := range []string{"n1", "n2", "n4", "n5", "n6"} {
		require.NotEqual(t, NotQualified, before[h].Verdict.Verdict, "%s: %s", h, before[h].Verdict.Line)
	}

	rr := r1.Rerun()
	require.NotNil(t, rr)
	assert.Equal(t, "slurm", rr.Engine)
	assert.Equal(t, []string{"n3"}, rr.Nodes)
	assert.Equal(t, []string{"n1", "n5"}, rr.Good, "two nodes that passed every pair, in the job's order (n2 and n4 failed theirs with n3)")
	var b bytes.Buffer
	require.NoError(t, r1.WriteActions(&b))
	acts := b.String()
	assert.Contains(t, acts, "scontrol update nodename=n3 state=drain reason='gdrconf: nic: n3 rail 1 bad: ", "the drain lines stay, naming the finding")
	assert.Contains(t, acts, "scontrol update nodename=n3 state=resume\n")
	assert.Contains(t, acts, "printf '%s\\n' 'rerun n3' 'known-good n[1,5]' >'"+first+"-rerun1.topology'\n")
	assert.Contains(t, acts, "sbatch -N3 -w n[1,3,5] --export=ALL,GDR_REPORTS="+first+"-rerun1,GDR_TOPOLOGY_FILE="+first+"-rerun1.topology dist/gdrconf.sbatch\n")
	assert.Contains(t, acts, "dist/bin/gdrreport -latest -out '"+first+"-merged' '"+first+"' '"+first+"-rerun1'\n")
	assert.NotContains(t, acts, "kubectl apply", "a Slurm run gets Slurm's commands")

	// The rerun as Slurm runs it: -w n[1,3,5] lists n1 n3 n5, and the
	// topology file's groups order the ring so that n3 meets n1 and n5.
	groups := pairing.Groups{"n3": 0, "n1": 1, "n5": 1}
	for _, repaired := range []bool{true, false} {
		rerun := filepath.Join(t.TempDir(), "cluster-100-rerun1")
		slow := map[string]int{}
		if !repaired {
			slow["n3"] = 1
		}
		clusterRun(t, rerun, "slurm/c/101", []string{"n1", "n3", "n5"}, groups, slow, t0.Add(2*time.Hour))

		_, err := FromDirs([]string{first, rerun}, Options{})
		require.Error(t, err, "two cluster runs merge only with -latest")
		assert.Contains(t, err.Error(), "pass -latest")

		m, err := FromDirs([]string{first, rerun}, Options{Latest: true, Isolate: isolate.Options{MinFraction: 0.5}})
		require.NoError(t, err)
		after := byHost(m)
		n3 := after["n3"]
		require.NotNil(t, n3)
		assert.True(t, n3.Latest, "n3 is judged by its rerun")
		earlier := 0
		for _, h := range m.Hosts {
			if h.Earlier {
				earlier++
				assert.True(t, strings.HasPrefix(h.Identity.Host, "n1 (earlier run") || strings.HasPrefix(h.Identity.Host, "n3 (earlier run") ||
					strings.HasPrefix(h.Identity.Host, "n5 (earlier run"), h.Identity.Host)
			}
		}
		assert.Equal(t, 3, earlier, "n1, n3 and n5 ran twice: their first runs are shown apart")
		if repaired {
			assert.NotEqual(t, NotQualified, n3.Verdict.Verdict, n3.Verdict.Line)
			for _, s := range m.Findings.Suspects {
				assert.NotEqual(t, "n3", s.Host, "the first run's finding on n3 is superseded: %s", s.Name())
			}
			assert.NotEqual(t, NotQualified, m.Verdict.Verdict, m.Verdict.Line)
			assert.Nil(t, m.Rerun(), "nothing left to rerun")
		} else {
			assert.Equal(t, NotQualified, n3.Verdict.Verdict)
			require.NotEmpty(t, m.Findings.Suspects)
			s := m.Findings.Suspects[0]
			assert.Equal(t, "n3 rail 1", s.Name())
			var partners []string
			for _, e := range s.Evidence {
				partners = append(partners, e.Partner)
			}
			assert.ElementsMatch(t, []string{"n1", "n5"}, partners, "judged by the rerun, with both known-good partners")
			assert.Equal(t, NotQualified, m.Verdict.Verdict)
		}
		// The nodes the rerun did not touch keep the first run's verdict,
		// their pairs with the old n3 still excused.
		for _, h := range []string{"n2", "n4", "n6"} {
			assert.Equal(t, before[h].Verdict, after[h].Verdict, h)
			assert.False(t, after[h].Earlier || after[h].Latest, h)
		}
		// Both runs' pairs are listed, named by run; the first run's failed
		// pairs with n3 are superseded, not failed, in JUnit.
		runs := map[string]int{}
		for _, p := range m.Cluster.Pairs {
			runs[p.Run]++
		}
		assert.Equal(t, map[string]int{"slurm/c/100": 12, "slurm/c/101": 6}, runs)
		var j bytes.Buffer
		require.NoError(t, m.WriteJUnit(&j))
		assert.Contains(t, j.String(), "n2 rail1 &lt;-&gt; n3 rail1 [run slurm/c/100 round 1]")
		assert.Contains(t, j.String(), "superseded: n3 was re-tested in run slurm/c/101, which judges it")

		// Given in either order, the runs merge the same: oldest first.
		m2, err := FromDirs([]string{rerun, first}, Options{Latest: true, Isolate: isolate.Options{MinFraction: 0.5}})
		require.NoError(t, err)
		assert.Equal(t, m.Verdict.Verdict, m2.Verdict.Verdict)
		for h, x := range byHost(m2) {
			assert.Equal(t, after[h].Verdict, x.Verdict, h)
		}
	}
}

// Under Kubernetes the rerun is the Job's edit: its completions and a node
// affinity on the machines' names (never the pods'), the failed one's and
// the known-good ones'.
func TestRerunKubernetes(t *testing.T) {
	pods := []string{"gdrconf-0", "gdrconf-1", "gdrconf-2", "gdrconf-3", "gdrconf-4", "gdrconf-5"}
	node := map[string]string{}
	for i, p := range pods {
		node[p] = fmt.Sprintf("gpu-%02d", 10+i)
	}
	first := filepath.Join(t.TempDir(), "gdrconf-uid1")
	clusterRun(t, first, "kubernetes/gdrconf/uid1", pods, nil, map[string]int{"gdrconf-2": 0}, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC), node)
	r, err := FromDirs([]string{first}, Options{Isolate: isolate.Options{MinFraction: 0.5}})
	require.NoError(t, err)
	rr := r.Rerun()
	require.NotNil(t, rr)
	assert.Equal(t, "kubernetes", rr.Engine)
	assert.Equal(t, []string{"gpu-12"}, rr.Nodes)
	assert.Equal(t, []string{"gpu-10", "gpu-14"}, rr.Good)
	var b bytes.Buffer
	require.NoError(t, r.WriteActions(&b))
	acts := b.String()
	assert.Contains(t, acts, "#   deploy/k8s/job.yaml: spec.completions: 3, and under spec.template.spec.affinity:\n")
	assert.Contains(t, acts, "- {key: kubernetes.io/hostname, operator: In, values: [gpu-12, gpu-10, gpu-14]}\n")
	assert.Contains(t, acts, "kubectl -n gdrconf delete job gdrconf --ignore-not-found && kubectl apply -k deploy/k8s\n")
	assert.NotContains(t, acts, "sbatch", "a Kubernetes run gets Kubernetes' edit")
	assert.NotContains(t, acts, "values: [gdrconf-", "pods are never named as nodes")
}
