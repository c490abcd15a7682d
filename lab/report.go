package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jstemmer/go-junit-report/v2/gtr"

	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/report"
	"github.com/gdrconf/gdrconf/report/junitcheck"
)

// Event is the report's test2json event: the lab and the report read the
// same streams.
type Event = report.Event

// Test2JSON converts a test binary's -test.v=test2json output into JSON
// events with `go tool test2json`, labelling them with pkg. test2json gives
// Elapsed only with -t, whose Time is the conversion's, not the test's:
// ParseEvents callers drop it with DropTimes.
func Test2JSON(ctx context.Context, goCmd string, pkg string, raw []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "tool", "test2json", "-t", "-p", pkg)
	cmd.Stdin = bytes.NewReader(raw)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s tool test2json -p %s: %v: %s", goCmd, pkg, err, errb.String())
	}
	return out.Bytes(), nil
}

// DropTimes clears the Time of every event.
func DropTimes(evs []Event) {
	for i := range evs {
		evs[i].Time = nil
	}
}

// Suite is the result of one package on one host (server, client, loopback).
type Suite struct {
	Host    string // server, client, loopback
	Pkg     string // conformance/pingpong, perftest
	Role    string // gdr.role: server, client, loopback
	VM      string // the job role of the VM that ran it (loopback runs in the server VM); "" when unknown
	Events  []Event
	StepErr string // the step itself failed outside any test (killed, crashed, did not start)
}

// Name is the JUnit testsuite name.
func (s *Suite) Name() string { return s.Host + "/" + s.Pkg }

// events are the suite's events as the report reads them: labelled with
// the suite's name where the step gave none, without test2json's times.
func (s *Suite) events() []report.Event {
	evs := make([]report.Event, 0, len(s.Events))
	for _, e := range s.Events {
		pkg := e.Package
		if pkg == "" {
			pkg = s.Name()
		}
		evs = append(evs, report.Event{Action: e.Action, Package: pkg, Test: e.Test, Elapsed: e.Elapsed,
			Output: e.Output, Key: e.Key, Value: e.Value})
	}
	return evs
}

// Tests are the suite's tests and subtests in the order they started, as
// report's model folds them (report.Build): the lab judges the cases its
// report shows. A case's Own attributes are the ones the lab reads.
func (s *Suite) Tests() []*report.Case {
	return report.Build([]report.Run{{Host: report.Identity{Host: s.Host}, Events: s.events()}}).Hosts[0].AllCases()
}

// action is a case's go test action: pass, fail, skip, or "" when it never
// finished.
func action(c *report.Case) string {
	switch c.Result {
	case gtr.Pass:
		return "pass"
	case gtr.Fail:
		return "fail"
	case gtr.Skip:
		return "skip"
	}
	return ""
}

// output is everything a case printed, framing included.
func output(c *report.Case) string { return strings.Join(c.Output, "\n") }

// Counts is pass/fail/skip for a suite.
type Counts struct{ Pass, Fail, Skip int }

// Counts counts tests and subtests; a test that never finished counts as
// failed, and a step failure outside any test counts as one more failure.
func (s *Suite) Counts() Counts {
	var c Counts
	for _, t := range s.Tests() {
		switch t.Status() {
		case report.Pass:
			c.Pass++
		case report.Skip:
			c.Skip++
		default:
			c.Fail++
		}
	}
	if s.StepErr != "" {
		c.Fail++
	}
	return c
}

// Runs turns the suites into the report package's runs, one per host (the
// VM roles server and client, and loopback), with what the lab knows of each
// host's identity: what the VM's agent collected inside it (vms, by the
// suite's VM: kernel, NICs, modules, DMI, the inventory), under the lab's
// own labels (host, kind, role, addresses). Events keep the package names
// the lab gave them (server/conformance/pingpong): the report's area is the
// last element.
func Runs(suites []*Suite, kernel string, vms map[string]*report.Identity) []report.Run {
	var runs []report.Run
	idx := map[string]int{}
	for _, s := range suites {
		i, ok := idx[s.Host]
		if !ok {
			var id report.Identity
			if in := vms[s.VM]; in != nil {
				id = *in
				id.Addrs, id.Peer, id.Role = nil, "", ""
			}
			id.Host, id.Role, id.Suite = s.Host, s.Role, report.SuiteVersion()
			id.Kind = "lab: qemu VM with Soft-RoCE (rxe0) and an emulated GPU; not hardware evidence"
			if id.Kernel == "" {
				id.Kernel = kernel
			}
			switch s.Role {
			case "server":
				id.Addrs = []string{ServerIP}
			case "client":
				id.Addrs, id.Peer = []string{ClientIP}, ServerIP
			}
			i = len(runs)
			idx[s.Host] = i
			runs = append(runs, report.Run{Host: id})
		}
		runs[i].Events = append(runs[i].Events, s.events()...)
		if s.StepErr != "" {
			runs[i].Errs = append(runs[i].Errs, s.Name()+": "+s.StepErr)
		}
	}
	return runs
}

// firstLine is the first non-blank line of s that is not go test framing.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
			return l
		}
	}
	return ""
}

// Summary prints one line per suite: host, package, pass, fail, skip. The
// counts are fixed-width, right-aligned, in the row's last cell.
func Summary(w io.Writer, suites []*Suite) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "host\tpackage\t%5s  %5s  %5s\n", "pass", "fail", "skip")
	var tot Counts
	for _, s := range suites {
		c := s.Counts()
		tot.Pass += c.Pass
		tot.Fail += c.Fail
		tot.Skip += c.Skip
		fmt.Fprintf(tw, "%s\t%s\t%5d  %5d  %5d\n", s.Host, s.Pkg, c.Pass, c.Fail, c.Skip)
	}
	fmt.Fprintf(tw, "total\t\t%5d  %5d  %5d\n", tot.Pass, tot.Fail, tot.Skip)
	tw.Flush()
}

// gpuSkip reports whether t is a test the lab expects to skip: a GPU-only
// requirement's (reqs.Req.GPUOnly) skipped for want of a GPU (the skip names
// libcuda.so.1 or says no GPU; the lab's VMs have none), or a multi-rail
// one's (reqs.Req.MultiRail) for want of a second rail (the two-VM lab has
// one per VM, make lab-cluster has two). A case on cuMemCreate memory
// (gdr.gpu_alloc: PP-04/PP-05's, of any requirement) is GPU-only too, and
// also skips in the host-memory run (GDR_MEM=host). Skipped for any other
// reason (say, no RDMA device) it is not excused.
func gpuSkip(t *report.Case) bool {
	if t.Result != gtr.Skip {
		return false
	}
	why := t.Own["gdr.skip"] + "\n" + output(t)
	r, _ := reqs.Lookup(t.Own["gdr.req"])
	if r.MultiRail {
		return strings.Contains(why, "needs two or more rails")
	}
	gpuCase := t.Own["gdr.gpu_alloc"] != ""
	if !r.GPUOnly && !gpuCase {
		return false
	}
	return strings.Contains(why, "libcuda.so.1") || strings.Contains(why, "no GPU") ||
		(gpuCase && strings.Contains(why, "GDR_MEM=host"))
}

// GPUSkips lists, for the lab's NOTE, the GPU-only tests of the mustRun
// packages that skipped because the VMs have no GPU.
func GPUSkips(suites []*Suite, mustRun []string) []string {
	var notes []string
	for _, s := range suites {
		if !slices.Contains(mustRun, s.Pkg) {
			continue
		}
		for _, t := range s.Tests() {
			if gpuSkip(t) {
				why := t.Own["gdr.skip"]
				if why == "" {
					why = firstLine(output(t))
				}
				what := "the VMs have no GPU"
				if r, _ := reqs.Lookup(t.Own["gdr.req"]); r.MultiRail {
					what = "each VM has one rail (make lab-cluster has two)"
				} else if strings.Contains(why, "GDR_MEM=host") {
					what = "this run is on host memory"
				}
				notes = append(notes, fmt.Sprintf("%s: %s (%s) skipped: %s (%s)", s.Name(), t.Name, t.Own["gdr.req"], what, why))
			}
		}
	}
	return notes
}

// Verdict decides the lab's outcome over report's cases: any failure
// fails, and so does any skipped test of the packages in mustRun (the lab
// exists to prove those really run), except the skips gpuSkip expects.
func Verdict(suites []*Suite, mustRun []string) []string {
	var problems []string
	for _, s := range suites {
		for _, t := range s.Tests() {
			switch t.Result {
			case gtr.Unknown:
				problems = append(problems, fmt.Sprintf("%s: %s did not finish (binary crashed, hung or its VM died)", s.Name(), t.Name))
			case gtr.Fail:
				problems = append(problems, fmt.Sprintf("%s: %s failed: %s", s.Name(), t.Name, firstFailLine(output(t))))
			case gtr.Skip:
				if gpuSkip(t) {
					continue
				}
				for _, m := range mustRun {
					if s.Pkg == m {
						problems = append(problems, fmt.Sprintf("%s: %s was skipped, but the lab must run it: %s", s.Name(), t.Name, firstLine(output(t))))
					}
				}
			}
		}
		if s.StepErr != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", s.Name(), s.StepErr))
		}
	}
	return problems
}

// firstFailLine picks the most telling line of a failed test's output: the
// first that gives a remedy (the suite's failures do), else the first line;
// never go test's framing, whose "=== ATTR ... gdr.remedy" lines come
// before the failure they describe.
func firstFailLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "=== ") {
			continue
		}
		if strings.Contains(l, "remedy") || strings.Contains(l, "panic:") {
			return strings.TrimSpace(l)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		return l
	}
	return "(no output)"
}

// JUnitProblems checks dir's junit.xml against both XSDs CI systems
// validate JUnit with, and what they cannot express (report/junitcheck): a
// file Jenkins xUnit or an Ant consumer would reject fails the lab (by the
// XSDs through xmllint where they are at hand, else by the schemas' rules
// as junitcheck re-states them), and so does a lab that cannot check.
func JUnitProblems(dir string) []string {
	f := filepath.Join(dir, report.JUnitFile)
	b, err := os.ReadFile(f)
	if err != nil {
		return []string{err.Error()}
	}
	problems, err := junitcheck.Check(b)
	if err != nil {
		return []string{fmt.Sprintf("%s: not checked against the JUnit schemas: %v", f, err)}
	}
	var out []string
	for _, s := range junitcheck.Schemas {
		var mine []string
		for _, p := range problems {
			if strings.HasPrefix(p, s.Name+": ") {
				mine = append(mine, p)
			}
		}
		if len(mine) > 0 {
			out = append(out, fmt.Sprintf("%s breaks %s in %d places, first: %s", f, s.Name, len(mine), mine[0]))
		}
	}
	var beyond []string
	for _, p := range problems {
		if !strings.HasPrefix(p, junitcheck.JUnit10.Name+": ") && !strings.HasPrefix(p, junitcheck.Ant.Name+": ") {
			beyond = append(beyond, p)
		}
	}
	if len(beyond) > 0 {
		out = append(out, fmt.Sprintf("%s breaks what CI systems rely on beyond the schemas in %d places, first: %s", f, len(beyond), beyond[0]))
	}
	return out
}
