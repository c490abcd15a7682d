package lab

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/lab/cpio"
	"github.com/gdrconf/gdrconf/lab/kube"
	"github.com/gdrconf/gdrconf/lab/vm"
	"github.com/gdrconf/gdrconf/lab/wait"
)

// ModeK8s is `make lab-k8s`: the cluster lab's four VMs and planted fault,
// with Kubernetes instead of Slurm. The control plane (built from the
// published modules, lab/kube) runs on the host; every VM is a node
// (containerd, kubelet, the device plugin; CoreDNS on vm1); the host
// applies deploy/k8s through a lab overlay with the built kubectl, waits
// for the Indexed Job, and merges the reports its pods wrote.
const ModeK8s = "k8s"

// K8sDegrade is make lab-k8s's planted fault: the whole host of make
// lab-cluster-host, so that CI proves the rail and path faults under Slurm
// (make lab-cluster) and the host fault under Kubernetes without a third
// four-VM lab: the pairing and isolation are the suite's, not the
// engine's. The host fault costs this lab minutes (both rails of the bad
// pairs crawl): 1062 s against 851-1002 s with one rail, its Job 14 of
// LAB_SRUN_TIMEOUT's 25 minutes.
const K8sDegrade = HostDegrade

// KubePackages are the Debian parts a Kubernetes node adds: runc (and
// libseccomp, which it links) and the CNI plugins' loopback.
var KubePackages = []string{"runc", "libseccomp2", "containernetworking-plugins"}

// Images make lab-k8s builds, imported on every node.
const (
	SuiteImage = "localhost/gdrconf:lab"
	apiNodeIP  = "10.0.2.15/24" // each VM on its own qemu user network
	k8sTools   = "gdrk8s"       // 9p tag of the built tools
	k8sImages  = "gdrimages"    // 9p tag of the image archives
	k8sJob     = "gdrconf"      // deploy/k8s's Job, Service and pod host names
)

// kubeRun is the host's side of make lab-k8s.
type kubeRun struct {
	tools   string // BuildTools' folder
	cp      *kube.ControlPlane
	admin   string // the admin kubeconfig
	dir     string // control plane's files
	images  string // the image archives (a read-only share)
	netdev  string // the qemu user network of each VM (the API server's forward)
	kubectl string
}

// kubeBackend is the cluster lab under Kubernetes (make lab-k8s): the
// control plane runs on the host, every VM is a node (kube_guest.go), and
// the host does the user's part with kubectl beside the VMs (kubeDrive).
type kubeBackend struct {
	r     *runner
	k     *kubeRun
	res   *kubeResult              // what kubeDrive saw of the Job
	setup map[string]time.Duration // the tools' and control plane's start
}

func (b *kubeBackend) name() string { return "lab-k8s" }

// packages: runc, libseccomp and the CNI plugins (KubePackages).
func (*kubeBackend) packages() []string { return KubePackages }

func (b *kubeBackend) lateOverhead() time.Duration { return kubeLateOverhead }

// setUp builds the tools, starts the control plane and makes every VM of
// the plan a node of it.
func (b *kubeBackend) setUp(ctx context.Context, plan []Job, agent string) (func(), error) {
	r := b.r
	t1 := time.Now()
	k, err := r.kubeStart(ctx, ClusterHosts(r.o.Cluster.Hosts), agent)
	if err != nil {
		return nil, err
	}
	b.k = k
	b.setup = map[string]time.Duration{"tools and control plane": time.Since(t1)}
	if err := r.kubePlan(plan, k); err != nil {
		k.cp.Stop()
		return nil, err
	}
	return k.cp.Stop, nil
}

// image adds the node's part to the VM image and writes the container
// images from it (the suite's is the VM image's userland).
func (b *kubeBackend) image(im *vm.Image, parts *vm.Parts) error {
	if err := b.r.kubeImage(im, parts); err != nil {
		return err
	}
	return b.r.kubeImages(im, parts, b.k)
}

// vmConfig gives the node its way to the API server and the shares of the
// tools and images.
func (b *kubeBackend) vmConfig(cfg *vm.Config, extra []GuestNIC) {
	for _, nic := range extra { // the node's way to the API server
		cfg.NICs = append(cfg.NICs, vm.NIC{Netdev: b.k.netdev, MAC: nic.MAC})
	}
	cfg.Shares = append(cfg.Shares, vm.Share{Tag: k8sTools, Path: b.k.tools, ReadOnly: true}, vm.Share{Tag: k8sImages, Path: b.k.images, ReadOnly: true})
}

// drive is the user's part (kubectl), beside the VMs; it writes the end
// file.
func (b *kubeBackend) drive(ctx context.Context, shared string) (func(), error) {
	r := b.r
	kdir := filepath.Join(r.o.ReportDir, "k8s")
	manifests, err := r.kubeManifests(kdir)
	if err != nil {
		return nil, err
	}
	klog, err := os.Create(filepath.Join(r.o.ReportDir, "k8s.log"))
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer klog.Close()
		b.res = r.kubeDrive(ctx, b.k, ClusterHosts(r.o.Cluster.Hosts), kdir, manifests, filepath.Join(shared, "lab", "end"), klog)
	}()
	return func() { <-done }, nil
}

// collect names the planted faults by the pods that ran on their VMs and
// finds the Job's run folder.
func (b *kubeBackend) collect(_ []Job, _ map[string]*clusterVM, shared string, degrade []Degrade) collected {
	r := b.r
	col := collected{found: degrade, times: map[string]time.Duration{}}
	for k, v := range b.setup {
		col.times[k] = v
	}
	if res := b.res; res != nil {
		col.problems = append(col.problems, res.Problems...)
		for k, v := range res.Times {
			col.times[k] = v
		}
		r.logf("pods: %s", podList(res.Pods))
		if len(res.Problems) == 0 {
			found, err := podDegrade(degrade, res.Pods)
			if err != nil {
				col.problems = append(col.problems, "k8s: "+err.Error())
			} else {
				col.found = found
			}
		}
		col.pods = res.Pods
		col.json = map[string]any{"engine": "kubernetes", "pods": res.Pods}
	}
	rounds, err := runFolder(filepath.Join(shared, "rounds"))
	if err != nil {
		col.problems = append(col.problems, "k8s: "+err.Error())
	}
	col.rounds = rounds
	return col
}

// checks: each pod's node named, the Job's status the verdict's, and
// strict's absences the VMs' own (when the driver saw the Job end well).
func (b *kubeBackend) checks(sum *ClusterSummary, gone map[string]string, _ string) []string {
	res := b.res
	if res == nil || len(res.Problems) > 0 {
		return nil
	}
	var problems []string
	problems = append(problems, podNodes(sum, res.Pods, gone)...)
	problems = append(problems, JobVerdict(res, sum, gone)...)
	return append(problems, StrictAbsences(sum, gone)...)
}

// printJob: the Job's account is k8s.log.
func (b *kubeBackend) printJob(string) {}

func (b *kubeBackend) exited(mergeExit int) string { return mergeExited(mergeExit) }

func (b *kubeBackend) times(t map[string]time.Duration) string {
	return fmt.Sprintf("parts %v, tools and control plane %v, build %v, VMs %v (nodes Ready %v, job %v), merge %v, total %v",
		t["parts"], t["tools and control plane"], t["build"], t["vms"], t["nodes"], t["job"], t["merge"], t["total"])
}

// kubeStart builds (or finds) the tools and starts the control plane.
func (r *runner) kubeStart(ctx context.Context, hosts []string, agent string) (*kubeRun, error) {
	o := r.o
	tools, err := kube.BuildTools(ctx, o.Go, o.RepoDir, o.CacheDir, r.logf)
	if err != nil {
		return nil, err
	}
	run, err := filepath.Abs(r.dir) // the control plane's processes and qemu get absolute paths
	if err != nil {
		return nil, err
	}
	k := &kubeRun{tools: tools, dir: filepath.Join(run, "k8s"), images: filepath.Join(run, "images"), kubectl: filepath.Join(tools, "kubectl")}
	for _, d := range []string{k.dir, k.images} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if k.cp, err = kube.NewControlPlane(tools, k.dir, hosts); err != nil {
		return nil, err
	}
	if err := k.cp.Start(ctx, 3*time.Minute, r.logf); err != nil {
		k.cp.Stop()
		return nil, fmt.Errorf("control plane: %w", err)
	}
	if k.admin, err = k.cp.Kubeconfig(kube.ClientAdmin, k.cp.Server()); err != nil {
		k.cp.Stop()
		return nil, err
	}
	// restrict=on: the guest reaches nothing of the host or beyond but
	// the forward. A cmd forward starts the pipe once per connection (a
	// chardev forward would carry one connection in all).
	k.netdev = fmt.Sprintf("user,restrict=on,net=10.0.2.0/24,guestfwd=tcp:%s:6443-cmd:%s pipe 127.0.0.1:%d", kube.GuestAPIAddr, strings.ReplaceAll(agent, ",", ",,"), k.cp.APIPort)
	return k, nil
}

// kubePlan turns the cluster plan's VMs into Kubernetes nodes: no srun, a
// user NIC to the API server, and each node's files.
func (r *runner) kubePlan(plan []Job, k *kubeRun) error {
	c := r.o.Cluster
	dns := plan[0].Addr // vm1's management address serves the cluster DNS
	ca := k.cp.PKI.CA
	for i := range plan {
		cj := plan[i].Cluster
		cj.Probes, cj.Sbatch = nil, nil
		cj.Controller = ""
		cj.NICs = append(cj.NICs, GuestNIC{MAC: clusterMAC(c.Rails+1, i+1), Addr: apiNodeIP, Rail: -1})
		// Boot, images and the kubelet's start under TCG take minutes; the
		// Job runs as long as srun would.
		cj.DaemonWait, cj.EndWait = 5*time.Minute, c.SrunTimeout+12*time.Minute
		node, ok := k.cp.PKI.Tokens[kube.NodeClient(cj.Host)]
		if !ok {
			return fmt.Errorf("no node token for %s", cj.Host)
		}
		kc, err := kube.Kubeconfig(kube.GuestServer(), ca, node)
		if err != nil {
			return err
		}
		kl, err := kube.KubeletConfig(kube.Node{Name: cj.Host, IP: plan[i].Addr, ClusterDNS: dns})
		if err != nil {
			return err
		}
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		kj := &KubeJob{ToolsTag: k8sTools, Tools: kubeTools, ImagesTag: k8sImages, Images: kubeImages, NodeIP: plan[i].Addr,
			GPUs: c.Rails, Files: map[string]string{
				kubeletConf:       string(kc),
				kubeletConfig:     string(kl),
				"/etc/machine-id": fmt.Sprintf("%x\n", id),
			}}
		if l, ok := r.live.late(cj.Host); ok {
			// LAB_LATE: the node joins Late after the first pod's mark at
			// the start barrier, on the claim's per-run folder.
			kj.Late = l.Delay
			kj.LateMarks = filepath.Join(clusterRounds, k8sJob+"-*", ".gdrcluster", "run-*", cluster.StartBarrier, "*")
		}
		if i == 0 {
			cd, ok := k.cp.PKI.Tokens[kube.ClientCoreDNS]
			if !ok {
				return fmt.Errorf("no CoreDNS token")
			}
			b, err := kube.Kubeconfig(kube.GuestServer(), ca, cd)
			if err != nil {
				return err
			}
			kj.DNS = true
			kj.Files[corednsConf] = string(b)
			kj.Files[corefile] = string(kube.Corefile(dns, corednsConf))
		}
		cj.Kube = kj
		// The device plugin hands the pods the GPUs' device files, as
		// NVIDIA's does: the node has one per GPU it offers.
		plan[i].GPUs = kj.GPUs
	}
	return nil
}

// kubeImage adds what every node shares to the VM image: runc, the CNI
// loopback plugin, the overlay module containerd's snapshotter mounts
// with, and the containerd and CNI configuration.
func (r *runner) kubeImage(im *vm.Image, parts *vm.Parts) error {
	for gp, rel := range map[string]string{runcPath: "usr/sbin/runc", cniBin + "/loopback": "usr/lib/cni/loopback"} {
		hp := filepath.Join(parts.Root, rel)
		if _, err := os.Stat(hp); err != nil {
			return fmt.Errorf("%s not in the unpacked packages (%s): %w", rel, strings.Join(KubePackages, " "), err)
		}
		im.Binaries[gp] = hp
	}
	im.Modules = append(im.Modules, "overlay")
	im.Applets = append(im.Applets, "umount")
	im.Data[containerdConfig] = vm.DataFile{Mode: 0o644, Bytes: kube.ContainerdConfig("/var/lib/containerd", "/run/containerd", runcPath, cniBin, cniConfDir)}
	im.Data[cniConfDir+"/10-gdrlab.conflist"] = vm.DataFile{Mode: 0o644, Bytes: []byte(kube.CNIConfig)}
	im.Data["/etc/resolv.conf"] = vm.DataFile{Mode: 0o644, Bytes: []byte("# the lab's VMs have no resolver of their own; pods get the cluster DNS from the kubelet\n")}
	// The pods find their peers (gdrconf-<i>.gdrconf) through the cluster
	// DNS: with "hosts: files" alone, Go's resolver never asks it (seen:
	// "lookup gdrconf-0.gdrconf: no such host" with CoreDNS serving it).
	im.Data["/etc/nsswitch.conf"] = vm.DataFile{Mode: 0o644, Bytes: []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n")}
	return nil
}

// LayerDist is where the container image holds make dist's layout.
const LayerDist = "/opt/gdrconf"

// layerPath is where guest path gp goes in the suite's container layer
// (vm.Image.Layer), or false when it stays out: the suite (make dist's
// layout, clusterDist in a VM) moves to LayerDist as deploy/k8s expects;
// the VM's own parts stay out: its agent (/init), the lab's files, and the
// daemons' keys and configs.
func layerPath(gp string) (string, bool) {
	if rest, ok := strings.CutPrefix(gp, clusterDist+"/"); ok {
		return LayerDist + "/" + rest, true
	}
	for _, p := range []string{"/init", "/lab", "/lab/", "/etc/munge/", "/etc/slurm/", "/etc/kubernetes/", "/etc/containerd/", "/etc/cni/", "/etc/coredns/"} {
		if gp == p || strings.HasPrefix(gp, p) {
			return "", false
		}
	}
	return gp, true
}

// kubeImages writes the container images every node imports: the suite
// (the VM image's userland with make dist's layout at /opt/gdrconf) and
// the pod sandbox (busybox sleeping: the lab's own pause image).
func (r *runner) kubeImages(im *vm.Image, parts *vm.Parts, k *kubeRun) error {
	layer := filepath.Join(r.dir, "gdrconf-layer.tar")
	if err := im.Layer(layer, layerPath); err != nil {
		return fmt.Errorf("the suite's image layer: %w", err)
	}
	defer os.Remove(layer)
	path := "PATH=" + LayerDist + ":/usr/bin:/usr/sbin:/bin:/sbin"
	if err := WriteArchive(ContainerImage{Ref: SuiteImage, Layer: layer, Env: []string{path}}, filepath.Join(k.images, "gdrconf.tar")); err != nil {
		return err
	}
	pause := filepath.Join(r.dir, "pause-layer.tar")
	f, err := os.Create(pause)
	if err != nil {
		return err
	}
	tw := cpio.NewLayerWriter(f)
	bb, err := os.ReadFile(filepath.Join(parts.Root, "bin/busybox"))
	if err == nil {
		err = tw.File("/bin/busybox", 0o755, bb)
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the pause image: %w", err)
	}
	defer os.Remove(pause)
	if err := WriteArchive(ContainerImage{Ref: kube.SandboxImage, Layer: pause, Entrypoint: []string{"/bin/busybox", "sleep", "2147483647"}},
		filepath.Join(k.images, "pause.tar")); err != nil {
		return err
	}
	for _, n := range []string{"gdrconf.tar", "pause.tar"} {
		if st, err := os.Stat(filepath.Join(k.images, n)); err == nil {
			r.logf("image %s: %.1f MiB", n, float64(st.Size())/(1<<20))
		}
	}
	return nil
}

// The lab runs deploy/k8s as shipped, with only the edits its README and
// docs/clusters.md give a user, made to a copy (kubeManifests): the image,
// the node count (spec.completions), the storage class, the container's
// resources (a VM has one CPU and 1280 MiB), GDR_* settings in its env and
// the suite's arguments, and FAKE_CUDA_* for the emulated GPU that stands
// in for the GPU operator's driver. TestLabEditsOnlyWhatUsersEdit renders
// both and fails on any other difference. The reports volume is the lab's
// storage (a PersistentVolume on the VMs' shared folder, as an NFS
// provisioner would give), applied beside the manifests.
const (
	k8sNamespace    = "gdrconf"       // the shipped namespace, kept
	labStorage      = "gdrlab-shared" // the lab's ReadWriteMany class
	labPodCPU       = "900m"          // of a VM's one CPU (the node daemons have the rest)
	labPodMemory    = "768Mi"         // of a VM's 1280 MiB
	labPVFile       = "reports-pv.yaml"
	manifestsSubdir = "manifests"
)

// LabEdits are the user edits the lab makes to deploy/k8s.
type LabEdits struct {
	Image, Tag   string
	Nodes        int
	GPUs         int
	StorageClass string
	CPU, Memory  string
	Env          [][2]string // name, value: set (or added) in the container's env
	Args         []string
}

// EditManifests applies e to the files of deploy/k8s (name -> content) as
// a user would edit them, and returns the edited files.
func EditManifests(files map[string][]byte, e LabEdits) (map[string][]byte, error) {
	out := map[string][]byte{}
	for n, b := range files {
		out[n] = b
	}
	edit := func(name string, f func(doc map[string]any) error) error {
		var doc map[string]any
		if err := yaml.Unmarshal(files[name], &doc); err != nil {
			return fmt.Errorf("deploy/k8s/%s: %w", name, err)
		}
		if err := f(doc); err != nil {
			return fmt.Errorf("deploy/k8s/%s: %w", name, err)
		}
		b, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		out[name] = append([]byte("# deploy/k8s/"+name+" with a user's edits (make lab-k8s)\n"), b...)
		return nil
	}
	err := edit("kustomization.yaml", func(k map[string]any) error {
		imgs, _ := k["images"].([]any)
		if len(imgs) != 1 {
			return fmt.Errorf("want one image, have %d", len(imgs))
		}
		img := imgs[0].(map[string]any)
		img["newName"], img["newTag"] = e.Image, e.Tag
		return nil
	})
	if err == nil {
		err = edit("reports-pvc.yaml", func(p map[string]any) error {
			spec, ok := p["spec"].(map[string]any)
			if !ok {
				return fmt.Errorf("no spec")
			}
			spec["storageClassName"] = e.StorageClass
			return nil
		})
	}
	if err == nil {
		err = edit("job.yaml", func(j map[string]any) error {
			spec, ok := j["spec"].(map[string]any)
			if !ok {
				return fmt.Errorf("no spec")
			}
			spec["completions"] = e.Nodes
			cs, _ := dig(spec, "template", "spec")["containers"].([]any)
			if len(cs) != 1 {
				return fmt.Errorf("want one container, have %d", len(cs))
			}
			c := cs[0].(map[string]any)
			res, _ := c["resources"].(map[string]any)
			req, _ := res["requests"].(map[string]any)
			lim, _ := res["limits"].(map[string]any)
			if req == nil || lim == nil {
				return fmt.Errorf("no resources.requests and .limits")
			}
			req["cpu"], req["memory"], lim["cpu"], lim["memory"] = e.CPU, e.Memory, e.CPU, e.Memory
			lim["nvidia.com/gpu"] = e.GPUs
			env, _ := c["env"].([]any)
		next:
			for _, kv := range e.Env {
				for _, x := range env {
					if m := x.(map[string]any); m["name"] == kv[0] {
						delete(m, "valueFrom")
						m["value"] = kv[1]
						continue next
					}
				}
				env = append(env, map[string]any{"name": kv[0], "value": kv[1]})
			}
			c["env"] = env
			if len(e.Args) > 0 {
				c["args"] = e.Args
			}
			return nil
		})
	}
	return out, err
}

// dig walks nested maps by key; a missing level is an empty map.
func dig(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		n, _ := m[k].(map[string]any)
		if n == nil {
			return map[string]any{}
		}
		m = n
	}
	return m
}

// ReadManifests reads deploy/k8s's files.
func ReadManifests(repo string) (map[string][]byte, error) {
	dir := filepath.Join(repo, "deploy", "k8s")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	return files, nil
}

// labEdits are this run's edits.
func (r *runner) labEdits() LabEdits {
	name, tag, _ := strings.Cut(SuiteImage, ":")
	e := LabEdits{Image: name, Tag: tag, Nodes: r.o.Cluster.Hosts, GPUs: r.o.Cluster.Rails, StorageClass: labStorage,
		CPU: labPodCPU, Memory: labPodMemory, Args: r.clusterSuiteArgs()}
	// The cluster lab's environment, less what the manifest sets itself
	// (GDR_REPORTS is the claim's per-run folder there, GDR_PAIRING ring
	// as here, GDR_STRICT=1 as shipped: what the VMs lack for their own
	// reasons is reqs.LabVMAbsent, and StrictAbsences checks that nothing
	// else is absent).
	var env [][2]string
	at := map[string]int{}
	for _, kv := range r.clusterEnv() {
		n, v, _ := strings.Cut(kv, "=")
		if n == "GDR_REPORTS" || n == "GDR_PAIRING" {
			continue
		}
		if i, ok := at[n]; ok { // the last wins, as in a process's environment
			env[i][1] = v
			continue
		}
		at[n] = len(env)
		env = append(env, [2]string{n, v})
	}
	e.Env = env
	return e
}

// kubeManifests writes the edited copy of deploy/k8s into dir/manifests
// and the lab's reports volume beside it; it returns the manifests' folder.
func (r *runner) kubeManifests(dir string) (string, error) {
	files, err := ReadManifests(r.o.RepoDir)
	if err != nil {
		return "", err
	}
	edited, err := EditManifests(files, r.labEdits())
	if err != nil {
		return "", err
	}
	mdir := filepath.Join(dir, manifestsSubdir)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return "", err
	}
	for n, b := range edited {
		if err := os.WriteFile(filepath.Join(mdir, n), b, 0o644); err != nil {
			return "", err
		}
	}
	// ReadWriteMany on the VMs' shared folder: every node mounts the same
	// virtio-9p folder at /shared, as NFS would be on a real cluster. Its
	// capacity is the claim's request: a volume smaller than the claim
	// asks never binds it.
	var pvc map[string]any
	if err := yaml.Unmarshal(edited["reports-pvc.yaml"], &pvc); err != nil {
		return "", fmt.Errorf("reports-pvc.yaml: %w", err)
	}
	size, _ := dig(pvc, "spec", "resources", "requests")["storage"].(string)
	if size == "" {
		return "", fmt.Errorf("reports-pvc.yaml requests no storage")
	}
	pv := map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": "gdrconf-reports-lab"},
		"spec": map[string]any{
			"storageClassName": labStorage,
			"capacity":         map[string]string{"storage": size},
			"accessModes":      []string{"ReadWriteMany"},
			"hostPath":         map[string]string{"path": clusterRounds, "type": "Directory"},
			"claimRef":         map[string]string{"namespace": k8sNamespace, "name": "gdrconf-reports"},
		},
	}
	b, err := yaml.Marshal(pv)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, labPVFile), append([]byte("# make lab-k8s's storage for the reports claim\n"), b...), 0o644); err != nil {
		return "", err
	}
	return mdir, nil
}

// corednsRBAC lets CoreDNS's token read what its kubernetes plugin
// watches (the role a CoreDNS install ships as system:coredns).
const corednsRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: gdrlab:coredns
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: gdrlab:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: gdrlab:coredns
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: system:gdrlab:coredns
`

// kubeResult is what the host's driver saw of the Job.
type kubeResult struct {
	Pods     map[string]string // pod host name (gdrconf-<i>) -> node
	Problems []string
	Times    map[string]time.Duration
	// Condition is how the Job ended (Complete or Failed), and Exits the
	// exit status of each pod (by host name) whose container ended; a pod
	// that was deleted (its node gone) has none.
	Condition string
	Exits     map[string]int
}

// run runs the built kubectl as the admin, stdin from in.
func (k *kubeRun) run(ctx context.Context, in string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig", k.admin}, args...)...)
	cmd.Stdin = strings.NewReader(in)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, clip.LastLines(string(b), 4))
	}
	return string(b), nil
}

// kubeDrive is the user's part, as README tells it: wait for the nodes,
// create the secret, apply the manifests, watch the Job to its end. It
// then writes the end file, whatever happened, so that the VMs stop.
func (r *runner) kubeDrive(ctx context.Context, k *kubeRun, hosts []string, dir, manifests, endFile string, log io.Writer) *kubeResult {
	res := &kubeResult{Pods: map[string]string{}, Times: map[string]time.Duration{}, Exits: map[string]int{}}
	defer func() {
		_ = os.WriteFile(endFile, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
	}()
	fail := func(f string, a ...any) *kubeResult {
		res.Problems = append(res.Problems, fmt.Sprintf(f, a...))
		return res
	}
	say := func(f string, a ...any) {
		fmt.Fprintf(log, "%s "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	// CoreDNS starts with vm1's node and lists the API at once: its role
	// goes first, as an install's manifests come before its pods (applied
	// after the nodes, CoreDNS logged "forbidden" for half a minute).
	out, err := k.run(ctx, corednsRBAC, "apply", "-f", "-")
	say("kubectl apply -f -\n%s", strings.TrimSpace(out))
	if err != nil {
		return fail("k8s: kubectl apply -f - (CoreDNS's role): %s", oneLine(clip.LastLines(out, 3)))
	}
	t0 := time.Now()
	// Every node registers and turns Ready once containerd, the kubelet
	// and the device plugin are up.
	last, got, ready := "", "", 0
	if err := wait.For(ctx, t0.Add(12*time.Minute), 3*time.Second, "every node Ready", func() bool {
		got, _ = k.run(ctx, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status},gpu={.status.allocatable.nvidia\.com/gpu},rdma={.status.allocatable.rdma/rdma_shared_device_a} {end}`)
		if got != last {
			say("nodes: %s", got)
			last = got
		}
		// A LAB_LATE node joins only after the Job's first pod is at the
		// start barrier (lateNode): the Job starts without it.
		ok := readyNodes(got)
		ready = 0
		for _, h := range hosts {
			if ok[h] || r.lateNode(h) {
				ready++
			}
		}
		return ready == len(hosts)
	}); err != nil {
		return fail("k8s: %d of %d nodes Ready (or planted late) with their GPUs and RDMA devices after %v (kubectl get nodes: %s); see the kubelet logs in the shared folder's lab/",
			ready, len(hosts), time.Since(t0).Round(time.Second), strings.TrimSpace(got))
	}
	res.Times["nodes"] = time.Since(t0)
	say("all %d nodes Ready in %.0fs", len(hosts), time.Since(t0).Seconds())
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	for _, step := range []struct {
		in   string
		args []string
	}{
		// The commands docs/clusters.md gives; the secret never touches a
		// file. The storage is the lab's (a cluster's provisioner).
		{"", []string{"create", "namespace", k8sNamespace}},
		{"", []string{"-n", k8sNamespace, "create", "secret", "generic", "gdrconf-cluster", "--from-literal=secret=" + base64.StdEncoding.EncodeToString(secret)}},
		{"", []string{"apply", "-f", filepath.Join(dir, labPVFile)}},
		{"", []string{"apply", "-k", manifests}},
	} {
		out, err := k.run(ctx, step.in, step.args...)
		shown := strings.Join(step.args, " ")
		if strings.Contains(shown, "--from-literal") {
			shown = "-n " + k8sNamespace + " create secret generic gdrconf-cluster --from-literal=secret=<32 random bytes, base64>"
		}
		say("kubectl %s\n%s", shown, strings.TrimSpace(out))
		if err != nil {
			return fail("k8s: kubectl %s: %s", shown, oneLine(clip.LastLines(out, 3)))
		}
	}
	t1 := time.Now()
	// The Job ends Complete (every pod exited 0: pod 0's merge found the
	// fleet QUALIFIED) or Failed (an index failed: pod 0's verdict, or a
	// pod that could not finish). Its pods are watched as they go.
	last = ""
	status := ""
	tainted := map[string]bool{} // LAB_KILL nodes taken out of service
	// Past the deadline status stays empty: the switch below says so.
	_ = wait.For(ctx, t1.Add(r.o.Cluster.SrunTimeout+5*time.Minute), 5*time.Second, "job "+k8sJob+" to end", func() bool {
		out, _ := k.run(ctx, "", "-n", k8sNamespace, "get", "pods", "-l", "batch.kubernetes.io/job-name="+k8sJob, "-o",
			`jsonpath={range .items[*]}{.spec.hostname}@{.spec.nodeName}={.status.phase} {end}`)
		if out != last {
			say("pods: %s", out)
			last = out
			for _, f := range strings.Fields(out) {
				pod, rest, _ := strings.Cut(f, "@")
				if node, _, _ := strings.Cut(rest, "="); node != "" {
					res.Pods[pod] = node
				}
			}
		}
		r.outOfService(ctx, k, tainted, say)
		st, _ := k.run(ctx, "", "-n", k8sNamespace, "get", "job", k8sJob, "-o", `jsonpath={range .status.conditions[?(@.status=="True")]}{.type} {end}`)
		if conds := strings.Fields(st); slices.Contains(conds, "Complete") || slices.Contains(conds, "Failed") {
			status = strings.Join(conds, " ")
			return true
		}
		return false
	})
	res.Times["job"] = time.Since(t1)
	say("job %s: %q after %.0fs", k8sJob, status, time.Since(t1).Seconds())
	if out, err := k.run(ctx, "", "-n", k8sNamespace, "get", "pods", "-l", "batch.kubernetes.io/job-name="+k8sJob,
		"-o", "jsonpath={range .items[*]}{.spec.hostname}={.status.containerStatuses[0].state.terminated.exitCode} {end}"); err == nil {
		res.Exits = podExits(out)
	}
	say("the pods' exit statuses (the first that ran to the end merged): %v", res.Exits)
	for _, a := range [][]string{{"-n", k8sNamespace, "get", "job,pods,service,endpointslices,pvc", "-o", "wide"}, {"get", "pv"}, {"-n", k8sNamespace, "get", "events", "--sort-by=.lastTimestamp"}} {
		out, _ := k.run(ctx, "", a...)
		say("kubectl %s\n%s", strings.Join(a, " "), out)
	}
	conds := strings.Fields(status)
	switch {
	case slices.Contains(conds, "Complete"):
		res.Condition = "Complete"
	case slices.Contains(conds, "Failed"):
		// The verdict's, or a harness fault: the merge decides (JobVerdict).
		res.Condition = "Failed"
	default:
		return fail("k8s: job %s did not end within %v (pods: %s)", k8sJob, r.o.Cluster.SrunTimeout+5*time.Minute, strings.TrimSpace(last))
	}
	if len(res.Pods) != len(hosts) {
		return fail("k8s: %d pods placed on nodes, want %d (%v)", len(res.Pods), len(hosts), res.Pods)
	}
	nodes := map[string]bool{}
	for _, n := range res.Pods {
		nodes[n] = true
	}
	if len(nodes) != len(hosts) {
		return fail("k8s: the Job's pods shared nodes (%v): the manifest's anti-affinity wants one per node", res.Pods)
	}
	return res
}

// lateNode reports whether vm is planted late (LAB_LATE).
func (r *runner) lateNode(vm string) bool {
	_, ok := r.live.late(vm)
	return ok
}

// outOfService does the operator's part for each node the lab killed
// (LAB_KILL), once the API sees it not Ready: the out-of-service taint, so
// that its pod is failed and the Job's index on it ends (without it the
// pod stays Terminating, the Job never ends, and kubectl wait runs into
// the Job's deadline). Nodes done are kept in tainted.
func (r *runner) outOfService(ctx context.Context, k *kubeRun, tainted map[string]bool, say func(string, ...any)) {
	for _, kl := range r.live.Kill {
		if tainted[kl.Host] || !r.wasKilled(kl.Host) {
			continue
		}
		st, _ := k.run(ctx, "", "get", "node", kl.Host, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if strings.TrimSpace(st) == "True" || strings.TrimSpace(st) == "" {
			continue // the node controller has not seen it gone yet
		}
		out, err := k.run(ctx, "", "taint", "nodes", kl.Host, outOfService, "--overwrite")
		say("LAB_KILL %s: node %s is Ready=%s; the operator's step for a node that is gone: kubectl taint nodes %s %s\n%s",
			kl.Spec, kl.Host, strings.TrimSpace(st), kl.Host, outOfService, strings.TrimSpace(out))
		if err == nil {
			tainted[kl.Host] = true
		}
	}
}

// podDegrade names the planted faults by the pods that ran on their VMs:
// the suite names each host of a Kubernetes job by its pod's host name.
func podDegrade(ds []Degrade, pods map[string]string) ([]Degrade, error) {
	byNode := map[string]string{}
	for p, n := range pods {
		byNode[n] = p
	}
	var out []Degrade
	for _, d := range ds {
		p, ok := byNode[d.Host]
		if !ok {
			return nil, fmt.Errorf("no pod ran on %s (pods: %v)", d.Host, pods)
		}
		d.Host = p
		if d.To != "" {
			if d.To, ok = byNode[d.To]; !ok {
				return nil, fmt.Errorf("no pod ran on %s (pods: %v)", d.To, pods)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// podNodes checks that the merged report names each pod's node as the API
// placed it (host.json's node: the kernel's host name on the host network),
// so that a user finds the machine from the report alone; the part at
// fault of each finding names the node too.
//
// A host in gone that did not start left no host.json: its node is unknown
// to the report.
func podNodes(s *ClusterSummary, pods map[string]string, gone map[string]string) []string {
	var problems []string
	for _, h := range s.Hosts {
		if gone[h.Host] == isolate.DidNotStart {
			continue
		}
		if want := pods[h.Host]; h.Identity.Node != want {
			problems = append(problems, fmt.Sprintf("k8s: the report names %s's node %q, and the API placed it on %q", h.Host, h.Identity.Node, want))
		}
	}
	if s.Cluster == nil {
		return problems
	}
	for _, x := range s.Cluster.Suspects {
		if x.AtFault == nil {
			continue // ClusterVerdict names a finding without a part
		}
		for _, h := range []string{x.Host, x.Peer} {
			if want := "(node " + pods[h] + ")"; h != "" && !strings.Contains(x.AtFault.Name, want) {
				problems = append(problems, fmt.Sprintf("k8s: %s's part at fault %q does not name %s's node %s", x.Name(), x.AtFault.Name, h, want))
			}
		}
	}
	return problems
}

// podList is "gdrconf-0 on vm2, ..." for messages.
func podList(pods map[string]string) string {
	var s []string
	for p, n := range pods {
		s = append(s, p+" on "+n)
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// PipeMain is `gdrlab pipe host:port`, qemu's guestfwd command: it joins
// its standard input and output to one TCP connection to addr, so that each
// connection a VM makes to the API server's address reaches the host's.
func PipeMain(addr string, in io.Reader, out io.Writer) int {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gdrlab pipe: %v\n", err)
		return 1
	}
	// The host's side ending ends the pipe: after the guest's side ends,
	// CloseWrite tells the API server, which then closes.
	go func() {
		_, _ = io.Copy(conn, in)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(out, conn)
	conn.Close()
	return 0
}

// JobVerdict checks that the Job's own status is the merged verdict: the
// pod that merged (GDR_MERGE=first: the first of the job's list that ran to
// the end, pod 0 unless it did not start or stopped) exited with the
// merge's exit status (the report's), a pod planted past the start barrier
// exited 4 (too late: rounds.sh), and the Job is Complete exactly when the
// verdict's status is 0, so that kubectl wait --for=condition=complete
// tells a pipeline the fleet qualified. gone: the hosts planted not to
// finish (LAB_LATE, LAB_KILL), whose indexes fail.
func JobVerdict(res *kubeResult, s *ClusterSummary, gone map[string]string) []string {
	var p []string
	mergeExit := s.Exit
	merger := ""
	for _, h := range s.Hosts {
		if s.Cluster.Liveness(h.Host) == "" {
			merger = h.Host
			break
		}
	}
	got, ok := res.Exits[merger]
	switch {
	case merger == "":
		p = append(p, "k8s: no pod ran to the end, so none merged")
	case !ok:
		p = append(p, fmt.Sprintf("k8s: %s, the first pod that ran to the end (the merge), has no exit status (pods: %v)", merger, res.Exits))
	case got != mergeExit:
		p = append(p, fmt.Sprintf("k8s: %s (the merge) exited %d, the merged report's exit status is %d: the Job's status is not the verdict", merger, got, mergeExit))
	}
	for _, h := range sortedKeys(gone) {
		if gone[h] != isolate.DidNotStart {
			continue
		}
		if e, ok := res.Exits[h]; !ok || e != exitTooLate {
			p = append(p, fmt.Sprintf("k8s: %s did not start, and its pod exited %s, want %d (too late: rounds.sh)", h, exitOf(res.Exits, h), exitTooLate))
		}
	}
	want := "Complete"
	if mergeExit != 0 {
		want = "Failed"
	}
	if res.Condition != want {
		p = append(p, fmt.Sprintf("k8s: the Job ended %s, but the merged verdict's exit status %d wants it %s", res.Condition, mergeExit, want))
	}
	return p
}

// exitTooLate is rounds.sh's exit status for a host that reached a barrier
// after it closed (gdrcluster's exitLate).
const exitTooLate = 4

func exitOf(exits map[string]int, h string) string {
	if e, ok := exits[h]; ok {
		return strconv.Itoa(e)
	}
	return "(none)"
}

// podExits reads "<pod>=<exit> ..." (kubectl's jsonpath of each pod's
// terminated container); a pod whose container has not ended has none.
func podExits(out string) map[string]int {
	exits := map[string]int{}
	for _, f := range strings.Fields(out) {
		pod, v, _ := strings.Cut(f, "=")
		if n, err := strconv.Atoi(v); err == nil && pod != "" {
			exits[pod] = n
		}
	}
	return exits
}

// readyNodes reads "<node>=<Ready>,gpu=<n>,rdma=<n> ..." (kubectl's
// jsonpath of the nodes): the nodes Ready with their GPUs and RDMA devices
// offered.
func readyNodes(out string) map[string]bool {
	ready := map[string]bool{}
	for _, f := range strings.Fields(out) {
		name, rest, _ := strings.Cut(f, "=")
		ready[name] = strings.HasPrefix(rest, "True,") && !strings.Contains(rest, "gpu=,") && !strings.HasSuffix(rest, "rdma=")
	}
	return ready
}

// outOfService is the taint Kubernetes documents for a node that is shut
// down for good ("non-graceful node shutdown"): the taint eviction
// controller evicts its pods, and the pod garbage collector marks each
// Failed and deletes it (kubernetes pkg/controller/podgc/gc_controller.go,
// gcTerminating: not Ready and this taint), so that a Job's index on it
// ends. A cloud's node controller deletes a gone machine's Node instead,
// with the same end (gcOrphaned).
const outOfService = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"

// runFolder is the one per-run folder the Job's pods wrote under rounds
// (deploy/k8s: GDR_REPORTS=/reports/<job>-<uid>).
func runFolder(rounds string) (string, error) {
	m, err := filepath.Glob(filepath.Join(rounds, k8sJob+"-*"))
	if err != nil {
		return "", err
	}
	if len(m) != 1 {
		return "", fmt.Errorf("want one run folder %s-<uid> under %s, found %d (%v)", k8sJob, rounds, len(m), m)
	}
	return m[0], nil
}
