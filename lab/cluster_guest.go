package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/lab/wait"
)

// ClusterJob is what one VM of the cluster lab does besides the two-VM
// lab's job fields: its NICs, its part in Slurm, the shared folder, and on
// the controller the device probes and the batch job that runs the suite
// on every node.
type ClusterJob struct {
	Host       string     `json:"host"`       // vm2: hostname and Slurm node name
	Controller string     `json:"controller"` // the VM running slurmctld and srun
	Hosts      []string   `json:"hosts"`      // every node, in Slurm's order
	NICs       []GuestNIC `json:"nics"`
	Degrade    []Degrade  `json:"degrade,omitempty"` // this VM's planted faults
	ShareTag   string     `json:"share_tag"`         // virtio-9p mount tag of the shared folder
	Shared     string     `json:"shared"`            // where it is mounted (/shared)
	LogDir     string     `json:"log_dir"`           // daemons' logs, on the shared folder
	EndFile    string     `json:"end_file"`          // the controller writes it when the batch job is over
	// Waits, each a deadline: daemons up, every node idle in Slurm, the end
	// file (nodes other than the controller).
	DaemonWait time.Duration `json:"daemon_wait"`
	NodesWait  time.Duration `json:"nodes_wait"`
	EndWait    time.Duration `json:"end_wait"`
	// Probes are the controller's srun steps that show what a step's
	// tasks may open of the GPUs' device files, without and with a GPU
	// request (deviceProbes); none without GPUs.
	Probes []Step `json:"probes,omitempty"`
	// Sbatch is the controller's submission of the batch script; the
	// script draws the job's GDR_CLUSTER_SECRET itself.
	Sbatch *SbatchJob `json:"sbatch,omitempty"`
	// Kube, when set, makes the VM a Kubernetes node instead (make
	// lab-k8s, kube_guest.go): no Slurm, no controller VM.
	Kube *KubeJob `json:"kube,omitempty"`
}

// GuestNIC is one virtio NIC of a cluster VM, found by its MAC.
type GuestNIC struct {
	MAC  string `json:"mac"`
	Addr string `json:"addr"` // 198.18.1.3/24
	RXE  string `json:"rxe"`  // rxe0 on a rail's NIC; "" on the management network
	Rail int    `json:"rail"` // the rail it carries (-1: management)
}

// recordStep runs fn as one recorded step (begin, output, end records).
func (g *guest) recordStep(st Step, fn func(w io.Writer, deadline time.Time) error) error {
	_ = g.rec.Write(RecBegin, st.ID, mustJSON(st))
	w := g.rec.StepOutput(st.ID)
	start := time.Now()
	err := fn(w, start.Add(st.Timeout))
	end := StepEnd{Duration: time.Since(start)}
	if err != nil {
		end.RC, end.Err = 1, err.Error()
		fmt.Fprintf(w, "gdrlab: %v\n", err)
	}
	_ = g.rec.Write(RecEnd, st.ID, mustJSON(end))
	g.logf("step %s: rc=%d %s %s", st.ID, end.RC, end.Duration.Round(time.Millisecond), end.Err)
	return err
}

func (g *guest) clusterMain() error {
	c := g.job.Cluster
	if c.Kube != nil {
		return g.kubeMain()
	}
	host := c.Host
	controller := host == c.Controller
	if controller {
		// Whatever happens here, the other nodes must stop waiting.
		defer g.writeEnd()
	}
	step := func(id string, d time.Duration) Step {
		return Step{ID: id, Host: host, Pkg: "lab", Kind: "setup", Timeout: d}
	}
	if err := g.recordStep(step("setup-"+host, g.job.Setup), g.clusterSetup); err != nil {
		return err
	}
	if err := g.recordStep(step("daemons-"+host, c.DaemonWait), g.startDaemons); err != nil {
		return err
	}
	if !controller {
		return g.recordStep(step("wait-"+host, c.EndWait), waitEnd(c.EndFile,
			"slurmd serves the job; waiting for "+c.EndFile+" from "+c.Controller, "the controller's batch job to end"))
	}
	if err := g.recordStep(step("nodes", c.NodesWait), g.waitNodes); err != nil {
		return err
	}
	for _, st := range c.Probes {
		g.runStep(st)
	}
	if c.Sbatch != nil {
		sb := *c.Sbatch
		return g.recordStep(sb.Step, func(w io.Writer, deadline time.Time) error { return runSbatch(w, deadline, sb) })
	}
	return nil
}

// waitEnd is the step of a node that waits for the end file: what it
// says it does, then the wait, named by what the file means.
func waitEnd(endFile, doing, means string) func(w io.Writer, deadline time.Time) error {
	return func(w io.Writer, deadline time.Time) error {
		fmt.Fprintln(w, doing)
		return wait.For(context.Background(), deadline, time.Second, endFile+" ("+means+")", func() bool {
			_, err := os.Stat(endFile)
			return err == nil
		})
	}
}

func (g *guest) writeEnd() {
	c := g.job.Cluster
	if err := os.WriteFile(c.EndFile, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		g.logf("writing %s: %v", c.EndFile, err)
	}
}

// guestEnv is the environment of the setup commands and daemons.
var guestEnv = []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/root"}

// command runs one setup command, its output into w, within deadline.
func command(w io.Writer, deadline time.Time, argv ...string) error {
	return commandEnv(w, deadline, guestEnv, argv...)
}

// commandEnv is command with its own environment.
func commandEnv(w io.Writer, deadline time.Time, env []string, argv ...string) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = env
	fmt.Fprintf(w, "+ %s\n", strings.Join(argv, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// clusterSetup: modules, hostname, NICs and their rxe devices, the shared
// folder, the planted fault.
func (g *guest) clusterSetup(w io.Writer, deadline time.Time) error {
	c := g.job.Cluster
	for _, m := range []struct{ dst, typ string }{{"/dev/shm", "tmpfs"}, {"/dev/pts", "devpts"}} {
		_ = os.MkdirAll(m.dst, 0o755)
		_ = unix.Mount(m.typ, m.dst, m.typ, 0, "")
	}
	if c.Kube != nil {
		if err := mountCgroup2(w); err != nil {
			return err
		}
	} else {
		if err := mountCgroup1(w); err != nil {
			return err
		}
	}
	for _, m := range g.job.Modules {
		if err := loadModule(m); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "loaded %d modules\n", len(g.job.Modules))
	// Before slurmd starts: gres.conf's File= nodes are read at its start.
	if err := makeGPUNodes(w, "/dev", g.job.GPUs); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(c.Host)); err != nil {
		return fmt.Errorf("sethostname %s: %w", c.Host, err)
	}
	if err := command(w, deadline, "/usr/sbin/ip", "link", "set", "lo", "up"); err != nil {
		return err
	}
	devs, err := g.setupNICs(w, deadline, c.NICs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Shared, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(c.ShareTag, c.Shared, "9p", 0, ninepOptions); err != nil {
		return fmt.Errorf("mounting the shared folder (virtio-9p tag %s) on %s: %w", c.ShareTag, c.Shared, err)
	}
	fmt.Fprintf(w, "shared folder %s mounted (virtio-9p)\n", c.Shared)
	for _, d := range c.Degrade {
		var nics []string
		for i, n := range c.NICs {
			if n.RXE != "" && (d.Rail == isolate.AllRails || n.Rail == d.Rail) {
				nics = append(nics, devs[i])
			}
		}
		if len(nics) == 0 {
			return fmt.Errorf("LAB_DEGRADE %s: this VM has no NIC of rail %d", d.Spec, d.Rail)
		}
		for _, dev := range nics {
			for _, argv := range netemCommands(dev, d) {
				if err := command(w, deadline, argv...); err != nil {
					return err
				}
			}
			if err := command(w, deadline, "/usr/sbin/tc", "qdisc", "show", "dev", dev); err != nil {
				return err
			}
			what := "all traffic"
			if d.To != "" {
				what = fmt.Sprintf("only packets for %s (%s)", d.To, d.ToAddr)
			}
			fmt.Fprintf(w, "DEGRADED on purpose: %s of %s: netem %s on %s\n", dev, c.Host, strings.Join(d.Netem, " "), what)
		}
	}
	return nil
}

// setupNICs addresses each NIC, found by its MAC (not by probe order), brings
// it up, adds its rxe device and waits for every rxe port ACTIVE with its
// RoCE v2 GID: the cluster labs' nodes and make lab-soak's hosts. It
// returns each NIC's netdev by index.
func (g *guest) setupNICs(w io.Writer, deadline time.Time, nics []GuestNIC) (map[int]string, error) {
	devs := map[int]string{}
	for i, n := range nics {
		var dev string
		if err := wait.For(context.Background(), deadline, 50*time.Millisecond, "a NIC with MAC "+n.MAC, func() bool { dev = netdevByMAC(n.MAC); return dev != "" }); err != nil {
			return nil, err
		}
		devs[i] = dev
		for _, cmd := range [][]string{
			{"/usr/sbin/ip", "addr", "add", n.Addr, "dev", dev},
			{"/usr/sbin/ip", "link", "set", dev, "up"},
		} {
			if err := command(w, deadline, cmd...); err != nil {
				return nil, err
			}
		}
		if n.RXE != "" {
			if err := command(w, deadline, "/usr/bin/rdma", "link", "add", n.RXE, "type", "rxe", "netdev", dev); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range nics {
		if n.RXE == "" {
			continue
		}
		b, err := waitRXE(g.sys, deadline, n.RXE)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "%s (rail %d) ACTIVE, gid 1 %s", n.RXE, n.Rail, b)
	}
	return devs, nil
}

// cgroup1Controllers are the cgroup v1 hierarchies Slurm's cgroup/v1 plugin
// uses here: freezer for proctrack/cgroup, devices for task/cgroup's
// ConstrainDevices (cgroup.conf: CgroupAutomount=no, so they are mounted
// before slurmd starts).
var cgroup1Controllers = []string{"freezer", "devices"}

// mountCgroup1 mounts a tmpfs on /sys/fs/cgroup and a cgroup v1 hierarchy
// of each controller Slurm uses under it, as cgroup/v1 expects them.
// (Slurm 22.05's cgroup/v2 wants systemd to delegate a cgroup, or
// IgnoreSystemd=yes, "for development and testing"; the VMs have no
// systemd.) The Kubernetes nodes mount cgroup2 instead (mountCgroup2).
func mountCgroup1(w io.Writer) error {
	root := cgroupRoot
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "mode=0755"); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mounting a tmpfs on %s: %w", root, err)
	}
	for _, ctl := range cgroup1Controllers {
		dir := filepath.Join(root, ctl)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("cgroup", dir, "cgroup", 0, ctl); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mounting the cgroup v1 %s hierarchy on %s: %w", ctl, dir, err)
		}
	}
	fmt.Fprintf(w, "cgroup v1 on %s: %s\n", root, strings.Join(cgroup1Controllers, " "))
	return nil
}

// netemCommands are the tc commands that plant d on the NIC dev. A rail or
// host fault is netem as the root qdisc. A path fault is a prio qdisc whose
// fourth band, which no packet priority maps to, holds the netem and gets
// only what a u32 filter sends it: IPv4 packets for the other end's rail
// address. RoCE v2 on the lab's rails is IPv4 (the suite picks the
// IPv4-mapped GID), so its data and its ACKs for that peer take the band,
// and ARP and everything for other peers the undelayed bands.
func netemCommands(dev string, d Degrade) [][]string {
	tc := "/usr/sbin/tc"
	if d.To == "" {
		return [][]string{append([]string{tc, "qdisc", "add", "dev", dev, "root", "netem"}, d.Netem...)}
	}
	return [][]string{
		{tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "prio", "bands", "4"},
		append([]string{tc, "qdisc", "add", "dev", dev, "parent", "1:4", "handle", "40:", "netem"}, d.Netem...),
		{tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", d.ToAddr + "/32", "flowid", "1:4"},
	}
}

// ninepOptions mount a virtio-9p share from the host.
const ninepOptions = "trans=virtio,version=9p2000.L,msize=262144"

// netdevByMAC names the network device with that MAC address, or "".
func netdevByMAC(mac string) string {
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/sys/class/net", e.Name(), "address"))
		if err == nil && strings.EqualFold(strings.TrimSpace(string(b)), mac) {
			return e.Name()
		}
	}
	return ""
}

// mkdirOwned makes dir with mode, owned by uid (munge and Slurm check both).
func mkdirOwned(dir string, mode os.FileMode, uid int) error {
	// Parents as Debian has them (0755): munge walks every one of them.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	return os.Lchown(dir, uid, uid)
}

// daemon starts a long-running process in the foreground of its own
// process group, its output into log.
func daemon(w io.Writer, log string, uid int, argv ...string) (*exec.Cmd, error) {
	return startDaemon(w, log, uid, guestEnv, argv...)
}

// daemonEnv starts a daemon as root with its own environment.
func daemonEnv(w io.Writer, log string, env []string, argv ...string) (*exec.Cmd, error) {
	return startDaemon(w, log, 0, env, argv...)
}

func startDaemon(w io.Writer, log string, uid int, env []string, argv ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = "/"
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	fmt.Fprintf(w, "+ %s > %s\n", strings.Join(argv, " "), log)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	go func() { _ = cmd.Wait(); f.Close() }()
	return cmd, nil
}

// alive reports whether a daemon is still running (not a zombie).
func alive(cmd *exec.Cmd) bool {
	if cmd.ProcessState != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// tail is the last lines of a log, for a failure message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return clip.LastLines(string(b), n)
}

// startDaemons sets up and starts munged, then slurmctld on the controller
// and slurmd everywhere, and checks each is up.
func (g *guest) startDaemons(w io.Writer, deadline time.Time) error {
	c := g.job.Cluster
	for _, d := range []struct {
		dir  string
		mode os.FileMode
		uid  int
	}{
		{"/etc/munge", 0o700, MungeUID}, {"/var/lib/munge", 0o700, MungeUID}, {"/var/log/munge", 0o700, MungeUID},
		{"/run/munge", 0o755, MungeUID}, {"/var/spool/slurmd", 0o755, 0}, {"/var/spool/slurmctld", 0o755, SlurmUID},
		{"/root", 0o700, 0}, {"/var/tmp", os.ModeSticky | 0o777, 0},
	} {
		if err := mkdirOwned(d.dir, d.mode, d.uid); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(c.LogDir, 0o777); err != nil {
		return err
	}
	_ = os.Chmod(c.LogDir, 0o777) // slurmctld logs there as the slurm user
	key := "/etc/munge/munge.key"
	if err := os.Chmod(key, 0o400); err != nil {
		return fmt.Errorf("munge key %s: %w", key, err)
	}
	if err := os.Lchown(key, MungeUID, MungeUID); err != nil {
		return err
	}
	mlog := filepath.Join(c.LogDir, "munged-"+c.Host+".log")
	munged, err := daemon(w, mlog, MungeUID, "/usr/sbin/munged", "--foreground", "--num-threads=2")
	if err != nil {
		return err
	}
	sock := "/run/munge/munge.socket.2"
	if err := wait.For(context.Background(), deadline, 50*time.Millisecond, sock+" (munged)", func() bool {
		_, err := os.Stat(sock)
		return err == nil || !alive(munged)
	}); err != nil || !alive(munged) {
		return fmt.Errorf("munged did not come up: %s", tail(mlog, 5))
	}
	if err := command(w, deadline, "/bin/sh", "-c", "/usr/bin/munge -n | /usr/bin/unmunge | head -3"); err != nil {
		return err
	}
	var ds []started
	if c.Host == c.Controller {
		log := filepath.Join(c.LogDir, "slurmctld.log")
		cmd, err := daemon(w, filepath.Join(c.LogDir, "slurmctld-stderr.log"), 0, "/usr/sbin/slurmctld", "-D", "-c")
		if err != nil {
			return err
		}
		ds = append(ds, started{"slurmctld", log, cmd})
	}
	log := filepath.Join(c.LogDir, "slurmd-"+c.Host+".log")
	cmd, err := daemon(w, filepath.Join(c.LogDir, "slurmd-"+c.Host+"-stderr.log"), 0, "/usr/sbin/slurmd", "-D", "-N", c.Host)
	if err != nil {
		return err
	}
	ds = append(ds, started{"slurmd", log, cmd})
	// Up means still running a few seconds later: a bad slurm.conf or a
	// missing plugin ends a daemon at once.
	return stillRunning(w, ds, 3*time.Second, func(d started) string {
		return tail(d.log, 6) + " | stderr: " + tail(strings.TrimSuffix(d.log, ".log")+"-stderr.log", 3)
	})
}

// started is a daemon the agent started and the log that tells about it.
type started struct {
	name, log string
	cmd       *exec.Cmd
}

// stillRunning waits, then fails naming the first daemon that exited
// (why: its logs' tails), or says each is running.
func stillRunning(w io.Writer, ds []started, wait time.Duration, why func(started) string) error {
	time.Sleep(wait)
	for _, d := range ds {
		if !alive(d.cmd) {
			return fmt.Errorf("%s exited at start: %s", d.name, why(d))
		}
		fmt.Fprintf(w, "%s running (pid %d), log %s\n", d.name, d.cmd.Process.Pid, d.log)
	}
	return nil
}

// waitNodes waits until every node is idle in Slurm (registered, munge
// working both ways).
func (g *guest) waitNodes(w io.Writer, deadline time.Time) error {
	c := g.job.Cluster
	last, s, idle := "", "", 0
	if err := wait.For(context.Background(), deadline, 2*time.Second, "every node idle in Slurm", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, "/usr/bin/sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		cancel()
		s = strings.TrimSpace(string(out))
		if s != last {
			fmt.Fprintf(w, "sinfo: %s\n", strings.ReplaceAll(s, "\n", "; "))
			last = s
		}
		idle = 0
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] == "idle" {
				idle++
			}
		}
		return err == nil && idle == len(c.Hosts)
	}); err != nil {
		return fmt.Errorf("%d of %d nodes idle in Slurm after %v (sinfo: %s); see the slurmd logs in %s", idle, len(c.Hosts),
			c.NodesWait, strings.ReplaceAll(s, "\n", "; "), c.LogDir)
	}
	return nil
}
