package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/lab/emugpu"
	"github.com/gdrconf/gdrconf/lab/vm"
	"github.com/gdrconf/gdrconf/report"
)

// ModeCluster is `make lab-cluster`: four VMs with two rails each run the
// suite under real Slurm, one rail of one VM degraded on purpose, and the
// merged report must find exactly that rail bad (and fail the merge for it).
const ModeCluster = "cluster"

// Cluster suites: what each round runs on a node.
const (
	SuitePingpong = "pingpong" // dist/run.sh with the LAB_PKGS test binaries (the real suite)
	SuiteStandin  = "standin"  // ib_write_bw on every rail (standin.go)
)

// ClusterOptions are the cluster lab's own settings (Options has the rest).
type ClusterOptions struct {
	Hosts       int           // VMs (LAB_CLUSTER_HOSTS, default 4)
	Rails       int           // rails per VM (2)
	Degrade     string        // LAB_DEGRADE
	Suite       string        // LAB_CLUSTER_SUITE: pingpong or standin
	MemMiB      int           // LAB_VM_MEM
	SrunTimeout time.Duration // LAB_SRUN_TIMEOUT: srun's limit (Slurm's --time and the agent's deadline)
	Pairing     string        // GDR_PAIRING inside the lab
	// Sbatch is LAB_SBATCH: the batch script submitted, SbatchShipped
	// (deploy/slurm/gdrconf.sbatch as it ships) or SbatchOld (without its
	// GPU request: the lab must fail naming it).
	Sbatch string
	// Late and Kill are LAB_LATE and LAB_KILL: VMs whose task or pod
	// starts late, and VMs killed during a round (liveness.go).
	Late, Kill string
}

// Guest paths and networks of the cluster lab.
const (
	clusterShared = "/shared"
	clusterRounds = clusterShared + "/rounds" // GDR_REPORTS of dist/run.sh under srun
	clusterLogs   = clusterShared + "/lab"    // daemons' logs and the end file
	clusterDist   = "/lab/dist"               // make dist's layout, rounds.sh and gdrcluster included
	clusterShare  = "gdrshared"               // virtio-9p mount tag
	mgmtNet       = "198.18.0"                // eth2 of every VM: Slurm, munge, out-of-band sessions
	clusterName   = "gdrlab"
	standinSh     = "/lab/standin.sh"
)

// railNet is rail r's network: 198.18.<r+1>.0/24.
func railNet(r int) string { return fmt.Sprintf("198.18.%d", r+1) }

// clusterMAC is NIC n of VM i (1-based): 52:54:00:1d:<n>:<i>.
func clusterMAC(n, i int) string { return fmt.Sprintf("52:54:00:1d:%02x:%02x", n, i) }

// ClusterHosts names the VMs: vm1..vm<n>, which is also Slurm's vm[1-n].
func ClusterHosts(n int) []string {
	var h []string
	for i := 1; i <= n; i++ {
		h = append(h, fmt.Sprintf("vm%d", i))
	}
	return h
}

// clusterPlan is the jobs of every VM.
func (r *runner) clusterPlan(degrade []Degrade) []Job {
	c := r.o.Cluster
	hosts := ClusterHosts(c.Hosts)
	var jobs []Job
	for i, h := range hosts {
		cj := &ClusterJob{Host: h, Controller: hosts[0], Hosts: hosts, ShareTag: clusterShare, Shared: clusterShared,
			LogDir: clusterLogs, EndFile: clusterLogs + "/end", DaemonWait: 2 * time.Minute, NodesWait: 4 * time.Minute,
			EndWait: c.SrunTimeout + 8*time.Minute}
		for rl := 0; rl < c.Rails; rl++ {
			cj.NICs = append(cj.NICs, GuestNIC{MAC: clusterMAC(rl, i+1), Addr: fmt.Sprintf("%s.%d/24", railNet(rl), i+1), RXE: fmt.Sprintf("rxe%d", rl), Rail: rl})
		}
		cj.NICs = append(cj.NICs, GuestNIC{MAC: clusterMAC(c.Rails, i+1), Addr: fmt.Sprintf("%s.%d/24", mgmtNet, i+1), Rail: -1})
		for _, d := range degrade {
			if d.Host == h {
				if d.To != "" {
					d.ToAddr = fmt.Sprintf("%s.%d", railNet(d.Rail), slices.Index(hosts, d.To)+1)
				}
				cj.Degrade = append(cj.Degrade, d)
			}
		}
		if i == 0 {
			cj.Probes = r.deviceProbes(h)
			cj.Sbatch = r.sbatchJob(h)
		}
		jobs = append(jobs, Job{Role: h, Addr: fmt.Sprintf("%s.%d", mgmtNet, i+1), Setup: 3 * time.Minute, Cluster: cj, GPUs: r.clusterGPUs()})
	}
	return jobs
}

// clusterGPUs is how many emulated GPUs each cluster VM has (0 without
// the emulated GPU): their device files, Slurm's GRES, the device plugin's
// nvidia.com/gpu.
func (r *runner) clusterGPUs() int {
	if !r.o.EmulatedGPU {
		return 0
	}
	return emulatedGPUCount(r.clusterEnv())
}

// labPairMinFraction is the cluster lab's GDR_PAIR_MIN_FRACTION (the
// suite's default is 0.5, for fabrics whose healthy pairs agree within a
// few per cent). Four TCG VMs on two cores do not: the pairs with vm1 (it
// also runs slurmctld and srun) measured 0.036-0.052 Gbit/s on a healthy
// rail where the pairs sharing neither host measured 0.085-0.125, a ratio
// down to 0.42, and a CI run and a local run flagged vm1 as slow at 0.5.
// The planted fault (DefaultDegrade) put its pairs at 0.05-0.09 of the
// others, 0.13 of the slowest healthy pair ever seen; 0.25 lies between
// with a margin of about 1.7 either way.
const labPairMinFraction = "0.25"

// labBWIters is the cluster labs' GDR_BW_ITERS: 50 WRs of 64 KiB (3.3 MB,
// under a second on a healthy rail under TCG) per bandwidth point. A
// planted 250 ms delay holds a pair at about 0.004 Gbit/s, so each point
// of a degraded pair took 26 s at the former 200 and its rounds 4-8
// minutes (PP-08 90 s on one bad rail, 159 s on two). At 50 make
// lab-cluster took 655 s instead of 976 s, its healthy pairs measured
// 0.066-0.124 Gbit/s (0.025-0.111 at 200) and the planted ones 0.004
// against floors of 0.0165-0.0225; far from the 5000 a hardware run takes.
const labBWIters = "50"

// clusterEnv is the suite's environment in every task: the user's GDR_*
// settings for TCG (sbatch passes its environment to the job, and srun to
// the tasks) and the emulated GPU's count.
func (r *runner) clusterEnv() []string {
	o, c := r.o, r.o.Cluster
	env := []string{
		"GDR_PAIRING=" + c.Pairing,
		"GDR_TIMEOUT=" + o.Timeout.String(),
		fmt.Sprintf("GDR_ITERS=%d", o.Iters),
		// Both ends of every pair wait for each other between rounds.
		"GDR_ROUND_TIMEOUT=" + (c.SrunTimeout).String(),
	}
	if o.EmulatedGPU {
		// One emulated GPU per rail: the rails pair GPU i with rxe<i>.
		env = append(env, fmt.Sprintf("FAKE_CUDA_DEVICES=%d", c.Rails))
	}
	if !hasEnv(o.Env, "GDR_BW_SIZES") {
		// One size keeps a round short under TCG; the pair's bandwidth is
		// the WRITE figure at the largest size anyway.
		env = append(env, "GDR_BW_SIZES=65536")
	}
	if !hasEnv(o.Env, "GDR_IB_TIMEOUT") {
		// Under TCG a round trip is about 17 ms and a planted 50 ms
		// delay makes it about 67 ms, the default ACK timeout's: the NIC
		// then retransmits until its retries run out and the partner's
		// tests fail too (seen: BIDIR on vm2-vm3 rail 1). 1.07 s leaves
		// the delay to slow the pair (rxe holds 64 packets per QP in
		// flight), which is the fault this lab plants; lost packets are
		// the fault matrix's.
		env = append(env, "GDR_IB_TIMEOUT=18")
	}
	if !hasEnv(o.Env, "GDR_PAIR_MIN_FRACTION") {
		env = append(env, "GDR_PAIR_MIN_FRACTION="+labPairMinFraction)
	}
	if len(r.live.Late) > 0 && !hasEnv(o.Env, "GDR_START_TIMEOUT") {
		// A late VM joins within it or is named as not started after it
		// (LivePlan.Expect); the default 15 min would make the second
		// cost the run 15.
		env = append(env, "GDR_START_TIMEOUT="+LabStartTimeout.String())
	}
	if !hasEnv(o.Env, "GDR_BW_ITERS") {
		env = append(env, "GDR_BW_ITERS="+labBWIters)
	}
	if c.Suite == SuiteStandin {
		// Ten times the suite's iterations: one ib_write_bw run is one
		// number, and short runs are dominated by their start.
		env = append(env, "GDR_SUITE="+standinSh, fmt.Sprintf("LAB_STANDIN_RAILS=%d", c.Rails), fmt.Sprintf("LAB_STANDIN_ITERS=%d", 10*o.Iters))
	}
	// The suite itself: rounds.sh's default, run.sh beside it.
	return append(env, o.Env...)
}

// clusterSuiteArgs are the suite's arguments on srun's command line: the
// lab's test limit and filter (none for the stand-in).
func (r *runner) clusterSuiteArgs() []string {
	if r.o.Cluster.Suite == SuiteStandin {
		return nil
	}
	args := []string{"-test.timeout=" + (r.o.StepTimeout - 15*time.Second).String()}
	if r.o.Run != "" {
		args = append(args, "-test.run="+r.o.Run)
	}
	return args
}

// goBuild builds Go commands for the image: static when cgo is off.
func (r *runner) goBuild(ctx context.Context, out string, cgo bool, pkgs ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	args := append([]string{"build", "-buildvcs=auto", "-o", out}, pkgs...)
	cmd := exec.CommandContext(ctx, r.o.Go, args...)
	cmd.Dir = r.o.RepoDir
	cmd.Env = os.Environ()
	if !cgo {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", r.o.Go, strings.Join(args, " "), err, clip.LastLines(string(b), 5))
	}
	return nil
}

// clusterImage adds what every cluster node has to the image, whatever
// its scheduler: bash and tc, the cluster tools and the suite (the
// backend's image adds the scheduler).
func (r *runner) clusterImage(ctx context.Context, im *vm.Image, parts *vm.Parts, pkgs []testPkg) error {
	o := r.o
	hosts := ClusterHosts(o.Cluster.Hosts)
	var addrs []string
	for i := range hosts {
		addrs = append(addrs, fmt.Sprintf("%s.%d", mgmtNet, i+1))
	}
	im.Files, im.Data, im.Symlinks = map[string]string{}, clusterEtc(hosts, addrs), map[string]string{}
	// sch_netem is in ModuleRoots; a path fault (LAB_DEGRADE to=) adds a
	// prio qdisc and a u32 filter.
	im.Modules = []string{"9p", "9pnet_virtio", "sch_prio", "cls_u32"}
	im.Applets = []string{"dirname", "basename", "rm", "head", "tail", "tee", "tr", "cut", "date", "hostname", "id", "wc", "sed",
		"awk", "touch", "chmod", "ln", "mv", "readlink", "sort", "uniq", "stat", "find", "true", "false", "test", "[", "seq", "xargs", "which"}
	if err := addParts(im, parts, clusterTools); err != nil {
		return err
	}
	im.Symlinks["/usr/bin/env"] = "/bin/busybox"
	im.Symlinks["/usr/bin/bash"] = "/bin/bash"
	bin := filepath.Join(r.dir, "cbin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := r.goBuild(ctx, bin+"/", false, "./cmd/gdrcluster", "./cmd/gdrreport"); err != nil {
		return err
	}
	// make dist's layout (build/dist/build.sh): the batch script's srun
	// starts rounds.sh (the Kubernetes Job too), which calls gdrcluster
	// and, for each round, GDR_SUITE (the stand-in) or run.sh.
	im.Binaries[clusterDist+"/gdrcluster"] = filepath.Join(bin, "gdrcluster")
	im.Files[clusterDist+"/rounds.sh"] = filepath.Join(o.RepoDir, "deploy", "rounds.sh")
	for _, f := range []string{"run.sh", "run-json.sh"} {
		im.Files[clusterDist+"/"+f] = filepath.Join(o.RepoDir, "build", "dist", f)
	}
	im.Data[standinSh] = vm.DataFile{Mode: 0o755, Bytes: []byte(standinScript)}
	if o.Cluster.Suite == SuitePingpong {
		// The suite: run.sh runs every test binary in dist/bin and writes
		// the round's reports.
		if err := r.addDist(ctx, im, bin, clusterDist, pkgs); err != nil {
			return err
		}
		if o.EmulatedGPU {
			lib, err := emugpu.Build(r.dir)
			if err != nil {
				return err
			}
			im.Binaries[vm.AMD64.LibDir()+"/libcuda.so.1"] = lib
		}
	}
	return nil
}

// addDist puts make dist's layout (build/dist/build.sh) under dist in the
// image: run.sh and run-json.sh, gotestsum, test2json and gdrreport in bin/
// (built into hostBin), and the test binaries with their .pkg markers
// (pingpong's .paired too), so that a VM runs dist/run.sh as a host does.
func (r *runner) addDist(ctx context.Context, im *vm.Image, hostBin, dist string, pkgs []testPkg) error {
	if err := r.goBuild(ctx, hostBin+"/", true, "gotest.tools/gotestsum", "cmd/test2json"); err != nil {
		return err
	}
	if err := r.goBuild(ctx, hostBin+"/", false, "./cmd/gdrreport"); err != nil {
		return err
	}
	for _, f := range []string{"run.sh", "run-json.sh"} {
		im.Files[dist+"/"+f] = filepath.Join(r.o.RepoDir, "build", "dist", f)
	}
	for _, n := range []string{"gotestsum", "test2json", "gdrreport"} {
		im.Binaries[dist+"/bin/"+n] = filepath.Join(hostBin, n)
	}
	for _, p := range pkgs {
		base := filepath.Base(p.Bin)
		im.Binaries[dist+"/bin/"+base] = p.Bin
		name := strings.TrimSuffix(base, ".test")
		im.Data[dist+"/bin/"+name+".pkg"] = vm.DataFile{Mode: 0o644, Bytes: []byte(p.Import + "\n")}
		if p.Short == PingpongPkg {
			// As build/dist/build.sh marks it: the package that meets a
			// peer, the only one a host's later rounds run.
			im.Data[dist+"/bin/"+name+".paired"] = vm.DataFile{Mode: 0o644, Bytes: nil}
		}
	}
	return nil
}

// clusterTools are the tools every cluster node has from the parts,
// whatever its scheduler (guest path -> path inside Parts.Root): bash for
// deploy/rounds.sh and dist/run.sh, tc for LAB_DEGRADE's faults.
var clusterTools = map[string]string{
	"/bin/bash":    "bin/bash",
	"/usr/sbin/tc": "sbin/tc",
}

// addParts adds binaries of the unpacked packages (guest path -> path
// inside Parts.Root) to the image.
func addParts(im *vm.Image, parts *vm.Parts, bins map[string]string) error {
	for gp, rel := range bins {
		hp := filepath.Join(parts.Root, rel)
		if _, err := os.Stat(hp); err != nil {
			return fmt.Errorf("%s not in the unpacked packages: %w", rel, err)
		}
		im.Binaries[gp] = hp
	}
	return nil
}

// clusterVM is one VM of the cluster and what the host saw of it.
type clusterVM struct {
	job      Job
	vm       *vm.VM
	res      *Results
	killed   string
	finished time.Time // when the host saw it past its last step (finishedSteps)
}

// powerOffHung kills a VM whose agent is past its last step (finished)
// but which has not powered off powerOffGrace after since, the time that
// was first seen.
func (r *runner) powerOffHung(role string, m *vm.VM, finished bool, since *time.Time) {
	if m.Exited() || !finished {
		return
	}
	if since.IsZero() {
		*since = time.Now()
		return
	}
	if time.Since(*since) > powerOffGrace {
		r.logf("VM %s finished its steps but had not powered off %v later; killed it (its results are in). Its console's end:\n%s",
			role, powerOffGrace, consoleEnd(m, 12))
		m.Kill(fmt.Sprintf("did not power off within %v of its last step", powerOffGrace))
	}
}

// powerOffGrace is how long a VM that finished its steps has to power
// off before the host kills it. Its results are in by then: a hung power
// off is noted in the log, not counted as a problem. (CI, stop 26: vm1's
// srun ended and every result was in, yet qemu ran on to the 40 min lab
// deadline; the console was not kept.)
const powerOffGrace = time.Minute

// finishedSteps reports whether a cluster VM's agent is past its last
// step: it said so (RecDone), or every step it must run has ended (a
// RecDone stuck behind a hung write still ends here).
func finishedSteps(j Job, res *Results) bool {
	if res == nil {
		return false
	}
	if res.Done {
		return true
	}
	for _, id := range clusterWant(j) {
		if s := res.Step(id); s == nil || s.End == nil {
			return false
		}
	}
	return true
}

// clusterWant is the steps a cluster VM's agent runs, in order.
func clusterWant(j Job) []string {
	switch {
	case j.Cluster.Kube != nil && j.Cluster.Kube.Late > 0:
		return []string{"setup-" + j.Role, "node-" + j.Role, "late-" + j.Role, "wait-" + j.Role}
	case j.Cluster.Kube != nil:
		return []string{"setup-" + j.Role, "node-" + j.Role, "wait-" + j.Role}
	case j.Cluster.Sbatch != nil:
		ids := []string{"setup-" + j.Role, "daemons-" + j.Role, "nodes"}
		for _, p := range j.Cluster.Probes {
			ids = append(ids, p.ID)
		}
		return append(ids, j.Cluster.Sbatch.Step.ID)
	default:
		return []string{"setup-" + j.Role, "daemons-" + j.Role, "wait-" + j.Role}
	}
}

// clusterBackend is what differs between the cluster labs' schedulers:
// Slurm (ModeCluster, slurm.go and sbatch.go, the daemons in
// cluster_guest.go) and Kubernetes (ModeK8s, k8s.go and kube_guest.go).
// RunCluster is the one sequence around it: plan the VMs, build the image,
// boot them, merge the reports they wrote and decide.
type clusterBackend interface {
	// name is the lab's name in its verdict: lab-cluster, lab-k8s.
	name() string
	// packages are the Debian packages the scheduler adds to the parts
	// (partsPackages); its image takes its files from them.
	packages() []string
	// lateOverhead is what a LAB_LATE host's start adds to its delay
	// under this scheduler (LivePlan.Expect).
	lateOverhead() time.Duration
	// setUp readies the scheduler's side on the host before the image is
	// built and turns the VMs' plan into its nodes; stop ends what it
	// started.
	setUp(ctx context.Context, plan []Job, agent string) (stop func(), err error)
	// image adds the scheduler to the VM image, which is complete but for
	// it (and writes what the nodes import beside it).
	image(im *vm.Image, parts *vm.Parts) error
	// vmConfig adds the scheduler's own NICs (extra: the plan's NICs past
	// the switches) and shares to a VM.
	vmConfig(cfg *vm.Config, extra []GuestNIC)
	// drive starts the host's part beside the VMs (submitting the job as
	// shipped and waiting for it, where the host does that); wait returns
	// once it ended, after ctx is done at the latest.
	drive(ctx context.Context, shared string) (wait func(), err error)
	// collect reads back what the scheduler and the VMs left once every
	// VM ended: where the job's reports are, and the problems it saw.
	collect(plan []Job, vms map[string]*clusterVM, shared string, degrade []Degrade) collected
	// checks are the scheduler's own verdicts on the merged report (gone:
	// the hosts planted not to finish, rounds: the reports' folder).
	checks(sum *ClusterSummary, gone map[string]string, rounds string) []string
	// printJob prints how the scheduler's job ended, after the report.
	printJob(rounds string)
	// exited is the passed line's account of the exit statuses.
	exited(mergeExit int) string
	// times is the times line's phases, by the keys of RunCluster's
	// times and collected.times.
	times(t map[string]time.Duration) string
}

// collected is what a backend read back after the VMs ended.
type collected struct {
	rounds   string                   // the folder the merge reads
	found    []Degrade                // the planted faults as the merged report names their hosts
	pods     map[string]string        // pod -> node, under Kubernetes
	times    map[string]time.Duration // the backend's own phases
	json     map[string]any           // the backend's fields of lab.json
	problems []string
}

// partsPackages is every package of the parts: the image's own
// (vm.Packages) and each cluster backend's, so that one cached parts folder
// (vm.FetchParts, keyed by every package's version) serves every mode.
func partsPackages() []string {
	pkgs := append([]string(nil), vm.Packages...)
	for _, b := range []clusterBackend{&slurmBackend{}, &kubeBackend{}} {
		pkgs = append(pkgs, b.packages()...)
	}
	return pkgs
}

// clusterBackend is the scheduler of the lab's mode.
func (r *runner) clusterBackend() clusterBackend {
	if r.o.Mode == ModeK8s {
		return &kubeBackend{r: r}
	}
	return &slurmBackend{r: r}
}

// RunCluster is the cluster lab (ModeCluster), and with ModeK8s the same
// VMs as Kubernetes nodes (k8s.go).
func RunCluster(ctx context.Context, o Options) error {
	r := &runner{o: o, start: time.Now(), dir: filepath.Join(o.CacheDir, "run-cluster")}
	c := o.Cluster
	b := r.clusterBackend()
	labName := b.name()
	degrade, err := ParseDegrade(c.Degrade, c.Hosts, c.Rails)
	if err != nil {
		return err
	}
	if c.Hosts < 2 || c.Hosts > 16 || c.Rails < 1 || c.Rails > 4 {
		return fmt.Errorf("cluster lab: %d hosts x %d rails: want 2..16 hosts and 1..4 rails", c.Hosts, c.Rails)
	}
	if r.live.Late, err = ParseLate(c.Late, c.Hosts); err != nil {
		return err
	}
	if r.live.Kill, err = ParseKill(c.Kill, c.Hosts); err != nil {
		return err
	}
	cfg, err := r.clusterConfig() // with GDR_START_TIMEOUT as the VMs get it
	if err != nil {
		return err
	}
	expect, err := r.live.Expect(cfg.StartTimeout, b.lateOverhead(), degrade)
	if err != nil {
		return err
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	times := map[string]time.Duration{}
	mark := func(k string, since time.Time) { times[k] = time.Since(since).Round(100 * time.Millisecond) }
	shared, err := r.clusterFolders()
	if err != nil {
		return err
	}
	sharedAbs, err := filepath.Abs(shared)
	if err != nil {
		return err
	}
	t0 := time.Now()
	qemu, err := vm.EnsureQEMU(ctx, vm.AMD64, &r.apt, r.logf)
	if err != nil {
		return err
	}
	parts, err := vm.FetchParts(ctx, o.CacheDir, vm.AMD64, partsPackages(), &r.apt, r.logf)
	if err != nil {
		return err
	}
	r.kernel = parts.KernelVer
	mark("parts", t0)
	r.logf("parts ready: kernel %s; slurm %s, munge %s", parts.KernelVer, parts.Versions["slurmd"], parts.Versions["munge"])
	t0 = time.Now()
	var pkgs []testPkg
	if c.Suite == SuitePingpong {
		if pkgs, err = r.buildTests(ctx); err != nil {
			return err
		}
		if len(pkgs) == 0 {
			return fmt.Errorf("cluster lab: no test binary to run (LAB_PKGS=%q, tags %q)", strings.Join(o.Pkgs, " "), o.Tags)
		}
	}
	agent, err := os.Executable()
	if err != nil {
		return err
	}
	plan := r.clusterPlan(degrade)
	stopBackend, err := b.setUp(ctx, plan, agent)
	if err != nil {
		return err
	}
	defer stopBackend()
	im := &vm.Image{Parts: parts, Agent: agent, Binaries: map[string]string{}, Jobs: map[string]vm.Job{}}
	for _, j := range plan {
		im.Jobs[j.Role] = j
	}
	if err := r.clusterImage(ctx, im, parts, pkgs); err != nil {
		return err
	}
	if err := b.image(im, parts); err != nil {
		return err
	}
	initrd := filepath.Join(r.dir, "initrd.gz")
	if err := im.Build(initrd); err != nil {
		return fmt.Errorf("building the initramfs: %w", err)
	}
	st, _ := os.Stat(initrd)
	mark("build", t0)
	r.logf("initramfs %s (%.1f MiB); suite %s; degraded: %s; liveness: %s", initrd, float64(st.Size())/(1<<20), c.Suite, degradeList(degrade), r.live.describe(expect))

	if o.Load > 0 { // as in make lab: a loaded CI machine, beside the VMs
		stop := startLoad(o.Load, r.logf)
		defer stop()
	}
	t0 = time.Now()
	driveCtx, stopDrive := context.WithCancel(ctx)
	defer stopDrive()
	driven, err := b.drive(driveCtx, shared)
	if err != nil {
		return err
	}
	vms, vmErrs := r.clusterBoot(ctx, b, qemu, parts, initrd, plan, sharedAbs)
	stopDrive()
	driven()
	mark("vms", t0)
	for role, v := range vms {
		if con, err := os.ReadFile(v.vm.Console); err == nil {
			_ = os.WriteFile(filepath.Join(o.ReportDir, role+".console.log"), con, 0o644)
		}
	}
	var problems []string
	for _, e := range vmErrs {
		problems = append(problems, e.Error())
	}
	problems = append(problems, r.clusterSteps(plan, vms)...)

	t0 = time.Now()
	col := b.collect(plan, vms, shared, degrade)
	problems = append(problems, col.problems...)
	for k, v := range col.times {
		times[k] = v.Round(100 * time.Millisecond)
	}
	rounds, found := col.rounds, col.found
	sum, rep, err := r.clusterMerge(rounds, found)
	mark("merge", t0)
	lc, gone, lerr := r.liveCheck(expect, rounds, col.pods)
	if lerr != nil {
		problems = append(problems, lerr.Error())
	}
	if err != nil {
		problems = append(problems, "merging the cluster's reports: "+err.Error())
	} else {
		problems = append(problems, ClusterVerdictLive(sum, found, gone, c.Hosts, c.Rails)...)
		if !r.live.Empty() {
			problems = append(problems, LiveVerdict(sum, lc)...)
		}
		problems = append(problems, ActionsVerdict(r.o.ReportDir, sum, gone, col.pods)...)
		if soakAsked(r.clusterEnv()) {
			problems = append(problems, SoakVerdict(sum)...)
		}
		problems = append(problems, b.checks(sum, gone, rounds)...)
		if o.EmulatedGPU && c.Suite == SuitePingpong {
			problems = append(problems, ClusterGPUVerdict(rep, gone)...)
		}
		problems = append(problems, JUnitProblems(r.o.ReportDir)...)
		r.printCluster(sum, rep, found)
		r.printLive(sum, lc)
		b.printJob(rounds)
	}
	times["total"] = time.Since(r.start).Round(100 * time.Millisecond)
	labJSON := map[string]any{
		"degraded": degradeJSON(degrade), "suite": c.Suite, "hosts": ClusterHosts(c.Hosts), "rails": c.Rails,
		"seconds": secondsOf(times), "problems": problems, "parts": parts.Versions}
	if !r.live.Empty() {
		labJSON["liveness"] = map[string]any{"planted": r.live, "expected": expect, "start_timeout": cfg.StartTimeout.String()}
	}
	if sum != nil {
		labJSON["merge_exit"] = sum.Exit // gdrreport's exit status for this merge: 1 when a planted fault was found
	}
	for k, v := range col.json {
		labJSON[k] = v
	}
	_ = writeJSONFile(filepath.Join(o.ReportDir, "lab.json"), labJSON)
	fmt.Fprintf(o.Out, "\ntimes: %s\n", b.times(times))
	if len(problems) > 0 {
		sort.Strings(problems)
		fmt.Fprintf(o.Out, "\n%s FAILED:\n", labName)
		for _, p := range problems {
			fmt.Fprintf(o.Out, "  %s\n", p)
		}
		return fmt.Errorf("%s failed (%d problems)", labName, len(problems))
	}
	live := ""
	if !r.live.Empty() {
		live = "; liveness as planted: " + r.live.describe(expect)
	}
	fmt.Fprintf(o.Out, "\n%s passed in %.0fs: found bad = degraded = %s%s; %s\n", labName, time.Since(r.start).Seconds(), degradeList(found), live, b.exited(sum.Exit))
	return nil
}

// clusterFolders empties the run folder and the report folder and makes
// the VMs' shared folder in the latter; it returns the shared folder.
func (r *runner) clusterFolders() (string, error) {
	for _, d := range []string{r.dir} {
		if err := os.RemoveAll(d); err != nil {
			return "", err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	// The report folder is the lab's own: the shared folder of the last run
	// and its merged report must not pass for this run's.
	shared := filepath.Join(r.o.ReportDir, "shared")
	if err := os.RemoveAll(shared); err != nil {
		return "", err
	}
	for _, pat := range []string{"junit.xml", "summary.*", "report.html", "actions.txt", "*.console.log", "srun.log", "sbatch.log", "devices-*.log", "lab.json", "k8s.log"} {
		old, _ := filepath.Glob(filepath.Join(r.o.ReportDir, pat))
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	for _, d := range []string{filepath.Join(shared, "rounds"), filepath.Join(shared, "lab"), filepath.Join(shared, "submit")} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return "", err
		}
		_ = os.Chmod(d, 0o777)
	}
	return shared, nil
}

// mergeExited is the passed line's account of the merge's exit status.
func mergeExited(exit int) string { return fmt.Sprintf("the merge exited %d as it must", exit) }

func secondsOf(t map[string]time.Duration) map[string]float64 {
	out := map[string]float64{}
	for k, v := range t {
		out[k] = v.Seconds()
	}
	return out
}

func degradeList(ds []Degrade) string {
	if len(ds) == 0 {
		return "none"
	}
	var s []string
	for _, d := range ds {
		how := "netem " + strings.Join(d.Netem, " ")
		if d.To != "" {
			how += " on " + d.Host + "'s packets for " + d.To
		}
		s = append(s, fmt.Sprintf("%s (%s)", d.Name(), how))
	}
	return strings.Join(s, ", ")
}

// degradeJSON is summary.json's degraded: host, rail and how.
func degradeJSON(ds []Degrade) []map[string]any {
	out := []map[string]any{}
	for _, d := range ds {
		m := map[string]any{"part": d.Kind(), "name": d.Name(), "host": d.Host, "rail": d.Rail, "netem": strings.Join(d.Netem, " "), "spec": d.Spec}
		if d.To != "" {
			m["to"] = d.To
		}
		out = append(out, m)
	}
	return out
}

// clusterBoot starts the switches and the VMs and follows them until every
// VM powered off, the deadline passed, or the controller ended and the others
// had their grace time.
func (r *runner) clusterBoot(ctx context.Context, b clusterBackend, qemu string, parts *vm.Parts, initrd string, plan []Job, shared string) (map[string]*clusterVM, []error) {
	o := r.o
	vms := map[string]*clusterVM{}
	var errs []error
	var nets []*vm.Switch
	for n := 0; n <= o.Cluster.Rails; n++ {
		name := fmt.Sprintf("rail%d", n)
		if n == o.Cluster.Rails {
			name = "mgmt"
		}
		s, err := vm.NewSwitch(name)
		if err != nil {
			return vms, []error{err}
		}
		defer s.Close()
		nets = append(nets, s)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.Deadline, fmt.Errorf("lab deadline %v", o.Deadline))
	defer cancel()
	for _, j := range plan {
		cfg := vm.Config{QEMU: qemu, Kernel: parts.Kernel, Initrd: initrd, Dir: r.dir, Name: j.Role, Role: j.Role, Accel: o.Accel,
			MemMiB: o.Cluster.MemMiB, Shares: []vm.Share{{Tag: clusterShare, Path: shared}}}
		nics := j.Cluster.NICs
		on := min(len(nics), len(nets)) // the rails' and the management network's
		for n, nic := range nics[:on] {
			cfg.NICs = append(cfg.NICs, vm.NIC{Netdev: nets[n].Netdev(), MAC: nic.MAC})
		}
		b.vmConfig(&cfg, nics[on:])
		m, err := vm.Start(cfg)
		if err != nil {
			errs = append(errs, err)
			break
		}
		vms[j.Role] = &clusterVM{job: j, vm: m}
		r.logf("VM %s started (qemu pid %d, console %s)", j.Role, m.Pid(), m.Console)
	}
	controller := plan[0].Role
	seen := map[string]bool{}
	began := map[string]time.Time{} // LAB_KILL: when each VM's round began
	var ctlEnd time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.killPlanted(vms, shared, began)
		all := true
		for role, v := range vms {
			v.res = readResults(v.vm.Result)
			for _, s := range v.res.Steps {
				k := role + " " + s.Step.ID
				if s.End != nil && !seen[k] {
					seen[k] = true
					status := "ok"
					if s.End.RC != 0 {
						status = fmt.Sprintf("FAILED rc=%d %s", s.End.RC, s.End.Err)
					}
					r.logf("%-4s %-12s %6.1fs  %s", role, s.Step.ID, s.End.Duration.Seconds(), status)
				}
			}
			r.powerOffHung(role, v.vm, finishedSteps(v.job, v.res), &v.finished)
			if v.vm.Exited() {
				if !seen[role+" off"] {
					seen[role+" off"] = true
					if r.wasKilled(role) {
						r.logf("VM %s is gone: it %s", role, v.killed)
					} else {
						r.logf("VM %s powered off", role)
					}
					if role == controller {
						ctlEnd = time.Now()
					}
				}
			} else {
				all = false
			}
		}
		if all {
			break
		}
		// The others wait for the controller's end file; once the
		// controller is gone they have a minute to see it.
		if !ctlEnd.IsZero() && time.Since(ctlEnd) > time.Minute {
			for role, v := range vms {
				if !v.vm.Exited() {
					v.killed = "was still running a minute after the controller powered off and was killed"
					v.vm.Kill(v.killed)
					errs = append(errs, fmt.Errorf("VM %s %s (console %s)%s", role, v.killed, v.vm.Console, vmTail(v.vm)))
				}
			}
			continue
		}
		select {
		case <-ctx.Done():
			for role, v := range vms {
				if !v.vm.Exited() {
					v.killed = fmt.Sprintf("did not finish within the lab deadline of %v and was killed", o.Deadline)
					v.vm.Kill(v.killed)
					errs = append(errs, fmt.Errorf("VM %s %s (console %s)%s", role, v.killed, v.vm.Console, vmTail(v.vm)))
				}
			}
		case <-tick.C:
		}
	}
	for _, v := range vms {
		v.res = readResults(v.vm.Result)
	}
	for _, s := range nets {
		r.logf("%s", s.Stats())
	}
	return vms, errs
}

// killPlanted kills each LAB_KILL VM once its round has run the entry's
// After, as make lab-kill kills its client (VM.Kill: qemu gets SIGKILL, the
// machine is gone at once, its heartbeat stops). began keeps when each
// VM's round began (roundBegan).
func (r *runner) killPlanted(vms map[string]*clusterVM, shared string, began map[string]time.Time) {
	for _, k := range r.live.Kill {
		v := vms[k.Host]
		if v == nil || v.vm.Exited() || r.wasKilled(k.Host) {
			continue
		}
		t, ok := began[k.Host]
		if !ok {
			if t = roundBegan(shared, k.Host, k.Round); t.IsZero() {
				continue
			}
			began[k.Host] = t
			r.logf("LAB_KILL %s: round %d began on %s; killing the VM %v into it", k.Spec, k.Round, k.Host, k.After)
		}
		if time.Since(t) < k.After {
			continue
		}
		v.killed = fmt.Sprintf("was killed by the lab %v into round %d (LAB_KILL %s)", k.After, k.Round, k.Spec)
		pid := v.vm.Pid()
		v.vm.Kill(v.killed)
		r.markKilled(k.Host)
		r.logf("LAB_KILL: VM %s (qemu pid %d) killed in round %d", k.Host, pid, k.Round)
	}
}

// clusterSteps checks every VM's setup, daemons and the controller's
// probes and batch job, and keeps each probe's output (every task's) as
// <probe>.log.
func (r *runner) clusterSteps(plan []Job, vms map[string]*clusterVM) []string {
	var problems []string
	for _, j := range plan {
		v := vms[j.Role]
		if v == nil {
			problems = append(problems, fmt.Sprintf("%s: its VM did not start", j.Role))
			continue
		}
		want := clusterWant(j)
		if r.wasKilled(j.Role) {
			want = want[:len(want)-1] // killed (LAB_KILL) while its last step waited for the end
		}
		for _, id := range want {
			s := v.res.Step(id)
			switch {
			case s == nil:
				problems = append(problems, fmt.Sprintf("%s: step %s did not run%s", j.Role, id, vmTail(v.vm)))
			case s.End == nil:
				problems = append(problems, fmt.Sprintf("%s: step %s did not finish%s", j.Role, id, vmTail(v.vm)))
			case s.End.RC != 0:
				problems = append(problems, fmt.Sprintf("%s: step %s failed (rc=%d %s): %s", j.Role, id, s.End.RC, s.End.Err, oneLine(clip.LastLines(string(s.Output), 4))))
			}
			if s != nil && strings.HasPrefix(id, "devices-") {
				_ = os.WriteFile(filepath.Join(r.o.ReportDir, id+".log"), s.Output, 0o644)
			}
			if s != nil && (s.End == nil || s.End.RC != 0) {
				fmt.Fprintf(r.o.Out, "\n--- %s %s output ---\n%s\n", j.Role, id, clip.LastLines(string(s.Output), 30))
			}
		}
	}
	return problems
}

// ClusterSummary is what the lab reads back from the merged summary.json.
type ClusterSummary struct {
	Verdict  string            `json:"verdict"`
	Hosts    []ClusterHost     `json:"hosts"`
	Pairs    []isolate.Pair    `json:"pairs"`
	Suspects []isolate.Suspect `json:"suspects"`
	Links    []isolate.Link    `json:"links"`
	// Cluster is isolation's verdict: suspects (part, host, rail, verdict,
	// evidence) and cleared hosts.
	Cluster  *report.ClusterFindings `json:"cluster"`
	Degraded []struct {
		Host string `json:"host"`
		Rail int    `json:"rail"`
	} `json:"degraded"`

	// Exit is the merge's exit status (gdrreport's for this report), and
	// IsolationFailed the failed or errored cases of junit.xml's
	// cluster/isolation suite, read back from the file.
	Exit            int      `json:"-"`
	IsolationFailed []string `json:"-"`
}

// ClusterHost is one host of the merged summary.json.
type ClusterHost struct {
	Host     string `json:"host"`
	Verdict  string `json:"verdict"`
	Fabric   string `json:"fabric"`
	Identity struct {
		Node   string `json:"node"`   // the machine's own name where the report names a pod
		Strict bool   `json:"strict"` // the host ran with GDR_STRICT=1
	} `json:"identity"`
	Earlier      bool         `json:"earlier_run"` // superseded by a later run of the host: not in the verdict
	Requirements []ClusterReq `json:"requirements"`
	// Soak is the host's soak as the merge found it (its soak.json, from
	// the round it soaked in); nil where none.
	Soak *struct {
		Rails []json.RawMessage `json:"rails"`
	} `json:"soak"`
}

// SoakVerdict checks a cluster run that asked for a soak (GDR_SOAK in the
// job's environment): every host soaked (the merge found its soak.json)
// and judged it (SOAK-02, which every soak judges on a rail or a GPU, is
// neither not run nor not asked).
func SoakVerdict(s *ClusterSummary) []string {
	var problems []string
	for _, h := range s.Hosts {
		if h.Earlier {
			continue
		}
		if h.Soak == nil {
			problems = append(problems, fmt.Sprintf("host %s: GDR_SOAK was set, but the merged report has no soak of it (no soak.json in its rounds)", h.Host))
			continue
		}
		if len(h.Soak.Rails) == 0 {
			problems = append(problems, fmt.Sprintf("host %s: its soak carried no rail's traffic", h.Host))
		}
		i := slices.IndexFunc(h.Requirements, func(r ClusterReq) bool { return r.ID == "SOAK-02" })
		switch {
		case i < 0:
			problems = append(problems, fmt.Sprintf("host %s: the merged report has no SOAK-02", h.Host))
		case h.Requirements[i].Status != "pass" && h.Requirements[i].Status != "fail":
			r := h.Requirements[i]
			problems = append(problems, fmt.Sprintf("host %s: SOAK-02 %s (%s), want it judged", h.Host, r.Status, r.Reason))
		}
	}
	return problems
}

// ClusterReq is one requirement of a host in the merged summary.json.
type ClusterReq struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// strictAbsent is the prefix of a requirement that failed only because
// GDR_STRICT=1 turned its absence into a failure.
const strictAbsent = "GDR_STRICT=1: "

// onlyLabAbsences says whether every failed requirement of h is an absence
// GDR_STRICT=1 failed that the lab's VMs have for their own reasons
// (reqs.LabVMAbsent): under strict such a host is NOT QUALIFIED without a
// planted fault, and that is expected.
func (h ClusterHost) onlyLabAbsences() bool {
	failed := 0
	for _, r := range h.Requirements {
		if r.Status != "fail" {
			continue
		}
		failed++
		if _, ok := reqs.LabVMAbsent[r.ID]; !ok || !strings.HasPrefix(r.Reason, strictAbsent) {
			return false
		}
	}
	return failed > 0
}

// clusterConfig is the cluster configuration the guests ran with (their
// environment, LAB_ENV last), so that the merge's pair analysis is the one
// their re-pairing rounds made, with the same GDR_PAIR_MIN_FRACTION.
func (r *runner) clusterConfig() (cluster.Config, error) {
	env := r.clusterEnv()
	return cluster.ParseConfig(func(k string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- { // the last wins, as in a process's environment
			if n, v, ok := strings.Cut(env[i], "="); ok && n == k {
				return v, true
			}
		}
		return "", false
	})
}

// clusterMerge merges the shared folder into the report folder
// (MergeCluster) with the guests' GDR_PAIR_MIN_FRACTION.
func (r *runner) clusterMerge(rounds string, degrade []Degrade) (*ClusterSummary, *report.Report, error) {
	cfg, err := r.clusterConfig()
	if err != nil {
		return nil, nil, err
	}
	return MergeCluster(rounds, r.o.ReportDir, isolate.Options{MinFraction: cfg.MinFraction}, degrade)
}

// MergeCluster merges a cluster's shared folder the way gdrreport does
// (LoadCluster, the pair analysis, one report) into dir, adds the lab's
// planted faults to summary.json as degraded, and reads back what a
// pipeline sees: summary.json, the exit status and junit.xml's isolation
// cases.
func MergeCluster(rounds, dir string, opt isolate.Options, degrade []Degrade) (*ClusterSummary, *report.Report, error) {
	runs, a, err := report.LoadCluster(rounds, opt, "")
	if err != nil {
		return nil, nil, err
	}
	rep := report.Build(runs)
	rep.SetCluster(a)
	if err := rep.WriteAll(dir); err != nil {
		return nil, nil, err
	}
	p := filepath.Join(dir, report.SummaryJSON)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, err
	}
	// degraded (host, rail): what the lab broke on purpose; the lab passes
	// when suspects names exactly these.
	m["degraded"] = degradeJSON(degrade)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		return nil, nil, err
	}
	if f, err := os.OpenFile(filepath.Join(dir, report.SummaryText), os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintf(f, "\nLab: degraded on purpose: %s\n", degradeList(degrade))
		f.Close()
	}
	var sum ClusterSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		return nil, nil, err
	}
	sum.Exit = rep.ExitCode()
	jf, err := os.Open(filepath.Join(dir, report.JUnitFile))
	if err != nil {
		return nil, nil, err
	}
	defer jf.Close()
	doc, err := report.ParseJUnit(jf)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %v", report.JUnitFile, err)
	}
	for _, su := range doc.Suites {
		for _, c := range su.Cases {
			if su.Name == report.IsolationSuite && (c.Failure != nil || c.Error != nil) {
				sum.IsolationFailed = append(sum.IsolationFailed, c.Name)
			}
		}
	}
	return &sum, rep, nil
}

// ClusterVerdict decides the cluster lab: every host reported, pairs ran
// on every rail and none is missing, isolation found exactly the planted
// parts bad (summary.json's cluster.suspects: a planted rail as that rail, a
// planted host as the host, a planted path as the link, and nothing else
// suspect), the merge failed the pipeline for them (exit status 1, a failed
// cluster/isolation case "<part> bad" each in junit.xml) and exited
// otherwise without one, and no host outside them is NOT QUALIFIED (a VM
// without a PCI GPU may be INCOMPLETE).
func ClusterVerdict(s *ClusterSummary, degrade []Degrade, hosts, rails int) []string {
	return ClusterVerdictLive(s, degrade, nil, hosts, rails)
}

// ClusterVerdictLive is ClusterVerdict with hosts planted not to finish
// (gone: host -> "did not start" or "stopped in round k", LAB_LATE and
// LAB_KILL): each is an errored cluster/isolation case "host <h>
// <liveness>" (and nothing else), may be NOT QUALIFIED, and fails the
// merge (exit 1) as a planted fault does; a finding of any part of it is
// not planted, so it fails the lab.
func ClusterVerdictLive(s *ClusterSummary, degrade []Degrade, gone map[string]string, hosts, rails int) []string {
	var problems []string
	if len(s.Hosts) != hosts {
		problems = append(problems, fmt.Sprintf("summary.json has %d hosts, want %d", len(s.Hosts), hosts))
	}
	perRail := map[int]int{}
	for _, p := range s.Pairs {
		perRail[p.Rail]++
		if p.Status == isolate.Missing {
			problems = append(problems, fmt.Sprintf("round %d pair %s-%s left no result (rail %d): %s", p.Round, p.A, p.B, p.Rail, p.Detail))
		}
	}
	for rl := 0; rl < rails; rl++ {
		if perRail[rl] == 0 {
			problems = append(problems, fmt.Sprintf("no pair ran on rail %d", rl))
		}
	}
	type planted struct {
		f report.ClusterFinding // the part isolation must find
		d Degrade
	}
	want := map[string]planted{} // partKey -> the fault planted there
	touched := map[string]bool{} // hosts a planted fault may leave NOT QUALIFIED
	for _, d := range wholeHosts(degrade, rails) {
		f := d.Finding()
		if f.Part == report.PartHost && rails == 1 {
			f.Part, f.Rail = report.PartRail, 0 // one rail: isolation names the rail
		}
		want[partKey(f)] = planted{f, d}
		touched[d.Host] = true
		if d.To != "" {
			touched[d.To] = true
		}
	}
	got := map[string]bool{}
	if s.Cluster == nil {
		problems = append(problems, "summary.json has no cluster object (isolation's verdict)")
	} else {
		for _, x := range s.Cluster.Suspects {
			k := partKey(x)
			if _, ok := want[k]; !ok || x.Verdict != isolate.Bad {
				problems = append(problems, fmt.Sprintf("%s found %s (%s), and the lab planted no such fault: %s", x.Name(), x.Verdict, x.Part, x.Reason))
				continue
			}
			got[k] = true
			// The merged report names the part to replace or fix.
			wantKind := map[string]string{report.PartRail: "nic", report.PartHost: "host", report.PartLink: "network path"}[x.Part]
			if x.AtFault == nil || x.AtFault.Kind != wantKind {
				problems = append(problems, fmt.Sprintf("%s was found bad but the report names %s at fault, want a part of kind %q", x.Name(), atFaultOf(x), wantKind))
			}
		}
	}
	var wantCases []string
	for h, l := range gone {
		touched[h] = true
		wantCases = append(wantCases, "host "+h+" "+l)
	}
	for k, p := range want {
		if !got[k] && s.Cluster != nil {
			problems = append(problems, fmt.Sprintf("%s was degraded (%s) but isolation did not find it bad", p.f.Name(), p.d.Spec))
		}
		wantCases = append(wantCases, caseKey(p.f.Name()+" bad"))
	}
	var gotCases []string
	for _, c := range s.IsolationFailed {
		gotCases = append(gotCases, caseKey(c))
	}
	if !sameSet(wantCases, gotCases) {
		problems = append(problems, fmt.Sprintf("junit.xml's %s suite failed [%s], want [%s]", report.IsolationSuite, strings.Join(s.IsolationFailed, ", "), strings.Join(wantCases, ", ")))
	}
	switch {
	case len(degrade) > 0 && s.Exit != 1:
		problems = append(problems, fmt.Sprintf("the merge exited %d, want 1: the planted fault must fail the pipeline", s.Exit))
	case len(gone) > 0 && s.Exit != 1:
		problems = append(problems, fmt.Sprintf("the merge exited %d, want 1: a host whose run did not finish is not qualified", s.Exit))
	case len(degrade) == 0 && len(gone) == 0 && s.Exit == 1:
		problems = append(problems, "the merge exited 1 (NOT QUALIFIED) with nothing degraded")
	}
	for _, h := range s.Hosts {
		if strings.HasPrefix(h.Verdict, "NOT QUALIFIED") && !touched[h.Host] && !h.onlyLabAbsences() {
			problems = append(problems, fmt.Sprintf("host %s is %s, and no fault was planted in it", h.Host, h.Verdict))
		}
	}
	return problems
}

// StrictAbsences checks a run made with GDR_STRICT=1 (make lab-k8s runs
// the Job as shipped): every requirement strict failed as absent must be
// one the VMs lack for their own reasons (reqs.LabVMAbsent: no PCI GPU, no
// NVIDIA kernel driver or NVML, no dma-buf on rxe); one absent for any
// other reason (the image, a capability, the manifest) is a problem naming
// it. Every host must have run strict (its identity says so): a run of
// pingpong alone may show no absence at all.
//
// A host in gone that did not start ran nothing and has no identity.
func StrictAbsences(s *ClusterSummary, gone map[string]string) []string {
	var problems []string
	for _, h := range s.Hosts {
		if gone[h.Host] == isolate.DidNotStart {
			continue
		}
		if !h.Identity.Strict {
			problems = append(problems, fmt.Sprintf("%s did not run with GDR_STRICT=1 (its host.json says strict false): the Job as shipped sets it", h.Host))
		}
		for _, r := range h.Requirements {
			if r.Status != "fail" || !strings.HasPrefix(r.Reason, strictAbsent) {
				continue
			}
			if _, ok := reqs.LabVMAbsent[r.ID]; !ok {
				problems = append(problems, fmt.Sprintf("%s: %s is absent for a reason the lab's VMs do not explain (the image, a capability or the manifest?): %s", h.Host, r.ID, r.Reason))
			}
		}
	}
	return problems
}

func atFaultOf(f report.ClusterFinding) string {
	if f.AtFault == nil {
		return "no part"
	}
	return fmt.Sprintf("%q (%s)", f.AtFault.Name, f.AtFault.Kind)
}

// wholeHosts is degrade with the rail faults that cover every rail of one
// host (vm3:0:... vm3:1:...) as one host fault: isolation names that host,
// not its rails.
func wholeHosts(degrade []Degrade, rails int) []Degrade {
	perHost := map[string][]Degrade{}
	for _, d := range degrade {
		if d.Kind() == report.PartRail {
			perHost[d.Host] = append(perHost[d.Host], d)
		}
	}
	var out []Degrade
	done := map[string]bool{}
	for _, d := range degrade {
		rs := perHost[d.Host]
		switch {
		case d.Kind() != report.PartRail || rails < 2 || len(rs) < rails:
			out = append(out, d)
		case !done[d.Host]:
			done[d.Host] = true
			var specs []string
			for _, r := range rs {
				specs = append(specs, r.Spec)
			}
			out = append(out, Degrade{Host: d.Host, Rail: isolate.AllRails, Netem: d.Netem, Spec: strings.Join(specs, " ")})
		}
	}
	return out
}

// partKey identifies a finding's part whichever end of a link is named
// first (a link's first end is the pair's server).
func partKey(f report.ClusterFinding) string {
	switch f.Part {
	case report.PartHost:
		return "host " + f.Host
	case report.PartLink:
		a, b := f.Host, f.Peer
		if b < a {
			a, b = b, a
		}
		return fmt.Sprintf("link %s %s %d", a, b, f.Rail)
	}
	return fmt.Sprintf("rail %s %d", f.Host, f.Rail)
}

// linkCase is a junit isolation case of a link: "link vm1 <-> vm2 rail 0 bad".
var linkCase = regexp.MustCompile(`^link (\S+) <-> (\S+) (rail .*)$`)

// caseKey is a junit isolation case name with a link's ends in order.
func caseKey(name string) string {
	if m := linkCase.FindStringSubmatch(name); m != nil && m[2] < m[1] {
		return fmt.Sprintf("link %s <-> %s %s", m[2], m[1], m[3])
	}
	return name
}

// sameSet reports whether a and b hold the same strings, order aside.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// hostTable prints host, verdict and fabric verdict, one host a line, in
// columns as wide as their widest entry (a verdict may be long).
func hostTable(w io.Writer, hs []ClusterHost) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, h := range hs {
		fmt.Fprintf(tw, "  %s\t%s\tfabric %s\n", h.Host, h.Verdict, h.Fabric)
	}
	tw.Flush()
}

// printCluster prints the pairs as a rail table, the suspects and the
// degraded rails.
func (r *runner) printCluster(s *ClusterSummary, rep *report.Report, degrade []Degrade) {
	w := r.o.Out
	fmt.Fprintf(w, "\ncluster report: %s (%s)\n", rep.Verdict.Line, r.o.ReportDir)
	hostTable(w, s.Hosts)
	fmt.Fprintf(w, "\n  %-5s %-12s", "round", "server-client")
	for rl := 0; rl < r.o.Cluster.Rails; rl++ {
		fmt.Fprintf(w, " %18s", fmt.Sprintf("rail %d Gbit/s", rl))
	}
	fmt.Fprintln(w)
	order, by := isolate.ByPair(s.Pairs)
	for _, k := range order {
		fmt.Fprintf(w, "  %-5d %-12s", k.Round, k.A+"-"+k.B)
		for rl := 0; rl < r.o.Cluster.Rails; rl++ {
			p, ok := by[k][rl]
			cell := "-"
			if ok {
				cell = fmt.Sprintf("%.4f %s", p.BWGbitS, p.Status)
			}
			fmt.Fprintf(w, " %18s", cell)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nsuspects:")
	if len(s.Suspects)+len(s.Links) == 0 {
		fmt.Fprintf(w, " none")
	}
	fmt.Fprintln(w)
	for _, x := range s.Suspects {
		fmt.Fprintf(w, "  %s rail %d (%s): %s\n", x.Host, x.Rail, x.Verdict, x.Reason)
	}
	for _, l := range s.Links {
		fmt.Fprintf(w, "  link %s <-> %s rail %d (bad): %s\n", l.A, l.B, l.Rail, l.Reason)
	}
	fmt.Fprintf(w, "degraded: %s\n", degradeList(degrade))
	if s.Cluster != nil {
		fmt.Fprintf(w, "isolation: %s; junit.xml %s failed: [%s]\n", s.Cluster.Line, report.IsolationSuite, strings.Join(s.IsolationFailed, ", "))
	}
	fmt.Fprintf(w, "merge exit status: %d (gdrreport's for this report: %s)\n", s.Exit, rep.Verdict.Line)
}

// soakAsked says whether the job's environment asks for a soak (GDR_SOAK
// set, not zero: config.ParseSoak reads it as the suite does).
func soakAsked(env []string) bool {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "GDR_SOAK="); ok {
			d, err := config.ParseSoak(v)
			return err == nil && d > 0
		}
	}
	return false
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}
