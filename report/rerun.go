package report

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// Rerun is how to re-test only a cluster run's failed nodes: a new job on
// them and on known-good nodes of the run, into a folder of its own, then
// a merge in which each node is judged by its latest run (gdrreport
// -latest). It is printed in actions.txt, never run.
type Rerun struct {
	Engine string // the engine of the run: "slurm", "kubernetes" ("" when its plans do not say)
	// Namespace is a Kubernetes run's namespace (its run's identity).
	Namespace string
	// Nodes are the hosts to re-test: not qualified, or not cleared by
	// isolation yet (a suspect, a rail untested, a run that did not
	// finish), by the engine's names for them: the job's host names under
	// Slurm, the machines' node names under Kubernetes.
	Nodes []string
	// Pods are hosts to re-test whose node is not known (a pod that never
	// started): Kubernetes only.
	Pods []string
	// Good are known-good partners from the run: every pair of theirs
	// passed and their verdict is QUALIFIED (or, where too few are, not
	// NOT QUALIFIED), two for each node to re-test, in the job's order.
	Good []string
	// Runs are the cluster folders merged so far, oldest first; Folder is
	// the rerun's own, Topology its groups file (Slurm), Merged the merge.
	Runs                     []string
	Folder, Topology, Merged string
}

// Rerun says how to re-test the report's failed nodes, or nil when it
// merges no cluster run or every node of it passed.
func (r *Report) Rerun() *Rerun {
	if len(r.clusters) == 0 || r.Cluster == nil {
		return nil
	}
	last := r.clusters[len(r.clusters)-1]
	rr := &Rerun{Engine: last.Engine(), Namespace: "gdrconf"}
	if f := strings.Split(last.Run, "/"); rr.Engine == "kubernetes" && len(f) > 1 && f[1] != "" {
		rr.Namespace = f[1]
	}
	fabric := map[string]isolate.State{}
	for _, h := range r.Cluster.Hosts {
		fabric[h.Host] = h.Fabric
	}
	open := map[string]bool{}
	for _, s := range r.Findings.Suspects {
		if s.Part != PartLink {
			open[s.Host] = true
		}
	}
	for _, u := range r.Findings.Unfinished {
		open[u.Host] = true
	}
	var good, fallback []string
	for _, h := range r.Hosts {
		name := h.Identity.Host
		if h.Earlier {
			continue
		}
		if _, inCluster := fabric[name]; !inCluster && !open[name] {
			continue // a host merged from a folder of its own
		}
		switch {
		case h.Verdict.Verdict == NotQualified || open[name]:
			node := name
			if rr.Engine == "kubernetes" {
				if node = h.Identity.Node; node == "" {
					rr.Pods = append(rr.Pods, name)
					continue
				}
			}
			rr.Nodes = append(rr.Nodes, node)
		case fabric[name] == isolate.Good && h.Verdict.Verdict == Qualified:
			good = append(good, r.nodeName(h, rr.Engine))
		case fabric[name] == isolate.Good:
			fallback = append(fallback, r.nodeName(h, rr.Engine))
		}
	}
	if len(rr.Nodes)+len(rr.Pods) == 0 {
		return nil
	}
	want := 2 * (len(rr.Nodes) + len(rr.Pods))
	rr.Good = append(good, fallback...)
	if len(rr.Good) > want {
		rr.Good = rr.Good[:want]
	}
	for _, c := range r.clusters {
		rr.Runs = append(rr.Runs, absPath(c.Dir))
	}
	base := rr.Runs[0]
	rr.Folder = base + "-rerun" + strconv.Itoa(len(r.clusters))
	rr.Topology = rr.Folder + ".topology"
	rr.Merged = base + "-merged"
	return rr
}

func (r *Report) nodeName(h *HostResult, engine string) string {
	if engine == "kubernetes" && h.Identity.Node != "" {
		return h.Identity.Node
	}
	return h.Identity.Host
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// write prints the rerun for the run's engine (both where it is not
// known).
func (rr *Rerun) write(s *strings.Builder) {
	all := append(slices.Clone(rr.Nodes), rr.Pods...)
	fmt.Fprintf(s, "# gdrconf: rerun only the %d node(s) not qualified or not cleared yet: %s, each with two known-good nodes of this run (every pair of theirs passed): %s\n",
		len(all), hostlist.Compress(all), noneLeft(hostlist.Compress(rr.Good)))
	s.WriteString("# After their repair, and before their drain or taint is lifted for good (docs/clusters.md, \"Rerun only the failed nodes\"):\n")
	if rr.Engine != "kubernetes" {
		rr.writeSlurm(s)
	}
	if rr.Engine != "slurm" {
		rr.writeKubernetes(s)
	}
}

func noneLeft(s string) string {
	if s == "" {
		return "none left (the rerun pairs them with each other)"
	}
	return s
}

func (rr *Rerun) writeSlurm(s *strings.Builder) {
	nodes := append(slices.Clone(rr.Nodes), rr.Good...)
	s.WriteString("\n# Slurm, from the folder that holds dist/ (a drained node takes no job: resume it first):\n")
	fmt.Fprintf(s, "scontrol update nodename=%s state=resume\n", hostlist.Compress(rr.Nodes))
	if len(rr.Good) == 0 {
		fmt.Fprintf(s, "sbatch -N%d -w %s --export=ALL,GDR_REPORTS=%s dist/gdrconf.sbatch\n", len(nodes), hostlist.Compress(nodes), rr.Folder)
	} else {
		// The groups put each re-tested node between two known-good ones
		// in the ring (pairing.Order), so both its partners pass elsewhere
		// and the ring's rounds judge it.
		fmt.Fprintf(s, "printf '%%s\\n' %s %s >%s\n", shellQuote("rerun "+hostlist.Compress(rr.Nodes)), shellQuote("known-good "+hostlist.Compress(rr.Good)), shellQuote(rr.Topology))
		fmt.Fprintf(s, "sbatch -N%d -w %s --export=ALL,GDR_REPORTS=%s,GDR_TOPOLOGY_FILE=%s dist/gdrconf.sbatch\n",
			len(nodes), hostlist.Compress(nodes), rr.Folder, rr.Topology)
	}
	s.WriteString("# when it ended, judge each node by its latest run (the others keep this run's verdict):\n")
	fmt.Fprintf(s, "dist/bin/gdrreport -latest -out %s %s %s\n", shellQuote(rr.Merged), strings.Join(quoteAll(rr.Runs), " "), shellQuote(rr.Folder))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shellQuote(s)
	}
	return out
}

func (rr *Rerun) writeKubernetes(s *strings.Builder) {
	nodes := append(slices.Clone(rr.Nodes), rr.Good...)
	s.WriteString("\n# Kubernetes (lift the taint first if you set it: kubectl taint nodes <node> gdrconf.io/not-qualified-):\n")
	fmt.Fprintf(s, "#   deploy/k8s/job.yaml: spec.completions: %d, and under spec.template.spec.affinity:\n", len(nodes)+len(rr.Pods))
	s.WriteString("#     nodeAffinity:\n#       requiredDuringSchedulingIgnoredDuringExecution:\n#         nodeSelectorTerms:\n#           - matchExpressions:\n")
	fmt.Fprintf(s, "#               - {key: kubernetes.io/hostname, operator: In, values: [%s]}\n", strings.Join(nodes, ", "))
	if len(rr.Pods) > 0 {
		fmt.Fprintf(s, "#   (%s never started, so its node is not known: add the nodes it was meant for, and count them in completions)\n", strings.Join(rr.Pods, ", "))
	}
	fmt.Fprintf(s, "kubectl -n %s delete job gdrconf --ignore-not-found && kubectl apply -k deploy/k8s\n", rr.Namespace)
	s.WriteString("# the new Job writes its own folder on the claim; its pods take new indexes, so judge these nodes by its report (summary.txt names each pod's node)\n")
}
