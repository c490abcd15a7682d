package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jstemmer/go-junit-report/v2/junit"
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
	return clusterFolderWith(t, slow, nil)
}

// clusterFolderWith is clusterFolder where fail[host] is also a rail whose
// pairs fail their test on both ends (a partner that stalls).
func clusterFolderWith(t *testing.T, slow, fail map[string]int) string {
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
					result := "pass"
					if r, ok := fail[me]; ok && r == rail {
						result = "fail"
					}
					if r, ok := fail[peer]; ok && r == rail {
						result = "fail"
					}
					if result == "fail" {
						evs = append(evs, Event{Action: "output", Package: pkg, Test: name, Output: "    pp_test.go:40: RDMA WRITE timed out after 10s: the peer stopped answering\n"})
					}
					evs = append(evs, Event{Action: result, Package: pkg, Test: name, Elapsed: 1})
				}
				top := "pass"
				if _, ok := fail[me]; ok {
					top = "fail"
				}
				if _, ok := fail[peer]; ok {
					top = "fail"
				}
				evs = append(evs, Event{Action: top, Package: pkg, Test: "TestPP08Bandwidth"}, Event{Action: top, Package: pkg})
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

	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5}, "")
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
	for _, s := range parseJUnit(t, ju.Bytes()).Suites {
		if s.Hostname == "vm1" {
			assert.NotContains(t, s.Name, "round", "the rounds share the host's suite name")
		}
	}

	// make report / LoadDir: the same hosts, without the analysis.
	runs2, err := LoadDir(root)
	require.NoError(t, err)
	assert.Len(t, runs2, 4)
}

// The job names a host by its task (a Kubernetes pod's gdrconf-<i>); the
// merge keeps the machine's own host name as node.
func TestClusterMergeKeepsNode(t *testing.T) {
	root := clusterFolder(t, nil)
	nameHost(t, root, "vm2", "rack1-node2")
	runs, _, err := LoadCluster(root, isolate.Options{MinFraction: 0.5}, "")
	require.NoError(t, err)
	require.Len(t, runs, 4)
	assert.Equal(t, "vm2", runs[1].Host.Host)
	assert.Equal(t, "rack1-node2", runs[1].Host.Node)
	assert.Empty(t, runs[0].Host.Node, "its folder and host.json agree: nothing to keep")
	var js bytes.Buffer
	rep := Build(runs)
	require.NoError(t, rep.WriteJSON(&js))
	assert.Contains(t, js.String(), `"node": "rack1-node2"`)
}

// nameHost makes host's host.json in every round say name: the machine's
// own host name, where the job's host list names it by its task.
func nameHost(t *testing.T, root, host, name string) {
	t.Helper()
	for _, round := range []string{"round-0", "round-1"} {
		dir := filepath.Join(root, host, round)
		id, err := ReadIdentity(filepath.Join(dir, HostFile))
		require.NoError(t, err)
		id.Host = name
		require.NoError(t, WriteIdentity(dir, id))
	}
}

// The part to pull names the machine, not only the pod: a slow rail, a
// slow host and a slow link, each on a host the job renamed.
func TestClusterPartNamesNode(t *testing.T) {
	root := clusterFolder(t, map[string]int{"vm2": 1})
	nameHost(t, root, "vm2", "rack1-node2")
	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5}, "")
	require.NoError(t, err)
	rep := Build(runs)
	rep.SetCluster(a)
	require.Len(t, rep.Findings.Suspects, 1)
	require.NotNil(t, rep.Findings.Suspects[0].AtFault)
	want := "nic: vm2 (node rack1-node2) rail 1; medium confidence"
	assert.Contains(t, rep.Findings.Suspects[0].AtFault.String(), want)
	var txt bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "at fault: "+want)
	// The hosts tables, the first thing a person reads, name the node too.
	assert.Regexp(t, `(?m)^vm2 \(node rack1-node2\) +NOT QUALIFIED`, txt.String())
	var md, page bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "| vm2 (node rack1-node2) | NOT QUALIFIED")
	assert.Contains(t, md.String(), "| host | vm2 |\n| node | rack1-node2 |\n")
	require.NoError(t, rep.WriteHTML(&page))
	assert.Contains(t, page.String(), `<a href="#host-vm2">vm2 (node rack1-node2)</a>`)
	// The path and the host, from the rule itself.
	r := &Report{Hosts: []*HostResult{{Identity: Identity{Host: "gdrconf-0", Node: "vm3"}}, {Identity: Identity{Host: "gdrconf-1"}}}}
	assert.Equal(t, "the path between gdrconf-0 (node vm3) and gdrconf-1 on rail 0",
		r.clusterPart(ClusterFinding{Host: "gdrconf-0", Peer: "gdrconf-1", Part: PartLink, Rail: 0}).Name)
	assert.Equal(t, "host gdrconf-1", r.clusterPart(ClusterFinding{Host: "gdrconf-1", Part: PartHost}).Name)
	assert.Equal(t, "host gdrconf-0 (node vm3)", r.clusterPart(ClusterFinding{Host: "gdrconf-0", Part: PartHost}).Name)
}

func TestClusterMergeAllGood(t *testing.T) {
	root := clusterFolder(t, nil)
	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5}, "")
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
	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5}, "")
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

// clusterJUnit renders rep's junit.xml and reads it back.
func clusterJUnit(t *testing.T, rep *Report) JUnit {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, rep.WriteJUnit(&b))
	doc, err := ParseJUnit(&b)
	require.NoError(t, err)
	return doc
}

func suiteNamed(t *testing.T, doc JUnit, name string) JUnitSuite {
	t.Helper()
	s, ok := suitesByName(doc)[name]
	if !ok {
		t.Fatalf("no suite %s in %d suites", name, len(doc.Suites))
	}
	return s
}

// casesWith names the cases of s whose result (pick: Failure, Error)
// is set, and checks that its message says msg.
func casesWith(t *testing.T, s JUnitSuite, pick func(JUnitCase) *junit.Result, msg string) []string {
	t.Helper()
	var out []string
	for _, c := range s.Cases {
		if r := pick(c); r != nil {
			out = append(out, c.Name)
			assert.Contains(t, r.Message, msg, c.Name)
		}
	}
	return out
}

func mergeCluster(t *testing.T, root string) *Report {
	t.Helper()
	runs, a, err := LoadCluster(root, isolate.Options{MinFraction: 0.5}, "")
	require.NoError(t, err)
	rep := Build(runs)
	rep.SetCluster(a)
	return rep
}

// A planted slow rail (vm3 rail 1) passes every test, yet the merge fails:
// the link suite fails exactly the slow links, the isolation suite names
// the rail, the verdict and the exit status are NOT QUALIFIED's.
func TestClusterSlowRailIsAVerdict(t *testing.T) {
	rep := mergeCluster(t, clusterFolder(t, map[string]int{"vm3": 1}))
	assert.Equal(t, NotQualified, rep.Verdict.Verdict)
	assert.Equal(t, 1, rep.ExitCode())
	assert.Contains(t, rep.Verdict.Advice, "cluster isolation found bad: vm3 rail 1")
	for _, h := range rep.Hosts {
		if h.Identity.Host == "vm3" {
			assert.Equal(t, "NOT QUALIFIED (vm3 rail 1 bad)", h.Verdict.Line)
		} else {
			assert.NotEqual(t, NotQualified, h.Verdict.Verdict, "%s is healthy", h.Identity.Host)
		}
	}

	doc := clusterJUnit(t, rep)
	links := suiteNamed(t, doc, LinkSuite)
	require.Len(t, links.Cases, 8, "4 pairs x 2 rails")
	var failed []string
	for _, c := range links.Cases {
		assert.Contains(t, c.Name, " <-> ")
		assert.Equal(t, "cluster.links", c.Classname)
		assert.NotContains(t, c.Name, "[vm", "a link case names both ends, not one host")
		if c.Failure != nil {
			failed = append(failed, c.Name)
			assert.Regexp(t, `slow: 0\.01 Gbit/s < floor 0\.1[34] Gbit/s \(GDR_PAIR_MIN_FRACTION 0\.5 x the median`, c.Failure.Message)
			assert.Contains(t, c.Failure.Data, "isolation: vm3 rail 1 bad")
		} else {
			assert.Nil(t, c.Error)
			assert.Nil(t, c.Skipped)
			// A passed case's evidence is its block in its suite's system-out.
			assert.Regexp(t, regexp.QuoteMeta(caseMark+c.Name)+"\n(.*\n)*"+`link .*: pass: 0\.2\d+ Gbit/s >= floor 0\.\d+ Gbit/s \(GDR_PAIR_MIN_FRACTION 0\.5 x the median`, links.SystemOut.Data, c.Name)
		}
	}
	assert.ElementsMatch(t, []string{"vm3 rail1 <-> vm4 rail1 [round 0]", "vm2 rail1 <-> vm3 rail1 [round 1]"}, failed)
	assert.Equal(t, 2, links.Failures)

	iso := suiteNamed(t, doc, IsolationSuite)
	require.Len(t, iso.Cases, 4, "vm3's rail, and vm1, vm2, vm4 cleared or good")
	assert.Equal(t, "vm3 rail 1 bad", iso.Cases[0].Name)
	require.NotNil(t, iso.Cases[0].Failure)
	assert.Contains(t, iso.Cases[0].Failure.Data, "round 1, rail 1, with vm2 (cleared): slow 0.01 Gbit/s < floor")
	assert.Equal(t, 1, iso.Failures)
	var passed []string
	for _, c := range iso.Cases[1:] {
		assert.Nil(t, c.Failure)
		assert.Nil(t, c.Error)
		passed = append(passed, c.Name)
	}
	assert.Equal(t, []string{"vm1 good: fast with 2 of 2 partners",
		"vm2 cleared: fast with 2 of 2 partners; its failed pairs are explained: vm3 rail 1 found bad",
		"vm4 cleared: fast with 2 of 2 partners; its failed pairs are explained: vm3 rail 1 found bad"}, passed)
	assert.Equal(t, 3, doc.Failures, "the two slow links and the rail; no host case failed")

	var js bytes.Buffer
	require.NoError(t, rep.WriteJSON(&js))
	var sum struct {
		Failed  int
		Verdict string
		Cluster struct {
			Verdict  string
			Suspects []struct {
				Host, Part, Verdict string
				Rail                int
				Evidence            []struct {
					Partner     string
					BWGbitS     float64 `json:"bw_gbit_s"`
					FloorGbitS  float64 `json:"floor_gbit_s"`
					FloorSource string  `json:"floor_source"`
				}
			}
			Cleared []struct{ Host, Fabric string }
		}
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &sum))
	assert.Equal(t, NotQualified, sum.Verdict)
	assert.Equal(t, 1, sum.Failed, "one host failed")
	assert.Equal(t, NotQualified, sum.Cluster.Verdict)
	require.Len(t, sum.Cluster.Suspects, 1)
	s := sum.Cluster.Suspects[0]
	assert.Equal(t, []string{"vm3", "rail", "bad"}, []string{s.Host, s.Part, s.Verdict})
	assert.Equal(t, 1, s.Rail)
	require.Len(t, s.Evidence, 2)
	for _, e := range s.Evidence {
		assert.Less(t, e.BWGbitS, e.FloorGbitS)
		assert.Contains(t, e.FloorSource, "GDR_PAIR_MIN_FRACTION")
	}
	assert.Len(t, sum.Cluster.Cleared, 3)

	var txt, md bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "GPUDirect RDMA qualification: NOT QUALIFIED")
	assert.Contains(t, txt.String(), "BAD      vm3 rail 1 (part: rail)")
	assert.Contains(t, txt.String(), "evidence: round 0, rail 1, with vm4 (cleared): slow 0.01 Gbit/s < floor 0.13 Gbit/s")
	assert.Contains(t, txt.String(), "CLEARED  vm2 cleared: fast with 2 of 2 partners")
	require.NoError(t, rep.WriteMarkdown(&md))
	assert.Contains(t, md.String(), "- **vm3 rail 1** (rail, bad)")
}

// vm3 rail 1 stalls: its partners' tests fail too, and are not held against
// them; vm3 fails, the others do not.
func TestClusterStalledRailFailsOnlyItsHost(t *testing.T) {
	rep := mergeCluster(t, clusterFolderWith(t, nil, map[string]int{"vm3": 1}))
	assert.Equal(t, 1, rep.ExitCode())
	for _, h := range rep.Hosts {
		var pp *ReqResult
		for _, rq := range h.Reqs {
			if rq.ID == "PP-08" {
				pp = rq
			}
		}
		require.NotNil(t, pp)
		switch h.Identity.Host {
		case "vm3":
			assert.Equal(t, NotQualified, h.Verdict.Verdict)
			assert.Equal(t, Fail, pp.Status, "vm3's own failure stands")
		case "vm2", "vm4":
			assert.NotEqual(t, NotQualified, h.Verdict.Verdict, "%s failed only with the bad rail: %s", h.Identity.Host, h.Verdict.Line)
			assert.Equal(t, Pass, pp.Status, "%s: passed with its other partner; the failed pair is the link's", h.Identity.Host)
			assert.Equal(t, 1, pp.Skip)
			assert.Contains(t, pp.Reason, "not held against "+h.Identity.Host+": vm3 rail 1 found bad by cluster isolation")
		default:
			assert.NotEqual(t, NotQualified, h.Verdict.Verdict)
		}
	}
	doc := clusterJUnit(t, rep)
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Failure == nil {
				continue
			}
			switch s.Name {
			case LinkSuite:
				assert.Contains(t, c.Name, "vm3 rail1")
			case IsolationSuite:
				assert.Equal(t, "vm3 rail 1 bad", c.Name)
			default:
				assert.Equal(t, "vm3/pingpong", s.Name, "only vm3's own cases fail: %s", c.Name)
			}
		}
	}
	assert.Contains(t, rep.Findings.Excused, "vm2: TestPP08Bandwidth/rail1/WRITE/65536 (round-1)")
}

func TestClusterAllFast(t *testing.T) {
	rep := mergeCluster(t, clusterFolder(t, nil))
	assert.Equal(t, 0, rep.ExitCode())
	assert.NotEqual(t, NotQualified, rep.Verdict.Verdict)
	assert.Equal(t, Qualified, rep.Findings.Verdict)
	assert.Empty(t, rep.Findings.Suspects)
	doc := clusterJUnit(t, rep)
	assert.Zero(t, doc.Failures)
	assert.Len(t, suiteNamed(t, doc, LinkSuite).Cases, 8)
	iso := suiteNamed(t, doc, IsolationSuite)
	require.Len(t, iso.Cases, 4)
	assert.Equal(t, "vm1 good: fast with 2 of 2 partners", iso.Cases[0].Name)
}

// Only round 0 ran and vm3 rail 1 stalls: vm3 and vm4 failed together and
// never passed with anyone on rail 1, so isolation cannot say which is bad.
func TestClusterInconclusive(t *testing.T) {
	root := clusterFolderWith(t, nil, map[string]int{"vm3": 1})
	for _, h := range []string{"vm1", "vm2", "vm3", "vm4"} {
		require.NoError(t, os.RemoveAll(cluster.RoundDir(root, h, 1)))
	}
	rep := mergeCluster(t, root)
	assert.Equal(t, Incomplete, rep.Verdict.Verdict, rep.Verdict.Line)
	assert.Equal(t, 0, rep.ExitCode(), "INCOMPLETE fails only under GDR_STRICT=1")
	assert.Equal(t, Incomplete, rep.Findings.Verdict)
	assert.Contains(t, rep.Findings.Line, "cluster isolation inconclusive: not isolated yet: vm3 rail 1 suspect, vm4 rail 1 suspect")
	assert.Contains(t, rep.Verdict.Advice, "cluster isolation inconclusive")
	assert.Contains(t, rep.Verdict.Line, "; cluster isolation inconclusive", "the headline says so too")
	for _, h := range rep.Hosts {
		assert.NotEqual(t, NotQualified, h.Verdict.Verdict, "%s: nothing was found bad: %s", h.Identity.Host, h.Verdict.Line)
	}
	doc := clusterJUnit(t, rep)
	assert.Equal(t, 1, doc.Failures, "only the link's case: no host case, no part pinned")
	errored := casesWith(t, suiteNamed(t, doc, IsolationSuite), func(c JUnitCase) *junit.Result { return c.Error }, "has not passed with anyone yet")
	assert.Equal(t, []string{"vm3 rail 1 suspect", "vm4 rail 1 suspect"}, errored)
	bad := casesWith(t, suiteNamed(t, doc, LinkSuite), func(c JUnitCase) *junit.Result { return c.Failure }, "RDMA WRITE timed out")
	assert.Equal(t, []string{"vm3 rail1 <-> vm4 rail1 [round 0]"}, bad, "the link's case fails; its hosts are not judged")
	var txt bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "SUSPECT  vm3 rail 1 (part: rail)")
}

// retested is the repair round that pairs every pair that failed in res
// again, its results st says (each pair's own round, after res's).
func retested(res []isolate.Result, st func(isolate.Result) isolate.Status) []isolate.Result {
	last := 0
	for _, r := range res {
		last = max(last, r.Round)
	}
	var out []isolate.Result
	for _, r := range res {
		if r.Status.Failed() {
			r.Round += last + 1
			r.Status = st(r)
			out = append(out, r)
		}
	}
	return out
}

// allPairs is every pair of hosts once ("all" pairing: 3 rounds for 4
// hosts), on rails 0 and 1, both ends' results; bad(a, b, rail) says the
// pair failed there.
func allPairs(hosts []string, bad func(a, b string, rail int) bool) []isolate.Result {
	var out []isolate.Result
	round := 0
	for i := range hosts {
		for j := i + 1; j < len(hosts); j++ {
			for rail := 0; rail < 2; rail++ {
				st := isolate.Pass
				if bad(hosts[i], hosts[j], rail) {
					st = isolate.Fail
				}
				out = append(out,
					isolate.Result{Host: hosts[i], Peer: hosts[j], Round: round, Rail: rail, Role: "server", Test: "TestPP03Write", Status: st},
					isolate.Result{Host: hosts[j], Peer: hosts[i], Round: round, Rail: rail, Role: "client", Test: "TestPP03Write", Status: st})
			}
			round++
		}
	}
	return out
}

func TestClusterFindingParts(t *testing.T) {
	hosts := []string{"vm1", "vm2", "vm3", "vm4"}
	judge := func(bad func(a, b string, rail int) bool, retest bool) *Report {
		var runs []Run
		for _, h := range hosts {
			runs = append(runs, Run{Host: Identity{Host: h}})
		}
		rep := Build(runs)
		res := allPairs(hosts, bad)
		if retest { // the failed pair meets again in a repair round, and fails again: the fault is static
			res = append(res, retested(res, func(isolate.Result) isolate.Status { return isolate.Fail })...)
		}
		rep.SetCluster(isolate.Analyze(hosts, res, isolate.Options{}))
		return rep
	}
	// A bad link: the merge fails, no host does.
	rep := judge(func(a, b string, rail int) bool { return a == "vm1" && b == "vm2" && rail == 0 }, true)
	assert.Equal(t, NotQualified, rep.Verdict.Verdict)
	assert.Contains(t, rep.Verdict.Line, "link vm1 <-> vm2 rail 0 bad")
	assert.Equal(t, 1, rep.ExitCode())
	for _, h := range rep.Hosts {
		assert.NotEqual(t, NotQualified, h.Verdict.Verdict, "a link is never one endpoint's: %s", h.Identity.Host)
	}
	require.Len(t, rep.Findings.Suspects, 1)
	assert.Equal(t, PartLink, rep.Findings.Suspects[0].Part)
	assert.Equal(t, []string{"link vm1 <-> vm2 rail 0 bad"},
		casesWith(t, suiteNamed(t, clusterJUnit(t, rep), IsolationSuite), func(c JUnitCase) *junit.Result { return c.Failure }, "failed together on rail 0"))

	// A host bad on every rail is one finding of part host.
	rep = judge(func(a, b string, rail int) bool { return a == "vm3" || b == "vm3" }, false)
	require.Len(t, rep.Findings.Suspects, 1)
	s := rep.Findings.Suspects[0]
	assert.Equal(t, []string{PartHost, "vm3"}, []string{s.Part, s.Host})
	assert.Equal(t, isolate.AllRails, s.Rail)
	assert.Len(t, s.Evidence, 6, "3 partners x 2 rails")
	for _, h := range rep.Hosts {
		assert.Equal(t, h.Identity.Host == "vm3", h.Verdict.Verdict == NotQualified, "%s: %s", h.Identity.Host, h.Verdict.Line)
	}
	assert.Equal(t, "NOT QUALIFIED (host vm3 bad)", rep.Hosts[2].Verdict.Line)
}

// The rail heatmap is coloured against each pair's floor, not relative to
// the other pairs: on a rail where one host is slow, the passing pairs are
// green and only the slow ones are outlined and off green.
func TestRailHeatAgainstFloor(t *testing.T) {
	rep := mergeCluster(t, clusterFolder(t, map[string]int{"vm3": 1}))
	cols, rows := rep.railHeat()
	require.Len(t, cols, 2)
	slow := 0
	for _, row := range rows {
		for _, c := range row.Cells {
			if c.Text == "" {
				continue
			}
			if strings.Contains(c.Text, "✗") {
				slow++
				assert.Contains(t, string(c.Style), "outline", row.Host)
				assert.NotContains(t, string(c.Style), "hsl(120", row.Host)
			} else {
				assert.Contains(t, string(c.Style), "hsl(120", "%s %s: a passing pair is green", row.Host, c.Text)
			}
		}
	}
	assert.Equal(t, 2, slow, "vm3's two rail-1 pairs")
}

// The page shows isolation's findings with their evidence and the cleared
// hosts, not only isolate's suspect table.
func TestClusterFindingsOnThePage(t *testing.T) {
	rep := mergeCluster(t, clusterFolder(t, map[string]int{"vm3": 1}))
	var b strings.Builder
	require.NoError(t, rep.WriteHTML(&b))
	page := b.String()
	i := strings.Index(page, `id="finding-list"`)
	require.GreaterOrEqual(t, i, 0)
	list := page[i:]
	list = list[:strings.Index(list, "</table>")]
	assert.Contains(t, list, "vm3 rail 1")
	assert.Contains(t, list, "bad")
	assert.Contains(t, list, "round ", "the evidence: each failed pair")
	assert.Contains(t, page, `id="cleared"`)
	assert.Contains(t, page, "vm2 cleared")
}

// A link that failed once and passed when re-tested is flaky: no part is
// found bad, the merged verdict stands and carries it as a flag, and its
// JUnit case passes saying what happened. Not re-tested, it stays a
// suspect: the merge is INCOMPLETE, never NOT QUALIFIED for one round.
func TestClusterFlakyAndSuspectLinks(t *testing.T) {
	hosts := []string{"vm1", "vm2", "vm3", "vm4"}
	var runs []Run
	for _, h := range hosts {
		runs = append(runs, Run{Host: Identity{Host: h}})
	}
	once := allPairs(hosts, func(a, b string, rail int) bool { return a == "vm1" && b == "vm2" && rail == 0 })
	passed := append(once, retested(once, func(isolate.Result) isolate.Status { return isolate.Pass })...)
	rep := Build(runs)
	rep.SetCluster(isolate.Analyze(hosts, passed, isolate.Options{}))
	assert.Empty(t, rep.Findings.Suspects)
	require.Len(t, rep.Findings.Flaky, 1)
	assert.Equal(t, "link vm1 <-> vm2 rail 0", rep.Findings.Flaky[0].Name())
	assert.Nil(t, rep.Findings.Flaky[0].AtFault, "no part at fault")
	assert.Contains(t, rep.Findings.Line, "1 link failed once and passed on re-test (flaky)")
	require.Len(t, rep.Verdict.Flags, 1)
	assert.Contains(t, rep.Verdict.Flags[0], "link vm1 <-> vm2 rail 0 flaky: vm1 and vm2 failed together on rail 0 in round 0 (fail) and passed when paired again in round 6")
	for _, h := range rep.Hosts {
		assert.NotEqual(t, NotQualified, h.Verdict.Verdict, h.Identity.Host)
	}
	iso := suiteNamed(t, clusterJUnit(t, rep), IsolationSuite)
	var flaky bool
	for _, c := range iso.Cases {
		if c.Name == "link vm1 <-> vm2 rail 0 flaky" {
			flaky = true
			assert.Nil(t, c.Failure)
			assert.Nil(t, c.Error)
		}
	}
	assert.True(t, flaky, "a case of its own")
	var txt bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "FLAKY    link vm1 <-> vm2 rail 0 (part: link)")

	rep = Build(runs)
	rep.SetCluster(isolate.Analyze(hosts, once, isolate.Options{}))
	require.Len(t, rep.Findings.Suspects, 1)
	assert.Equal(t, isolate.Suspected, rep.Findings.Suspects[0].Verdict)
	assert.Equal(t, PartLink, rep.Findings.Suspects[0].Part)
	assert.Equal(t, Incomplete, rep.Verdict.Verdict, "one round alone is not a bad link")
	assert.Contains(t, rep.Verdict.Advice, "link vm1 <-> vm2 rail 0 suspect")
}

// Hosts whose run did not finish: one did not start (it left no folder),
// one stopped in round 1. Each is NOT QUALIFIED as a run that did not
// finish, naming no part; its JUnit case is an error of type
// did_not_finish; the others are judged as usual.
func TestClusterRunsThatDidNotFinish(t *testing.T) {
	hosts := []string{"vm1", "vm2", "vm3", "vm4", "vm5"}
	live := isolate.Liveness{NotStarted: map[string]bool{"vm5": true}, Stopped: map[string]int{"vm4": 1}}
	var runs []Run
	for _, h := range hosts[:4] {
		runs = append(runs, Run{Host: Identity{Host: h}})
	}
	// vm1 met vm4 in round 1 and failed before any rail: vm4 died while
	// the two agreed their rails (as lab-cluster-live's kill showed).
	pkg := "round-1/github.com/gdrconf/gdrconf/conformance/pingpong"
	runs[0].Events = []Event{{Action: "start", Package: pkg}, {Action: "run", Package: pkg, Test: "TestPP05Read"},
		{Action: "attr", Package: pkg, Test: "TestPP05Read", Key: "gdr.req", Value: "PP-05"},
		{Action: "output", Package: pkg, Test: "TestPP05Read", Output: "    pp_test.go:40: agreeing the rails with the peer: oob: could not reach the server vm4:27536 within 45s\n"},
		{Action: "fail", Package: pkg, Test: "TestPP05Read", Elapsed: 45}, {Action: "fail", Package: pkg}}
	var res []isolate.Result
	add := func(round int, a, b string, st isolate.Status) {
		for rail := range 2 {
			res = append(res, isolate.Result{Host: a, Peer: b, Round: round, Rail: rail, Role: "server", Status: st, Test: "TestPP03Write"},
				isolate.Result{Host: b, Peer: a, Round: round, Rail: rail, Role: "client", Status: st, Test: "TestPP03Write"})
		}
	}
	add(0, "vm1", "vm2", isolate.Pass)
	add(0, "vm3", "vm4", isolate.Pass)
	add(1, "vm2", "vm3", isolate.Pass)
	add(1, "vm4", "vm1", isolate.Fail) // vm4 died: vm1 failed with it
	rep := Build(runs)
	rep.SetCluster(isolate.Analyze(hosts, res, isolate.Options{Live: live}))

	require.Len(t, rep.Hosts, 5, "the host that did not start has a place")
	byName := map[string]*HostResult{}
	for _, h := range rep.Hosts {
		byName[h.Identity.Host] = h
	}
	assert.Equal(t, "NOT QUALIFIED (did not start: its run did not finish)", byName["vm5"].Verdict.Line)
	assert.Equal(t, "NOT QUALIFIED (stopped in round 1: its run did not finish)", byName["vm4"].Verdict.Line)
	assert.Contains(t, byName["vm4"].Verdict.Advice, "vm4 stopped in round 1: it had not finished the round")
	assert.NotEqual(t, NotQualified, byName["vm1"].Verdict.Verdict, "its failure with vm4 is not its own: %s", byName["vm1"].Verdict.Line)
	assert.Contains(t, rep.Findings.Excused, "vm1: TestPP05Read (round-1)")
	for _, rq := range byName["vm1"].Reqs {
		if rq.ID == "PP-05" {
			assert.Contains(t, rq.Reason, "not held against vm1: its partner vm4 stopped in round 1")
		}
	}
	assert.Equal(t, NotQualified, rep.Verdict.Verdict)
	assert.Empty(t, rep.Findings.Suspects, "no part")
	require.Len(t, rep.Findings.Unfinished, 2)
	assert.Equal(t, ClusterUnfinished{Host: "vm4", Liveness: "stopped in round 1", Reason: rep.Findings.Unfinished[0].Reason}, rep.Findings.Unfinished[0])
	assert.Equal(t, "vm5", rep.Findings.Unfinished[1].Host)
	assert.Contains(t, rep.Findings.Line, "runs that did not finish (no part named): vm4 stopped in round 1, vm5 did not start")

	iso := suiteNamed(t, clusterJUnit(t, rep), IsolationSuite)
	var errs []string
	for _, c := range iso.Cases {
		if c.Error != nil {
			errs = append(errs, c.Name+": "+c.Error.Type)
			assert.NotContains(t, c.Error.Data, "at fault")
		}
	}
	assert.Equal(t, []string{"host vm4 stopped in round 1: did_not_finish", "host vm5 did not start: did_not_finish"}, errs)
	links := suiteNamed(t, clusterJUnit(t, rep), LinkSuite)
	for _, c := range links.Cases {
		if strings.Contains(c.Name, "vm4") && strings.Contains(c.Name, "round 1") {
			require.NotNil(t, c.Skipped, c.Name)
			assert.Contains(t, c.Skipped.Message, "not judged: vm4 stopped in round 1")
		}
	}
	sum := rep.Cluster
	assert.Equal(t, "did not start", sum.Hosts[4].Liveness)
	var txt bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	assert.Contains(t, txt.String(), "LEFT     vm5 did not start (no part named)")
	// Every format renders the host that left no folder.
	dir := t.TempDir()
	require.NoError(t, rep.WriteAll(dir))
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "Runs that did not finish (no part named)")
	assert.Contains(t, string(page), "vm5 did not start: it had not reached the start barrier")
	// summary.json names each host's liveness (docs/clusters.md), and
	// actions.txt drains both nodes saying why, naming no part.
	raw, err := os.ReadFile(filepath.Join(dir, SummaryJSON))
	require.NoError(t, err)
	var sj struct {
		Hosts []struct {
			Host, Liveness string
		}
	}
	require.NoError(t, json.Unmarshal(raw, &sj))
	got := map[string]string{}
	for _, h := range sj.Hosts {
		got[h.Host] = h.Liveness
	}
	assert.Equal(t, map[string]string{"vm1": "", "vm2": "", "vm3": "", "vm4": "stopped in round 1", "vm5": "did not start"}, got)
	act, err := os.ReadFile(filepath.Join(dir, ActionsFile))
	require.NoError(t, err)
	assert.Contains(t, string(act), "scontrol update nodename=vm4 state=drain reason='gdrconf: did_not_finish: stopped in round 1: its run did not finish'\n")
	assert.Contains(t, string(act), "scontrol update nodename=vm5 state=drain reason='gdrconf: did_not_finish: did not start: its run did not finish'\n")
	assert.Contains(t, string(act), "kubectl taint nodes vm4 gdrconf.io/not-qualified=did_not_finish:NoSchedule --overwrite\n")
	assert.NotContains(t, string(act), "nodename=vm1 ", "vm1's failure with vm4 is not its own")
}
