package lab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/internal/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/report"
)

// recordedSuites rebuilds the lab's suites from a recorded lab run (one
// folder per host, as report.SaveRun wrote them): one suite per package, in
// the order the events name them.
func recordedSuites(t *testing.T, dir string) []*Suite {
	t.Helper()
	hosts, err := os.ReadDir(dir)
	require.NoError(t, err)
	var suites []*Suite
	for _, h := range hosts {
		if !h.IsDir() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, h.Name(), "test.json"))
		require.NoError(t, err)
		evs, err := report.ReadEvents(f)
		f.Close()
		require.NoError(t, err)
		DropTimes(evs)
		id, err := report.ReadIdentity(filepath.Join(dir, h.Name(), "host.json"))
		require.NoError(t, err)
		by := map[string]*Suite{}
		for _, e := range evs {
			s := by[e.Package]
			if s == nil {
				s = &Suite{Host: h.Name(), Pkg: strings.TrimPrefix(e.Package, h.Name()+"/"), Role: id.Role}
				by[e.Package] = s
				suites = append(suites, s)
			}
			s.Events = append(s.Events, e)
		}
	}
	return suites
}

// mutate applies f to every event of the suites of host and pkg.
func mutate(suites []*Suite, host, pkg string, f func(evs []Event) []Event) {
	for _, s := range suites {
		if s.Host == host && s.Pkg == pkg {
			s.Events = f(s.Events)
		}
	}
}

// labOutput is what the lab prints and decides from its suites after the
// run (report() less the files and the kill and bench modes), and what its
// kill, bench and fault verdicts read of each test.
func labOutput(suites []*Suite, emulated bool) string {
	var b bytes.Buffer
	Summary(&b, suites)
	problems := Verdict(suites, []string{PingpongPkg})
	if emulated {
		ep, notes := EmulatedVerdict(suites)
		problems = append(problems, ep...)
		fmt.Fprintf(&b, "emulated notes:\n  %s\n", strings.Join(notes, "\n  "))
	}
	fmt.Fprintf(&b, "gpu skips:\n  %s\n", strings.Join(GPUSkips(suites, []string{PingpongPkg}), "\n  "))
	sort.Strings(problems)
	fmt.Fprintf(&b, "problems:\n  %s\n", strings.Join(problems, "\n  "))
	closing(&b, suites)
	rep := report.Build(Runs(suites, "6.1.0-57-amd64", nil))
	fmt.Fprintf(&b, "report: %s (exit %d)\n", rep.Verdict.Line, rep.ExitCode())
	for _, s := range suites {
		c := s.Counts()
		fmt.Fprintf(&b, "suite %s %d/%d/%d\n", s.Name(), c.Pass, c.Fail, c.Skip)
		for _, t := range s.Tests() {
			var attrs []string
			for k, v := range t.Own {
				attrs = append(attrs, k+"="+v)
			}
			sort.Strings(attrs)
			out := output(t)
			fmt.Fprintf(&b, "  %s %q %.3f gpuSkip=%v %s\n    first: %s\n    fail: %s\n    one: %s\n",
				t.Name, action(t), t.Duration.Seconds(), gpuSkip(t), strings.Join(attrs, " "), firstLine(out), firstFailLine(out), oneLine(out))
		}
	}
	return b.String()
}

// The lab's verdict, summary lines and closing line on recorded lab runs,
// as recorded and with failures planted, stay what they were: golden files
// in testdata (UPDATE=1 go test ./lab rewrites them).
func TestRecordedLabVerdicts(t *testing.T) {
	setAction := func(test, from, to, out string) func([]Event) []Event {
		return func(evs []Event) []Event {
			var keep []Event
			for _, e := range evs {
				if e.Test == test && e.Action == from {
					if out != "" {
						keep = append(keep, Event{Action: "output", Package: e.Package, Test: test, Output: out})
					}
					if to == "" {
						continue
					}
					e.Action = to
				}
				keep = append(keep, e)
			}
			return keep
		}
	}
	cases := []struct {
		name, run string
		emulated  bool
		plant     func([]*Suite)
	}{
		{"emulated", "lab-emulated", true, nil},
		{"pingpong", "lab-pingpong", false, nil},
		{"fail", "lab-pingpong", false, func(s []*Suite) {
			mutate(s, "server", PingpongPkg, setAction("TestPP03Write", "pass", "fail", "    x_test.go:9: data differs at byte 4; remedy: check the NIC\n"))
			mutate(s, "client", "perftest", setAction("ibv_rc_pingpong", "pass", "fail", "exit status 1 \n"))
		}},
		{"skip", "lab-emulated", true, func(s []*Suite) {
			mutate(s, "client", PingpongPkg, setAction("TestPP05Read", "pass", "skip", "    x_test.go:3: no RDMA device\n"))
			mutate(s, "server", PingpongPkg, setAction("TestPP09HostVsGPU", "pass", "skip", "    x_test.go:3: no CUDA driver: libcuda.so.1 does not open\n"))
		}},
		{"hang", "lab-emulated", true, func(s []*Suite) {
			mutate(s, "loopback", PingpongPkg, setAction("TestPP06SendRecv", "pass", "", ""))
			mutate(s, "server-hostmem", PingpongPkg, func(evs []Event) []Event {
				for i := range evs {
					if evs[i].Action == "pass" {
						evs[i].Action = "fail"
					}
				}
				return evs
			})
		}},
		{"hostmem", "lab-emulated", true, func(s []*Suite) {
			mutate(s, "server", PingpongPkg, func(evs []Event) []Event {
				for i := range evs {
					if evs[i].Action == "attr" && evs[i].Key == "gdr.mem" && strings.HasPrefix(evs[i].Test, "TestPP04") {
						evs[i].Value = "host"
					}
				}
				return evs
			})
			s[0].StepErr = "did not finish: its VM died"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			suites := recordedSuites(t, filepath.Join("..", "fixtures", "runs", c.run))
			if c.plant != nil {
				c.plant(suites)
			}
			got := labOutput(suites, c.emulated)
			want, err := golden.File(filepath.Join("testdata", "verdict-"+c.name+".txt"), []byte(got))
			require.NoError(t, err, "no golden output: "+golden.Hint("./lab"))
			assert.Equal(t, string(want), got, "the lab's output on %s changed", c.run)
		})
	}
}
