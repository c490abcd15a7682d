// Command gdrcluster plans and judges an N-host run of the suite. It runs
// inside each task that Slurm (srun -N<n> --ntasks-per-node=1) or a
// Kubernetes Indexed Job started; it starts nothing and reaches no host.
//
//	eval "$(gdrcluster plan -round K)"   this task's round K: GDR_PLAN (run, idle, done),
//	                                     GDR_ROLE, GDR_PEER, GDR_LISTEN, GDR_TOKEN, ...
//	gdrcluster done -round K             mark this task's round K finished
//	gdrcluster wait -round K             wait until every task finished round K
//	gdrcluster isolate [-json] [-run ID] pairs, suspects and bad links from the shared reports
//	gdrcluster hosts [-addrs]            the job's hosts in schedule order
//	gdrcluster gres-gpus GRES            the GPU count of a node's Gres (scontrol show node)
//
// Configuration: GDR_PAIRING, GDR_CLUSTER_SECRET(_FILE), GDR_CLUSTER_PORTS,
// GDR_PEER_SUFFIX, GDR_REPAIR_ROUNDS, GDR_REPORTS, GDR_PAIR_MIN_FRACTION
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
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
)

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

const usage = `usage: gdrcluster plan|done|wait -round K | isolate [-json] [-reports DIR] [-run ID] | hosts [-addrs] | gres-gpus GRES`

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
	timeout := fs.Duration("timeout", 30*time.Minute, "wait: give up after this long")
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
	case "plan":
		err = plan(lookup, cfg, *round, needRound, stdout)
	case "done":
		err = withTask(lookup, cfg, needRound, func(t jobenv.Task) error { return cluster.Done(cfg.Reports, t.Self(), *round, t.Run()) })
	case "wait":
		err = withTask(lookup, cfg, needRound, func(t jobenv.Task) error {
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			return cluster.Wait(ctx, cfg.Reports, t.Names, *round, 2*time.Second, t.Run())
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
	if err != nil {
		return fail(stderr, err)
	}
	return 0
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
	t, err := task(lookup, cfg)
	if err != nil {
		return err
	}
	secret, err := cluster.Secret(cfg)
	if err != nil {
		return err
	}
	var results []isolate.Result
	if k >= len(pairing.Base(cfg.Pairing, len(t.Names))) {
		// A re-pairing round: judged from every host's earlier rounds.
		if results, _, err = cluster.Load(cfg.Reports, t.Run()); err != nil {
			return err
		}
	}
	s := cluster.PlanRound(t, cfg, secret, k, results)
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
	a := isolate.Analyze(hosts, results, isolate.Options{MinFraction: cfg.MinFraction})
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(a.Summary(nil))
	}
	rounds := map[int]bool{}
	for _, p := range a.Pairs {
		rounds[p.Round] = true
	}
	fmt.Fprintf(w, "%d hosts, %d rails, %d pair results in %d rounds: %d suspects, %d bad links\n",
		len(a.Hosts), len(a.Rails), len(a.Pairs), len(rounds), len(a.Suspects), len(a.Links))
	for _, s := range a.Suspects {
		fmt.Fprintf(w, "%-8s %s rail %d: %s\n", strings.ToUpper(string(s.Verdict)), s.Host, s.Rail, s.Reason)
	}
	for _, l := range a.Links {
		fmt.Fprintf(w, "%-8s %s-%s rail %d: %s\n", "LINK", l.A, l.B, l.Rail, l.Reason)
	}
	return nil
}
