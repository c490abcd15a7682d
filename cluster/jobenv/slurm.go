package jobenv

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
)

// MaxTasks bounds a job's size (Slurm's own bound on a node list is far
// above any GPU cluster; this keeps a broken value from allocating much).
const MaxTasks = 1 << 16

// FromSlurm reads a task started by `srun -N<n> --ntasks-per-node=1`:
//
//	SLURM_JOB_ID        the job (with SLURM_CLUSTER_NAME when set)
//	SLURM_JOB_NODELIST  the job's nodes, Slurm hostlist syntax (SLURM_NODELIST on old releases)
//	SLURM_NTASKS        must equal the number of nodes: one task per node
//	SLURM_PROCID        this task's rank
//	SLURMD_NODENAME     this task's node, when set: its position in the node
//	                    list is the task's index (it must agree with the rank
//	                    under srun's default block distribution, and is
//	                    trusted over it otherwise)
//	SLURM_STEP_ID       recorded for logs
//	SLURM_RESTART_COUNT how often a requeued job restarted (Task.Attempt)
//
// Peers dial node names with peerSuffix appended (GDR_PEER_SUFFIX, e.g. "-ib").
func FromSlurm(lookup func(string) (string, bool), peerSuffix string) (Task, error) {
	t := Task{Engine: Slurm}
	var err error
	if t.JobID, err = need(lookup, "SLURM_JOB_ID", "not inside a Slurm job (run under srun or sbatch)"); err != nil {
		return t, err
	}
	if _, err := number("SLURM_JOB_ID", t.JobID, 0, 1<<62); err != nil {
		return t, err
	}
	t.Scope, _ = lookup("SLURM_CLUSTER_NAME")
	t.Step, _ = lookup("SLURM_STEP_ID")
	if v, ok := lookup("SLURM_RESTART_COUNT"); ok && strings.TrimSpace(v) != "" && strings.TrimSpace(v) != "0" {
		if _, err := number("SLURM_RESTART_COUNT", strings.TrimSpace(v), 0, 1<<30); err != nil {
			return t, err
		}
		t.Attempt = strings.TrimSpace(v)
	}

	listVar := "SLURM_JOB_NODELIST"
	list, err := need(lookup, listVar, "Slurm sets it for every job step")
	if err != nil {
		if v, ok := lookup("SLURM_NODELIST"); ok && v != "" {
			listVar, list, err = "SLURM_NODELIST", v, nil
		} else {
			return t, err
		}
	}
	nodes, err := hostlist.Expand(list)
	if err != nil {
		return t, fmt.Errorf("%s: %w", listVar, err)
	}
	if len(nodes) == 0 || len(nodes) > MaxTasks {
		return t, fmt.Errorf("%s=%q names %d nodes: want 1 to %d", listVar, list, len(nodes), MaxTasks)
	}
	if err := unique(listVar, nodes); err != nil {
		return t, err
	}

	ntasksVar := "SLURM_NTASKS"
	nt, err := need(lookup, ntasksVar, "not inside an srun step: run the suite with srun -N<n> --ntasks-per-node=1")
	if err != nil {
		if v, ok := lookup("SLURM_NPROCS"); ok && v != "" {
			ntasksVar, nt, err = "SLURM_NPROCS", v, nil
		} else {
			return t, err
		}
	}
	ntasks, err := number(ntasksVar, nt, 1, MaxTasks)
	if err != nil {
		return t, err
	}
	if ntasks != len(nodes) {
		return t, fmt.Errorf("%s=%d but %s=%q has %d nodes: the suite runs one task per node (srun -N%d --ntasks-per-node=1)",
			ntasksVar, ntasks, listVar, list, len(nodes), len(nodes))
	}
	pid, err := need(lookup, "SLURM_PROCID", "not inside an srun step: run the suite with srun")
	if err != nil {
		return t, err
	}
	rank, err := number("SLURM_PROCID", pid, 0, ntasks-1)
	if err != nil {
		return t, err
	}
	t.Index = rank
	if node, ok := lookup("SLURMD_NODENAME"); ok && node != "" {
		i := slices.Index(nodes, node)
		if i < 0 {
			return t, fmt.Errorf("SLURMD_NODENAME=%q is not in %s=%q", node, listVar, list)
		}
		t.Index = i
	}
	t.Names = nodes
	t.Addrs = make([]string, len(nodes))
	for i, n := range nodes {
		t.Addrs[i] = n + peerSuffix
	}
	return t, nil
}

// gresParens are the socket bindings scontrol prints after a count
// ("gpu:h100:8(S:0-1)").
var gresParens = regexp.MustCompile(`\([^)]*\)`)

// GresGPUs is the number of GPUs in a node's Gres as `scontrol show node`
// prints it ("gpu:8", "gpu:h100:8(S:0-1),nic:mlx5:8", "(null)"): the sum of
// its gpu entries, each name[:type]:count (a count left out is 1, as in
// gres.conf). "" and "(null)" are 0; an entry that does not parse is an
// error naming it.
func GresGPUs(gres string) (int, error) {
	gres = strings.TrimSpace(gres)
	if gres == "" || gres == "(null)" {
		return 0, nil
	}
	total := 0
	for _, e := range strings.Split(gresParens.ReplaceAllString(gres, ""), ",") {
		f := strings.Split(strings.TrimSpace(e), ":")
		if f[0] != "gpu" {
			continue
		}
		n := 1
		if len(f) > 1 {
			if c, err := strconv.Atoi(f[len(f)-1]); err == nil {
				n = c
			} else if len(f) > 2 {
				return 0, fmt.Errorf("gres %q: entry %q has no GPU count", gres, e)
			}
		}
		if n < 0 || n > 1024 {
			return 0, fmt.Errorf("gres %q: entry %q counts %d GPUs", gres, e, n)
		}
		total += n
	}
	return total, nil
}
