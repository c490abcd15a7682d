package lab

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/lab/wait"
)

// KubeJob makes a cluster VM a Kubernetes node (make lab-k8s) instead of a
// Slurm node: containerd, the kubelet, the device plugin and, on one VM,
// CoreDNS, all from the tools folder the host built, with the API server
// on the host behind qemu's user network.
type KubeJob struct {
	ToolsTag  string            `json:"tools_tag"`  // virtio-9p tag of the built tools (read-only)
	Tools     string            `json:"tools"`      // where they are mounted (/opt/k8s)
	ImagesTag string            `json:"images_tag"` // virtio-9p tag of the image archives (read-only)
	Images    string            `json:"images"`     // where they are mounted (/opt/images)
	NodeIP    string            `json:"node_ip"`    // the kubelet's --node-ip: the management address
	Files     map[string]string `json:"files"`      // guest path -> content: kubeconfigs, configs
	DNS       bool              `json:"dns"`        // this VM serves the cluster DNS (CoreDNS)
	GPUs      int               `json:"gpus"`       // nvidia.com/gpu the device plugin offers
	// Late (LAB_LATE) holds this node's kubelet and device plugin until
	// Late after the first pod's mark at the start barrier (LateMarks, a
	// glob of the shared folder): the node joins late, as one that was
	// rebooting or being added, and the Job's pod for it is scheduled
	// and starts only then. The manifests stay as shipped.
	Late      time.Duration `json:"late,omitempty"`
	LateMarks string        `json:"late_marks,omitempty"`
}

// Guest paths of a Kubernetes node.
const (
	kubeTools        = "/opt/k8s"
	kubeImages       = "/opt/images"
	kubeletConfig    = "/etc/kubernetes/kubelet.yaml"
	kubeletConf      = "/etc/kubernetes/kubelet.conf"
	containerdConfig = "/etc/containerd/config.toml"
	containerdSock   = "/run/containerd/containerd.sock"
	corefile         = "/etc/coredns/Corefile"
	corednsConf      = "/etc/coredns/kubeconfig"
	cniBin           = "/opt/cni/bin"
	cniConfDir       = "/etc/cni/net.d"
	runcPath         = "/usr/sbin/runc"
	podLogs          = "/var/log/pods"
)

// kubeMain is a Kubernetes node's life: the cluster lab's setup (NICs, rxe,
// shared folder, planted fault), the node's daemons, then waiting until
// the host has seen the Job end (its end file).
func (g *guest) kubeMain() error {
	c := g.job.Cluster
	host := c.Host
	step := func(id string, d time.Duration) Step {
		return Step{ID: id, Host: host, Pkg: "lab", Kind: "setup", Timeout: d}
	}
	if err := g.recordStep(step("setup-"+host, g.job.Setup), g.clusterSetup); err != nil {
		return err
	}
	if err := g.recordStep(step("node-"+host, c.DaemonWait), g.startNode); err != nil {
		return err
	}
	if c.Kube.Late > 0 {
		if err := g.recordStep(step("late-"+host, c.EndWait), g.lateNode); err != nil {
			return err
		}
	}
	err := g.recordStep(step("wait-"+host, c.EndWait), waitEnd(c.EndFile,
		"the kubelet runs the Job's pod; waiting for "+c.EndFile+" from the host", "the host: the Job ended"))
	// The containers' output, for the lab's report folder (the API server
	// cannot reach a kubelet to serve kubectl logs).
	dst := filepath.Join(c.LogDir, "pods", host)
	if n, cerr := copyTree(podLogs, dst); cerr != nil {
		g.logf("copying %s to %s: %v", podLogs, dst, cerr)
	} else {
		g.logf("copied %d pod log files to %s", n, dst)
	}
	g.logf("CPU time by cgroup: %s", cpuByGroup(cgroupRoot))
	return err
}

const cgroupRoot = "/sys/fs/cgroup"

// systemGroup is where the node's daemons (containerd, the kubelet, the
// device plugin, CoreDNS) run, and its CPU weight. The kubelet weighs
// kubepods/ by the node's CPUs: 39 for the lab's one vCPU, against 100
// for each busy daemon left in the root. In make lab-k8s (stop 28) that
// gave the pods a fraction of their VM: PP-01 took about 20 s in a pod
// against 2 s under Slurm on the same VMs. A real node's kubepods weigh
// about 39 per CPU against systemd's system.slice at 100, so its pods
// get most of a busy machine; weight 10 gives the lab's pods that share.
const (
	systemGroup  = "system"
	systemWeight = "10"
)

// joinSystemGroup makes the system group under root, weighs it, and moves
// this process (the guest agent, which starts every daemon) into it, so
// that each daemon and its children inherit it.
func joinSystemGroup(w io.Writer, root string) error {
	dir := filepath.Join(root, systemGroup)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.weight"), []byte(systemWeight), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: cpu.weight %s: %w", dir, systemWeight, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: moving the agent (pid %d) there: %w", dir, os.Getpid(), err)
	}
	fmt.Fprintf(w, "node daemons in %s, cpu.weight %s (kubepods/ gets the kubelet's weight)\n", dir, systemWeight)
	return nil
}

// cpuByGroup is the CPU time of the system group and of kubepods/ (the
// pods) so far, from their cpu.stat, for the log: what each got of the VM.
func cpuByGroup(root string) string {
	var parts []string
	for _, grp := range []string{systemGroup, "kubepods"} {
		b, err := os.ReadFile(filepath.Join(root, grp, "cpu.stat"))
		if err != nil {
			parts = append(parts, grp+" unknown ("+err.Error()+")")
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				parts = append(parts, grp+" "+v+" us")
			}
		}
	}
	return strings.Join(parts, ", ")
}

// mountCgroup2 mounts the unified hierarchy and hands its controllers to
// child groups: the kubelet (1.35 and later) refuses cgroup v1, and with
// cgroupfs it makes kubepods/ under the root itself.
func mountCgroup2(w io.Writer) error {
	root := cgroupRoot
	_ = os.MkdirAll(root, 0o755)
	if err := unix.Mount("cgroup2", root, "cgroup2", 0, ""); err != nil && err != unix.EBUSY {
		return fmt.Errorf("mounting cgroup2 on %s: %w", root, err)
	}
	b, err := os.ReadFile(root + "/cgroup.controllers")
	if err != nil {
		return err
	}
	var on []string
	for _, ctl := range strings.Fields(string(b)) {
		if err := os.WriteFile(root+"/cgroup.subtree_control", []byte("+"+ctl), 0o644); err == nil {
			on = append(on, ctl)
		}
	}
	fmt.Fprintf(w, "cgroup2 on %s, controllers delegated: %s\n", root, strings.Join(on, " "))
	for _, need := range []string{"cpu", "cpuset", "memory", "pids"} {
		if !slices.Contains(on, need) {
			return fmt.Errorf("cgroup2: controller %s is not available (%s has %q); the kubelet needs cpu, cpuset, memory and pids", need, root+"/cgroup.controllers", strings.TrimSpace(string(b)))
		}
	}
	return joinSystemGroup(w, root)
}

// startNode mounts the node's folders, writes its files, starts containerd,
// imports the images, then starts the kubelet, the device plugin and (on
// one VM) CoreDNS, and checks each is still running a few seconds later.
func (g *guest) startNode(w io.Writer, deadline time.Time) error {
	c := g.job.Cluster
	k := c.Kube
	// The kubelet's and containerd's state on tmpfs: the initramfs root is
	// not a file system cadvisor can size, and the kubelet stops when it
	// cannot size the one under /var/lib/kubelet.
	for _, d := range []string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log", "/run/containerd", "/tmp"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mounting a tmpfs on %s: %w", d, err)
		}
	}
	for _, sh := range []struct{ tag, dir string }{{k.ToolsTag, k.Tools}, {k.ImagesTag, k.Images}} {
		if err := os.MkdirAll(sh.dir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(sh.tag, sh.dir, "9p", unix.MS_RDONLY, ninepOptions); err != nil {
			return fmt.Errorf("mounting %s (virtio-9p tag %s) read-only: %w", sh.dir, sh.tag, err)
		}
	}
	var names []string
	for p := range k.Files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(k.Files[p]), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "node files: %s\n", strings.Join(names, " "))
	env := k.daemonEnv()
	n := &nodeDaemons{w: w, env: env, logDir: c.LogDir, host: c.Host}
	start := n.start
	if err := start("containerd", k.Tools+"/containerd", "--config", containerdConfig); err != nil {
		return err
	}
	ctd := n.ds[0]
	if err := wait.For(context.Background(), deadline, 200*time.Millisecond, containerdSock+" (containerd)", func() bool {
		_, err := os.Stat(containerdSock)
		return err == nil || !alive(ctd.cmd)
	}); err != nil || !alive(ctd.cmd) {
		return fmt.Errorf("containerd did not come up: %s", tail(ctd.log, 6))
	}
	archives, _ := filepath.Glob(filepath.Join(k.Images, "*.tar"))
	if len(archives) == 0 {
		return fmt.Errorf("no image archive (*.tar) in %s", k.Images)
	}
	for _, a := range archives {
		t0 := time.Now()
		if err := commandEnv(w, deadline, env, k.Tools+"/ctr", "--address", containerdSock, "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", a); err != nil {
			return err
		}
		fmt.Fprintf(w, "imported %s in %.1fs\n", filepath.Base(a), time.Since(t0).Seconds())
	}
	if err := commandEnv(w, deadline, env, k.Tools+"/ctr", "--address", containerdSock, "-n", "k8s.io", "images", "ls", "-q"); err != nil {
		return err
	}
	if k.DNS {
		if err := start("coredns", k.Tools+"/coredns", "-conf", corefile); err != nil {
			return err
		}
	}
	if k.Late > 0 {
		fmt.Fprintf(w, "LAB_LATE: the kubelet and the device plugin start %v after the first pod reaches the start barrier (step late-%s)\n", k.Late, c.Host)
	} else if err := g.startKubelet(n); err != nil {
		return err
	}
	return stillRunning(w, n.ds, 5*time.Second, func(d started) string { return tail(d.log, 8) })
}

// daemonEnv is the environment of the node's daemons: the tools first.
func (k *KubeJob) daemonEnv() []string {
	return []string{"PATH=" + k.Tools + ":/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/root"}
}

// nodeDaemons starts a node's daemons, each logging to the shared folder.
type nodeDaemons struct {
	w            io.Writer
	env          []string
	logDir, host string
	ds           []started
}

func (n *nodeDaemons) start(name string, argv ...string) error {
	log := filepath.Join(n.logDir, name+"-"+n.host+".log")
	cmd, err := daemonEnv(n.w, log, n.env, argv...)
	if err != nil {
		return err
	}
	n.ds = append(n.ds, started{name, log, cmd})
	return nil
}

// startKubelet starts the kubelet, which registers the node, and the
// device plugin, which offers it the GPUs.
func (g *guest) startKubelet(n *nodeDaemons) error {
	c := g.job.Cluster
	k := c.Kube
	if err := n.start("kubelet", k.Tools+"/kubelet", "--config="+kubeletConfig, "--kubeconfig="+kubeletConf,
		"--hostname-override="+c.Host, "--node-ip="+k.NodeIP, "--v=1",
		// The GPU operator's feature discovery labels GPU nodes so; the
		// shipped Job's nodeSelector asks for it (deploy/k8s/job.yaml),
		// and the device plugin here stands in for the operator.
		"--node-labels=nvidia.com/gpu.present=true"); err != nil {
		return err
	}
	return n.start("deviceplugin", k.Tools+"/gdrlab-deviceplugin", fmt.Sprintf("--gpus=%d", k.GPUs))
}

// lateNode is a LAB_LATE node's join: it waits for the first pod's mark
// at the start barrier in the shared folder, then Late, then starts the
// kubelet and the device plugin. The node registers and turns Ready, and
// the scheduler places the Job's last pod on it: that pod reaches the
// start barrier Late and the node's start after the others.
func (g *guest) lateNode(w io.Writer, deadline time.Time) error {
	c := g.job.Cluster
	k := c.Kube
	var first []string
	if err := wait.For(context.Background(), deadline, time.Second, "a pod's mark at the start barrier ("+k.LateMarks+")", func() bool {
		first, _ = filepath.Glob(k.LateMarks)
		return len(first) > 0
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "LAB_LATE: %s reached the start barrier; this node's kubelet starts in %v\n", first[0], k.Late)
	time.Sleep(k.Late)
	n := &nodeDaemons{w: w, env: k.daemonEnv(), logDir: c.LogDir, host: c.Host}
	if err := g.startKubelet(n); err != nil {
		return err
	}
	return stillRunning(w, n.ds, 5*time.Second, func(d started) string { return tail(d.log, 8) })
}

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		n++
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	return n, err
}
