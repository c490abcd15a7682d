package cluster

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/config"
)

// Secret returns the job's secret from GDR_CLUSTER_SECRET or the file
// GDR_CLUSTER_SECRET_FILE names (trailing newline dropped). It must hold at
// least 16 bytes: the round tokens are only as secret as it is.
func Secret(c Config) ([]byte, error) {
	s := []byte(c.Secret)
	if c.SecretFile != "" {
		b, err := os.ReadFile(c.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("GDR_CLUSTER_SECRET_FILE=%q: %w", c.SecretFile, err)
		}
		s = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	if len(s) == 0 {
		return nil, errors.New("GDR_CLUSTER_SECRET (or GDR_CLUSTER_SECRET_FILE) is not set: every round's token derives from a secret the job's tasks share; " +
			"Slurm: export GDR_CLUSTER_SECRET=$(head -c 32 /dev/urandom | base64) in the batch script before srun; Kubernetes: the Secret deploy/k8s references")
	}
	if len(s) < 16 {
		return nil, fmt.Errorf("the cluster secret holds %d bytes: want at least 16 (e.g. head -c 32 /dev/urandom | base64)", len(s))
	}
	return s, nil
}

// Step is one task's view of round k.
type Step struct {
	Plan  Plan
	Done  bool   // there is no round k: the run is over
	Token string // GDR_TOKEN of the round's pair; "" for an idle host
	Dir   string // the task's report folder for the round
	// MergeHost is, once the run is over, the first host of the job's
	// list that ran to the end: the task that merges (GDR_MERGE=first),
	// whichever hosts did not start or stopped.
	MergeHost string
	// SoakSkip is why this round runs without the soak GDR_SOAK asked for
	// (SoakSkip's), "" where it soaks or none was asked for.
	SoakSkip string
}

// SoakSkip decides whether a host's round k runs the soak GDR_SOAK asked
// for (soak, as config.ParseSoak read it, the suite's own parser): it runs
// in a host's first round, with that round's partner, and in round 0 both
// ends of every pair start it together. A host whose first round is a
// later one (idle in round 0) meets a partner that ran its suite already
// and now runs pingpong alone, so its soak would wait for nobody: it is not
// run, and the reason returned is what its tests say (GDR_SOAK_SKIP).
// ranBefore: the host ran the suite in a round before k (RanBefore).
func SoakSkip(soak time.Duration, k int, ranBefore bool) string {
	if soak == 0 || k == 0 || ranBefore {
		return ""
	}
	return fmt.Sprintf("this host's first round was round %d, not round 0 (idle then): a cluster run soaks in round 0 only, where both ends of every pair start the soak together", k)
}

// RanBefore says whether host ran the suite (a plan with a partner) in a
// round of run before k, from its own plan.json files: every round's plan
// is written before the round, so they are the host's record.
func RanBefore(root, run, host string, k int) (bool, error) {
	for j := range k {
		p, err := readPlan(fsys{}, RoundDir(root, host, j))
		if err != nil {
			return false, err
		}
		if p != nil && p.Run == run && p.Role != Idle {
			return true, nil
		}
	}
	return false, nil
}

// PlanRound computes task's round k. Rounds past the schedule's own are
// re-pairing rounds computed from results (LoadCompact's, of rounds before
// k); live is what the barriers closed before round k said
// (LivenessBefore): the schedule pairs the hosts that started, and a host
// whose partner stopped idles. Every task computes the same from the same
// files.
func PlanRound(task jobenv.Task, c Config, secret []byte, k int, results []isolate.Result, live isolate.Liveness) Step {
	r, done := isolate.Round(c.Pairing, task.Names, k, c.RepairRounds, results, isolate.Options{MinFraction: c.MinFraction, Live: live.Before(k), Groups: c.Groups, Domains: c.Domains})
	return PlanFrom(task, c, secret, k, r, done, live)
}

// PlanFrom is PlanRound of a round already computed (RepairPlan's).
func PlanFrom(task jobenv.Task, c Config, secret []byte, k int, r pairing.Round, done bool, live isolate.Liveness) Step {
	live = live.Before(k)
	job := pairing.Job{Key: task.Key(), Secret: secret, Ports: c.Ports}
	p := Plan{Round: k, Host: task.Self(), Index: task.Index, Hosts: len(task.Names), Repair: r.Repair,
		Role: Idle, Pairing: string(c.Pairing), Job: task.Key(), Run: task.Run(), NVLinkDomain: c.Domains[task.Self()]}
	s := Step{Plan: p, Done: done, Dir: RoundDir(c.Reports, task.Self(), k)}
	if done {
		for _, h := range task.Names {
			if !live.Gone(h, k) {
				s.MergeHost = h
				break
			}
		}
		return s
	}
	if peer, server, ok := r.Peer(task.Index); ok && live.Gone(task.Names[peer], k) {
		s.Plan.PeerStopped, s.Plan.PeerStoppedIn = task.Names[peer], live.Stopped[task.Names[peer]]
	} else if ok {
		s.Plan.Peer, s.Plan.PeerAddr, s.Plan.Port = task.Names[peer], task.Addrs[peer], job.Port(k)
		s.Plan.PeerNVLinkDomain = c.Domains[s.Plan.Peer]
		// Bound to this pair: a host reached by mistake (or one that
		// claims another's place) fails the proof.
		s.Token = job.Token(k, task.Self(), s.Plan.Peer)
		s.Plan.Role = string(config.Client)
		if server {
			s.Plan.Role = string(config.Server)
		}
	}
	return s
}

// Shell renders the step as POSIX shell for eval: the suite's own variables
// (GDR_ROLE, GDR_PEER, GDR_LISTEN, GDR_TOKEN) and the run's (GDR_PLAN run,
// idle or done; GDR_ROUND; GDR_RUN, the run's identity (jobenv.Task.Run);
// GDR_HOST_INDEX, this task's position in the job's host list; GDR_HOST_NAME and GDR_PEER_NAME, the host names
// as in the job's host list; GDR_ROUND_REPORTS, where the round's reports
// go; once done, GDR_MERGE_HOST, the host whose task merges), and
// GDR_PLAN_SOAK_SKIP, SoakSkip's, not exported. Variables that
// do not apply are unset, so a previous round's values never leak into
// this one.
func (s Step) Shell() string {
	var b strings.Builder
	set := func(k, v string) { fmt.Fprintf(&b, "export %s=%s\n", k, quote(v)) }
	unset := func(ks ...string) { fmt.Fprintf(&b, "unset %s\n", strings.Join(ks, " ")) }
	p := s.Plan
	set("GDR_ROUND", strconv.Itoa(p.Round))
	set("GDR_HOST_NAME", p.Host)
	set("GDR_HOST_INDEX", strconv.Itoa(p.Index))
	set("GDR_RUN", p.Run)
	// Not exported: rounds.sh's alone, which turns it into the suite's
	// GDR_SOAK=0 and GDR_SOAK_SKIP; always assigned, so no round inherits
	// the last one's.
	fmt.Fprintf(&b, "GDR_PLAN_SOAK_SKIP=%s\n", quote(s.SoakSkip))
	switch {
	case s.Done:
		set("GDR_PLAN", "done")
		set("GDR_MERGE_HOST", s.MergeHost)
		unset("GDR_ROLE", "GDR_PEER", "GDR_LISTEN", "GDR_TOKEN", "GDR_PEER_NAME", "GDR_ROUND_REPORTS")
		return b.String()
	case p.Role == Idle:
		set("GDR_PLAN", "idle")
		unset("GDR_ROLE", "GDR_PEER", "GDR_LISTEN", "GDR_TOKEN", "GDR_PEER_NAME")
	default:
		set("GDR_PLAN", "run")
		set("GDR_ROLE", p.Role)
		set("GDR_TOKEN", s.Token)
		set("GDR_PEER_NAME", p.Peer)
		if p.Role == string(config.Server) {
			set("GDR_LISTEN", ":"+strconv.Itoa(p.Port))
			unset("GDR_PEER")
		} else {
			set("GDR_PEER", joinHostPort(p.PeerAddr, p.Port))
			unset("GDR_LISTEN")
		}
	}
	set("GDR_ROUND_REPORTS", s.Dir)
	return b.String()
}

func joinHostPort(h string, port int) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + strconv.Itoa(port)
	}
	return h + ":" + strconv.Itoa(port)
}

// quote makes v one shell word.
func quote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
