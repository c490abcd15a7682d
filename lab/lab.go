// Package lab is the Soft-RoCE two-host lab: it fetches a Debian kernel and
// rdma-core from Debian's packages, builds an initramfs holding the rdma
// suite's test binaries, boots two qemu VMs joined by a socket network on
// 127.0.0.1, runs the suite in both (server and client) and once in loopback,
// and turns the results into JUnit. The same binary is the VMs' /init.
package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/lab/emugpu"
	"github.com/gdrconf/gdrconf/lab/vm"
	"github.com/gdrconf/gdrconf/report"
)

// Modes of a lab run.
const (
	ModeLab   = "lab"   // the whole suite on both hosts and in loopback
	ModeKill  = "kill"  // kill the client mid-run; the server must fail naming the peer
	ModeBench = "bench" // our bandwidth/latency tests against perftest
	// ModeFaults (faults.go) is the fault matrix.
)

// PingpongPkg is the package the lab exists to prove.
const PingpongPkg = "conformance/pingpong"

// Module is the Go module path, stripped from package names in reports.
const Module = "github.com/gdrconf/gdrconf/"

// Options configure a run; cmd/gdrlab fills them from flags and LAB_* variables.
type Options struct {
	Mode        string
	RepoDir     string
	CacheDir    string
	ReportDir   string
	Go          string
	Tags        string
	Pkgs        []string      // package patterns, default ./conformance/...
	Run         string        // -test.run filter
	Iters       int           // GDR_ITERS inside the lab
	Timeout     time.Duration // GDR_TIMEOUT inside the lab
	StepTimeout time.Duration // limit of one package's run
	Deadline    time.Duration // limit of the whole VM phase
	KillAfter   time.Duration // kill mode: delay after the victim step starts on the client
	Env         []string      // extra variables for every test binary (GDR_BW_SIZES=...)
	Loopback    bool
	// Arch is the guests' architecture (amd64, arm64; "" this host's). A
	// foreign one (make lab-arm64) boots one VM of it with the test
	// binaries of Dist, the prebuilt suite of that architecture, and runs
	// them in loopback: ModeLab only (arch.go).
	Arch string
	// VMs is how many VMs mode lab boots: 2 (server and client, plus the
	// loopback run in the server), 1 (the loopback run alone), or 0 for
	// the architecture's default: 2 on this host's, 1 on a foreign one,
	// whose TCG is slower (LAB_VMS=2 runs the pair there too).
	VMs  int
	Dist string // a make dist folder whose bin/ holds the test binaries; "" builds them with go test -c
	// Kernel is the Debian kernel meta package the VMs boot instead of the
	// architecture's default (vm.Arch.KernelMeta): linux-image-6.12-arm64-16k.
	Kernel string
	// EmulatedGPU installs the emulated libcuda.so.1 (lab/emugpu) in
	// the VMs: the suite's GPU paths run on it, and pingpong runs once
	// more on host memory (hosts "server-hostmem", "client-hostmem").
	EmulatedGPU bool
	Accel       string
	Out         io.Writer
	// Load is how many busy loops run on the host beside the VMs for the
	// whole run (LAB_LOAD; a loaded CI machine).
	Load int
	// Faults selects cases of the fault matrix by name (ModeFaults; nil = all).
	Faults []string
	// Repeat is how many times the fault matrix runs each case (LAB_REPEAT;
	// 0 or 1: once, today's output).
	Repeat  int
	Cluster ClusterOptions // ModeCluster only
	Soak    SoakOptions    // ModeSoak only
}

type runner struct {
	o      Options
	start  time.Time
	dir    string // .cache/lab/run
	apt    vm.Apt
	arch   vm.Arch  // the guests' architecture (Options.Arch)
	kernel string   // the VMs' kernel, for the report's host identity
	kill   bool     // kill the client VM KillAfter into its pingpong run (ModeKill, lab-faults' kill case)
	live   LivePlan // the cluster labs' LAB_LATE and LAB_KILL (liveness.go)
	// killedAt: the VMs the cluster lab killed for LAB_KILL, and when; the
	// Kubernetes driver reads it beside the VMs' loop.
	killMu   sync.Mutex
	killedAt map[string]time.Time
}

// markKilled records that the lab killed vm for LAB_KILL.
func (r *runner) markKilled(vm string) {
	r.killMu.Lock()
	defer r.killMu.Unlock()
	if r.killedAt == nil {
		r.killedAt = map[string]time.Time{}
	}
	r.killedAt[vm] = time.Now()
}

// wasKilled reports whether the lab killed vm for LAB_KILL.
func (r *runner) wasKilled(vm string) bool {
	r.killMu.Lock()
	defer r.killMu.Unlock()
	_, ok := r.killedAt[vm]
	return ok
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Out, "lab [%5.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// testPkg is a conformance package with a test binary.
type testPkg struct {
	Import string // full import path
	Short  string // conformance/pingpong
	Bin    string // host path of the test binary
	Guest  string // guest path
}

// Run executes a lab run and returns an error when the lab failed.
func Run(ctx context.Context, o Options) error {
	if err := o.checkVMs(); err != nil {
		return err
	}
	if o.Mode == ModeCluster || o.Mode == ModeK8s {
		return RunCluster(ctx, o)
	}
	r := &runner{o: o, start: time.Now(), dir: filepath.Join(o.CacheDir, "run")}
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.RemoveAll(r.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
		return err
	}
	// Old results must not pass for new ones; remove only what the lab
	// writes, since LAB_REPORTS may name a folder shared with other reports.
	for _, pat := range []string{"junit.xml", "test.json", "bench.json", "*_*.json", "*.console.log", "summary.*", "report.html",
		"server*/*.json", "client*/*.json", "loopback*/*.json", "faults.json", "*/*_pingpong.json", "*/*.console.log",
		"*/run*/*_pingpong.json", "*/run*/*.console.log", "lab-soak.json"} {
		old, _ := filepath.Glob(filepath.Join(o.ReportDir, pat))
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	if r.arch, err = vm.ArchFor(o.Arch); err != nil {
		return err
	}
	if o.Kernel != "" {
		r.arch.KernelMeta = o.Kernel
	}
	if !r.arch.Native() && o.Mode != ModeLab {
		return fmt.Errorf("lab mode %s: only the lab itself (mode lab) runs on %s guests", o.Mode, r.arch.GOARCH)
	}
	qemu, err := vm.EnsureQEMU(ctx, r.arch, &r.apt, r.logf)
	if err != nil {
		return err
	}
	parts, err := vm.FetchParts(ctx, o.CacheDir, r.arch, r.partsPackages(), &r.apt, r.logf)
	if err != nil {
		return err
	}
	r.arch = r.arch.ForKernel(parts)
	if parts.PageKiB > 0 {
		r.logf("parts ready: kernel %s (%s, %d KiB pages; qemu %s)", parts.KernelVer, r.arch.GOARCH, parts.PageKiB, strings.Join(r.arch.Machine, " "))
	} else {
		r.logf("parts ready: kernel %s (%s)", parts.KernelVer, r.arch.GOARCH)
	}
	r.kernel = parts.KernelVer
	var pkgs []testPkg
	if o.Dist != "" {
		pkgs, err = r.distTests()
	} else {
		pkgs, err = r.buildTests(ctx)
	}
	if err != nil {
		return err
	}
	agent, err := r.agent(ctx)
	if err != nil {
		return err
	}
	if o.Load > 0 {
		stop := startLoad(o.Load, r.logf)
		defer stop()
	}
	if o.Mode == ModeFaults {
		return r.runFaults(ctx, qemu, parts, pkgs, agent)
	}
	if o.Mode == ModeSoak {
		return r.runSoak(ctx, qemu, parts, pkgs, agent)
	}
	r.kill = o.Mode == ModeKill
	plan, err := r.plan(pkgs)
	if err != nil {
		return err
	}
	im := &vm.Image{Parts: parts, Agent: agent, Binaries: map[string]string{}, Jobs: map[string]vm.Job{}}
	used := map[string]bool{}
	for _, j := range plan {
		im.Jobs[j.Role] = j
		for _, st := range j.Steps {
			used[st.Argv[0]] = true
		}
	}
	for _, p := range pkgs {
		if used[p.Guest] { // kill and bench modes need only pingpong's
			im.Binaries[p.Guest] = p.Bin
		}
	}
	if o.EmulatedGPU && o.Mode == ModeLab {
		lib, err := emugpu.BuildWith(r.arch.Compiler(), r.dir)
		if err != nil {
			return err
		}
		im.Binaries[r.arch.LibDir()+"/libcuda.so.1"] = lib
		r.logf("emulated GPU installed as %s/libcuda.so.1 in the VMs (results are labelled gpu-emulated)", r.arch.LibDir())
	}
	initrd := filepath.Join(r.dir, "initrd.gz")
	if err := im.Build(initrd); err != nil {
		return fmt.Errorf("building the initramfs: %w", err)
	}
	st, _ := os.Stat(initrd)
	r.logf("initramfs %s (%.1f MiB)", initrd, float64(st.Size())/(1<<20))

	results, vmErrs := r.boot(ctx, qemu, parts, initrd, plan)
	suites := r.collect(ctx, plan, results, vmErrs)
	return r.report(suites, pkgs, results)
}

// lock serialises lab runs sharing a cache folder (two engineers in one
// checkout): the second waits, within a deadline, instead of deleting the
// first one's VM files.
func (r *runner) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(r.o.CacheDir, 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(r.o.CacheDir, "lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	limit := r.o.Deadline + 5*time.Minute
	deadline := time.Now().Add(limit)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", p, err)
		}
		if !said {
			r.logf("another lab run holds %s; waiting (at most %v)", p, limit)
			said = true
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another lab run held %s for more than %v", p, limit)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return func() { f.Close() }, nil
}

// buildTests lists the packages with test files for the tags and builds
// their test binaries in one go test -c.
func (r *runner) buildTests(ctx context.Context) ([]testPkg, error) {
	o := r.o
	args := append([]string{"list", "-tags", o.Tags, "-f", "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}"}, o.Pkgs...)
	out, err := vm.RunCommand(ctx, 5*time.Minute, o.RepoDir, o.Go, args...)
	if err != nil && !strings.Contains(out, "matched no packages") {
		return nil, err
	}
	var pkgs []testPkg
	bindir := filepath.Join(r.dir, "bin")
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "go: warning") || strings.Contains(l, " ") {
			continue
		}
		short := strings.TrimPrefix(l, Module)
		base := path.Base(l) + ".test"
		pkgs = append(pkgs, testPkg{Import: l, Short: short, Bin: filepath.Join(bindir, base), Guest: "/lab/bin/" + base})
	}
	if len(pkgs) == 0 {
		r.logf("no package under %v has test files for tags %q: only the reference tools will run", o.Pkgs, o.Tags)
		return nil, nil
	}
	seen := map[string]string{}
	var imports []string
	for _, p := range pkgs {
		if other, dup := seen[p.Guest]; dup {
			return nil, fmt.Errorf("test binaries of %s and %s would share the name %s", other, p.Import, path.Base(p.Guest))
		}
		seen[p.Guest] = p.Import
		imports = append(imports, p.Import)
	}
	r.logf("building test binaries (-tags %s): %s", o.Tags, strings.Join(imports, " "))
	if err := os.MkdirAll(bindir, 0o755); err != nil {
		return nil, err
	}
	bargs := append([]string{"test", "-c", "-tags", o.Tags, "-o", bindir + "/"}, imports...)
	if _, err := vm.RunCommand(ctx, 10*time.Minute, o.RepoDir, o.Go, bargs...); err != nil {
		return nil, err
	}
	for _, p := range pkgs {
		if _, err := os.Stat(p.Bin); err != nil {
			return nil, fmt.Errorf("go test -c did not produce %s: %w", p.Bin, err)
		}
	}
	return pkgs, nil
}

func (r *runner) testEnv(role string) []string {
	env := []string{
		"GDR_RDMA_DEVICE=" + RXEDevice,
		"GDR_TIMEOUT=" + r.o.Timeout.String(),
		fmt.Sprintf("GDR_ITERS=%d", r.o.Iters),
		fmt.Sprintf("GDR_BW_ITERS=%d", r.o.Iters), // 5000 x 1 MiB is minutes under TCG
	}
	switch role {
	case "server":
		env = append(env, "GDR_ROLE=server")
	case "client":
		env = append(env, "GDR_ROLE=client", "GDR_PEER="+ServerIP)
	}
	return append(env, r.o.Env...)
}

func (r *runner) gotestArgv(p testPkg, run string) []string {
	argv := []string{p.Guest, "-test.v=test2json", "-test.count=1",
		"-test.timeout=" + (r.o.StepTimeout - 15*time.Second).String()}
	if run != "" {
		argv = append(argv, "-test.run="+run)
	}
	return argv
}

// pair adds one step to both hosts: same ID so the barrier matches.
func pair(server, client *Job, st Step, serverArgv, clientArgv []string, serverEnv, clientEnv []string) {
	s, c := st, st
	s.Host, s.Argv, s.Env = "server", serverArgv, serverEnv
	c.Host, c.Argv, c.Env = "client", clientArgv, clientEnv
	s.Barrier, c.Barrier = true, true
	// The client starts a moment later so the server is listening.
	c.Delay = 1500 * time.Millisecond
	server.Steps = append(server.Steps, s)
	client.Steps = append(client.Steps, c)
}

// perftest command lines (device rxe0, RoCE v2 GID 1).
func rcPingpong(n int) []string {
	return []string{"/usr/bin/ibv_rc_pingpong", "-d", RXEDevice, "-g", "1", "-n", fmt.Sprint(n)}
}

func writeBW(size, iters int) []string {
	// MB/sec (MiB/s in perftest) has finer resolution than --report_gbits's
	// two decimals of Gb/s; bench.go converts.
	return []string{"/usr/bin/ib_write_bw", "-d", RXEDevice, "-x", "1", "-F", "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters)}
}

func writeLat(size, iters int) []string {
	return []string{"/usr/bin/ib_write_lat", "-d", RXEDevice, "-x", "1", "-F", "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters)}
}

// loopbackTool runs a perftest-style tool's server and client in one VM.
func loopbackTool(argv []string) []string {
	cmd := strings.Join(argv, " ")
	return []string{"/bin/sh", "-c", cmd + " & s=$!; sleep 1; " + cmd + " 127.0.0.1; c=$?; wait $s; s=$?; echo \"server rc=$s client rc=$c\"; [ $s -eq 0 ] && [ $c -eq 0 ]"}
}

// plan makes the server's and the client's jobs.
func (r *runner) plan(pkgs []testPkg) ([]Job, error) {
	o := r.o
	server := Job{Role: "server", Addr: ServerIP, Peer: ClientIP, Setup: 90 * time.Second}
	client := Job{Role: "client", Addr: ClientIP, Peer: ServerIP, Setup: 90 * time.Second}
	toolStep := func(id string, t time.Duration) Step {
		return Step{ID: id, Pkg: "perftest", Kind: "tool", Timeout: t}
	}
	var pp *testPkg
	for i := range pkgs {
		if pkgs[i].Short == PingpongPkg {
			pp = &pkgs[i]
		}
	}
	switch o.Mode {
	case ModeLab:
		if o.EmulatedGPU {
			server.GPUs = emulatedGPUCount(r.testEnv(""))
			client.GPUs = server.GPUs
		}
		if r.oneVM() {
			r.loopbackSteps(&server, pkgs)
			return []Job{server}, nil
		}
		pair(&server, &client, toolStep("ibv_rc_pingpong", time.Minute), rcPingpong(100), append(rcPingpong(100), ServerIP), nil, nil)
		for _, p := range pkgs {
			st := Step{ID: "2h:" + p.Short, Pkg: p.Short, Kind: "gotest", Timeout: o.StepTimeout}
			pair(&server, &client, st, r.gotestArgv(p, o.Run), r.gotestArgv(p, o.Run), r.testEnv("server"), r.testEnv("client"))
		}
		if o.EmulatedGPU && pp != nil {
			// The runs above used the emulated GPU; host memory stays proven.
			st := Step{ID: "2h-hostmem:" + pp.Short, Pkg: pp.Short, Kind: "gotest", Timeout: o.StepTimeout}
			pair(&server, &client, st, r.gotestArgv(*pp, o.Run), r.gotestArgv(*pp, o.Run),
				append(r.testEnv("server"), "GDR_MEM=host"), append(r.testEnv("client"), "GDR_MEM=host"))
			server.Steps[len(server.Steps)-1].Host = "server" + HostMemSuffix
			client.Steps[len(client.Steps)-1].Host = "client" + HostMemSuffix
		}
		if o.Loopback {
			r.loopbackSteps(&server, pkgs)
		}
	case ModeKill:
		if pp == nil {
			return nil, fmt.Errorf("lab kill: no %s test binary was built (it needs test files for tags %q)", PingpongPkg, o.Tags)
		}
		st := Step{ID: "2h:" + pp.Short, Pkg: pp.Short, Kind: "gotest", Timeout: o.StepTimeout}
		// failfast: the step ends at the server's first failure, so its end
		// time measures how long the server took to notice the lost peer.
		argv := append(r.gotestArgv(*pp, o.Run), "-test.failfast")
		pair(&server, &client, st, argv, argv, r.testEnv("server"), r.testEnv("client"))
	case ModeBench:
		r.benchPlan(pp, &server, &client) // bench.go: ours and perftest interleaved
	default:
		return nil, fmt.Errorf("unknown lab mode %q (lab, kill, bench, faults)", o.Mode)
	}
	return []Job{server, client}, nil
}

// loopbackSteps adds the loopback run (host "loopback", the "lo:" rows)
// to the server's job: ibv_rc_pingpong, then every package.
func (r *runner) loopbackSteps(server *Job, pkgs []testPkg) {
	lo := Step{ID: "lo:ibv_rc_pingpong", Host: "loopback", Pkg: "perftest", Kind: "tool", Timeout: time.Minute,
		Argv: loopbackTool(rcPingpong(100))}
	server.Steps = append(server.Steps, lo)
	for _, p := range pkgs {
		server.Steps = append(server.Steps, Step{ID: "lo:" + p.Short, Host: "loopback", Pkg: p.Short, Kind: "gotest",
			Timeout: r.o.StepTimeout, Argv: r.gotestArgv(p, r.o.Run), Env: r.testEnv("")})
	}
}

// vmRun is one VM's outcome.
type vmRun struct {
	job     Job
	vm      *vm.VM
	res     *Results
	killed  string
	killAt  time.Time
	endedAt time.Time
	doneAt  time.Time            // when the host saw its agent's RecDone (powerOffHung)
	stepEnd map[string]time.Time // host time each step's end was seen (1 s resolution)
}

// boot starts both VMs, follows their progress and waits with a deadline.
func (r *runner) boot(ctx context.Context, qemu string, parts *vm.Parts, initrd string, plan []Job) (map[string]*vmRun, []error) {
	runs := map[string]*vmRun{}
	var errs []error
	port, err := vm.FreePort()
	if err != nil {
		return runs, []error{err}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, r.o.Deadline, fmt.Errorf("lab deadline %v", r.o.Deadline))
	defer cancel()
	// Jobs with NICs (make lab-soak) join one switch per NIC index, as the
	// cluster lab's VMs do; the others one socket network.
	var nets []*vm.Switch
	for n := range plan[0].NICs {
		s, err := vm.NewSwitch(fmt.Sprintf("net%d", n))
		if err != nil {
			return runs, []error{err}
		}
		defer s.Close()
		nets = append(nets, s)
	}
	for _, j := range plan {
		netopt := fmt.Sprintf("listen=127.0.0.1:%d", port)
		mac := "52:54:00:12:34:01"
		if j.Role == "client" {
			netopt = fmt.Sprintf("connect=127.0.0.1:%d", port)
			mac = "52:54:00:12:34:02"
		}
		var cmdline string
		if j.Key != "" {
			cmdline = "lab.job=" + j.Key
		}
		m, err := vm.Start(vm.Config{Arch: r.arch, QEMU: qemu, Kernel: parts.Kernel, Initrd: initrd, Dir: r.dir, Name: j.Role, Role: j.Role,
			Net: netopt, MAC: mac, Accel: r.o.Accel, Cmdline: cmdline, NICs: switchNICs(nets, j.NICs)})
		if err != nil {
			errs = append(errs, err)
			break
		}
		runs[j.Role] = &vmRun{job: j, vm: m, stepEnd: map[string]time.Time{}}
		r.logf("VM %s started (qemu pid %d, console %s)", j.Role, m.Pid(), m.Console)
		if j.Role == "server" && len(nets) == 0 {
			if err := vm.WaitListening(port, time.Now().Add(30*time.Second), func() bool { return !m.Exited() }); err != nil {
				errs = append(errs, fmt.Errorf("server VM: %w (see %s)", err, filepath.Join(r.dir, "server.qemu.log")))
				break
			}
		}
	}
	// Follow progress: print each step as it ends; in kill mode, kill the
	// client once its victim step has run for KillAfter.
	seen := map[string]bool{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		allDone := true
		for role, vr := range runs {
			res := readResults(vr.vm.Result)
			vr.res = res
			for _, s := range res.Steps {
				k := role + " " + s.Step.ID
				if s.End != nil && !seen[k] {
					seen[k] = true
					vr.stepEnd[s.Step.ID] = time.Now()
					status := "ok"
					if s.End.RC != 0 {
						status = fmt.Sprintf("FAILED rc=%d %s", s.End.RC, s.End.Err)
					}
					r.logf("%-6s %-28s %6.1fs  %s", role, s.Step.ID, s.End.Duration.Seconds(), status)
				}
			}
			if r.kill && role == "client" && vr.killed == "" {
				if st := res.Step("2h:" + PingpongPkg); st != nil && st.End == nil {
					if vr.killAt.IsZero() {
						vr.killAt = time.Now().Add(r.o.KillAfter)
						r.logf("kill: client started %s; killing the client VM in %v", st.Step.ID, r.o.KillAfter)
					} else if time.Now().After(vr.killAt) {
						vr.killed = "was killed by the lab (kill mode) mid-run"
						vr.vm.Kill(vr.killed)
						vr.killAt = time.Now()
						r.logf("kill: client VM killed (pid %d)", vr.vm.Pid())
					}
				}
			}
			r.powerOffHung(role, vr.vm, res.Done, &vr.doneAt)
			if vr.vm.Exited() {
				if vr.endedAt.IsZero() {
					vr.endedAt = time.Now()
					r.logf("VM %s powered off", role)
				}
			} else {
				allDone = false
			}
		}
		if allDone {
			break
		}
		select {
		case <-ctx.Done():
			for role, vr := range runs {
				if !vr.vm.Exited() {
					vr.killed = fmt.Sprintf("did not finish within the lab deadline of %v and was killed", r.o.Deadline)
					vr.vm.Kill(vr.killed)
					errs = append(errs, fmt.Errorf("VM %s %s (console %s)", role, vr.killed, vr.vm.Console))
				}
			}
		case <-tick.C:
		}
	}
	for _, vr := range runs {
		vr.res = readResults(vr.vm.Result)
	}
	return runs, errs
}

// switchNICs joins NIC i of a job to switch i.
func switchNICs(nets []*vm.Switch, nics []GuestNIC) []vm.NIC {
	var out []vm.NIC
	for i, n := range nics {
		if i < len(nets) {
			out = append(out, vm.NIC{Netdev: nets[i].Netdev(), MAC: n.MAC})
		}
	}
	return out
}

// vmTail names the last words of a VM's qemu log and console, so a "did not
// run" failure carries its cause (qemu error, kernel panic, agent error).
func vmTail(v *vm.VM) string {
	var parts []string
	for _, f := range []struct{ what, path string }{
		{"qemu", strings.TrimSuffix(v.Console, ".console.log") + ".qemu.log"}, {"console", v.Console},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		if t := strings.TrimSpace(clip.LastLines(string(b), 2)); t != "" {
			parts = append(parts, f.what+": "+t)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// consoleEnd is the last n lines of a VM's console, for a log.
func consoleEnd(v *vm.VM, n int) string {
	b, err := os.ReadFile(v.Console)
	if err != nil {
		return fmt.Sprintf("(console %s: %v)", v.Console, err)
	}
	return strings.TrimRight(clip.LastLines(string(b), n), "\n")
}

func readResults(p string) *Results {
	f, err := os.Open(p)
	if err != nil {
		return &Results{}
	}
	defer f.Close()
	res, _ := ParseRecords(f)
	return res
}

// collect turns step results into suites; planned steps that never ran and
// steps that failed outside any test become failures too.
func (r *runner) collect(ctx context.Context, plan []Job, runs map[string]*vmRun, vmErrs []error) []*Suite {
	var suites []*Suite
	tools := map[string]*Suite{}
	for _, e := range vmErrs {
		r.logf("ERROR: %v", e)
	}
	for _, j := range plan {
		vr := runs[j.Role]
		res := &Results{}
		why := "its VM did not start"
		if vr != nil {
			res = vr.res
			why = "its VM stopped before the step began"
			if vr.killed != "" {
				why = "its VM " + vr.killed
			}
			why += vmTail(vr.vm)
		}
		if s := res.Step("setup-" + j.Role); s != nil && (s.End == nil || s.End.RC != 0) {
			msg := "VM setup did not finish"
			if s.End != nil {
				msg = "VM setup failed: " + s.End.Err
			}
			suites = append(suites, &Suite{Host: j.Role, Pkg: "lab", Role: j.Role, VM: j.Role, StepErr: msg,
				Events: []Event{{Action: "output", Output: string(s.Output)}}})
		}
		for _, st := range j.Steps {
			sr := res.Step(st.ID)
			role := strings.TrimSuffix(st.Host, HostMemSuffix)
			if st.Kind == "tool" {
				s := tools[st.Host]
				if s == nil {
					s = &Suite{Host: st.Host, Pkg: "perftest", Role: role, VM: j.Role}
					tools[st.Host] = s
					suites = append(suites, s)
				}
				s.Events = append(s.Events, toolEvents(st, sr, why)...)
				continue
			}
			s := &Suite{Host: st.Host, Pkg: st.Pkg, Role: role, VM: j.Role}
			suites = append(suites, s)
			if sr == nil {
				s.StepErr = "did not run: " + why
				continue
			}
			label := s.Name()
			js, err := Test2JSON(ctx, r.o.Go, label, sr.Output)
			if err != nil {
				s.StepErr = err.Error()
				continue
			}
			evs, _ := report.ReadEvents(bytes.NewReader(js))
			DropTimes(evs)
			s.Events = evs
			switch {
			case sr.End == nil:
				s.StepErr = "did not finish: " + why
			case sr.End.Err != "":
				s.StepErr = sr.End.Err
			case sr.End.RC != 0 && s.Counts().Fail == 0:
				s.StepErr = fmt.Sprintf("test binary exited %d with no failed test (crash or bad flag?)", sr.End.RC)
			}
		}
	}
	return suites
}

// toolEvents turns a reference tool's run into one test's events.
func toolEvents(st Step, sr *StepResult, why string) []Event {
	name := st.ID
	evs := []Event{{Action: "run", Test: name}}
	if sr != nil {
		evs = append(evs, Event{Action: "output", Test: name, Output: "$ " + strings.Join(st.Argv, " ") + "\n" + string(sr.Output)})
	}
	switch {
	case sr == nil:
		evs = append(evs, Event{Action: "output", Test: name, Output: "did not run: " + why + "\n"}, Event{Action: "fail", Test: name})
	case sr.End == nil:
		evs = append(evs, Event{Action: "output", Test: name, Output: "did not finish: " + why + "\n"}, Event{Action: "fail", Test: name})
	case sr.End.RC != 0:
		evs = append(evs, Event{Action: "output", Test: name, Output: fmt.Sprintf("exit status %d %s\n", sr.End.RC, sr.End.Err)},
			Event{Action: "fail", Test: name, Elapsed: sr.End.Duration.Seconds()})
	default:
		evs = append(evs, Event{Action: "pass", Test: name, Elapsed: sr.End.Duration.Seconds()})
	}
	return evs
}

// report writes JUnit, raw JSON and the summary, and decides the verdict.
func (r *runner) report(suites []*Suite, pkgs []testPkg, runs map[string]*vmRun) error {
	o := r.o
	var all bytes.Buffer
	for _, s := range suites {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		for _, e := range s.Events {
			if e.Package == "" {
				e.Package = s.Name()
			}
			_ = enc.Encode(e)
		}
		name := strings.ReplaceAll(s.Name(), "/", "_") + ".json"
		if err := os.WriteFile(filepath.Join(o.ReportDir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
		all.Write(b.Bytes())
	}
	if err := os.WriteFile(filepath.Join(o.ReportDir, "test.json"), all.Bytes(), 0o644); err != nil {
		return err
	}
	// One report over the lab's hosts (junit.xml with suites <host>/<area>,
	// summary.*, report.html), and each host's folder (test.json, host.json)
	// for make report to merge with other hosts.
	ids := map[string]*report.Identity{}
	for role, vr := range runs {
		if vr != nil && vr.res != nil {
			ids[role] = vr.res.Identity
		}
	}
	hostRuns := Runs(suites, r.kernel, ids)
	for _, run := range hostRuns {
		if err := report.SaveRun(filepath.Join(o.ReportDir, run.Host.Host), run); err != nil {
			return err
		}
	}
	rep := report.Build(hostRuns)
	if err := rep.WriteAll(o.ReportDir); err != nil {
		return err
	}
	// Keep the consoles next to the reports for whoever reads a failure.
	for role, vr := range runs {
		if b, err := os.ReadFile(vr.vm.Console); err == nil {
			_ = os.WriteFile(filepath.Join(o.ReportDir, role+".console.log"), b, 0o644)
		}
	}
	fmt.Fprintln(o.Out)
	Summary(o.Out, suites)
	fmt.Fprintf(o.Out, "report: %s (%s/summary.txt; junit.xml, summary.md, summary.json, report.html, test.json)\n", rep.Verdict.Line, o.ReportDir)

	switch o.Mode {
	case ModeKill:
		return r.killVerdict(suites, runs)
	case ModeBench:
		return r.bench(suites)
	}
	problems := Verdict(suites, []string{PingpongPkg})
	problems = append(problems, JUnitProblems(o.ReportDir)...)
	hasPP := false
	for _, p := range pkgs {
		if p.Short == PingpongPkg {
			hasPP = true
		}
	}
	hosts := []string{"server", "client"}
	if r.oneVM() {
		hosts = []string{"loopback"}
	}
	if hasPP {
		for _, host := range hosts {
			n := 0
			for _, s := range suites {
				if s.Host == host && s.Pkg == PingpongPkg {
					n += s.Counts().Pass
				}
			}
			if n == 0 {
				problems = append(problems, fmt.Sprintf("%s/%s: no test passed (filter LAB_RUN=%q?)", host, PingpongPkg, o.Run))
			}
		}
	} else {
		fmt.Fprintf(o.Out, "\nNOTE: no %s test ran in this lab run (LAB_PKGS=%q, tags %q): it proved verbs traffic\n"+
			"between the two VMs only with ibv_rc_pingpong (perftest suites above); it does NOT prove the pingpong suite.\n",
			PingpongPkg, strings.Join(o.Pkgs, " "), o.Tags)
	}
	if o.EmulatedGPU {
		ep, notes := EmulatedVerdict(suites)
		problems = append(problems, ep...)
		fmt.Fprintf(o.Out, "\nNOTE: the GPU paths ran on the lab's EMULATED GPU (lab/emugpu: host memory behind PROT_NONE, flush enforced); these results are not hardware evidence:\n")
		for _, n := range notes {
			fmt.Fprintf(o.Out, "  %s\n", n)
		}
	}
	if notes := GPUSkips(suites, []string{PingpongPkg}); len(notes) > 0 {
		fmt.Fprintf(o.Out, "\nNOTE: tests skipped as this lab expects (no GPU, or one rail per VM); they are NOT proven by it:\n")
		for _, n := range notes {
			fmt.Fprintf(o.Out, "  %s\n", n)
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		fmt.Fprintf(o.Out, "\nlab FAILED:\n")
		for _, p := range problems {
			fmt.Fprintf(o.Out, "  %s\n", p)
		}
		closing(o.Out, suites)
		return fmt.Errorf("lab failed (%d problems)", len(problems))
	}
	fmt.Fprintf(o.Out, "\nlab passed in %.0fs\n", time.Since(r.start).Seconds())
	closing(o.Out, suites)
	return nil
}

// closing prints the plain closing line CI runners look for.
func closing(w io.Writer, suites []*Suite) {
	var c Counts
	for _, s := range suites {
		sc := s.Counts()
		c.Pass, c.Fail, c.Skip = c.Pass+sc.Pass, c.Fail+sc.Fail, c.Skip+sc.Skip
	}
	fmt.Fprintf(w, "lab: %d passed, %d failed, %d skipped\n", c.Pass, c.Fail, c.Skip)
}

// killVerdict checks that the server failed, naming the peer, within GDR_TIMEOUT of the kill.
func (r *runner) killVerdict(suites []*Suite, runs map[string]*vmRun) error {
	cl, sv := runs["client"], runs["server"]
	if cl == nil || sv == nil || cl.killed == "" {
		return fmt.Errorf("kill: the client VM was never killed (did %s start on the client?)", PingpongPkg)
	}
	fmt.Fprintf(r.o.Out, "\nkill experiment: client VM killed at +%.1fs\n", cl.killAt.Sub(r.start).Seconds())
	var failed []string
	for _, s := range suites {
		if s.Host != "server" || s.Pkg != PingpongPkg {
			continue
		}
		for _, t := range s.Tests() {
			if t.Status() == report.Fail {
				failed = append(failed, fmt.Sprintf("  --- %s (%s, %.1fs): %s", t.Name, action(t), t.Duration.Seconds(), oneLine(output(t))))
			}
		}
	}
	sr := sv.res.Step("2h:" + PingpongPkg)
	if sr == nil || sr.End == nil {
		return fmt.Errorf("kill: the server's %s run did not finish", PingpongPkg)
	}
	fmt.Fprintf(r.o.Out, "server failures:\n%s\n", strings.Join(failed, "\n"))
	out := string(sr.Output)
	took := sv.stepEnd["2h:"+PingpongPkg].Sub(cl.killAt)
	fmt.Fprintf(r.o.Out, "server step ended rc=%d %.1fs after the kill (seen by the host, 1 s resolution); GDR_TIMEOUT=%v\n",
		sr.End.RC, took.Seconds(), r.o.Timeout)
	if took > r.o.Timeout+5*time.Second {
		return fmt.Errorf("kill: the server needed %.1fs after the kill, more than GDR_TIMEOUT=%v", took.Seconds(), r.o.Timeout)
	}
	if len(failed) == 0 {
		return fmt.Errorf("kill: the server reported no failed test after its peer vanished")
	}
	if !strings.Contains(out, ClientIP) && !strings.Contains(strings.ToLower(out), "peer") {
		return fmt.Errorf("kill: the server's failure does not name the peer (%s)", ClientIP)
	}
	return nil
}

func oneLine(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, " | ")
}

// CommandOutput is exec's combined output, for the cmd package.
func CommandOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
