package lab

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func attr(test, k, v string) Event { return Event{Action: "attr", Test: test, Key: k, Value: v} }

func end(action, test string, el float64) Event {
	return Event{Action: action, Test: test, Elapsed: el}
}

// host builds one host's pingpong suite from (test, action, elapsed, own output).
func host(role string, tests ...[4]string) *Suite {
	s := &Suite{Host: role, Pkg: PingpongPkg, Role: role}
	for _, t := range tests {
		s.Events = append(s.Events, ev("run", t[0], ""), ev("output", t[0], "=== RUN   "+t[0]+"\n"))
		if t[3] != "" {
			s.Events = append(s.Events, ev("output", t[0], "    x_test.go:1: "+t[3]+"\n"))
		}
		s.Events = append(s.Events, attr(t[0], "gdr.rdma_leaked_count", "0"))
		el, _ := strconv.ParseFloat(t[2], 64)
		s.Events = append(s.Events, end(t[1], t[0], el))
	}
	return s
}

func caseNamed(t *testing.T, name string) FaultCase {
	cs, err := selectCases(FaultCases(), []string{name})
	require.NoError(t, err)
	return cs[0]
}

func TestJudgePassCase(t *testing.T) {
	c := caseNamed(t, "load")
	ok := caseRun{timeout: 20 * time.Second, suites: []*Suite{
		host("server", [4]string{"TestPP03Write", "pass", "3.5", ""}, [4]string{"TestPP03Write/rail0", "pass", "3.4", ""}),
		host("client", [4]string{"TestPP03Write", "pass", "3.6", ""}, [4]string{"TestPP03Write/rail0", "pass", "3.5", ""}),
	}}
	r := Judge(c, ok)
	assert.True(t, r.OK, "%v", r.Problems)
	assert.Equal(t, 3.5, r.Seconds, "the longest test when nothing failed")
	assert.Equal(t, 35.0, r.DeadlineS)
	assert.Equal(t, "server 2 pass 0 fail 0 skip; client 2 pass 0 fail 0 skip", r.Got)

	bad := ok
	bad.suites = []*Suite{ok.suites[0], host("client", [4]string{"TestPP03Write", "fail", "1", ""},
		[4]string{"TestPP03Write/rail0", "fail", "0.9", "RDMA WRITE: no completion within 20s"})}
	r = Judge(c, bad)
	assert.False(t, r.OK)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "TestPP03Write/rail0 failed, and this case must pass")
}

// 1% loss: the traffic passes and HLTH-01 fails on both hosts, naming the
// rxe loss counters; a traffic failure or a HLTH failure naming another
// counter fails the case, and so does a run where HLTH-01 passes.
func TestJudgeLossCase(t *testing.T) {
	c := caseNamed(t, "loss-1pct")
	const hl = "TestHLTH01TrafficCounters"
	srvMsg := "rxe0 port 1 hw_counters/out_of_seq_request rose by 41 during the run: requests received with a PSN beyond the expected one: a packet was lost and a NAK sent (retransmission) (rose during: TestPP08Bandwidth/rail0/WRITE/65536 +41); remedy: find where packets were lost"
	cliMsg := "rxe0 port 1 hw_counters/rcvd_seq_err rose by 40 during the run: NAK sequence errors received: the peer saw a PSN gap (packet loss) (retransmission) (rose during: ...); remedy: ..."
	run := func(srv, cli string, pp string) caseRun {
		hs := func(role, msg string) *Suite {
			a := "fail"
			if msg == "" {
				a = "pass"
			}
			return host(role, [4]string{"TestPP03Write", pp, "3.5", ""}, [4]string{"TestPP03Write/rail0", pp, "3.4", ""},
				[4]string{hl, a, "0.2", ""}, [4]string{hl + "/rail0", a, "0.1", msg})
		}
		return caseRun{timeout: 45 * time.Second, suites: []*Suite{hs("server", srv), hs("client", cli)}}
	}
	r := Judge(c, run(srvMsg, cliMsg, "pass"))
	assert.True(t, r.OK, "%v", r.Problems)

	r = Judge(c, run("", "", "pass"))
	assert.False(t, r.OK, "HLTH-01 passing under loss is the fault gone unnoticed")
	assert.Contains(t, strings.Join(r.Problems, "\n"), "no test failed")

	r = Judge(c, run(srvMsg, "rxe0 port 1 hw_counters/send_err rose by 1", "pass"))
	assert.False(t, r.OK)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "client: "+hl+"/rail0 failed without naming the cause")

	r = Judge(c, run(srvMsg, cliMsg, "fail"))
	assert.False(t, r.OK, "a traffic test failing under 1% loss fails the case")
}

// A failure caused by an earlier one, a verdict slower than GDR_TIMEOUT plus
// the margin, a failure naming nothing, and a leak each fail the case.
func TestJudgeFaultCase(t *testing.T) {
	c := caseNamed(t, "loss-10pct")
	good := caseRun{timeout: 20 * time.Second, suites: []*Suite{
		host("server", [4]string{"TestPP08Bandwidth/rail0/WRITE/4096", "fail", "21.0", "the peer 198.18.0.2 ... peer vanished"},
			[4]string{"TestPP08Bandwidth/rail0/WRITE/65536", "pass", "2.0", ""}),
		host("client", [4]string{"TestPP08Bandwidth/rail0/WRITE/4096", "fail", "20.5", "WRITE bandwidth: work completion error: status 12; retry exceeded: the NIC gave up (retry_exceeded_err +1)"},
			[4]string{"TestPP08Bandwidth/rail0/WRITE/65536", "pass", "2.0", ""}),
	}}
	r := Judge(c, good)
	assert.True(t, r.OK, "%v", r.Problems)
	assert.Equal(t, 21.0, r.Seconds, "the slowest failing verdict")
	assert.Contains(t, r.Got, "server 1 pass 1 fail 0 skip (TestPP08Bandwidth/rail0/WRITE/4096 21.0s:")

	cascaded := good
	cascaded.suites = []*Suite{good.suites[0], host("client",
		[4]string{"TestPP08Bandwidth/rail0/WRITE/65536", "fail", "0.1", "oob: peer 198.18.0.1 sent result while we waited for barrier: the two hosts run different suite builds or got out of step"})}
	r = Judge(c, cascaded)
	assert.False(t, r.OK)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "failed on what an earlier test left behind")

	slow := good
	slow.suites = []*Suite{host("server", [4]string{"TestPP05Read/rail0", "fail", "50.2", "peer vanished"}), good.suites[1]}
	r = Judge(c, slow)
	assert.False(t, r.OK)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "took 50.2s to its verdict, more than GDR_TIMEOUT 20s + margin 30s")

	mute := good
	mute.suites = []*Suite{host("server", [4]string{"TestPP05Read/rail0", "fail", "3", "data differ at byte 7"}), good.suites[1]}
	r = Judge(c, mute)
	assert.False(t, r.OK)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "failed without naming the cause")

	leak := good
	ls := host("server", [4]string{"TestPP02Connect", "pass", "1", ""})
	ls.Events = append(ls.Events, attr("TestPP02Connect", "gdr.rdma_leaked_count", "3"))
	leak.suites = []*Suite{ls, good.suites[1]}
	r = Judge(c, leak)
	assert.False(t, r.OK)
	assert.Equal(t, 3, r.Leaked)

	unchecked := good
	unchecked.suites = []*Suite{{Role: "server", Pkg: PingpongPkg, Events: []Event{ev("run", "TestPP02Connect", ""), end("pass", "TestPP02Connect", 1)}}, good.suites[1]}
	r = Judge(c, unchecked)
	assert.False(t, r.OK)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "GDR_LEAK_CHECK did not run")
}

func TestJudgeNeedAndRecover(t *testing.T) {
	c := caseNamed(t, "linkdown-5s")
	run := caseRun{timeout: 20 * time.Second, suites: []*Suite{
		host("server", [4]string{"TestPP03Write/rail0", "fail", "21", "oob: peer vanished: 198.18.0.2 gave no answer within 20s"},
			[4]string{"TestPP04WriteImm/rail0", "pass", "3", ""}),
		host("client", [4]string{"TestPP03Write/rail0", "fail", "2", "rxe0 port 1 is DOWN, not ACTIVE now: the link went down during the test"},
			[4]string{"TestPP04WriteImm/rail0", "pass", "3", ""}),
	}}
	r := Judge(c, run)
	assert.True(t, r.OK, "%v", r.Problems)

	noRecovery := run
	noRecovery.suites = []*Suite{run.suites[0], host("client", [4]string{"TestPP03Write/rail0", "fail", "2", "rxe0 port 1 is DOWN"},
		[4]string{"TestPP04WriteImm/rail0", "fail", "5", "rxe0 port 1 is DOWN"})}
	r = Judge(c, noRecovery)
	assert.Contains(t, strings.Join(r.Problems, "\n"), "client: no test passed after the first failure")

	unnamed := run
	unnamed.suites = []*Suite{run.suites[0], host("client", [4]string{"TestPP03Write/rail0", "fail", "2", "peer vanished"},
		[4]string{"TestPP04WriteImm/rail0", "pass", "3", ""})}
	r = Judge(c, unnamed)
	assert.Contains(t, strings.Join(r.Problems, "\n"), fmt.Sprintf("client: nothing in its results matches %q", c.Need["client"]))

	// Counters listed without a cause named are not enough (lab: status 2
	// with the counters and no sentence saying the link went down).
	countersOnly := run
	countersOnly.suites = []*Suite{run.suites[0], host("client", [4]string{"TestPP08Bandwidth/rail0/WRITE/1048576", "fail", "8",
		"work completion error: wr_id 0 status 2 (local QP operation error); peer failed; rxe0 port 1 counters since the connection 12s ago: none rose"},
		[4]string{"TestPP08Bandwidth/rail0/READ/4096", "pass", "3", ""})}
	r = Judge(c, countersOnly)
	assert.Contains(t, strings.Join(r.Problems, "\n"), fmt.Sprintf("client: nothing in its results matches %q", c.Need["client"]))
}

func TestJudgeKill(t *testing.T) {
	c := caseNamed(t, "kill")
	run := caseRun{timeout: 20 * time.Second, killTook: 21 * time.Second, suites: []*Suite{
		host("server", [4]string{"TestPP03Write/rail0", "fail", "29", "oob: peer vanished: 198.18.0.2:41000 gave no answer"}),
		{Host: "client", Role: "client", Pkg: PingpongPkg, StepErr: "did not finish: its VM was killed"},
	}}
	r := Judge(c, run)
	assert.True(t, r.OK, "%v", r.Problems)
	assert.Contains(t, r.Got, "server's verdict 21.0s after the kill")
	run.killTook = 0
	r = Judge(c, run)
	assert.False(t, r.OK)
}

func TestSelectCasesAndJobs(t *testing.T) {
	_, err := selectCases(FaultCases(), []string{"loss-1pct", "nope"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `LAB_FAULTS names case "nope"; the cases are loss-1pct, loss-10pct`)
	all, err := selectCases(FaultCases(), nil)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, c := range all {
		names[c.Name] = true
	}
	for _, want := range []string{"loss-1pct", "loss-10pct", "delay-jitter", "linkdown-5s", "linkdown", "kill", "token", "mismatch", "stray", "hostile", "load"} {
		assert.True(t, names[want], want)
	}

	r := &runner{o: Options{Timeout: 20 * time.Second, Iters: 200, StepTimeout: 5 * time.Minute}}
	pp := testPkg{Short: PingpongPkg, Guest: "/lab/bin/pingpong.test"}
	jobs := r.faultJobs(caseNamed(t, "token"), pp)
	require.Len(t, jobs, 2)
	assert.Equal(t, "token-server", jobs[0].Key)
	st := jobs[1].Steps[0]
	assert.Contains(t, st.Env, "GDR_LEAK_CHECK=1")
	assert.Contains(t, st.Env, "GDR_TOKEN=lab-faults-bravo")
	pass := r.faultJobs(caseNamed(t, "stray"), pp)
	assert.Equal(t, "GDR_TIMEOUT=45s", pass[0].Steps[0].Env[len(pass[0].Steps[0].Env)-1], "must-pass cases run with make lab's GDR_TIMEOUT")
	assert.Contains(t, st.Argv, "-test.run=TestPP0[12]")
	kill := r.faultJobs(caseNamed(t, "kill"), pp)
	assert.Contains(t, kill[0].Steps[0].Argv, "-test.failfast")
	loss := r.faultJobs(caseNamed(t, "loss-10pct"), pp)
	require.Len(t, loss[1].Steps[0].Faults, 1)
	assert.Equal(t, []string{"/usr/sbin/tc", "qdisc", "add", "dev", "eth0", "root", "netem", "loss", "10%"}, loss[1].Steps[0].Faults[0].Argv)
	assert.Empty(t, loss[0].Steps[0].Faults, "faults are planted in the client only")
}

// A parent whose subtest failed is not judged itself (its log lines are not
// its cause), and its own time excludes its subtests even when their names
// hold a "/".
func TestHostTestsTree(t *testing.T) {
	s := host("server",
		[4]string{"TestPP08Bandwidth/rail0/WRITE/4096", "pass", "2", ""},
		[4]string{"TestPP08Bandwidth/rail0/WRITE-BIDIR/1048576", "fail", "30", "no completion within 20s"},
		[4]string{"TestPP08Bandwidth/rail0", "fail", "40", "oob: rejected connection from 198.18.0.2:1: was still in its handshake"},
		[4]string{"TestPP08Bandwidth", "fail", "41", ""})
	ts := hostTests(s)
	byName := map[string]hostTest{}
	for _, x := range ts {
		byName[x.Name] = x
	}
	rail := byName["TestPP08Bandwidth/rail0"]
	assert.False(t, rail.leaf)
	assert.InDelta(t, 8.0, rail.self, 1e-9)
	assert.True(t, rail.childFails)
	assert.True(t, byName["TestPP08Bandwidth"].childFails)
	assert.InDelta(t, 1.0, byName["TestPP08Bandwidth"].self, 1e-9)

	c := caseNamed(t, "loss-10pct")
	r := Judge(c, caseRun{timeout: 20 * time.Second, suites: []*Suite{s}})
	assert.NotContains(t, strings.Join(r.Problems, "\n"), "TestPP08Bandwidth/rail0 failed without naming")
	assert.Equal(t, 30.0, r.Seconds)
}

// A case that may pass: a flap that retransmission cured is fine, and a
// killed client's unfinished tests are not held against it.
func TestJudgeMayPass(t *testing.T) {
	c := caseNamed(t, "linkdown-5s")
	r := Judge(c, caseRun{timeout: 20 * time.Second, suites: []*Suite{
		host("server", [4]string{"TestPP08Bandwidth/rail0/WRITE/1048576", "pass", "30", ""}),
		host("client", [4]string{"TestPP08Bandwidth/rail0/WRITE/1048576", "pass", "30", ""}),
	}})
	assert.True(t, r.OK, "%v", r.Problems)

	k := caseNamed(t, "kill")
	cl := host("client", [4]string{"TestPP02Connect", "pass", "1", ""})
	cl.Events = append(cl.Events, ev("run", "TestPP03Write", ""), ev("run", "TestPP03Write/rail0", ""))
	cl.StepErr = "did not finish: its VM was killed"
	r = Judge(k, caseRun{timeout: 20 * time.Second, killTook: 22 * time.Second, suites: []*Suite{
		host("server", [4]string{"TestPP03Write/rail0", "fail", "25", "oob: peer vanished: 198.18.0.2:41000"}), cl}})
	assert.True(t, r.OK, "%v", r.Problems)
}

// LAB_REPEAT: each case's runs are tallied in the order the cases ran; a
// flaky case reads "2 of 3" on every one of its runs (faults.json), an
// interrupted matrix says how many runs were not made, and one run per case
// leaves the results exactly as they were (no run, runs or case_ok keys).
func TestTallyRepeat(t *testing.T) {
	rs := []CaseResult{
		{Name: "stray", OK: true, Run: 1}, {Name: "stray", OK: false, Run: 2}, {Name: "stray", OK: true, Run: 3},
		{Name: "load", OK: true, Run: 1}, {Name: "load", OK: true, Run: 2}, {Name: "load", OK: true, Run: 3},
		{Name: "kill", OK: true, Run: 1},
	}
	ts := Tally(rs, 3)
	require.Len(t, ts, 3)
	assert.Equal(t, CaseTally{Name: "stray", OK: 2, Ran: 3, Planned: 3}, ts[0])
	assert.Equal(t, "2 of 3", ts[0].String())
	assert.False(t, ts[0].AllOK(), "one bad run of three: the case is not ok")
	assert.Equal(t, "3 of 3", ts[1].String())
	assert.True(t, ts[1].AllOK())
	assert.Equal(t, "1 of 1 (2 not run)", ts[2].String())
	assert.False(t, ts[2].AllOK(), "runs not made are not runs ok")
	for _, r := range rs[:3] {
		assert.Equal(t, "2 of 3", r.CaseOK, "every run of the case carries its tally")
		assert.Equal(t, 3, r.Runs)
	}
	b, err := json.Marshal(rs[1])
	require.NoError(t, err)
	assert.Contains(t, string(b), `"run":2,"runs":3,"case_ok":"2 of 3"`)

	one := []CaseResult{{Name: "stray", OK: true}, {Name: "load", OK: false}}
	ts = Tally(one, 1)
	assert.Equal(t, []CaseTally{{Name: "stray", OK: 1, Ran: 1, Planned: 1}, {Name: "load", OK: 0, Ran: 1, Planned: 1}}, ts)
	b, err = json.Marshal(one[0])
	require.NoError(t, err)
	for _, k := range []string{`"run"`, `"runs"`, `"case_ok"`} {
		assert.NotContains(t, string(b), k, "one run: faults.json keeps its shape")
	}
}

// The printed table: with repeats a row per run (case #n) and a tally per
// case naming the cases not ok in every run; with one run neither.
func TestFaultTableRepeat(t *testing.T) {
	rs := []CaseResult{
		{Name: "stray", OK: true, Run: 1, Got: "all passed"}, {Name: "stray", OK: false, Run: 2, Got: "1 failed", Problems: []string{"no completion"}},
		{Name: "stray", OK: true, Run: 3}, {Name: "load", OK: true, Run: 1}, {Name: "load", OK: true, Run: 2}, {Name: "load", OK: true, Run: 3},
	}
	Tally(rs, 3)
	var b strings.Builder
	FaultTable(&b, rs)
	out := b.String()
	assert.Contains(t, out, "stray #2  FAIL")
	assert.Contains(t, out, "problem: no completion")
	assert.Contains(t, out, "runs ok per case (LAB_REPEAT=3):")
	assert.Regexp(t, `(?m)^stray +2 of 3  NOT OK$`, out)
	assert.Regexp(t, `(?m)^load +3 of 3$`, out)

	b.Reset()
	one := []CaseResult{{Name: "stray", OK: true}, {Name: "load", OK: false}}
	Tally(one, 1)
	FaultTable(&b, one)
	out = b.String()
	assert.NotContains(t, out, "#")
	assert.NotContains(t, out, "runs ok per case")
	assert.Regexp(t, `(?m)^load   FAIL `, out)
}
