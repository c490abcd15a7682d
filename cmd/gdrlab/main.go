// Command gdrlab runs the Soft-RoCE labs (make lab, lab-bench, lab-kill,
// lab-faults, lab-soak, lab-cluster, lab-k8s). Inside the lab's VMs the
// same binary is /init.
//
//	gdrlab [-mode lab|kill|bench|faults|soak|cluster|k8s] [-pkgs ./conformance/pingpong] [-run TestPP03Write]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/lab"
	"github.com/gdrconf/gdrconf/lab/kube"
	"github.com/gdrconf/gdrconf/lab/vm"
)

func main() {
	if os.Getpid() == 1 {
		lab.GuestMain() // never returns
	}
	if len(os.Args) > 1 && os.Args[1] == "standin" {
		// Inside a cluster lab VM: one round of the stand-in workload.
		os.Exit(lab.StandinMain(os.LookupEnv, os.Stdout))
	}
	if len(os.Args) == 2 && os.Args[1] == "gpu-devices" {
		// Inside a cluster lab VM, a task of the device probes: what
		// this step may open of the GPUs' device files.
		os.Exit(lab.GPUDevicesMain(os.LookupEnv, os.Stdout))
	}
	if len(os.Args) == 3 && os.Args[1] == "pipe" {
		// qemu's guestfwd command in make lab-k8s: one VM connection to
		// the API server.
		os.Exit(lab.PipeMain(os.Args[2], os.Stdin, os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == "k8s-tools" {
		// make lab-k8s: build (or find cached) the Kubernetes tools and
		// print their folder.
		dir, err := kube.BuildTools(context.Background(), env("GO", "go"), ".", env("LAB_CACHE", ".cache/lab"), func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, f+"\n", a...)
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "gdrlab: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(dir)
		os.Exit(0)
	}
	if err := hostMain(); err != nil {
		fmt.Fprintf(os.Stderr, "gdrlab: %v\n", err)
		os.Exit(1)
	}
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// atoiOr reads a whole number, -1 for anything else (rejected later).
// parseRepeat reads LAB_REPEAT: 1 to 20 runs per case, bounded so that a
// typo does not hold the machine for a day (each run boots fresh VMs).
func parseRepeat(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 20 {
		return 0, fmt.Errorf("LAB_REPEAT=%q: want a whole number of runs per fault case from 1 to 20", v)
	}
	return n, nil
}

func atoiOr(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return -1
	}
	return n
}

// env returns the variable or a default.
func env(k, def string) string {
	if v, ok := os.LookupEnv(k); ok && v != "" {
		return v
	}
	return def
}

func hostMain() error {
	fs := flag.NewFlagSet("gdrlab", flag.ContinueOnError)
	var o lab.Options
	var pkgs, extra string
	mode := env("LAB_MODE", lab.ModeLab)
	for i, a := range os.Args[1:] { // the cluster lab's defaults differ; read -mode first
		if v, ok := strings.CutPrefix(a, "-mode="); ok {
			mode = v
		} else if a == "-mode" && i+2 < len(os.Args) {
			mode = os.Args[i+2]
		}
	}
	cluster := mode == lab.ModeCluster || mode == lab.ModeK8s
	arch := env("LAB_ARCH", "")
	for i, a := range os.Args[1:] { // a foreign architecture's default packages differ
		if v, ok := strings.CutPrefix(a, "-arch="); ok {
			arch = v
		} else if a == "-arch" && i+2 < len(os.Args) {
			arch = os.Args[i+2]
		}
	}
	garch, err := vm.ArchFor(arch)
	if err != nil {
		return fmt.Errorf("-arch (LAB_ARCH): %w", err)
	}
	k8s := mode == lab.ModeK8s
	pick := func(normal, forCluster string) string {
		if cluster {
			return forCluster
		}
		return normal
	}
	fs.StringVar(&o.Mode, "mode", mode, "lab (whole suite), kill (kill the client mid-run), bench (ours vs perftest), faults (the fault matrix), cluster (four VMs under Slurm), k8s (the same VMs as Kubernetes nodes) or soak (a soak with planted faults)")
	// lab-k8s runs the whole suite in the pods (round 0; pingpong after):
	// the container profile is what it proves, and install and topology
	// are where a pod differs from a host.
	clusterPkgs := "./conformance/pingpong"
	if k8s {
		clusterPkgs = "./conformance/..."
	}
	defPkgs := pick("./conformance/... ./harness/verbs", clusterPkgs)
	if !garch.Native() {
		defPkgs = strings.Join(lab.ArchPkgs, " ")
	}
	fs.StringVar(&pkgs, "pkgs", env("LAB_PKGS", defPkgs), "package patterns, space separated (LAB_PKGS; harness/verbs: its own tests need an RDMA device)")
	fs.StringVar(&o.Arch, "arch", arch, "the VMs' architecture: amd64 or arm64 (LAB_ARCH; default this host's); another than this host's boots one VM, loopback only, with the test binaries of -dist")
	fs.StringVar(&o.Kernel, "kernel", env("LAB_KERNEL", ""), "Debian kernel meta package the VMs boot (LAB_KERNEL; default linux-image-<arch>; e.g. linux-image-6.12-arm64-16k, 16 KiB pages)")
	fs.StringVar(&o.Dist, "dist", env("LAB_DIST", ""), "a make dist folder whose test binaries the VMs run instead of go test -c's (LAB_DIST; make lab-arm64: dist-arm64)")
	fs.StringVar(&o.Run, "run", env("LAB_RUN", ""), "-test.run filter for the test binaries (LAB_RUN)")
	fs.StringVar(&o.Tags, "tags", env("LAB_TAGS", "gpu,rdma"), "build tags of the test binaries (LAB_TAGS)")
	fs.StringVar(&o.Go, "go", env("GO", "go"), "go command")
	fs.StringVar(&o.CacheDir, "cache", env("LAB_CACHE", ".cache/lab"), "cache folder (Debian parts, build outputs)")
	fs.StringVar(&o.ReportDir, "reports", env("LAB_REPORTS", ""), "report folder (LAB_REPORTS; default reports/lab, reports/lab-faults for -mode faults, reports/lab-cluster for -mode cluster)")
	fs.StringVar(&o.Accel, "accel", env("LAB_ACCEL", "tcg"), "qemu accelerator (tcg: what CI has)")
	fs.StringVar(&extra, "env", env("LAB_ENV", ""), "extra VAR=value settings for the test binaries, space separated (LAB_ENV)")
	iters, _ := strconv.Atoi(env("LAB_ITERS", pick("200", "20")))
	fs.IntVar(&o.Iters, "iters", iters, "GDR_ITERS inside the lab and perftest -n in bench mode (LAB_ITERS; bench default 1000)")
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(env(k, def))
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "gdrlab: %s=%q is not a positive duration (like 45s); using %s\n", k, os.Getenv(k), def)
			d, _ = time.ParseDuration(def)
		}
		return d
	}
	fs.DurationVar(&o.Timeout, "timeout", dur("LAB_TIMEOUT", "45s"), "GDR_TIMEOUT inside the lab (LAB_TIMEOUT; faults mode default 20s)")
	// A cluster round's suite runs every rail, and a planted fault on rail 0
	// slows PP-09 too (it runs on one rail: the first): the pair vm1-vm2
	// with the path degraded took all of 4m45s and its last tests were cut
	// short, so its pairs read "fail" (could not finish) instead of "slow";
	// with every rail of vm2 degraded (make lab-cluster-host) its rounds took
	// 7m02s each.
	fs.DurationVar(&o.StepTimeout, "step-timeout", dur("LAB_STEP_TIMEOUT", pick("5m", "10m")), "limit of one package's run in one VM (LAB_STEP_TIMEOUT; cluster mode default 10m)")
	fs.DurationVar(&o.Deadline, "deadline", dur("LAB_DEADLINE", pick("15m", "40m")), "limit of the whole VM phase; VMs still running are killed (LAB_DEADLINE)")
	degradeDefault := lab.DefaultDegrade
	if k8s {
		degradeDefault = lab.K8sDegrade
	}
	fs.StringVar(&o.Cluster.Degrade, "degrade", env("LAB_DEGRADE", degradeDefault), "cluster: the rails degraded on purpose, host:rail:netem (e.g. vm3:1:delay=20ms, vm2:0:loss=10%), or none (LAB_DEGRADE)")
	fs.StringVar(&o.Cluster.Late, "late", env("LAB_LATE", "none"), "cluster: VMs whose task (Slurm: a TaskProlog) or pod (Kubernetes: the node joins late) starts late, vmN:duration, space separated (e.g. vm4:90s), or none (LAB_LATE)")
	fs.StringVar(&o.Cluster.Kill, "kill", env("LAB_KILL", "none"), "cluster: VMs killed during a round, vmN:roundK[+duration into it] (e.g. vm4:round1), or none (LAB_KILL)")
	fs.StringVar(&o.Cluster.Suite, "cluster-suite", env("LAB_CLUSTER_SUITE", lab.SuitePingpong), "cluster: what each round runs: pingpong (dist/run.sh with the LAB_PKGS test binaries) or standin (ib_write_bw on every rail) (LAB_CLUSTER_SUITE)")
	fs.StringVar(&o.Cluster.Pairing, "pairing", env("LAB_PAIRING", "ring"), "cluster: GDR_PAIRING inside the lab (LAB_PAIRING)")
	fs.StringVar(&o.Cluster.Sbatch, "sbatch", env("LAB_SBATCH", lab.SbatchShipped), "cluster: the batch script submitted: shipped (deploy/slurm/gdrconf.sbatch), or old (without its GPU request: the lab must fail naming it) (LAB_SBATCH)")
	chosts, _ := strconv.Atoi(env("LAB_CLUSTER_HOSTS", "4"))
	fs.IntVar(&o.Cluster.Hosts, "hosts", chosts, "cluster: number of VMs (LAB_CLUSTER_HOSTS)")
	o.Cluster.Rails = 2
	// A Kubernetes node holds containerd's copy of the suite's image and
	// its unpacked snapshot on tmpfs besides the VM's own.
	memDefault := pick("768", "640")
	if k8s {
		memDefault = "1280"
	}
	mem, _ := strconv.Atoi(env("LAB_VM_MEM", memDefault))
	fs.IntVar(&o.Cluster.MemMiB, "vm-mem", mem, "cluster: MiB of memory per VM (LAB_VM_MEM)")
	fs.DurationVar(&o.Cluster.SrunTimeout, "srun-timeout", dur("LAB_SRUN_TIMEOUT", "25m"), "cluster: srun's time limit (LAB_SRUN_TIMEOUT)")
	fs.DurationVar(&o.KillAfter, "kill-after", dur("LAB_KILL_AFTER", "8s"), "kill mode: how long after the client starts pingpong it is killed (LAB_KILL_AFTER)")
	vms, err := strconv.Atoi(env("LAB_VMS", "0"))
	if err != nil {
		return fmt.Errorf("LAB_VMS=%q: want 1 or 2 (0: the architecture's default)", os.Getenv("LAB_VMS"))
	}
	fs.IntVar(&o.VMs, "vms", vms, "mode lab: VMs to boot, 2 (server, client and loopback) or 1 (loopback only); default 2 on this host's architecture, 1 on another (LAB_VMS)")
	loop := fs.Bool("loopback", env("LAB_LOOPBACK", "1") != "0", "also run the suite in loopback inside the server VM (LAB_LOOPBACK=0 turns it off)")
	fs.IntVar(&o.Load, "load", atoiOr(env("LAB_LOAD", "0")), "busy loops on the host beside the VMs for the whole run (LAB_LOAD)")
	repeat := fs.String("repeat", env("LAB_REPEAT", "1"), "faults mode: runs of each case, each reported (LAB_REPEAT; a flaky case shows as 2 of 3)")
	faults := fs.String("faults", env("LAB_FAULTS", ""), "faults mode: the cases to run, comma separated (LAB_FAULTS; default all)")
	fs.DurationVar(&o.Soak.Duration, "soak", dur("LAB_SOAK", "6m"), "soak mode: GDR_SOAK of each case (LAB_SOAK; CI runs 90s)")
	fs.DurationVar(&o.Soak.Interval, "soak-interval", dur("LAB_SOAK_INTERVAL", "5s"), "soak mode: GDR_SOAK_INTERVAL (LAB_SOAK_INTERVAL)")
	soakCases := fs.String("soak-cases", env("LAB_SOAK_CASES", ""), "soak mode: the cases to run, comma separated: flap-loss, hog, cut, cut-gotestsum (LAB_SOAK_CASES; default flap-loss,hog,cut)")
	emu := fs.Bool("emulated-gpu", env("LAB_EMULATED_GPU", "1") != "0", "install the emulated GPU (lab/emugpu) in the VMs and run the suite on it, plus pingpong once more on host memory (LAB_EMULATED_GPU=0 turns it off)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	// The bench compares averages and percentiles: more samples than a
	// functional run, unless LAB_ITERS or -iters says otherwise.
	itersSet := os.Getenv("LAB_ITERS") != ""
	fs.Visit(func(f *flag.Flag) { itersSet = itersSet || f.Name == "iters" })
	if o.Mode == lab.ModeBench && !itersSet {
		o.Iters = 1000
	}
	// Five interleaved pairs of three metrics take 9-13 minutes under TCG
	// (bench.go): more than the functional lab's deadline on a busy host.
	deadlineSet := os.Getenv("LAB_DEADLINE") != ""
	fs.Visit(func(f *flag.Flag) { deadlineSet = deadlineSet || f.Name == "deadline" })
	if o.Mode == lab.ModeBench && !deadlineSet {
		o.Deadline = 30 * time.Minute
	}
	switch o.Mode {
	case lab.ModeLab, lab.ModeKill, lab.ModeBench, lab.ModeFaults, lab.ModeCluster, lab.ModeK8s, lab.ModeSoak:
	default:
		return fmt.Errorf("-mode %q (LAB_MODE): want lab, kill, bench, faults, cluster, k8s or soak", o.Mode)
	}
	if !garch.Native() && o.Dist == "" {
		return fmt.Errorf("-arch %s: the VMs run a dist of that architecture: make dist ARCH=%s, then -dist dist-%s (LAB_DIST), or make lab-%s", garch.GOARCH, garch.GOARCH, garch.GOARCH, garch.GOARCH)
	}
	if o.ReportDir == "" {
		o.ReportDir = "reports/lab"
		if !garch.Native() {
			o.ReportDir = "reports/lab-" + garch.GOARCH
		}
		switch o.Mode {
		case lab.ModeFaults:
			o.ReportDir = "reports/lab-faults"
		case lab.ModeCluster:
			o.ReportDir = "reports/lab-cluster"
		case lab.ModeK8s:
			o.ReportDir = "reports/lab-k8s"
		case lab.ModeSoak:
			o.ReportDir = "reports/lab-soak"
		}
	}
	// The matrix waits out GDR_TIMEOUT in many of its cases: a shorter one
	// than make lab's keeps it short, and is still far above what the lab's
	// healthy waits need.
	timeoutSet := os.Getenv("LAB_TIMEOUT") != ""
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	if o.Mode == lab.ModeFaults && !timeoutSet {
		o.Timeout = 20 * time.Second
	}
	if o.Load < 0 || o.Load > 64 {
		return fmt.Errorf("LAB_LOAD=%d: want 0 to 64 busy loops", o.Load)
	}
	if o.Repeat, err = parseRepeat(*repeat); err != nil {
		return err
	}
	if *faults != "" {
		o.Faults = strings.Split(*faults, ",")
	}
	if o.Cluster.Suite != lab.SuitePingpong && o.Cluster.Suite != lab.SuiteStandin {
		return fmt.Errorf("LAB_CLUSTER_SUITE=%q: want %s or %s", o.Cluster.Suite, lab.SuitePingpong, lab.SuiteStandin)
	}
	if o.Cluster.Sbatch != lab.SbatchShipped && o.Cluster.Sbatch != lab.SbatchOld {
		return fmt.Errorf("LAB_SBATCH=%q: want %s or %s", o.Cluster.Sbatch, lab.SbatchShipped, lab.SbatchOld)
	}
	o.Loopback = *loop
	o.EmulatedGPU = *emu
	o.Pkgs = strings.Fields(pkgs)
	if o.Mode == lab.ModeFaults && os.Getenv("LAB_PKGS") == "" && !flagSet(fs, "pkgs") {
		o.Pkgs = []string{"./" + lab.PingpongPkg} // the matrix runs pingpong only
	}
	if o.Mode == lab.ModeSoak {
		// The soak lab ships conformance/soak alone in its dist: the soak
		// is what it proves, and every other package would add minutes of
		// TCG before it.
		o.Pkgs = []string{"./conformance/soak"}
		if *soakCases != "" {
			o.Soak.Cases = strings.Split(*soakCases, ",")
		}
		// The cases run one after another, each the soak plus its boot,
		// the suite's set-up and its wind-down.
		if os.Getenv("LAB_DEADLINE") == "" && !flagSet(fs, "deadline") {
			o.Deadline = o.Soak.Duration + 10*time.Minute
		}
	}
	o.Env = strings.Fields(extra)
	for _, e := range o.Env {
		if !strings.HasPrefix(e, "GDR_") || !strings.Contains(e, "=") {
			return fmt.Errorf("LAB_ENV entry %q: want GDR_NAME=value", e)
		}
	}
	if o.Iters < 1 {
		return fmt.Errorf("LAB_ITERS=%d: want a whole number >= 1", o.Iters)
	}
	if o.RepoDir, _ = os.Getwd(); o.RepoDir == "" {
		o.RepoDir = "."
	}
	o.Out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return lab.Run(ctx, o)
}
