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
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/lab/kube"
)

// ModeK8s is `make lab-k8s`: the cluster lab's four VMs and planted fault,
// with Kubernetes instead of Slurm. The control plane (built from the
// published modules, lab/kube) runs on the host; every VM is a node
// (containerd, kubelet, the device plugin; CoreDNS on vm1); the host
// applies deploy/k8s through a lab overlay with the built kubectl, waits
// for the Indexed Job, and merges the reports its pods wrote.
const ModeK8s = "k8s"

// K8sDegrade is make lab-k8s's planted fault: one rail, the part the
// Slurm lab proves first. The host and path faults are proved under Slurm
// (make lab-cluster, lab-cluster-host): the pairing is the suite's, not
// the engine's.
const K8sDegrade = "vm3:1:delay=250ms"

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
		cj.Srun = nil
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
	}
	return nil
}

// kubeImage adds what every node shares to the VM image: runc, the CNI
// loopback plugin, the overlay module containerd's snapshotter mounts
// with, and the containerd and CNI configuration.
func (r *runner) kubeImage(im *Image, parts *Parts) error {
	for gp, rel := range map[string]string{runcPath: "usr/sbin/runc", cniBin + "/loopback": "usr/lib/cni/loopback"} {
		hp := filepath.Join(parts.Root, rel)
		if _, err := os.Stat(hp); err != nil {
			return fmt.Errorf("%s not in the unpacked packages (%s): %w", rel, strings.Join(KubePackages, " "), err)
		}
		im.Binaries[gp] = hp
	}
	im.Modules = append(im.Modules, "overlay")
	im.Applets = append(im.Applets, "umount")
	im.Data[containerdConfig] = DataFile{0o644, kube.ContainerdConfig("/var/lib/containerd", "/run/containerd", runcPath, cniBin, cniConfDir)}
	im.Data[cniConfDir+"/10-gdrlab.conflist"] = DataFile{0o644, []byte(kube.CNIConfig)}
	im.Data["/etc/resolv.conf"] = DataFile{0o644, []byte("# the lab's VMs have no resolver of their own; pods get the cluster DNS from the kubelet\n")}
	// The pods find their peers (gdrconf-<i>.gdrconf) through the cluster
	// DNS: with "hosts: files" alone, Go's resolver never asks it (seen:
	// "lookup gdrconf-0.gdrconf: no such host" with CoreDNS serving it).
	im.Data["/etc/nsswitch.conf"] = DataFile{0o644, []byte("passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n")}
	return nil
}

// kubeImages writes the container images every node imports: the suite
// (the VM image's userland with make dist's layout at /opt/gdrconf) and
// the pod sandbox (busybox sleeping: the lab's own pause image).
func (r *runner) kubeImages(im *Image, parts *Parts, k *kubeRun) error {
	layer := filepath.Join(r.dir, "gdrconf-layer.tar")
	if err := im.Layer(layer); err != nil {
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
	tw := NewLayerWriter(f)
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

// kubeOverlay writes the lab's kustomization over deploy/k8s into dir:
// the image built here, the lab's GPU count, the cluster lab's settings
// for TCG, and a hostPath volume on the shared folder for the claim.
func (r *runner) kubeOverlay(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	base, err := filepath.Rel(abs, filepath.Join(r.o.RepoDir, "deploy", "k8s"))
	if err != nil {
		return err
	}
	name, tag, _ := strings.Cut(SuiteImage, ":")
	kust := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{base, "reports-pv.yaml"},
		"images":     []map[string]string{{"name": "gdrconf", "newName": name, "newTag": tag}},
		"patches":    []map[string]string{{"path": "job-lab.yaml"}},
	}
	// The cluster lab's environment, less what the manifest sets itself
	// (GDR_REPORTS is the claim's mount there, GDR_PAIRING ring as here).
	env := []map[string]string{{"name": "GDR_STRICT", "value": "0"}}
	at := map[string]int{"GDR_STRICT": 0}
	for _, e := range r.clusterEnv() {
		n, v, _ := strings.Cut(e, "=")
		if n == "GDR_REPORTS" || n == "GDR_PAIRING" {
			continue
		}
		if i, ok := at[n]; ok { // the last wins, as in a process's environment
			env[i]["value"] = v
			continue
		}
		at[n] = len(env)
		env = append(env, map[string]string{"name": n, "value": v})
	}
	if r.o.Cluster.Hosts != 4 { // the manifest's own count
		env = append(env, map[string]string{"name": "GDR_K8S_COMPLETIONS", "value": fmt.Sprint(r.o.Cluster.Hosts)})
	}
	container := map[string]any{"name": k8sJob, "env": env,
		"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": r.o.Cluster.Rails}}}
	if args := r.clusterSuiteArgs(); len(args) > 0 {
		container["args"] = args
	}
	job := map[string]any{
		"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": k8sJob},
		"spec": map[string]any{
			"completions": r.o.Cluster.Hosts, "parallelism": r.o.Cluster.Hosts,
			"template": map[string]any{"spec": map[string]any{"containers": []any{container}}},
		},
	}
	// ReadWriteMany on the VMs' shared folder: every node mounts the same
	// virtio-9p folder at /shared, as NFS would be on a real cluster.
	pv := map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": "gdrconf-reports-lab"},
		"spec": map[string]any{
			"capacity":    map[string]string{"storage": "2Gi"},
			"accessModes": []string{"ReadWriteMany"},
			"hostPath":    map[string]string{"path": clusterRounds, "type": "Directory"},
			"claimRef":    map[string]string{"namespace": "default", "name": "gdrconf-reports"},
		},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for n, doc := range map[string]any{"kustomization.yaml": kust, "job-lab.yaml": job, "reports-pv.yaml": pv} {
		b, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		head := "# make lab-k8s's overlay of deploy/k8s (generated per run by lab/k8s.go)\n"
		if err := os.WriteFile(filepath.Join(dir, n), append([]byte(head), b...), 0o644); err != nil {
			return err
		}
	}
	return nil
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
func (r *runner) kubeDrive(ctx context.Context, k *kubeRun, hosts []string, overlay, endFile string, log io.Writer) *kubeResult {
	res := &kubeResult{Pods: map[string]string{}, Times: map[string]time.Duration{}}
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
	deadline := t0.Add(12 * time.Minute)
	last := ""
	for {
		out, _ := k.run(ctx, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status},gpu={.status.allocatable.nvidia\.com/gpu},rdma={.status.allocatable.rdma/rdma_shared_device_a} {end}`)
		if out != last {
			say("nodes: %s", out)
			last = out
		}
		ready := 0
		for _, f := range strings.Fields(out) {
			if strings.Contains(f, "=True,") && !strings.Contains(f, "gpu=,") && !strings.HasSuffix(f, "rdma=") {
				ready++
			}
		}
		if ready == len(hosts) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fail("k8s: %d of %d nodes Ready with their GPUs and RDMA devices after %v (kubectl get nodes: %s); see the kubelet logs in the shared folder's lab/",
				ready, len(hosts), time.Since(t0).Round(time.Second), strings.TrimSpace(out))
		}
		time.Sleep(3 * time.Second)
	}
	res.Times["nodes"] = time.Since(t0)
	say("all %d nodes Ready in %.0fs", len(hosts), time.Since(t0).Seconds())
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	for _, step := range []struct {
		in   string
		args []string
	}{
		// The command README gives; the secret never touches a file.
		{"", []string{"create", "secret", "generic", "gdrconf-cluster", "--from-literal=secret=" + base64.StdEncoding.EncodeToString(secret)}},
		{"", []string{"apply", "-k", overlay}},
	} {
		out, err := k.run(ctx, step.in, step.args...)
		shown := strings.Join(step.args, " ")
		if strings.Contains(shown, "--from-literal") {
			shown = "create secret generic gdrconf-cluster --from-literal=secret=<32 random bytes, base64>"
		}
		say("kubectl %s\n%s", shown, strings.TrimSpace(out))
		if err != nil {
			return fail("k8s: kubectl %s: %s", shown, oneLine(clip.LastLines(out, 3)))
		}
	}
	t1 := time.Now()
	// The Job ends Complete (every pod's rounds.sh exited 0) or Failed (a
	// pod failed: backoffLimit 0). Its pods are watched as they go.
	jobDeadline := t1.Add(r.o.Cluster.SrunTimeout + 5*time.Minute)
	last = ""
	status := ""
	for {
		out, _ := k.run(ctx, "", "get", "pods", "-l", "batch.kubernetes.io/job-name="+k8sJob, "-o",
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
		st, _ := k.run(ctx, "", "get", "job", k8sJob, "-o", `jsonpath={range .status.conditions[?(@.status=="True")]}{.type} {end}`)
		if conds := strings.Fields(st); slices.Contains(conds, "Complete") || slices.Contains(conds, "Failed") {
			status = strings.Join(conds, " ")
			break
		}
		if time.Now().After(jobDeadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Second)
	}
	res.Times["job"] = time.Since(t1)
	say("job %s: %q after %.0fs", k8sJob, status, time.Since(t1).Seconds())
	for _, a := range [][]string{{"get", "job,pods,service,endpointslices,pv,pvc", "-o", "wide"}, {"get", "events", "--sort-by=.lastTimestamp"}} {
		out, _ := k.run(ctx, "", a...)
		say("kubectl %s\n%s", strings.Join(a, " "), out)
	}
	switch {
	case slices.Contains(strings.Fields(status), "Complete"):
	case status == "":
		return fail("k8s: job %s did not end within %v (pods: %s)", k8sJob, r.o.Cluster.SrunTimeout+5*time.Minute, strings.TrimSpace(last))
	default:
		return fail("k8s: job %s ended %s (pods: %s); the pods' output is in the report folder's pods/", k8sJob, status, strings.TrimSpace(last))
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
func podNodes(s *ClusterSummary, pods map[string]string) []string {
	var problems []string
	for _, h := range s.Hosts {
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
