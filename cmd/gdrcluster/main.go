// Command gdrcluster plans and judges an N-host run of the suite. It runs
// inside each task that Slurm (srun -N<n> --ntasks-per-node=1) or a
// Kubernetes Indexed Job started; it starts nothing and reaches no host.
//
//	gdrcluster start [-identity FILE]    the start barrier: wait for every task (GDR_START_TIMEOUT);
//	                                     publish this host's NVLink domain (GPU-16's events in FILE)
//	gdrcluster heartbeat                 mark this task alive until it ends (run in the background)
//	eval "$(gdrcluster plan -round K)"   this task's round K: GDR_PLAN (run, idle, done),
//	                                     GDR_ROLE, GDR_PEER, GDR_LISTEN, GDR_TOKEN, ...,
//	                                     GDR_PLAN_SOAK_SKIP (GDR_SOAK read as the suite reads it)
//	gdrcluster done -round K             mark this task's round K finished
//	gdrcluster wait -round K             wait until every task finished round K (GDR_ROUND_TIMEOUT)
//	gdrcluster isolate [-json] [-run ID] pairs, suspects and bad links from the shared reports
//	gdrcluster hosts [-addrs]            the job's hosts in schedule order
//	gdrcluster gres-gpus GRES            the GPU count of a node's Gres (scontrol show node)
//
// start and wait exit 4 when the barrier closed without this host (it came
// too late: the run goes on without it); a barrier that closed without
// other hosts is said on stderr and is no error.
//
// Configuration: GDR_PAIRING, GDR_CLUSTER_SECRET(_FILE), GDR_CLUSTER_PORTS,
// GDR_PEER_SUFFIX, GDR_REPAIR_ROUNDS, GDR_REPORTS, GDR_PAIR_MIN_FRACTION,
// GDR_START_TIMEOUT, GDR_ROUND_TIMEOUT, and for plan GDR_SOAK
// (docs/configuration.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/report"
)

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

const usage = `usage: gdrcluster start [-identity FILE] | heartbeat | plan|done|wait -round K | isolate [-json] [-reports DIR] [-run ID] | hosts [-addrs] | gres-gpus GRES`

// exitLate is the status of start and wait for a host the barrier closed
// without.
const exitLate = 4

func run(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if args[0] == "gres-gpus" { // the batch script's, before any job variable is read
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: gdrcluster gres-gpus GRES (as scontrol show node prints Gres=)")
			return 2
		}
		n, err := jobenv.GresGPUs(args[1])
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintln(stdout, n)
		return 0
	}
	fs := flag.NewFlagSet("gdrcluster "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	round := fs.Int("round", -1, "round number, from 0")
	asJSON := fs.Bool("json", false, "isolate: print the summary fields as JSON")
	reports := fs.String("reports", "", "isolate: the shared reports folder (default GDR_REPORTS)")
	runID := fs.String("run", "", "isolate: the run to judge where the folder holds several (plan.json's run; inside a job, the job's own)")
	addrs := fs.Bool("addrs", false, "hosts: print the address a peer dials")
	timeout := fs.Duration("timeout", 0, "start, wait: close the barrier after this long (default GDR_START_TIMEOUT, GDR_ROUND_TIMEOUT)")
	identity := fs.String("identity", "", "start: go test -json events of GPU-16 (rounds.sh runs it alone first) whose NVLink domain this host publishes; absent or empty: none")
	quiet := fs.Duration("quiet", -1, "wait: close early when the missing hosts' heartbeats stood still this long (default from GDR_ROUND_TIMEOUT; 0: never)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	cfg, err := cluster.ParseConfig(lookup)
	if err != nil {
		return fail(stderr, err)
	}
	needRound := func() error {
		if *round < 0 {
			return fmt.Errorf("%s needs -round K (0, 1, ...)", args[0])
		}
		return nil
	}
	switch args[0] {
	case "start":
		if *timeout > 0 {
			cfg.StartTimeout = *timeout
		}
		err = withTask(lookup, cfg, func() error { return nil }, func(t jobenv.Task) error {
			c, err := cluster.Start(context.Background(), cluster.BarrierOptions{Root: cfg.Reports, Run: t.Run(), Self: t.Self(),
				Hosts: t.Names, Timeout: cfg.StartTimeout, Domain: hostDomain(*identity, stderr)})
			return closed(c, err, cfg.Reports, stderr)
		})
	case "heartbeat":
		err = withTask(lookup, cfg, func() error { return nil }, func(t jobenv.Task) error {
			return heartbeat(cfg.Reports, t, cluster.HeartbeatFor(cfg.RoundTimeout))
		})
	case "plan":
		err = plan(lookup, cfg, *round, needRound, stdout)
	case "done":
		err = withTask(lookup, cfg, needRound, func(t jobenv.Task) error { return cluster.Done(cfg.Reports, t.Self(), *round, t.Run()) })
	case "wait":
		if *timeout > 0 {
			cfg.RoundTimeout = *timeout
		}
		if *quiet < 0 {
			*quiet = cluster.QuietFor(cfg.RoundTimeout)
		}
		err = withTask(lookup, cfg, needRound, func(t jobenv.Task) error {
			live, err := cluster.LivenessBefore(cfg.Reports, t.Run(), *round)
			if err != nil {
				return err
			}
			c, err := cluster.WaitRound(context.Background(), cluster.BarrierOptions{Root: cfg.Reports, Run: t.Run(), Self: t.Self(),
				Hosts: cluster.Expected(t.Names, live, *round), Timeout: cfg.RoundTimeout, Quiet: *quiet}, *round)
			return closed(c, err, cfg.Reports, stderr)
		})
	case "hosts":
		err = withTask(lookup, cfg, func() error { return nil }, func(t jobenv.Task) error {
			list := t.Names
			if *addrs {
				list = t.Addrs
			}
			_, err := fmt.Fprintln(stdout, strings.Join(list, "\n"))
			return err
		})
	case "isolate":
		root := cfg.Reports
		if *reports != "" {
			root = *reports
		}
		err = isolateCmd(lookup, cfg, root, *runID, *asJSON, stdout)
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var late *cluster.LateError
	if errors.As(err, &late) {
		fmt.Fprintln(stderr, "gdrcluster:", err)
		return exitLate
	}
	if err != nil {
		return fail(stderr, err)
	}
	return 0
}

// hostDomain is the NVLink domain this host publishes at the start: the
// one GPU-16 recorded in the events file path holds (NVML's fabric info,
// read by the suite's one NVML reader: this binary is static and loads no
// NVML). No file, no GPU, no driver or no domain: "", and the host is
// planned as one without. A file that does not read or GPUs that disagree
// are said on w, and the host publishes none: the domain steers the
// pairing, it never stops the run.
func hostDomain(path string, w io.Writer) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		fmt.Fprintf(w, "gdrcluster: -identity: %v; this host publishes no NVLink domain\n", err)
		return ""
	}
	defer f.Close()
	evs, err := report.ReadEvents(f)
	if err != nil {
		fmt.Fprintf(w, "gdrcluster: -identity %s: %v; this host publishes no NVLink domain\n", path, err)
		return ""
	}
	d, err := cluster.HostDomain(report.NVLinkDomains(evs))
	if err != nil {
		fmt.Fprintf(w, "gdrcluster: -identity %s: %v; this host publishes no NVLink domain\n", path, err)
	}
	return d
}

// closed says on w which hosts a barrier closed without, and what they
// left that another run wrote.
func closed(c cluster.Closed, err error, root string, w io.Writer) error {
	if err != nil {
		return err
	}
	if line := c.Line(); line != "" {
		what := "they stopped in it; the run goes on without them"
		if c.Barrier == cluster.StartBarrier {
			what = "the schedule pairs the others"
		}
		fmt.Fprintf(w, "gdrcluster: %s; %s\n", line, what)
		if note := c.Note(root); note != "" {
			fmt.Fprintf(w, "gdrcluster: %s\n", note)
		}
	}
	return nil
}

// heartbeat beats until this process's parent (rounds.sh) is gone, or a
// signal ends it: a task killed with its script stops beating, and a
// round's barrier then stops waiting for it (cluster.QuietFor).
func heartbeat(root string, t jobenv.Task, interval time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	parent := os.Getppid()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if os.Getppid() != parent {
				cancel()
				return
			}
			time.Sleep(time.Second)
		}
	}()
	return cluster.Heartbeat(ctx, root, t.Run(), t.Self(), interval)
}

func fail(w io.Writer, err error) int {
	fmt.Fprintln(w, "gdrcluster:", err)
	return 1
}

func task(lookup func(string) (string, bool), cfg cluster.Config) (jobenv.Task, error) {
	t, found, err := jobenv.Detect(lookup, cfg.PeerSuffix)
	if err != nil {
		return t, err
	}
	if !found {
		return t, errors.New("not a task of a cluster job: neither SLURM_JOB_ID (srun) nor JOB_COMPLETION_INDEX (Kubernetes Indexed Job) is set")
	}
	return t, nil
}

func withTask(lookup func(string) (string, bool), cfg cluster.Config, check func() error, f func(jobenv.Task) error) error {
	if err := check(); err != nil {
		return err
	}
	t, err := task(lookup, cfg)
	if err != nil {
		return err
	}
	return f(t)
}

func plan(lookup func(string) (string, bool), cfg cluster.Config, k int, check func() error, stdout io.Writer) error {
	if err := check(); err != nil {
		return err
	}
	// GDR_SOAK read by the suite's own parser: rounds.sh's decision and
	// the suite's can then never differ on a value (00, 0.0h). A bad one
	// fails every round's plan, before any round ran.
	v, _ := lookup("GDR_SOAK")
	soak, err := config.ParseSoak(v)
	if err != nil {
		return err
	}
	t, err := task(lookup, cfg)
	if err != nil {
		return err
	}
	secret, err := cluster.Secret(cfg)
	if err != nil {
		return err
	}
	// What the barriers before round k closed on: the same files for every
	// task, so every task plans around the same hosts.
	live, err := cluster.LivenessBefore(cfg.Reports, t.Run(), k)
	if err != nil {
		return err
	}
	// The NVLink domains the hosts published at the start: the same file
	// for every task, so every task pairs across the same domains.
	if cfg.Domains, err = cluster.StartDomains(cfg.Reports, t.Run()); err != nil {
		return err
	}
	started := len(t.Names) - len(live.NotStarted)
	var s cluster.Step
	if k >= len(pairing.Base(cfg.Pairing, started)) {
		// A re-pairing round: judged from every host's earlier rounds by
		// the lead, whose plan the others read (cluster.RepairPlan).
		r, done, err := cluster.RepairPlan(context.Background(), cluster.RepairOptions{Config: cfg, Task: t, Live: live, Wait: cluster.RepairWait}, k)
		if err != nil {
			return err
		}
		s = cluster.PlanFrom(t, cfg, secret, k, r, done, live)
	} else {
		s = cluster.PlanRound(t, cfg, secret, k, nil, live)
	}
	if !s.Done && s.Plan.Role != cluster.Idle {
		ran, err := cluster.RanBefore(cfg.Reports, t.Run(), t.Self(), k)
		if err != nil {
			return err
		}
		s.SoakSkip = cluster.SoakSkip(soak, k, ran)
	}
	if !s.Done {
		if err := cluster.WritePlan(cfg.Reports, s.Plan); err != nil {
			return fmt.Errorf("writing the plan under GDR_REPORTS=%q: %w", cfg.Reports, err)
		}
	}
	_, err = io.WriteString(stdout, s.Shell())
	return err
}

func isolateCmd(lookup func(string) (string, bool), cfg cluster.Config, root, run string, asJSON bool, w io.Writer) error {
	var hosts []string
	if t, found, err := jobenv.Detect(lookup, cfg.PeerSuffix); err == nil && found {
		hosts = t.Names
		if run == "" {
			run = t.Run()
		}
	} else if hosts, err = cluster.Hosts(root, run); err != nil {
		return err
	}
	results, _, err := cluster.Load(root, run)
	if err != nil {
		return err
	}
	live, err := cluster.Liveness(root, run)
	if err != nil {
		return err
	}
	doms, err := cluster.StartDomains(root, run)
	if err != nil {
		return err
	}
	a := isolate.Analyze(hosts, results, isolate.Options{MinFraction: cfg.MinFraction, Live: live, Domains: doms})
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(a.Summary(nil))
	}
	rounds := map[int]bool{}
	for _, p := range a.Pairs {
		rounds[p.Round] = true
	}
	fmt.Fprintf(w, "%d hosts, %d rails, %d pair results in %d rounds: %d suspects, %d bad links, %d links not re-tested, %d flaky\n",
		len(a.Hosts), len(a.Rails), len(a.Pairs), len(rounds), len(a.Suspects), len(a.Links), len(a.LinkSuspects), len(a.Flaky))
	for _, h := range a.Hosts {
		if l := a.Live.Of(h); l != "" {
			fmt.Fprintf(w, "%-8s %s %s: its run did not finish (no hardware verdict)\n", "LEFT", h, l)
		}
	}
	for _, s := range a.Suspects {
		fmt.Fprintf(w, "%-8s %s rail %d: %s\n", strings.ToUpper(string(s.Verdict)), s.Host, s.Rail, s.Reason)
	}
	for _, l := range a.Links {
		fmt.Fprintf(w, "%-8s %s-%s rail %d: %s\n", "LINK", l.A, l.B, l.Rail, l.Reason)
	}
	for _, l := range a.LinkSuspects {
		fmt.Fprintf(w, "%-8s %s-%s rail %d: %s\n", "LINK?", l.A, l.B, l.Rail, l.Reason)
	}
	for _, l := range a.Flaky {
		fmt.Fprintf(w, "%-8s %s-%s rail %d: %s\n", "FLAKY", l.A, l.B, l.Rail, l.Reason)
	}
	return nil
}
