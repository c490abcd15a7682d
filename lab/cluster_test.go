package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/lab/vm"
	"github.com/gdrconf/gdrconf/report"
)

func TestParseDegrade(t *testing.T) {
	d, err := ParseDegrade(DefaultDegrade, 4, 2)
	require.NoError(t, err)
	assert.Equal(t, []Degrade{{Host: "vm3", Rail: 1, Netem: []string{"delay", "250ms"}, Spec: "vm3:1:delay=250ms"},
		{Host: "vm1", Rail: 0, To: "vm2", Netem: []string{"delay", "250ms"}, Spec: "vm1:0:delay=250ms,to=vm2"}}, d)
	d, err = ParseDegrade(HostDegrade, 4, 2)
	require.NoError(t, err)
	assert.Equal(t, []Degrade{{Host: "vm2", Rail: isolate.AllRails, Netem: []string{"delay", "250ms"}, Spec: "vm2:*:delay=250ms"}}, d)

	d, err = ParseDegrade(" vm2:0:loss=10%  vm4:1:delay=10ms,loss=1.5% ", 4, 2)
	require.NoError(t, err)
	require.Len(t, d, 2)
	assert.Equal(t, []string{"loss", "10%"}, d[0].Netem)
	assert.Equal(t, []string{"delay", "10ms", "loss", "1.5%"}, d[1].Netem)

	d, err = ParseDegrade("vm2:*:delay=250ms vm1:0:delay=250ms,to=vm2 vm4:1:to=vm3,loss=1%", 4, 2)
	require.NoError(t, err)
	require.Len(t, d, 3)
	assert.Equal(t, Degrade{Host: "vm2", Rail: isolate.AllRails, Netem: []string{"delay", "250ms"}, Spec: "vm2:*:delay=250ms"}, d[0])
	assert.Equal(t, report.PartHost, d[0].Kind())
	assert.Equal(t, "host vm2", d[0].Name())
	assert.Equal(t, Degrade{Host: "vm1", Rail: 0, To: "vm2", Netem: []string{"delay", "250ms"}, Spec: "vm1:0:delay=250ms,to=vm2"}, d[1])
	assert.Equal(t, report.PartLink, d[1].Kind())
	assert.Equal(t, "link vm1 <-> vm2 rail 0", d[1].Name())
	assert.Equal(t, []string{"loss", "1%"}, d[2].Netem, "to= is not a netem argument")
	assert.Equal(t, "vm3", d[2].To)

	for _, c := range []struct {
		d     Degrade
		a, b  string
		rail  int
		slows bool
	}{
		{d[0], "vm1", "vm2", 0, true}, {d[0], "vm2", "vm4", 1, true}, {d[0], "vm1", "vm3", 1, false},
		{d[1], "vm2", "vm1", 0, true}, {d[1], "vm1", "vm4", 0, false}, {d[1], "vm1", "vm2", 1, false}, {d[1], "vm3", "vm2", 0, false},
	} {
		assert.Equal(t, c.slows, c.d.Slows(c.a, c.b, c.rail), "%s on %s-%s rail %d", c.d.Spec, c.a, c.b, c.rail)
	}

	for _, none := range []string{"", "none", "  "} {
		d, err = ParseDegrade(none, 4, 2)
		require.NoError(t, err)
		assert.Empty(t, d)
	}
	for spec, want := range map[string]string{
		"vm5:1:delay=20ms":                       `host "vm5" is not one of vm1..vm4`,
		"node3:1:delay=20ms":                     `host "node3"`,
		"vm3:2:delay=20ms":                       `rail "2" is not one of 0..1`,
		"vm3:1":                                  "not three fields",
		"vm3:1:jitter=5ms":                       `"jitter=5ms" is not kind=value`,
		"vm3:1:delay=20":                         `delay="20": want a time like 20ms`,
		"vm3:1:loss=10":                          `loss="10": want a percentage like 10%`,
		"vm3:1:delay=1ms;reboot":                 `delay="1ms;reboot"`,
		"vm3:1:delay=1ms vm3:1:loss=1%":          "vm3:1 is degraded twice",
		"vm3:1:rate=fast":                        `rate="fast": want a rate like 10mbit`,
		"vm3:1:delay=20ms,delay=5ms extra":       "not three fields",
		"vm3:x:delay=20ms":                       `rail "x" is not one of 0..1, or * for every rail`,
		"vm3:*:delay=1ms vm3:0:loss=1%":          "vm3:0 is degraded twice",
		"vm3:0:delay=1ms,to=vm3":                 "to=vm3 is the host itself",
		"vm3:0:delay=1ms,to=vm9":                 `to="vm9": want the other end of the path, one of vm1..vm4`,
		"vm3:0:delay=1ms,to=vm1,to=vm2":          "to= given twice",
		"vm3:*:delay=1ms,to=vm1":                 "to= needs one rail, not *",
		"vm3:0:to=vm1":                           "no impairment",
		"vm3:0:delay=1ms vm3:0:to=vm1,delay=2ms": "vm3:0 is degraded twice",
	} {
		_, err := ParseDegrade(spec, 4, 2)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), want, spec)
		assert.Contains(t, err.Error(), "LAB_DEGRADE entry", spec)
	}
}

func TestSlurmConf(t *testing.T) {
	// GPUs: GRES, and the cgroup plugins that give each step a device
	// cgroup of its GPUs (cgroup.conf ConstrainDevices=yes).
	c := SlurmConf("gdrlab", ClusterHosts(4), "/shared/lab", 2)
	for _, want := range []string{"ClusterName=gdrlab\n", "SlurmctldHost=vm1\n", "AuthType=auth/munge\n", "SlurmUser=slurm\n",
		"NodeName=vm1,vm2,vm3,vm4 CPUs=1 Gres=gpu:2 State=UNKNOWN\n", "PartitionName=lab Nodes=ALL Default=YES", "SlurmdLogFile=/shared/lab/slurmd-%n.log\n",
		"GresTypes=gpu\n", "ProctrackType=proctrack/cgroup\n", "TaskPlugin=task/cgroup\n", "MinJobAge=300\n"} {
		assert.Contains(t, c, want)
	}
	assert.Equal(t, "# gres.conf of the gdrconf cluster lab\nAutoDetect=off\nName=gpu File=/dev/nvidia[0-1]\n", GresConf(2))
	assert.Contains(t, GresConf(1), "Name=gpu File=/dev/nvidia0\n")
	assert.Equal(t, "# cgroup.conf of the gdrconf cluster lab\nCgroupPlugin=cgroup/v1\nCgroupAutomount=no\nConstrainDevices=yes\n", CgroupConf(2))
	assert.Equal(t, []string{"freezer", "devices"}, cgroup1Controllers, "proctrack/cgroup's and ConstrainDevices' hierarchies")
	// No GPUs (LAB_EMULATED_GPU=0): no GRES, nothing constrained.
	c = SlurmConf("gdrlab", ClusterHosts(2), "/shared/lab", 0)
	for _, want := range []string{"NodeName=vm1,vm2 CPUs=1 State=UNKNOWN\n", "ProctrackType=proctrack/linuxproc\n", "TaskPlugin=task/none\n"} {
		assert.Contains(t, c, want)
	}
	assert.NotContains(t, c, "Gres")
	assert.NotContains(t, CgroupConf(0), "ConstrainDevices")
	etc := clusterEtc([]string{"vm1", "vm2"}, []string{"198.18.0.1", "198.18.0.2"})
	assert.Equal(t, "127.0.0.1\tlocalhost\n198.18.0.1\tvm1\n198.18.0.2\tvm2\n", string(etc["/etc/hosts"].Bytes))
	assert.Contains(t, string(etc["/etc/passwd"].Bytes), "slurm:x:64030:64030:")
	assert.Contains(t, string(etc["/etc/group"].Bytes), "munge:x:105:")
	assert.Contains(t, string(etc["/etc/nsswitch.conf"].Bytes), "hosts: files")
	for _, p := range ClusterPackages {
		assert.NotContains(t, vm.Packages, p, "a package listed twice would be downloaded twice")
	}
	// One parts folder, keyed by every package's version, serves every
	// mode: the image's packages and each backend's.
	all := append(append(append([]string(nil), vm.Packages...), ClusterPackages...), KubePackages...)
	assert.ElementsMatch(t, all, partsPackages())
}

func TestClusterPlan(t *testing.T) {
	r := &runner{o: Options{Timeout: 45 * time.Second, Iters: 20, EmulatedGPU: true, Env: []string{"GDR_STRICT=0"},
		StepTimeout: 5 * time.Minute, Run: "TestPP0[38]",
		Cluster: ClusterOptions{Hosts: 4, Rails: 2, Suite: SuitePingpong, SrunTimeout: 25 * time.Minute, Pairing: "ring"}}}
	d, err := ParseDegrade("vm3:1:delay=20ms vm1:0:delay=20ms,to=vm2", 4, 2)
	require.NoError(t, err)
	jobs := r.clusterPlan(d)
	require.Len(t, jobs[0].Cluster.Degrade, 1)
	assert.Equal(t, "198.18.1.2", jobs[0].Cluster.Degrade[0].ToAddr, "vm2's rail-0 address")
	assert.Empty(t, jobs[2].Cluster.Degrade[0].ToAddr)
	require.Len(t, jobs, 4)
	for i, j := range jobs {
		c := j.Cluster
		assert.Equal(t, ClusterHosts(4)[i], j.Role)
		assert.Equal(t, "vm1", c.Controller)
		require.Len(t, c.NICs, 3, "two rails and the management network")
		assert.Equal(t, GuestNIC{MAC: clusterMAC(0, i+1), Addr: "198.18.1." + string(rune('1'+i)) + "/24", RXE: "rxe0", Rail: 0}, c.NICs[0])
		assert.Equal(t, "198.18.2."+string(rune('1'+i))+"/24", c.NICs[1].Addr)
		assert.Equal(t, "rxe1", c.NICs[1].RXE)
		assert.Equal(t, -1, c.NICs[2].Rail)
		assert.Empty(t, c.NICs[2].RXE)
		assert.Equal(t, i == 2 || i == 0, len(c.Degrade) == 1, j.Role)
		assert.Equal(t, i == 0, c.Sbatch != nil, j.Role)
		assert.Equal(t, i == 0, len(c.Probes) == 2, j.Role)
		assert.Equal(t, 2, j.GPUs, "%s: one emulated GPU per rail, each with its device file", j.Role)
	}
	// The shipped batch script as a user submits it: from the submit
	// folder, waiting for the job, the user's settings in the
	// environment; the suite's arguments have no way through it.
	sb := jobs[0].Cluster.Sbatch
	assert.Equal(t, []string{"/usr/bin/sbatch", "--wait", "--parsable", "--nodes=4", "--time=25", "/lab/dist/gdrconf.sbatch"}, sb.Step.Argv)
	assert.Equal(t, "/shared/submit", sb.Dir)
	assert.Equal(t, "/shared/lab/job.json", sb.Result)
	env := strings.Join(sb.Step.Env, " ")
	for _, want := range []string{"GDR_DIST=/lab/dist", "GDR_PAIRING=ring", "GDR_TIMEOUT=45s", "GDR_ITERS=20", "FAKE_CUDA_DEVICES=2",
		"GDR_BW_SIZES=65536", "GDR_IB_TIMEOUT=18", "GDR_BW_ITERS=50", "GDR_PAIR_MIN_FRACTION=0.25", "GDR_STRICT=0"} {
		assert.Contains(t, env, want)
	}
	assert.NotContains(t, env, "GDR_REPORTS", "the script's own folder: reports/cluster-<job id> in the submit folder")
	probes := jobs[0].Cluster.Probes
	assert.Equal(t, []string{"/usr/bin/srun", "--nodes=4", "--ntasks-per-node=1", "--exclusive", "--time=5", "--job-name=gdrlab-devices",
		"/init", "gpu-devices"}, probes[0].Argv, "no GPU request: the old script's step")
	assert.Equal(t, []string{"/usr/bin/srun", "--nodes=4", "--ntasks-per-node=1", "--exclusive", "--time=5", "--job-name=gdrlab-devices",
		"--gres=gpu:2", "/init", "gpu-devices"}, probes[1].Argv)
	assert.Equal(t, []string{"setup-vm1", "daemons-vm1", "nodes", "devices-no-gpu", "devices-gpu", "sbatch"}, clusterWant(jobs[0]))
	cfg, err := r.clusterConfig()
	require.NoError(t, err)
	assert.Equal(t, 0.25, cfg.MinFraction, "the merge analyses the pairs as the guests did")
	assert.NotContains(t, env, "GDR_CLUSTER_SECRET", "the batch script draws the secret")
	assert.NotContains(t, env, "GDR_RDMA_DEVICE", "every rail, not one NIC")
	assert.NotContains(t, env, "GDR_SUITE", "the suite is rounds.sh's default, run.sh beside it")

	r.o.Cluster.Suite = SuiteStandin
	r.o.Env = []string{"GDR_BW_SIZES=4096", "GDR_PAIR_MIN_FRACTION=0.4"}
	env = strings.Join(r.clusterEnv(), " ")
	assert.Equal(t, 1, strings.Count(env, "GDR_PAIR_MIN_FRACTION="), "LAB_ENV's own wins")
	cfg, err = r.clusterConfig()
	require.NoError(t, err)
	assert.Equal(t, 0.4, cfg.MinFraction)
	assert.Contains(t, env, "GDR_SUITE=/lab/standin.sh")
	assert.Contains(t, env, "LAB_STANDIN_RAILS=2")
	assert.Empty(t, r.clusterSuiteArgs(), "the stand-in takes no test flags")
	assert.Equal(t, 1, strings.Count(env, "GDR_BW_SIZES="), "LAB_ENV's own wins")
}

func TestClusterVerdict(t *testing.T) {
	d, err := ParseDegrade("vm3:1:delay=250ms", 4, 2)
	require.NoError(t, err)
	good := func() *ClusterSummary {
		s := &ClusterSummary{}
		for i, v := range []string{"INCOMPLETE (30 not run)", "QUALIFIED", "NOT QUALIFIED (1)", "INCOMPLETE (30 not run)"} {
			s.Hosts = append(s.Hosts, ClusterHost{Host: ClusterHosts(4)[i], Verdict: v})
		}
		s.Pairs = []isolate.Pair{{A: "vm1", B: "vm2", Rail: 0, Status: isolate.Pass}, {A: "vm2", B: "vm3", Rail: 1, Status: isolate.Slow}}
		s.Suspects = []isolate.Suspect{{Host: "vm3", Rail: 1, Verdict: isolate.Bad}}
		s.Cluster = &report.ClusterFindings{Suspects: []report.ClusterFinding{{Part: report.PartRail, Host: "vm3", Rail: 1, Verdict: isolate.Bad,
			AtFault: &report.Part{Kind: "nic", Name: "vm3 rail 1 (rxe1)"}}}}
		s.Exit, s.IsolationFailed = 1, []string{"vm3 rail 1 bad"}
		return s
	}
	assert.Empty(t, ClusterVerdict(good(), d, 4, 2), "vm3 may be NOT QUALIFIED: its rail was degraded")

	s := good()
	s.Cluster.Suspects = append(s.Cluster.Suspects, report.ClusterFinding{Part: report.PartRail, Host: "vm4", Rail: 1, Verdict: isolate.Suspected, Reason: "r"})
	assert.Equal(t, []string{"vm4 rail 1 found suspect (rail), and the lab planted no such fault: r"}, ClusterVerdict(s, d, 4, 2))

	s = good()
	s.Cluster.Suspects[0].AtFault = &report.Part{Kind: "host", Name: "host vm3"}
	assert.Equal(t, []string{`vm3 rail 1 was found bad but the report names "host vm3" (host) at fault, want a part of kind "nic"`}, ClusterVerdict(s, d, 4, 2))
	s.Cluster.Suspects[0].AtFault = nil
	assert.Equal(t, []string{`vm3 rail 1 was found bad but the report names no part at fault, want a part of kind "nic"`}, ClusterVerdict(s, d, 4, 2))

	s = good()
	s.Cluster.Suspects = nil
	s.IsolationFailed = nil
	s.Exit = 0
	assert.Equal(t, []string{
		"junit.xml's cluster/isolation suite failed [], want [vm3 rail 1 bad]",
		"the merge exited 0, want 1: the planted fault must fail the pipeline",
		"vm3 rail 1 was degraded (vm3:1:delay=250ms) but isolation did not find it bad",
	}, sortedCopy(ClusterVerdict(s, d, 4, 2)))

	s = good()
	s.Cluster = nil
	assert.Equal(t, []string{"summary.json has no cluster object (isolation's verdict)"}, ClusterVerdict(s, d, 4, 2), "an old summary.json does not pass")

	s = good()
	s.Cluster.Suspects[0] = report.ClusterFinding{Part: report.PartHost, Host: "vm3", Rail: isolate.AllRails, Verdict: isolate.Bad, Reason: "r"}
	assert.ElementsMatch(t, []string{"host vm3 found bad (host), and the lab planted no such fault: r",
		"vm3 rail 1 was degraded (vm3:1:delay=250ms) but isolation did not find it bad"}, ClusterVerdict(s, d, 4, 2), "a bad host is not its one planted rail")
	both, err := ParseDegrade("vm3:0:delay=250ms vm3:1:delay=250ms", 4, 2)
	require.NoError(t, err)
	s.Cluster.Suspects[0].AtFault = &report.Part{Kind: "host"}
	s.IsolationFailed = []string{"host vm3 bad"}
	assert.Empty(t, ClusterVerdict(s, both, 4, 2), "every rail of a host planted one by one is the host")

	// With one rail a planted host is found as its one rail, and its junit
	// case is that rail's.
	one, err := ParseDegrade("vm3:*:delay=250ms", 4, 1)
	require.NoError(t, err)
	s = good()
	s.Pairs = s.Pairs[:1]
	s.Cluster.Suspects[0].Rail = 0
	s.IsolationFailed = []string{"vm3 rail 0 bad"}
	assert.Empty(t, ClusterVerdict(s, one, 4, 1))
	s.IsolationFailed = []string{"host vm3 bad"}
	assert.Contains(t, ClusterVerdict(s, one, 4, 1), "junit.xml's cluster/isolation suite failed [host vm3 bad], want [vm3 rail 0 bad]")

	// A planted path is the link, whichever end the report names first.
	link, err := ParseDegrade("vm1:0:delay=250ms,to=vm2", 4, 2)
	require.NoError(t, err)
	s = good()
	s.Cluster.Suspects[0] = report.ClusterFinding{Part: report.PartLink, Host: "vm2", Peer: "vm1", Rail: 0, Verdict: isolate.Bad, AtFault: &report.Part{Kind: "network path"}}
	s.IsolationFailed = []string{"link vm2 <-> vm1 rail 0 bad"}
	s.Hosts[2].Verdict = "QUALIFIED"
	s.Hosts[0].Verdict = "NOT QUALIFIED (1)"
	assert.Empty(t, ClusterVerdict(s, link, 4, 2), "the link's ends may fail their own tests")
	s.Cluster.Suspects[0].Rail = 1
	assert.ElementsMatch(t, []string{"link vm2 <-> vm1 rail 1 found bad (link), and the lab planted no such fault: ",
		"link vm1 <-> vm2 rail 0 was degraded (vm1:0:delay=250ms,to=vm2) but isolation did not find it bad"}, ClusterVerdict(s, link, 4, 2))

	s = good()
	s.Hosts[1].Verdict = "NOT QUALIFIED (2)"
	s.Pairs = s.Pairs[:1]
	s.Pairs = append(s.Pairs, isolate.Pair{Round: 1, A: "vm4", B: "vm1", Rail: isolate.AllRails, Status: isolate.Missing, Detail: "no pair results (no test.json)"})
	assert.ElementsMatch(t, []string{
		"host vm2 is NOT QUALIFIED (2), and no fault was planted in it",
		"no pair ran on rail 1",
		"round 1 pair vm4-vm1 left no result (rail -1): no pair results (no test.json)",
	}, ClusterVerdict(s, d, 4, 2))

	s = good()
	s.Hosts = s.Hosts[:3]
	assert.Equal(t, []string{"summary.json has 3 hosts, want 4"}, ClusterVerdict(s, d, 4, 2))
}

func TestStandin(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{"GDR_REPORTS": "/shared/rounds/vm2/round-0", "GDR_HOST_NAME": "vm2", "GDR_PEER_NAME": "vm1"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	c, err := ParseStandin(env("GDR_ROLE", "client", "GDR_PEER", "vm1:20016", "LAB_STANDIN_ITERS", "50"))
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/bin/ib_write_bw", "-d", "rxe1", "-x", "1", "-F", "-s", "65536", "-n", "50", "-p", "20017", "vm1"}, c.standinArgv(1))
	s, err := ParseStandin(env("GDR_ROLE", "server", "GDR_LISTEN", ":20016"))
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/bin/ib_write_bw", "-d", "rxe0", "-x", "1", "-F", "-s", "65536", "-n", "200", "-p", "20016"}, s.standinArgv(0))

	for _, bad := range []struct{ kv []string }{
		{[]string{"GDR_ROLE", "peer"}}, {[]string{"GDR_ROLE", "client", "GDR_PEER", "vm1"}}, {[]string{"GDR_ROLE", "server", "GDR_LISTEN", ":x"}},
		{[]string{"GDR_ROLE", "server", "GDR_LISTEN", ":1", "LAB_STANDIN_RAILS", "0"}}, {[]string{"GDR_ROLE", "server", "GDR_LISTEN", ":1", "GDR_TIMEOUT", "soon"}},
		{[]string{"GDR_ROLE", "server", "GDR_LISTEN", ":1", "GDR_HOST_NAME", ""}},
	} {
		_, err := ParseStandin(env(bad.kv...))
		assert.Error(t, err, "%v", bad.kv)
	}

	out := "#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      50             31.25              30.00                0.000480\n"
	evs := c.StandinEvents(1, out, nil, time.Second)
	attrs := map[string]string{}
	for _, e := range evs {
		assert.Equal(t, StandinPkg, e.Package)
		assert.Equal(t, StandinTest+"/rail1", e.Test)
		if e.Action == "attr" {
			attrs[e.Key] = e.Value
		}
	}
	assert.Equal(t, "pass", evs[len(evs)-1].Action)
	assert.Equal(t, "1", attrs["gdr.rail"])
	assert.Equal(t, "vm1", attrs["gdr.peer"], "the job's host name, as the pair analysis needs")
	assert.Equal(t, "client", attrs["gdr.role"])
	assert.Equal(t, "0.2517", attrs["gdr.bw_gbit_s"], "30 MiB/s")
	assert.Empty(t, attrs["gdr.req"], "lab tooling carries no requirement")

	evs = c.StandinEvents(0, "Couldn't connect to vm1:20016\n", assert.AnError, time.Second)
	assert.Equal(t, "fail", evs[len(evs)-1].Action)
	assert.Contains(t, evs[len(evs)-2].Output, "standin.go:1: ib_write_bw on rail 0 with vm1 failed")
	evs = c.StandinEvents(0, "no table\n", nil, time.Second)
	assert.Equal(t, "fail", evs[len(evs)-1].Action, "a run without a result line proves nothing")
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// labRounds writes a 4-VM, 2-rail ring run as the cluster lab's rounds
// leave it with the stand-in suite: the ring's rounds 0 and 1, then the
// repair rounds the planner asks for (GDR_REPAIR_ROUNDS 2: a suspect link
// is re-tested before it is called bad), each round's gdrcluster plan.json,
// and test.json (StandinEvents from ib_write_bw tables) with host.json.
// Pairs that a planted fault slows (Degrade.Slows) crawl.
func labRounds(t *testing.T, planted []Degrade) string {
	return labRoundsLive(t, planted, isolate.Liveness{})
}

// labRun is the run identity of labRoundsLive's plans and barriers.
const labRun = "slurm/gdrlab/1"

// labRoundsLive is labRounds with hosts that did not start (no folder at
// all; the schedule pairs the others) and hosts that stopped in a round
// (LAB_KILL: a plan of that round and no results; its partner's test with
// it fails, "peer vanished"; later partners idle with peer_stopped; never
// planned again), with the closed barrier files that say so, as the
// planner and the barriers of gdrcluster leave them.
func labRoundsLive(t *testing.T, planted []Degrade, live isolate.Liveness) string {
	t.Helper()
	root := t.TempDir()
	hosts := ClusterHosts(4)
	closeBarrier := func(name string, expected []string, missing []string) {
		c := cluster.Closed{Run: labRun, Barrier: name, Expected: len(expected), Missing: missing, Why: "labRoundsLive", By: expected[0], At: "2026-12-04T18:00:00Z"}
		if c.Missing == nil {
			c.Missing = []string{}
		}
		for _, h := range missing {
			if name == cluster.StartBarrier {
				c.MissingIndex = append(c.MissingIndex, slices.Index(hosts, h))
			}
		}
		b, err := json.Marshal(c)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(cluster.RunDir(root, labRun), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(cluster.RunDir(root, labRun), name+".json"), b, 0o644))
	}
	var notStarted []string
	for _, h := range hosts {
		if live.NotStarted[h] {
			notStarted = append(notStarted, h)
		}
	}
	closeBarrier(cluster.StartBarrier, hosts, notStarted)
	opt := isolate.Options{MinFraction: 0.25}
	for k := 0; ; k++ {
		o := opt
		o.Live = live.Before(k)
		rd, done := isolate.Round(pairing.Ring, hosts, k, 2, loadResults(t, root), o)
		if done {
			break
		}
		var expected, missing []string
		for i, me := range hosts {
			if live.Gone(me, k-1) {
				continue // did not start, or stopped before round k
			}
			expected = append(expected, me)
			if s, ok := live.Stopped[me]; ok && s == k {
				missing = append(missing, me)
			}
			j, server, ok := rd.Peer(i)
			if !ok {
				continue
			}
			role, peer := "client", hosts[j]
			if server {
				role = "server"
			}
			plan := cluster.Plan{Round: k, Host: me, Index: i, Hosts: len(hosts), Role: role, Peer: peer,
				PeerAddr: peer, Port: 20016, Pairing: "ring", Job: labRun, Run: labRun}
			if live.Gone(peer, k-1) { // its partner stopped before: it idles
				plan = cluster.Plan{Round: k, Host: me, Index: i, Hosts: len(hosts), Role: cluster.Idle, Pairing: "ring", Job: labRun, Run: labRun,
					PeerStopped: peer, PeerStoppedIn: live.Stopped[peer]}
				require.NoError(t, cluster.WritePlan(root, plan))
				continue
			}
			require.NoError(t, cluster.WritePlan(root, plan))
			if s, ok := live.Stopped[me]; ok && s == k {
				continue // killed during the round: no results
			}
			c := StandinConfig{Role: role, PeerHost: peer, PeerName: peer, Host: me, Port: 20016, Rails: 2, Size: 65536, Iters: 200}
			evs := []report.Event{{Action: "start", Package: StandinPkg}, {Action: "run", Package: StandinPkg, Test: StandinTest}}
			result := "pass"
			for rail := 0; rail < 2; rail++ {
				if s, ok := live.Stopped[peer]; ok && s == k {
					evs = append(evs, c.StandinEvents(rail, "Couldn't connect to "+peer+"\n", errors.New("peer vanished"), time.Second)...)
					result = "fail"
					continue
				}
				mbs := 30.0 + float64(i) // healthy TCG pairs differ a little
				for _, d := range planted {
					if d.Slows(me, peer, rail) {
						mbs = 0.5
					}
				}
				out := fmt.Sprintf("#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      200             %.2f              %.2f                0.000480\n", mbs, mbs)
				evs = append(evs, c.StandinEvents(rail, out, nil, time.Second)...)
			}
			evs = append(evs, report.Event{Action: result, Package: StandinPkg, Test: StandinTest}, report.Event{Action: result, Package: StandinPkg})
			zero := 0
			require.NoError(t, report.SaveRun(cluster.RoundDir(root, me, k), report.Run{Host: report.Identity{Host: me, Role: role, Peer: peer, GoTestExit: &zero}, Events: evs}))
		}
		closeBarrier(cluster.RoundBarrier(k), expected, missing)
	}
	return root
}

// loadResults reads the pair results written so far, as the planner does.
func loadResults(t *testing.T, root string) []isolate.Result {
	t.Helper()
	res, _, err := cluster.Load(root, "")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return res
}

// The lab's own merge and check on constructed rounds: the planted rail
// found bad passes the lab while the merge exits 1 with the rail as a failed
// JUnit case; another rail claimed, or none planted but one claimed, fails it.
func TestMergeClusterCheck(t *testing.T) {
	planted, err := ParseDegrade("vm3:1:delay=250ms", 4, 2)
	require.NoError(t, err)
	opt := isolate.Options{MinFraction: 0.25} // labPairMinFraction
	dir := t.TempDir()
	sum, rep, err := MergeCluster(labRounds(t, planted), dir, opt, planted)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Exit)
	assert.Equal(t, 1, rep.ExitCode())
	assert.Equal(t, []string{"vm3 rail 1 bad"}, sum.IsolationFailed)
	require.NotNil(t, sum.Cluster)
	assert.Empty(t, ClusterVerdict(sum, planted, 4, 2), "the planted rail was found: the lab passes")
	assert.FileExists(t, filepath.Join(dir, report.JUnitFile))

	other, err := ParseDegrade("vm2:0:delay=250ms", 4, 2)
	require.NoError(t, err)
	probs := ClusterVerdict(sum, other, 4, 2)
	assert.Contains(t, probs, "vm2 rail 0 was degraded (vm2:0:delay=250ms) but isolation did not find it bad")
	assert.Contains(t, strings.Join(probs, "\n"), "vm3 rail 1 found bad (rail), and the lab planted no such fault")
	assert.Contains(t, strings.Join(probs, "\n"), "host vm3 is NOT QUALIFIED, and no fault was planted in it")

	sum, _, err = MergeCluster(labRounds(t, nil), t.TempDir(), opt, nil)
	require.NoError(t, err)
	assert.NotEqual(t, 1, sum.Exit)
	assert.Empty(t, sum.IsolationFailed)
	assert.Empty(t, ClusterVerdict(sum, nil, 4, 2), "LAB_DEGRADE=none: nothing found, the merge does not fail")
	probs = ClusterVerdict(sum, planted, 4, 2)
	assert.Contains(t, probs, "the merge exited 0, want 1: the planted fault must fail the pipeline")
	assert.Contains(t, probs, "vm3 rail 1 was degraded (vm3:1:delay=250ms) but isolation did not find it bad", "none named")
}

// A whole host and a path planted, as make lab-cluster-host and the default
// LAB_DEGRADE do, each found as its part and named at fault by the merge of
// constructed ring rounds.
func TestMergeClusterHostAndPath(t *testing.T) {
	opt := isolate.Options{MinFraction: 0.25}
	for spec, want := range map[string][]string{
		"vm2:*:delay=250ms":                          {"host vm2 bad"},
		"vm3:1:delay=250ms vm1:0:delay=250ms,to=vm2": {"vm3 rail 1 bad", "link vm1 <-> vm2 rail 0 bad"},
	} {
		planted, err := ParseDegrade(spec, 4, 2)
		require.NoError(t, err)
		sum, _, err := MergeCluster(labRounds(t, planted), t.TempDir(), opt, planted)
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Exit, spec)
		assert.ElementsMatch(t, want, sum.IsolationFailed, spec)
		assert.Empty(t, ClusterVerdict(sum, planted, 4, 2), spec)
		for _, f := range sum.Cluster.Suspects {
			require.NotNil(t, f.AtFault, spec)
			t.Logf("%s: %s at fault: %s", spec, f.Name(), f.AtFault.String())
		}
		// The same rounds judged against another plant fail the lab.
		other, err := ParseDegrade("vm4:0:delay=250ms", 4, 2)
		require.NoError(t, err)
		assert.NotEmpty(t, ClusterVerdict(sum, other, 4, 2), spec)
	}
}

// make lab-cluster-host plants HostDegrade.
func TestMakeLabClusterHost(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	assert.Contains(t, string(mk), "LAB_DEGRADE='"+HostDegrade+"' LAB_REPORTS=reports/lab-cluster-host")
}

func TestNetemCommands(t *testing.T) {
	d, err := ParseDegrade("vm1:0:delay=250ms vm1:1:delay=250ms,loss=1%,to=vm2", 4, 2)
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"/usr/sbin/tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "250ms"}}, netemCommands("eth0", d[0]))
	d[1].ToAddr = "198.18.2.2"
	assert.Equal(t, [][]string{
		{"/usr/sbin/tc", "qdisc", "add", "dev", "eth1", "root", "handle", "1:", "prio", "bands", "4"},
		{"/usr/sbin/tc", "qdisc", "add", "dev", "eth1", "parent", "1:4", "handle", "40:", "netem", "delay", "250ms", "loss", "1%"},
		{"/usr/sbin/tc", "filter", "add", "dev", "eth1", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", "198.18.2.2/32", "flowid", "1:4"},
	}, netemCommands("eth1", d[1]))
}

func TestFinishedSteps(t *testing.T) {
	r := &runner{o: Options{Cluster: ClusterOptions{Hosts: 2, Rails: 1, Suite: SuitePingpong, SrunTimeout: time.Minute, Pairing: "ring"}}}
	jobs := r.clusterPlan(nil)
	ctl, node := jobs[0], jobs[1]
	ended := func(ids ...string) *Results {
		res := &Results{}
		for _, id := range ids {
			res.Steps = append(res.Steps, &StepResult{Step: Step{ID: id}, End: &StepEnd{}})
		}
		return res
	}
	assert.False(t, finishedSteps(ctl, nil))
	assert.False(t, finishedSteps(ctl, &Results{}))
	assert.False(t, finishedSteps(ctl, ended("setup-vm1", "daemons-vm1", "nodes")), "the batch job still runs")
	running := ended("setup-vm1", "daemons-vm1", "nodes")
	running.Steps = append(running.Steps, &StepResult{Step: Step{ID: "sbatch"}})
	assert.False(t, finishedSteps(ctl, running), "sbatch began, not ended")
	assert.True(t, finishedSteps(ctl, ended("setup-vm1", "daemons-vm1", "nodes", "sbatch")), "no emulated GPU: no probes")
	r.o.EmulatedGPU = true
	ctl = r.clusterPlan(nil)[0]
	assert.False(t, finishedSteps(ctl, ended("setup-vm1", "daemons-vm1", "nodes", "sbatch")), "the probes did not run")
	assert.True(t, finishedSteps(ctl, ended("setup-vm1", "daemons-vm1", "nodes", "devices-no-gpu", "devices-gpu", "sbatch")))
	assert.False(t, finishedSteps(node, ended("setup-vm2", "daemons-vm2")), "still waiting for the end file")
	assert.True(t, finishedSteps(node, ended("setup-vm2", "daemons-vm2", "wait-vm2")))
	assert.True(t, finishedSteps(node, &Results{Done: true}), "a failed setup ends the agent early: RecDone says so")
	kube := Job{Role: "vm3", Cluster: &ClusterJob{Kube: &KubeJob{}}}
	assert.Equal(t, []string{"setup-vm3", "node-vm3", "wait-vm3"}, clusterWant(kube))
}

// A "qemu" that never powers off: the host kills it powerOffGrace after
// its agent finished, and logs the console's end.
func TestPowerOffHung(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "qemu")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755))
	m, err := vm.Start(vm.Config{QEMU: fake, Dir: dir, Name: "vm1"})
	require.NoError(t, err)
	t.Cleanup(func() { m.Kill("test over") })
	require.NoError(t, os.WriteFile(m.Console, []byte("gdrlab: step srun: rc=0 9m0s\nlast words\n"), 0o644))
	var out strings.Builder
	r := &runner{o: Options{Out: &out}, start: time.Now()}
	var since time.Time
	r.powerOffHung("vm1", m, false, &since)
	assert.True(t, since.IsZero(), "not finished: no clock")
	r.powerOffHung("vm1", m, true, &since)
	require.False(t, since.IsZero())
	assert.False(t, m.Exited(), "within the grace")
	since = time.Now().Add(-powerOffGrace - time.Second)
	r.powerOffHung("vm1", m, true, &since)
	assert.True(t, m.Exited())
	assert.Contains(t, m.Killed, "did not power off within 1m0s")
	assert.Contains(t, out.String(), "VM vm1 finished its steps but had not powered off 1m0s later")
	assert.Contains(t, out.String(), "last words")
}

// A cluster run that asked for a soak must show every host's soak, judged.
func TestSoakVerdict(t *testing.T) {
	assert.True(t, soakAsked([]string{"GDR_SOAK=2m"}))
	assert.False(t, soakAsked([]string{"GDR_SOAK=2m", "GDR_SOAK=0"}), "the last setting wins")
	assert.False(t, soakAsked([]string{"GDR_SOAKX=2m"}))
	var s ClusterSummary
	require.NoError(t, json.Unmarshal([]byte(`{"hosts":[
	  {"host":"vm1","soak":{"rails":[{"rail":0}]},"requirements":[{"id":"SOAK-02","status":"pass"}]},
	  {"host":"vm2","requirements":[{"id":"SOAK-02","status":"skip","reason":"not asked"}]},
	  {"host":"vm3","soak":{"rails":[{"rail":0}]},"requirements":[{"id":"SOAK-02","status":"not run","reason":"not reached"}]},
	  {"host":"vm4","soak":{},"requirements":[{"id":"SOAK-01","status":"fail"}]},
	  {"host":"vm5","earlier_run":true}]}`), &s))
	assert.Equal(t, []string{
		"host vm2: GDR_SOAK was set, but the merged report has no soak of it (no soak.json in its rounds)",
		"host vm3: SOAK-02 not run (not reached), want it judged",
		"host vm4: its soak carried no rail's traffic",
		"host vm4: the merged report has no SOAK-02",
	}, SoakVerdict(&s))
}
