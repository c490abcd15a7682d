package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/gtr"

	"github.com/gdrconf/gdrconf/lab/vm"
	"github.com/gdrconf/gdrconf/report"
)

// ModeFaults runs the fault matrix (make lab-faults): each case boots two
// fresh VMs, plants one fault and runs pingpong on both, then checks that
// the tests passed or that both hosts reached verdicts in time, naming the
// cause, with no RDMA object left behind between tests.
const ModeFaults = "faults"

// Fresh VMs per case, not fresh processes in long-lived VMs: a fault
// changes kernel state that outlives a test process (a qdisc, an rxe port
// and its GID table after a link flap, QPs the kernel still retransmits on,
// a killed VM), and a case must not inherit the one before. A boot costs
// about 15 s of the case's time.

// FaultCase is one row of the matrix.
type FaultCase struct {
	Name     string
	Expected string              // what must happen, in words (faults.json)
	Run      string              // -test.run of the pingpong binaries ("" = all tests)
	Env      map[string][]string // role -> extra GDR_* settings
	Faults   map[string][]Fault  // role -> what that VM's agent does during the run
	Kill     time.Duration       // the host kills the client VM this long after its run began
	FailFast bool                // -test.failfast: the run ends at its first failure (its end times the verdict)
	Load     int                 // busy loops on the host for the whole case
	// Pass: every test must pass outright on both hosts. Otherwise tests
	// may pass, and every failure must name one of Causes.
	Pass   bool
	Causes string // regexp (case-insensitive) every failure message matches
	// Need: role -> regexp that at least one failure, or (Pass cases) the
	// output, on that host must match (the cause named where it happened);
	// in a case that may pass (neither Pass nor MustFail), only a host with
	// failures must name it.
	Need map[string]string
	// MustFail: at least one test fails (the fault cannot go unnoticed).
	MustFail bool
	// Recover: on each host with a failure a test passes after it (the
	// link came back; one failure stays one failure).
	Recover bool
	Margin  time.Duration // over GDR_TIMEOUT for one verdict; 0 = FaultMargin
	// Timeout is the case's GDR_TIMEOUT (0: the matrix's, LAB_TIMEOUT).
	Timeout time.Duration
}

// FaultMargin is the default margin over GDR_TIMEOUT within which a failing
// test must reach its verdict: the part of the test before the fault hit,
// the transfer allowance of rc.End.WaitBudget at the matrix's sizes, and the
// report. A case may state its own.
const FaultMargin = 15 * time.Second

// PassTimeout is GDR_TIMEOUT of the cases that must pass outright: make
// lab's own, so that nothing but the fault differs from a plain lab run.
const PassTimeout = 45 * time.Second

// SlowMargin is the margin of the cases whose fault lasts the whole run
// (loss, delay): a failing test's own work before its stall is slowed too.
const SlowMargin = 30 * time.Second

// Messages that mean a failure did not stay one failure: a later test
// failed on what an earlier one left behind.
var cascade = regexp.MustCompile(`got out of step|different suite builds|panic: test timed out|killed after the step's limit`)

// FaultCases is the matrix. The client is the VM the faults are planted in.
func FaultCases() []FaultCase {
	tc := func(args ...string) []Fault {
		return []Fault{{Argv: append([]string{"/usr/sbin/tc", "qdisc", "add", "dev", "eth0", "root", "netem"}, args...)}}
	}
	oobPort := ServerIP + ":" + strconv.Itoa(18515)
	// The whole-run faults get fewer iterations and no 1 MiB bandwidth
	// point: their verdicts are the point, and a slowed fabric would
	// otherwise spend the binary's budget. loss-1pct too: a 1 MiB WR is
	// about ten lost packets at 1%, and with the host loaded (LAB_LOAD=2)
	// rxe's recovery of them stalled the bidirectional 1 MiB point for 46 s
	// (issue 17, run 2 of the matrix); at 64 KiB a WR rarely loses two, so
	// "retransmission cures it" stays what the case shows.
	small := map[string][]string{"server": {"GDR_ITERS=50", "GDR_BW_ITERS=50", "GDR_BW_SIZES=4096,65536"},
		"client": {"GDR_ITERS=50", "GDR_BW_ITERS=50", "GDR_BW_SIZES=4096,65536"}}
	peerGone := `peer vanished|no valid peer|closed the connection|could not reach|peer failed|peer reported|cannot run|is behind|skipped forward|stopped test|unreachable|DOWN|retr|counters`
	return []FaultCase{
		{Name: "loss-1pct", Expected: "1% packet loss on the client's link: every traffic test passes (RoCE retransmission cures it), and HLTH-01 fails on both hosts naming the rxe counter that rose and its delta (the server out_of_seq_request, the client rcvd_seq_err)",
			Faults: map[string][]Fault{"client": tc("loss", "1%")}, Timeout: PassTimeout, MustFail: true, Env: small,
			Causes: `hw_counters/(out_of_seq_request|rcvd_seq_err|retry_exceeded_err) rose by \d+`,
			Need:   map[string]string{"server": `rxe0 port 1 hw_counters/out_of_seq_request rose by \d+`, "client": `rxe0 port 1 hw_counters/rcvd_seq_err rose by \d+`}},
		{Name: "loss-10pct", Expected: "10% packet loss on the client's link: tests pass, or fail each within GDR_TIMEOUT+margin naming what the NIC counted (retransmits, retry exceeded) or the peer; no failure caused by an earlier one",
			Faults: map[string][]Fault{"client": tc("loss", "10%")}, Causes: peerGone + `|budget|-test.timeout|timed? ?out|no completion`,
			Env: small, Margin: SlowMargin},
		{Name: "delay-jitter", Expected: "20 ms +- 10 ms delay on the client's link (packets reordered): tests pass, or fail each within GDR_TIMEOUT+margin naming the cause; never the binary's timeout panic",
			Faults: map[string][]Fault{"client": tc("delay", "20ms", "10ms")}, Causes: peerGone + `|budget|-test.timeout|timed? ?out|no completion`,
			Env: small, Margin: SlowMargin},
		// The sweep alone, so that the flap lands in the 1 MiB WRITE point
		// (about 5-27 s into the run under TCG) whatever the host's load:
		// at 30 s into the whole run it hit PP-07 or PP-08 by chance.
		{Name: "linkdown-5s", Expected: "client eth0 down for 5 s during the bandwidth sweep: the tests in flight pass (retransmission) or fail within GDR_TIMEOUT+margin naming the cause (the client its port DOWN or what its NIC counted); tests after the link is back pass",
			Run: "TestPP08",
			Faults: map[string][]Fault{"client": {
				{At: 10 * time.Second, Argv: []string{"/usr/sbin/ip", "link", "set", "eth0", "down"}},
				{At: 15 * time.Second, Argv: []string{"/usr/sbin/ip", "link", "set", "eth0", "up"}}}},
			// The client must name the cause, not only list counters.
			Causes: peerGone + `|GID|budget`, Need: map[string]string{"client": `DOWN|link went down|retry exceeded|retransmitted`}, Recover: true},
		{Name: "linkdown", Expected: "client eth0 down for good mid-run: every later test fails within GDR_TIMEOUT+margin, the client naming its port DOWN, the server its vanished peer",
			Run:      "TestPP0[2-8]",
			Faults:   map[string][]Fault{"client": {{At: 8 * time.Second, Argv: []string{"/usr/sbin/ip", "link", "set", "eth0", "down"}}}},
			MustFail: true, Causes: peerGone, Need: map[string]string{"client": `DOWN`, "server": `peer vanished|no valid peer|closed the connection|peer failed`}},
		{Name: "kill", Expected: "client VM killed mid-run: the server fails within GDR_TIMEOUT+margin of the kill, naming the peer",
			Kill: 8 * time.Second, FailFast: true, MustFail: true, Causes: peerGone, Need: map[string]string{"server": ClientIP + `|peer`}},
		{Name: "token", Expected: "GDR_TOKEN differs: every test fails on both hosts within GDR_TIMEOUT+margin, naming the token",
			Run: "TestPP0[12]", Env: map[string][]string{"server": {"GDR_TOKEN=lab-faults-alpha"}, "client": {"GDR_TOKEN=lab-faults-bravo"}},
			MustFail: true, Causes: `token`, Need: map[string]string{"server": `token`, "client": `token`}},
		{Name: "mismatch", Expected: "GDR_ITERS differs: every test fails on both hosts at once, naming GDR_ITERS",
			Run: "TestPP0[1-3]", Env: map[string][]string{"client": {"GDR_ITERS=50"}},
			MustFail: true, Causes: `GDR_ITERS differs`, Need: map[string]string{"server": `GDR_ITERS`, "client": `GDR_ITERS`}},
		{Name: "stray", Expected: "a connect-and-close to the server's out-of-band port every 0.7 s for the whole run: every test passes, and the server logs each stray with its address",
			Faults: map[string][]Fault{"client": {{Kind: FaultStray, Target: oobPort, Every: 700 * time.Millisecond}}},
			Pass:   true, Timeout: PassTimeout, Need: map[string]string{"server": `rejected connection from ` + regexp.QuoteMeta(ClientIP)}},
		{Name: "hostile", Expected: "garbage, an oversized frame, a replayed and a reflected hello to the server's out-of-band port every 0.7 s: every test passes, and the server names each hostile connection's address and what it sent",
			Faults: map[string][]Fault{"client": {{Kind: FaultHostile, Target: oobPort, Every: 700 * time.Millisecond}}},
			Pass:   true, Timeout: PassTimeout, Need: map[string]string{"server": `rejected connection from ` + regexp.QuoteMeta(ClientIP) + `:\d+: sent garbage`}},
		{Name: "load", Expected: "two busy loops on the host for the whole run: every test passes",
			Load: 2, Pass: true, Timeout: PassTimeout},
	}
}

// CaseResult is one row of faults.json.
type CaseResult struct {
	Name      string   `json:"name"`
	Expected  string   `json:"expected"`
	Got       string   `json:"got"`
	OK        bool     `json:"ok"`
	Seconds   float64  `json:"seconds"`    // the slowest failing test's verdict (kill: from the kill), or the longest test when none failed
	Measured  string   `json:"measured"`   // which of the two seconds is
	DeadlineS float64  `json:"deadline_s"` // GDR_TIMEOUT + margin, which every failing test must meet
	Leaked    int      `json:"leaked"`     // RDMA objects left between tests, both hosts
	WallS     float64  `json:"wall_s"`     // the case from boot to verdict
	Problems  []string `json:"problems,omitempty"`
	// Run is this run's number and Runs how many runs of the case were
	// asked for (LAB_REPEAT > 1; absent with one run, so faults.json keeps
	// its shape); CaseOK is the case's tally over its runs, "2 of 3", on
	// each of them.
	Run    int    `json:"run,omitempty"`
	Runs   int    `json:"runs,omitempty"`
	CaseOK string `json:"case_ok,omitempty"`
}

// caseRun is what a case produced, for Judge.
type caseRun struct {
	suites   []*Suite      // pingpong on server and client
	killTook time.Duration // kill cases: from the kill to the server's verdict (host clock)
	timeout  time.Duration // GDR_TIMEOUT of the case
}

// hostTests are one host's tests with their own failure text.
type hostTest struct {
	*report.Case
	leaf       bool
	self       float64 // seconds spent in the test itself, not in its subtests
	msg        string  // its own output without go test's framing
	childFails bool    // a subtest failed (which carries the cause)
}

// hostTests are a suite's tests with what Judge needs of their subtests
// (report's model links them: "/" in t.Run names makes one level look like
// several, rail0/WRITE/4096 is a child of rail0).
func hostTests(s *Suite) []hostTest {
	ts := s.Tests()
	out := make([]hostTest, len(ts))
	for i, t := range ts {
		self := t.Duration.Seconds()
		for _, ch := range t.Children {
			self -= ch.Duration.Seconds()
		}
		out[i] = hostTest{Case: t, leaf: len(t.Children) == 0, self: self, msg: ownText(output(t)), childFails: subtestFailed(t)}
	}
	return out
}

// subtestFailed reports whether a subtest of c, at any depth, failed or
// never finished.
func subtestFailed(c *report.Case) bool {
	for _, ch := range c.Children {
		if ch.Status() == report.Fail || subtestFailed(ch) {
			return true
		}
	}
	return false
}

// ownText drops go test's framing lines from a test's output.
func ownText(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		keep = append(keep, t)
	}
	return strings.Join(keep, "\n")
}

// Judge checks a case's results against its expectation.
func Judge(c FaultCase, cr caseRun) CaseResult {
	margin := c.Margin
	if margin == 0 {
		margin = FaultMargin
	}
	deadline := cr.timeout + margin
	res := CaseResult{Name: c.Name, Expected: c.Expected, DeadlineS: deadline.Seconds()}
	var problems, got []string
	causes := regexp.MustCompile(`(?i)` + orNever(c.Causes))
	var slowest, slowestFail float64
	anyFail := false
	for _, s := range cr.suites {
		tests := hostTests(s)
		var nPass, nFail, nSkip, leakSeen int
		var fails []string
		failedYet, recovered := false, false
		var need *regexp.Regexp
		if n := c.Need[s.Role]; n != "" {
			need = regexp.MustCompile(`(?i)` + n)
		}
		needMet := need == nil
		for _, t := range tests {
			if v, ok := t.Own["gdr.rdma_leaked_count"]; ok {
				leakSeen++
				n, _ := strconv.Atoi(v)
				res.Leaked += n
			}
			if t.leaf {
				slowest = max(slowest, t.Duration.Seconds())
			}
			switch action(t.Case) {
			case "pass":
				nPass++
				if failedYet && t.leaf {
					recovered = true
				}
			case "skip":
				nSkip++
				if c.Pass && !gpuSkip(t.Case) {
					problems = append(problems, fmt.Sprintf("%s: %s skipped: %s", s.Role, t.Name, firstLine(t.msg)))
				}
			default:
				nFail++
				anyFail, failedYet = true, true
				if t.Result == gtr.Unknown {
					if !(c.Kill > 0 && s.Role == "client") { // a killed VM's test never ends
						problems = append(problems, fmt.Sprintf("%s: %s never reached a verdict", s.Role, t.Name))
					}
					continue
				}
				if !t.leaf && (t.msg == "" || t.childFails) {
					continue // fails for its subtests, which carry the cause
				}
				took := t.self
				if t.leaf {
					took = t.Duration.Seconds()
				}
				slowestFail = max(slowestFail, took)
				line := firstFailLine(output(t.Case))
				fails = append(fails, fmt.Sprintf("%s %.1fs: %s", t.Name, took, clipLine(line, 160)))
				if took > deadline.Seconds() {
					problems = append(problems, fmt.Sprintf("%s: %s took %.1fs to its verdict, more than GDR_TIMEOUT %v + margin %v", s.Role, t.Name, took, cr.timeout, margin))
				}
				if cascade.MatchString(t.msg) {
					problems = append(problems, fmt.Sprintf("%s: %s failed on what an earlier test left behind: %s", s.Role, t.Name, clipLine(line, 200)))
				}
				if c.Pass {
					problems = append(problems, fmt.Sprintf("%s: %s failed, and this case must pass: %s", s.Role, t.Name, clipLine(line, 200)))
				} else if !causes.MatchString(t.msg) {
					problems = append(problems, fmt.Sprintf("%s: %s failed without naming the cause (%s): %s", s.Role, t.Name, c.Causes, clipLine(line, 200)))
				}
				if need != nil && need.MatchString(t.msg) {
					needMet = true
				}
			}
		}
		if need != nil && !needMet && c.Pass {
			for _, t := range tests {
				if need.MatchString(output(t.Case)) {
					needMet = true
				}
			}
		}
		if !needMet && (c.Pass || c.MustFail || nFail > 0) && !(c.Kill > 0 && s.Role == "client") {
			problems = append(problems, fmt.Sprintf("%s: nothing in its results matches %q", s.Role, c.Need[s.Role]))
		}
		if c.Recover && failedYet && !recovered {
			problems = append(problems, s.Role+": no test passed after the first failure (the fault's effect did not stay with the tests it hit)")
		}
		if s.StepErr != "" && !(c.Kill > 0 && s.Role == "client") {
			problems = append(problems, fmt.Sprintf("%s: the run itself failed: %s", s.Role, s.StepErr))
		}
		if cascade.MatchString(s.StepErr) {
			problems = append(problems, s.Role+": "+s.StepErr)
		}
		if len(tests) > 0 && leakSeen == 0 {
			problems = append(problems, s.Role+": no test recorded gdr.rdma_leaked_count (GDR_LEAK_CHECK did not run)")
		}
		h := fmt.Sprintf("%s %d pass %d fail %d skip", s.Role, nPass, nFail, nSkip)
		if len(fails) > 0 {
			h += " (" + strings.Join(fails[:min(len(fails), 2)], "; ")
			if len(fails) > 2 {
				h += fmt.Sprintf("; and %d more", len(fails)-2)
			}
			h += ")"
		}
		if c.Kill > 0 && s.Role == "client" {
			h = "client VM killed"
			if len(tests) > 0 {
				h += fmt.Sprintf(" after %d tests", nPass)
			}
		}
		got = append(got, h)
	}
	if c.Kill > 0 {
		k := cr.killTook.Seconds()
		got = append(got, fmt.Sprintf("server's verdict %.1fs after the kill", k))
		slowestFail = max(slowestFail, k)
		if cr.killTook <= 0 {
			problems = append(problems, "the client VM was not killed, or the server's run never ended")
		} else if k > deadline.Seconds() {
			problems = append(problems, fmt.Sprintf("the server needed %.1fs after the kill, more than GDR_TIMEOUT %v + margin %v", k, cr.timeout, margin))
		}
	}
	if c.MustFail && !anyFail {
		problems = append(problems, "no test failed: the fault went unnoticed")
	}
	if res.Leaked > 0 {
		problems = append(problems, fmt.Sprintf("%d RDMA objects left between tests (gdr.rdma_leaked_count)", res.Leaked))
	}
	if len(cr.suites) == 0 {
		problems = append(problems, "no results")
	}
	res.Seconds, res.Measured = slowestFail, "slowest failing verdict"
	if c.Kill > 0 {
		res.Measured = "slowest failing verdict or the server's after the kill"
	}
	if !anyFail && c.Kill == 0 {
		res.Seconds, res.Measured = slowest, "longest test (none failed)"
	}
	res.Got = strings.Join(got, "; ")
	res.Problems = problems
	res.OK = len(problems) == 0
	return res
}

func orNever(re string) string {
	if re == "" {
		return `$.^`
	}
	return re
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// FaultTable prints the matrix.
func FaultTable(w io.Writer, rs []CaseResult) {
	nw := len("case")
	for _, r := range rs {
		nw = max(nw, len(runName(r)))
	}
	fmt.Fprintf(w, "seconds: the slowest failing test's verdict on either host (kill: the server's after the kill); in parentheses when nothing failed: the longest test\n")
	fmt.Fprintf(w, "%-*s  %-4s  %8s  %10s  %6s  %7s  %s\n", nw, "case", "ok", "seconds", "deadline_s", "leaked", "wall_s", "got")
	for _, r := range rs {
		ok := "ok"
		if !r.OK {
			ok = "FAIL"
		}
		secs := fmt.Sprintf("%.1f", r.Seconds)
		if strings.HasPrefix(r.Measured, "longest") {
			secs = "(" + secs + ")" // nothing failed: no verdict to time
		}
		fmt.Fprintf(w, "%-*s  %-4s  %8s  %10.1f  %6d  %7.0f  %s\n", nw, runName(r), ok, secs, r.DeadlineS, r.Leaked, r.WallS, r.Got)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "%-*s        problem: %s\n", nw, "", p)
		}
	}
	if len(rs) == 0 || rs[0].Runs < 2 {
		return // one run per case: the rows are the verdicts
	}
	fmt.Fprintf(w, "\nruns ok per case (LAB_REPEAT=%d):\n", rs[0].Runs)
	for _, c := range Tally(slices.Clone(rs), rs[0].Runs) {
		flag := ""
		if !c.AllOK() {
			flag = "  NOT OK"
		}
		fmt.Fprintf(w, "%-*s  %s%s\n", nw, c.Name, c.String(), flag)
	}
}

// runName is a row's case name, with its run number when cases repeat.
func runName(r CaseResult) string {
	if r.Run == 0 {
		return r.Name
	}
	return fmt.Sprintf("%s #%d", r.Name, r.Run)
}

// CaseTally is one case over its runs (LAB_REPEAT).
type CaseTally struct {
	Name    string
	OK, Ran int // runs ok, runs made
	Planned int // runs asked for (an interrupted matrix made fewer)
}

// String is the tally as the table and faults.json show it: "2 of 3".
func (c CaseTally) String() string {
	s := fmt.Sprintf("%d of %d", c.OK, c.Ran)
	if c.Ran < c.Planned {
		s += fmt.Sprintf(" (%d not run)", c.Planned-c.Ran)
	}
	return s
}

// AllOK: every run asked for was made and was ok.
func (c CaseTally) AllOK() bool { return c.OK == c.Planned && c.Ran == c.Planned }

// Tally counts each case's ok runs, cases in the order they first ran,
// and writes each case's tally into its runs (Runs, CaseOK) when the matrix
// ran each case more than once (planned > 1).
func Tally(rs []CaseResult, planned int) []CaseTally {
	var out []CaseTally
	at := map[string]int{}
	for _, r := range rs {
		i, ok := at[r.Name]
		if !ok {
			i, at[r.Name] = len(out), len(out)
			out = append(out, CaseTally{Name: r.Name, Planned: max(planned, 1)})
		}
		out[i].Ran++
		if r.OK {
			out[i].OK++
		}
	}
	if planned > 1 {
		for j := range rs {
			rs[j].Runs, rs[j].CaseOK = planned, out[at[rs[j].Name]].String()
		}
	}
	return out
}

// selectCases applies LAB_FAULTS (comma-separated case names; "" = all).
func selectCases(all []FaultCase, names []string) ([]FaultCase, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []FaultCase
	for _, n := range names {
		i := slices.IndexFunc(all, func(c FaultCase) bool { return c.Name == n })
		if i < 0 {
			known := make([]string, len(all))
			for j, c := range all {
				known[j] = c.Name
			}
			return nil, fmt.Errorf("LAB_FAULTS names case %q; the cases are %s", n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// faultJobs is the pair of jobs of one case.
func (r *runner) faultJobs(c FaultCase, pp testPkg) []Job {
	key := func(role string) string { return c.Name + "-" + role }
	server := Job{Role: "server", Key: key("server"), Addr: ServerIP, Peer: ClientIP, Setup: 90 * time.Second}
	client := Job{Role: "client", Key: key("client"), Addr: ClientIP, Peer: ServerIP, Setup: 90 * time.Second}
	st := Step{ID: "2h:" + pp.Short, Pkg: pp.Short, Kind: "gotest", Timeout: r.o.StepTimeout}
	run := c.Run
	if run == "" {
		run = r.o.Run
	}
	argv := r.gotestArgv(pp, run)
	if c.FailFast {
		argv = append(argv, "-test.failfast")
	}
	env := func(role string) []string {
		e := append(r.testEnv(role), "GDR_LEAK_CHECK=1")
		if c.Timeout > 0 {
			e = append(e, "GDR_TIMEOUT="+c.Timeout.String()) // the last of a name wins
		}
		return append(e, c.Env[role]...)
	}
	pair(&server, &client, st, argv, argv, env("server"), env("client"))
	server.Steps[0].Faults = c.Faults["server"]
	client.Steps[0].Faults = c.Faults["client"]
	return []Job{server, client}
}

// runFaults is make lab-faults after the parts and binaries are ready.
func (r *runner) runFaults(ctx context.Context, qemu string, parts *vm.Parts, pkgs []testPkg, agent string) error {
	o := r.o
	var pp *testPkg
	for i := range pkgs {
		if pkgs[i].Short == PingpongPkg {
			pp = &pkgs[i]
		}
	}
	if pp == nil {
		return fmt.Errorf("lab-faults: no %s test binary was built (tags %q)", PingpongPkg, o.Tags)
	}
	cases, err := selectCases(FaultCases(), o.Faults)
	if err != nil {
		return err
	}
	im := &vm.Image{Parts: parts, Agent: agent, Binaries: map[string]string{pp.Guest: pp.Bin}, Jobs: map[string]vm.Job{}}
	plans := map[string][]Job{}
	for _, c := range cases {
		plans[c.Name] = r.faultJobs(c, *pp)
		for _, j := range plans[c.Name] {
			im.Jobs[j.Key] = j
		}
	}
	initrd := filepath.Join(r.dir, "initrd.gz")
	if err := im.Build(initrd); err != nil {
		return fmt.Errorf("building the initramfs: %w", err)
	}
	var results []CaseResult
	n := max(o.Repeat, 1)
	for _, c := range cases {
		for i := 1; i <= n; i++ {
			run := 0 // one run: today's names, folders and faults.json
			if n > 1 {
				run = i
			}
			res := r.faultCase(ctx, qemu, parts, initrd, c, plans[c.Name], run)
			res.Run = run
			results = append(results, res)
			status := "ok"
			if !res.OK {
				status = "FAILED: " + strings.Join(res.Problems, "; ")
			}
			r.logf("case %s: %s (%.0fs)", runName(res), status, res.WallS)
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	tallies := Tally(results, n)
	if err := writeRows(o.ReportDir, "faults.json", results, o.Out, func(w io.Writer) { FaultTable(w, results) }); err != nil {
		return err
	}
	bad := 0
	for _, c := range tallies {
		if !c.AllOK() {
			bad++
		}
	}
	if n == 1 {
		fmt.Fprintf(o.Out, "\nfault matrix: %d of %d cases ok in %.0fs (%s/faults.json; each case's events and consoles in %s/<case>/)\n",
			len(tallies)-bad, len(tallies), time.Since(r.start).Seconds(), o.ReportDir, o.ReportDir)
	} else {
		fmt.Fprintf(o.Out, "\nfault matrix: %d of %d cases ok in all %d runs, in %.0fs (%s/faults.json; each run's events and consoles in %s/<case>/run<n>/)\n",
			len(tallies)-bad, len(tallies), n, time.Since(r.start).Seconds(), o.ReportDir, o.ReportDir)
	}
	if bad > 0 {
		return fmt.Errorf("lab-faults: %d case(s) not as expected", bad)
	}
	return nil
}

// faultCase boots fresh VMs for one case, plants its faults and judges it.
// run is the run's number when cases repeat (0: the only run); its
// events and consoles go to <case>/run<n>/.
func (r *runner) faultCase(ctx context.Context, qemu string, parts *vm.Parts, initrd string, c FaultCase, plan []Job, run int) CaseResult {
	start := time.Now()
	r.logf("case %s: %s", runName(CaseResult{Name: c.Name, Run: run}), c.Expected)
	if c.Load > 0 {
		stop := startLoad(c.Load, r.logf)
		defer stop()
	}
	r.kill, r.o.KillAfter = c.Kill > 0, c.Kill
	defer func() { r.kill = false }()
	runs, vmErrs := r.boot(ctx, qemu, parts, initrd, plan)
	suites := r.collect(ctx, plan, runs, vmErrs)
	dir := filepath.Join(r.o.ReportDir, c.Name)
	if run > 0 {
		dir = filepath.Join(dir, fmt.Sprintf("run%d", run))
	}
	_ = os.MkdirAll(dir, 0o755)
	for role, vr := range runs {
		if b, err := os.ReadFile(vr.vm.Console); err == nil {
			_ = os.WriteFile(filepath.Join(dir, role+".console.log"), b, 0o644)
		}
	}
	cr := caseRun{timeout: r.o.Timeout}
	if c.Timeout > 0 {
		cr.timeout = c.Timeout
	}
	for _, s := range suites {
		if s.Pkg != PingpongPkg {
			if s.StepErr != "" && !(c.Kill > 0 && s.Role == "client") {
				cr.suites = append(cr.suites, s) // setup failures count
			}
			continue
		}
		cr.suites = append(cr.suites, s)
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		for _, e := range s.Events {
			_ = enc.Encode(e)
		}
		_ = os.WriteFile(filepath.Join(dir, s.Role+"_pingpong.json"), []byte(buf.String()), 0o644)
	}
	sort.Slice(cr.suites, func(i, j int) bool { return cr.suites[i].Role > cr.suites[j].Role }) // server first
	if c.Kill > 0 {
		if cl, sv := runs["client"], runs["server"]; cl != nil && sv != nil && cl.killed != "" {
			if end, ok := sv.stepEnd["2h:"+PingpongPkg]; ok {
				cr.killTook = end.Sub(cl.killAt)
			}
		}
	}
	res := Judge(c, cr)
	res.WallS = time.Since(start).Seconds()
	return res
}
