package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/report"
)

// The cluster labs' liveness plants: a node whose task starts late
// (LAB_LATE) and a node that dies mid-run (LAB_KILL). Neither is a fault of
// the node's hardware, and the merged report must say so: a late node that
// joined within GDR_START_TIMEOUT is judged as any other, one that came
// after it "did not start", a killed one "stopped in round k", and no link,
// rail or host finding comes from either (docs/clusters.md, "Late, dead and
// flapping nodes").

// Late is one LAB_LATE entry: the VM whose task (Slurm) or pod
// (Kubernetes) starts Delay after the others.
type Late struct {
	Host  string        `json:"host"`
	Delay time.Duration `json:"delay"`
	Spec  string        `json:"spec"`
}

// Kill is one LAB_KILL entry: the host kills the VM's qemu After into
// round Round, counted from the round's plan.json on that host (the
// round's suite starts right after gdrcluster plan writes it).
type Kill struct {
	Host  string        `json:"host"`
	Round int           `json:"round"`
	After time.Duration `json:"after"`
	Spec  string        `json:"spec"`
}

// DefaultKillAfter is how far into its round a LAB_KILL VM is killed
// unless the entry says (vm4:round1+45s): the paired rounds' pingpong runs
// for minutes under TCG, so 30 s lands inside the pair's tests.
const DefaultKillAfter = 30 * time.Second

// LabStartTimeout is GDR_START_TIMEOUT inside the lab when a VM is planted
// late and LAB_ENV names none: long enough for a 90 s late task (and a
// late pod's node coming up under TCG) to join, short enough that a VM
// planted past it costs the run minutes, not the default's 15.
const LabStartTimeout = 5 * time.Minute

// Margins of a LAB_LATE entry against GDR_START_TIMEOUT (LivePlan.Expect).
const (
	// lateMargin is the skew between the tasks' own starts: srun's
	// launches, a container's start, the first task's clock.
	lateMargin = 30 * time.Second
	// kubeLateOverhead is what a late pod adds to its delay under TCG: the
	// node's kubelet and device plugin start after the delay, then the
	// node registers and turns Ready, the scheduler places the pod, and
	// the kubelet starts its sandbox and container.
	kubeLateOverhead = 2 * time.Minute
)

var killSpec = regexp.MustCompile(`^(vm[0-9]+):round([0-9]+)(?:\+(.+))?$`)

// parseVM reads vmN for a cluster of hosts VMs.
func parseVM(s string, hosts int) (string, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "vm"))
	return s, strings.HasPrefix(s, "vm") && err == nil && n >= 1 && n <= hosts && s == fmt.Sprintf("vm%d", n)
}

// ParseLate reads LAB_LATE: space-separated vmN:duration entries
// (vm4:90s), or "none". Each VM at most once; 1s to 30m.
func ParseLate(spec string, hosts int) ([]Late, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "none" {
		return nil, nil
	}
	var out []Late
	seen := map[string]bool{}
	for _, e := range strings.Fields(spec) {
		bad := func(why string) error {
			return fmt.Errorf("LAB_LATE entry %q: %s; want vmN:duration (e.g. vm4:90s), space separated, or none", e, why)
		}
		h, d, ok := strings.Cut(e, ":")
		if !ok {
			return nil, bad("no ':' between the VM and the delay")
		}
		if _, ok := parseVM(h, hosts); !ok {
			return nil, bad(fmt.Sprintf("host %q is not one of vm1..vm%d", h, hosts))
		}
		delay, err := time.ParseDuration(d)
		if err != nil || delay < time.Second || delay > 30*time.Minute {
			return nil, bad(fmt.Sprintf("delay %q is not a duration from 1s to 30m", d))
		}
		if seen[h] {
			return nil, bad(h + " is late twice")
		}
		seen[h] = true
		out = append(out, Late{Host: h, Delay: delay, Spec: e})
	}
	return out, nil
}

// ParseKill reads LAB_KILL: space-separated vmN:roundK[+duration] entries
// (vm4:round1, vm4:round1+45s), or "none". vm1 cannot be killed: it runs
// slurmctld and the batch script under Slurm, CoreDNS under Kubernetes, so
// its death ends the run rather than one node of it. K is 1 or later: the
// host tells a pod's node from its round-0 host.json.
func ParseKill(spec string, hosts int) ([]Kill, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "none" {
		return nil, nil
	}
	var out []Kill
	seen := map[string]bool{}
	for _, e := range strings.Fields(spec) {
		bad := func(why string) error {
			return fmt.Errorf("LAB_KILL entry %q: %s; want vmN:roundK or vmN:roundK+duration (e.g. vm4:round1, vm4:round1+45s), space separated, or none", e, why)
		}
		m := killSpec.FindStringSubmatch(e)
		if m == nil {
			return nil, bad("not vmN:roundK[+duration]")
		}
		if _, ok := parseVM(m[1], hosts); !ok {
			return nil, bad(fmt.Sprintf("host %q is not one of vm1..vm%d", m[1], hosts))
		}
		if m[1] == "vm1" {
			return nil, bad("vm1 runs slurmctld and the batch script (Kubernetes: CoreDNS): killing it ends the run, not one node of it; kill vm2..")
		}
		k, err := strconv.Atoi(m[2])
		if err != nil || k < 1 || k > 16 {
			return nil, bad(fmt.Sprintf("round %q is not one of 1..16 (round 0: the host names a pod's node from its round-0 host.json)", m[2]))
		}
		after := DefaultKillAfter
		if m[3] != "" {
			if after, err = time.ParseDuration(m[3]); err != nil || after < 0 || after > 10*time.Minute {
				return nil, bad(fmt.Sprintf("+%s is not a duration from 0s to 10m into the round", m[3]))
			}
		}
		if seen[m[1]] {
			return nil, bad(m[1] + " is killed twice")
		}
		seen[m[1]] = true
		out = append(out, Kill{Host: m[1], Round: k, After: after, Spec: e})
	}
	return out, nil
}

// LivePlan is a run's liveness plants.
type LivePlan struct {
	Late []Late `json:"late,omitempty"`
	Kill []Kill `json:"kill,omitempty"`
}

// Empty reports whether nothing is planted.
func (p LivePlan) Empty() bool { return len(p.Late) == 0 && len(p.Kill) == 0 }

// late returns the LAB_LATE entry of host, if any.
func (p LivePlan) late(host string) (Late, bool) {
	for _, l := range p.Late {
		if l.Host == host {
			return l, true
		}
	}
	return Late{}, false
}

// Expect is what the merged report must say of each planted VM, by VM: ""
// for a late one that joins (no liveness, judged as any other),
// isolate.DidNotStart for one planted past the start barrier, "stopped in
// round k" for a killed one. start is the run's GDR_START_TIMEOUT; over is
// what the scheduler adds to a late host's delay (clusterBackend's
// lateOverhead: kubeLateOverhead under Kubernetes, none under Slurm). A
// delay too close to the timeout to call, or a VM both too late and
// killed, or planted with a LAB_DEGRADE fault (its evidence is what the
// lab must find), is an error naming what to change.
func (p LivePlan) Expect(start, over time.Duration, degrade []Degrade) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range p.Late {
		switch {
		case l.Delay+over+lateMargin <= start:
			out[l.Host] = ""
		case l.Delay >= start+lateMargin:
			out[l.Host] = isolate.DidNotStart
		default:
			return nil, fmt.Errorf("LAB_LATE %s with GDR_START_TIMEOUT=%v: too close to call whether it joins; a delay up to %v joins, one of %v or more does not start (set GDR_START_TIMEOUT in LAB_ENV, or change the delay)",
				l.Spec, start, start-over-lateMargin, start+lateMargin)
		}
	}
	for _, k := range p.Kill {
		if out[k.Host] == isolate.DidNotStart {
			return nil, fmt.Errorf("LAB_KILL %s: %s is planted to come after the start barrier closed (LAB_LATE), so it never reaches round %d", k.Spec, k.Host, k.Round)
		}
		out[k.Host] = fmt.Sprintf("%s %d", isolate.StoppedIn, k.Round)
	}
	for _, d := range degrade {
		for _, h := range []string{d.Host, d.To} {
			if l, ok := out[h]; ok && l != "" {
				return nil, fmt.Errorf("%s is planted to %s and degraded (LAB_DEGRADE %s): the lab must find the fault from rounds it ran; plant the liveness on another VM", h, l, d.Spec)
			}
		}
	}
	return out, nil
}

// lateProlog is the Slurm TaskProlog of a LAB_LATE run.
const lateProlog = "/etc/slurm/lab-late-taskprolog.sh"

// sbatchJobName is the shipped batch script's #SBATCH --job-name: the
// late TaskProlog holds only that job's tasks, not the device probes'.
const sbatchJobName = "gdrconf"

// LateTaskProlog is the TaskProlog that makes the LAB_LATE VMs' tasks of
// the batch job's srun step start late: slurmstepd runs TaskProlog (in
// slurm.conf, a site's own mechanism) in each task's process after the
// step launched and before it execs the task, and waits for it without a
// limit (Slurm's src/slurmd/slurmstepd/task.c, exec_task and
// _run_script_and_set_env), so the task of that node comes Delay after the
// others, as behind a slow node health check or file system mount, with
// the batch script and srun as shipped. Its "print" line goes to the
// task's output (slurm-<job>.out). Tasks of other jobs (the device probes)
// and of a step of one task (the batch script itself) pass at once.
func LateTaskProlog(late []Late) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# LAB_LATE (the cluster lab, generated per run): hold these nodes' tasks of the\n")
	b.WriteString("# batch job's srun step, as a slow prolog would; everything else passes.\n")
	fmt.Fprintf(&b, "[ \"$SLURM_JOB_NAME\" = %s ] || exit 0\n", sbatchJobName)
	b.WriteString("[ \"${SLURM_STEP_NUM_TASKS:-1}\" -gt 1 ] 2>/dev/null || exit 0\n")
	b.WriteString("case \"$SLURMD_NODENAME\" in\n")
	for _, l := range late {
		s := int((l.Delay + time.Second - 1) / time.Second)
		fmt.Fprintf(&b, "%s) echo \"print gdrlab LAB_LATE: the TaskProlog holds %s's task %ds\"; sleep %d ;;\n", l.Host, l.Host, s, s)
	}
	b.WriteString("esac\nexit 0\n")
	return b.String()
}

// withTaskProlog is slurm.conf with TaskProlog=path among the parameters,
// before the node and partition lines.
func withTaskProlog(conf, path string) string {
	return strings.Replace(conf, "\nNodeName=", "\nTaskProlog="+path+"\nNodeName=", 1)
}

// runRoots are the folders under the lab's shared folder where a run's
// hosts write their rounds: the batch job's (Slurm) and the Job's (the
// claim's per-run folder, Kubernetes).
func runRoots(shared string) []string {
	var roots []string
	for _, pat := range []string{filepath.Join(shared, "submit", "reports", "cluster-*"), filepath.Join(shared, "rounds", k8sJob+"-*")} {
		m, _ := filepath.Glob(pat)
		roots = append(roots, m...)
	}
	sort.Strings(roots)
	return roots
}

// hostNode is the node a host folder's host ran on: its round-0
// host.json's node (a pod's), else the host itself (a Slurm node).
func hostNode(hostDir string) string {
	host := filepath.Base(hostDir)
	b, err := os.ReadFile(filepath.Join(hostDir, "round-0", report.HostFile))
	if err != nil {
		return host
	}
	var id struct {
		Node string `json:"node"`
	}
	if json.Unmarshal(b, &id) == nil && id.Node != "" {
		return id.Node
	}
	return host
}

// roundBegan reports when round k began on VM vm, as the host's clock saw
// it: the mtime of that VM's host's round-k plan.json in the shared folder
// (zero when not yet).
func roundBegan(shared, vm string, k int) time.Time {
	for _, root := range runRoots(shared) {
		plans, _ := filepath.Glob(filepath.Join(root, "*", "round-"+strconv.Itoa(k), "plan.json"))
		for _, p := range plans {
			hostDir := filepath.Dir(filepath.Dir(p))
			if hostNode(hostDir) != vm {
				continue
			}
			if st, err := os.Stat(p); err == nil {
				return st.ModTime()
			}
		}
	}
	return time.Time{}
}

// StartArrivals are the hosts' marks at the start barrier under root (the
// run's folder), by host as the run names them, with their files' times:
// the shared folder is the lab host's, so every time is the host's clock.
func StartArrivals(root string) map[string]time.Time {
	out := map[string]time.Time{}
	marks, _ := filepath.Glob(filepath.Join(root, ".gdrcluster", "run-*", cluster.StartBarrier, "*"))
	for _, m := range marks {
		if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() {
			out[filepath.Base(m)] = st.ModTime()
		}
	}
	return out
}

// LiveCheck is what LiveVerdict judges, every host named as the merged
// report names it (a Kubernetes pod's host name).
type LiveCheck struct {
	Want     map[string]string        // host -> the liveness it must have ("" included); hosts absent must have none
	Late     map[string]time.Duration // host -> its planted delay
	Kill     map[string]int           // host -> the round it was killed in
	Killed   map[string]bool          // hosts the lab did kill
	Arrivals map[string]time.Time     // host -> its start barrier mark (StartArrivals)
	Spec     map[string]string        // host -> its LAB_LATE/LAB_KILL entries, for messages
}

// LiveVerdict checks the liveness plants in the merged report: each host's
// liveness as planted and no other host's, a late host's task seen at the
// start barrier at least its delay after the first host, a killed VM
// killed, its pairs of that round stopped and none after, and no flaky
// link with a planted host (the suspects are ClusterVerdict's).
func LiveVerdict(s *ClusterSummary, c LiveCheck) []string {
	var p []string
	for _, h := range s.Hosts {
		want := c.Want[h.Host]
		if got := s.Cluster.Liveness(h.Host); got != want {
			what := "no liveness (it ran to the end)"
			if want != "" {
				what = fmt.Sprintf("%q (%s)", want, c.Spec[h.Host])
			}
			p = append(p, fmt.Sprintf("the merged report says %s %q, want %s", h.Host, orNone(got), what))
		}
	}
	var first time.Time
	for h, t := range c.Arrivals {
		if _, late := c.Late[h]; !late && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	for h, d := range c.Late {
		t, ok := c.Arrivals[h]
		switch {
		case !ok:
			p = append(p, fmt.Sprintf("%s (%s) left no mark at the start barrier", h, c.Spec[h]))
		case first.IsZero():
			p = append(p, "no host that was not planted late left a mark at the start barrier")
		case t.Sub(first) < d-2*time.Second: // the marks' times are the host's clock, to the second
			p = append(p, fmt.Sprintf("%s (%s) reached the start barrier %.0fs after the first host, less than its delay: the plant did not hold it", h, c.Spec[h], t.Sub(first).Seconds()))
		}
	}
	for h, k := range c.Kill {
		if !c.Killed[h] {
			p = append(p, fmt.Sprintf("%s (%s) was not killed: round %d never began on it", h, c.Spec[h], k))
			continue
		}
		for _, pr := range s.Pairs {
			if pr.A != h && pr.B != h {
				continue
			}
			switch {
			case pr.Round == k && pr.Status != isolate.Stopped:
				p = append(p, fmt.Sprintf("round %d pair %s-%s rail %d is %s, want %s: %s was killed in that round", pr.Round, pr.A, pr.B, pr.Rail, pr.Status, isolate.Stopped, h))
			case pr.Round > k:
				p = append(p, fmt.Sprintf("round %d pair %s-%s rail %d: %s stopped in round %d and must never be paired again", pr.Round, pr.A, pr.B, pr.Rail, h, k))
			}
		}
	}
	for _, pr := range s.Pairs {
		if pr.Status != isolate.Stopped {
			continue
		}
		if k, ok := c.Kill[pr.A]; ok && pr.Round >= k {
			continue
		}
		if k, ok := c.Kill[pr.B]; ok && pr.Round >= k {
			continue
		}
		p = append(p, fmt.Sprintf("round %d pair %s-%s rail %d is %s, and neither end was killed in or before it", pr.Round, pr.A, pr.B, pr.Rail, pr.Status))
	}
	if s.Cluster != nil {
		for _, f := range s.Cluster.Flaky {
			for _, h := range []string{f.Host, f.Peer} {
				if _, ok := c.Want[h]; ok && c.Spec[h] != "" {
					p = append(p, fmt.Sprintf("%s is flaky, and %s (%s) is an end of it: a late or killed host must give no link finding", f.Name(), h, c.Spec[h]))
				}
			}
		}
	}
	return p
}

// actionLine reads one line of actions.txt: the node a scontrol or kubectl
// line names, which kind it is, and a drain's reason.
var (
	drainLine = regexp.MustCompile(`^scontrol update nodename=(\S+) state=drain reason=(.*)$`)
	taintLine = regexp.MustCompile(`^kubectl taint nodes (\S+) gdrconf\.io/not-qualified=\S+:NoSchedule --overwrite$`)
	labelLine = regexp.MustCompile(`^kubectl label nodes (\S+) gdrconf\.io/verdict=not-qualified --overwrite$`)
)

// ActionsVerdict checks actions.txt in the merged report's folder: a drain
// (Slurm), a taint and a label (Kubernetes) line for exactly the nodes of
// the hosts the report found NOT QUALIFIED, by node name (under Kubernetes
// never a pod's: pods maps each pod to its node), and each host planted
// to not start or to stop drained with that reason (gone: host ->
// liveness). No NOT QUALIFIED host: no actions.txt.
func ActionsVerdict(dir string, s *ClusterSummary, gone, pods map[string]string) []string {
	var p []string
	want := map[string]string{} // node -> host
	for _, h := range s.Hosts {
		if h.Earlier || !strings.HasPrefix(h.Verdict, report.NotQualified) {
			continue
		}
		node := h.Identity.Node
		if node == "" {
			node = h.Host
		}
		want[node] = h.Host
	}
	b, err := os.ReadFile(filepath.Join(dir, report.ActionsFile))
	switch {
	case err != nil && len(want) == 0:
		return nil
	case err != nil:
		return []string{fmt.Sprintf("%s: %v, and the report found %s NOT QUALIFIED", report.ActionsFile, err, strings.Join(sortedKeys(want), ", "))}
	}
	drains, taints, labels := map[string]string{}, map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := drainLine.FindStringSubmatch(l); m != nil {
			drains[m[1]] = m[2]
		} else if m := taintLine.FindStringSubmatch(l); m != nil {
			taints[m[1]] = true
		} else if m := labelLine.FindStringSubmatch(l); m != nil {
			labels[m[1]] = true
		}
	}
	wantNodes := sortedKeys(want)
	for what, got := range map[string][]string{"drains": sortedKeys(drains), "taints": sortedKeys(taints), "labels": sortedKeys(labels)} {
		if !slices.Equal(got, wantNodes) {
			p = append(p, fmt.Sprintf("%s %s [%s], want the nodes of the hosts found NOT QUALIFIED [%s]", report.ActionsFile, what, strings.Join(got, ", "), strings.Join(wantNodes, ", ")))
		}
	}
	if pods != nil {
		for _, n := range sortedKeys(drains) {
			if _, isPod := pods[n]; isPod {
				p = append(p, fmt.Sprintf("%s names %s, a pod, where a node's name belongs (the pod ran on %s)", report.ActionsFile, n, orNone(pods[n])))
			}
		}
	}
	for host, l := range gone {
		node := host
		for n, h := range want {
			if h == host {
				node = n
			}
		}
		reason, ok := drains[node]
		if !ok {
			continue // the set check above names it
		}
		if !strings.Contains(reason, l) {
			p = append(p, fmt.Sprintf("%s drains %s with reason %s, which does not say it %s", report.ActionsFile, node, reason, l))
		}
	}
	sort.Strings(p)
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describe says what is planted and what the report must say of it:
// "vm4 late 90s (joins), vm2 killed 30s into round 1 (stopped in round 1)";
// "none" when nothing is.
func (p LivePlan) describe(expect map[string]string) string {
	var out []string
	for _, l := range p.Late {
		what := "joins"
		if e := expect[l.Host]; e != "" {
			what = e
		}
		out = append(out, fmt.Sprintf("%s late %v (%s)", l.Host, l.Delay, what))
	}
	for _, k := range p.Kill {
		out = append(out, fmt.Sprintf("%s killed %v into round %d (%s)", k.Host, k.After, k.Round, expect[k.Host]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// liveCheck names the liveness plants as the merged report names their
// hosts (under Kubernetes a pod's host name: pods maps pod -> node) and
// reads the start barrier's marks under the run's folder root. gone is
// host -> the liveness it must have, where that is not "".
func (r *runner) liveCheck(expect map[string]string, root string, pods map[string]string) (LiveCheck, map[string]string, error) {
	lc := LiveCheck{Want: map[string]string{}, Late: map[string]time.Duration{}, Kill: map[string]int{}, Killed: map[string]bool{},
		Spec: map[string]string{}, Arrivals: StartArrivals(root)}
	gone := map[string]string{}
	var errs []string
	name := func(vm string) (string, bool) {
		if pods == nil {
			return vm, true
		}
		for p, n := range pods {
			if n == vm {
				return p, true
			}
		}
		errs = append(errs, fmt.Sprintf("k8s: no pod ran on %s (pods: %s), which LAB_LATE or LAB_KILL names", vm, podList(pods)))
		return "", false
	}
	spec := func(h, e string) {
		if lc.Spec[h] != "" {
			e = lc.Spec[h] + " " + e
		}
		lc.Spec[h] = e
	}
	for _, vm := range sortedKeys(expect) {
		h, ok := name(vm)
		if !ok {
			continue
		}
		lc.Want[h] = expect[vm]
		if expect[vm] != "" {
			gone[h] = expect[vm]
		}
	}
	for _, l := range r.live.Late {
		if h, ok := name(l.Host); ok {
			lc.Late[h] = l.Delay
			spec(h, "LAB_LATE "+l.Spec)
		}
	}
	for _, k := range r.live.Kill {
		if h, ok := name(k.Host); ok {
			lc.Kill[h], lc.Killed[h] = k.Round, r.wasKilled(k.Host)
			spec(h, "LAB_KILL "+k.Spec)
		}
	}
	if len(errs) > 0 {
		return lc, gone, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return lc, gone, nil
}

// printLive prints each planted host's arrival at the start barrier and
// the liveness the merged report gave it.
func (r *runner) printLive(s *ClusterSummary, c LiveCheck) {
	if r.live.Empty() {
		return
	}
	var first time.Time
	for h, t := range c.Arrivals {
		if _, late := c.Late[h]; !late && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	fmt.Fprintf(r.o.Out, "liveness planted:\n")
	for _, h := range sortedKeys(c.Spec) {
		at := "no mark at the start barrier"
		if t, ok := c.Arrivals[h]; ok && !first.IsZero() {
			at = fmt.Sprintf("at the start barrier %+.0fs after the first host", t.Sub(first).Seconds())
		}
		if _, killed := c.Kill[h]; killed {
			at += fmt.Sprintf(", killed by the lab: %v", c.Killed[h])
		}
		fmt.Fprintf(r.o.Out, "  %-10s %s: %s; the report: %s\n", h, c.Spec[h], at, orNone(s.Cluster.Liveness(h)))
	}
}
