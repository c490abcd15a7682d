package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/report"
)

// The stand-in workload of the cluster lab (LAB_CLUSTER_SUITE=standin):
// until pingpong runs every rail, it proves the cluster machinery (Slurm,
// the rounds, the shared folder, the merge and isolation) with perftest's
// ib_write_bw on every rail, rail i meeting rail i on the peer, written as
// go test -json events a pair result is read from (gdr.rail, gdr.role,
// gdr.peer, gdr.bw_gbit_s, gdr.size_bytes, gdr.op). Its tests carry no
// requirement ID: they are labelled lab tooling, never suite evidence.
const (
	StandinPkg  = "lab/standin"
	StandinTest = "TestLabStandinWriteBW"
)

// StandinConfig is read from the round's environment (gdrcluster plan's
// variables plus the lab's).
type StandinConfig struct {
	Role, PeerHost, PeerName, Host string
	Port                           int // rail r uses Port+r
	Rails                          int
	Size, Iters                    int
	Timeout                        time.Duration
	Reports                        string
}

// ParseStandin reads the stand-in's configuration; bad values name the variable.
func ParseStandin(lookup func(string) (string, bool)) (StandinConfig, error) {
	get := func(k, def string) string {
		if v, ok := lookup(k); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
		return def
	}
	c := StandinConfig{Role: get("GDR_ROLE", ""), PeerName: get("GDR_PEER_NAME", ""), Host: get("GDR_HOST_NAME", ""), Reports: get("GDR_REPORTS", "")}
	num := func(k, def string, lo int) (int, error) {
		v := get(k, def)
		n, err := strconv.Atoi(v)
		if err != nil || n < lo {
			return 0, fmt.Errorf("%s=%q: want a whole number >= %d", k, v, lo)
		}
		return n, nil
	}
	var err error
	if c.Rails, err = num("LAB_STANDIN_RAILS", "2", 1); err != nil {
		return c, err
	}
	if c.Size, err = num("LAB_STANDIN_SIZE", "65536", 1); err != nil {
		return c, err
	}
	if c.Iters, err = num("LAB_STANDIN_ITERS", "200", 1); err != nil {
		return c, err
	}
	t := get("GDR_TIMEOUT", "45s")
	if c.Timeout, err = time.ParseDuration(t); err != nil || c.Timeout <= 0 {
		return c, fmt.Errorf("GDR_TIMEOUT=%q: want a duration like 45s", t)
	}
	if c.Reports == "" || c.Host == "" {
		return c, fmt.Errorf("GDR_REPORTS and GDR_HOST_NAME must be set (deploy/rounds.sh sets them from gdrcluster plan)")
	}
	var hp string
	switch c.Role {
	case "server":
		hp = get("GDR_LISTEN", "")
	case "client":
		hp = get("GDR_PEER", "")
	default:
		return c, fmt.Errorf("GDR_ROLE=%q: want server or client", c.Role)
	}
	h, p, err := net.SplitHostPort(hp)
	if err == nil {
		c.Port, err = strconv.Atoi(p)
	}
	if err != nil || c.Port < 1 || c.Port+c.Rails > 65535 {
		return c, fmt.Errorf("GDR_LISTEN or GDR_PEER %q: want host:port", hp)
	}
	c.PeerHost = h
	return c, nil
}

// standinArgv is ib_write_bw for rail r (device rxe<r>, RoCE v2 GID 1).
func (c StandinConfig) standinArgv(r int) []string {
	a := []string{"/usr/bin/ib_write_bw", "-d", fmt.Sprintf("rxe%d", r), "-x", "1", "-F", "-s", strconv.Itoa(c.Size),
		"-n", strconv.Itoa(c.Iters), "-p", strconv.Itoa(c.Port + r)}
	if c.Role == "client" {
		a = append(a, c.PeerHost)
	}
	return a
}

// StandinEvents turns one rail's run into go test -json events of the
// subtest <StandinTest>/rail<r>.
func (c StandinConfig) StandinEvents(r int, out string, runErr error, took time.Duration) []report.Event {
	name := fmt.Sprintf("%s/rail%d", StandinTest, r)
	ev := func(action string) report.Event { return report.Event{Action: action, Package: StandinPkg, Test: name} }
	attr := func(k, v string) report.Event { e := ev("attr"); e.Key, e.Value = "gdr."+k, v; return e }
	evs := []report.Event{ev("run"), attr("rail", strconv.Itoa(r)), attr("nic", fmt.Sprintf("rxe%d", r)), attr("role", c.Role),
		attr("peer", c.PeerName), attr("op", "WRITE"), attr("size_bytes", strconv.Itoa(c.Size)),
		attr("tool", "ib_write_bw (perftest): the cluster lab's stand-in for pingpong's per-rail PP-08")}
	o := ev("output")
	o.Output = "$ " + strings.Join(c.standinArgv(r), " ") + "\n" + out
	evs = append(evs, o)
	bw, perr := ParsePerftestBW(out, c.Size)
	status := "pass"
	switch {
	case runErr != nil:
		status = "fail"
		o.Output = fmt.Sprintf("    standin.go:1: ib_write_bw on rail %d with %s failed: %v\n", r, c.PeerName, runErr)
		evs = append(evs, o)
	case perr != nil:
		status = "fail"
		o.Output = fmt.Sprintf("    standin.go:1: rail %d with %s: %v\n", r, c.PeerName, perr)
		evs = append(evs, o)
	default:
		evs = append(evs, attr("bw_gbit_s", strconv.FormatFloat(bw, 'f', 4, 64)))
	}
	end := ev(status)
	end.Elapsed = took.Seconds()
	return append(evs, end)
}

// StandinMain runs the stand-in for one round: every rail in turn, then the
// round's report folder (test.json, host.json and the report), as
// dist/run.sh leaves it. Its exit status is 1 when a rail failed.
func StandinMain(lookup func(string) (string, bool), stdout io.Writer) int {
	c, err := ParseStandin(lookup)
	if err != nil {
		fmt.Fprintf(stdout, "gdrlab standin: %v\n", err)
		return 2
	}
	evs := []report.Event{{Action: "start", Package: StandinPkg}, {Action: "run", Package: StandinPkg, Test: StandinTest}}
	failed := false
	start := time.Now()
	for r := 0; r < c.Rails; r++ {
		t0 := time.Now()
		out, err := c.runRail(r)
		fmt.Fprintf(stdout, "%s rail %d (%s with %s): %s\n", c.Host, r, c.Role, c.PeerName, oneLine(clip.LastLines(out, 3)))
		re := c.StandinEvents(r, out, err, time.Since(t0))
		failed = failed || re[len(re)-1].Action == "fail"
		evs = append(evs, re...)
	}
	status := "pass"
	if failed {
		status = "fail"
	}
	evs = append(evs, report.Event{Action: status, Package: StandinPkg, Test: StandinTest, Elapsed: time.Since(start).Seconds()},
		report.Event{Action: status, Package: StandinPkg, Elapsed: time.Since(start).Seconds()})
	id := report.Collect()
	id.Host = c.Host
	id.Role, id.Peer = c.Role, c.PeerName
	id.Kind = "lab: qemu VM with Soft-RoCE (rxe0, rxe1); stand-in workload (ib_write_bw), not suite evidence"
	rc := 0
	if failed {
		rc = 1
	}
	id.GoTestExit = &rc
	run := report.Run{Host: id, Events: evs}
	if err := report.SaveRun(c.Reports, run); err != nil {
		fmt.Fprintf(stdout, "gdrlab standin: %v\n", err)
		return 2
	}
	if err := report.Build([]report.Run{run}).WriteAll(c.Reports); err != nil {
		fmt.Fprintf(stdout, "gdrlab standin: %v\n", err)
		return 2
	}
	return rc
}

// runRail runs ib_write_bw on rail r. The client retries while the server
// is not listening yet; both ends give up after the timeout.
func (c StandinConfig) runRail(r int) (string, error) {
	deadline := time.Now().Add(c.Timeout + 2*time.Minute)
	argv := c.standinArgv(r)
	var last string
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/tmp"}
		b, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		last = string(b)
		if err == nil {
			return last, nil
		}
		if timedOut {
			return last, fmt.Errorf("no result within %v: %v", c.Timeout+2*time.Minute, err)
		}
		// perftest's client says so when nobody listens yet.
		if c.Role == "client" && strings.Contains(last, "Couldn't connect") && time.Now().Add(2*time.Second).Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		return last, fmt.Errorf("%v (attempt %d)", err, attempt)
	}
}

// standinScript is GDR_SUITE in the stand-in mode: /init is gdrlab.
const standinScript = "#!/bin/sh\nexec /init standin \"$@\"\n"

// writeRows is how a lab that judges rows ends (the fault matrix, the
// soak): the rows as indented JSON in dir/name for tools, then, after a
// blank line, the same rows as a table for people.
func writeRows(dir, name string, rows any, out io.Writer, table func(io.Writer)) error {
	if err := writeJSONFile(filepath.Join(dir, name), rows); err != nil {
		return err
	}
	fmt.Fprintln(out)
	table(out)
	return nil
}

// writeJSONFile writes v as indented JSON.
func writeJSONFile(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o644)
}
