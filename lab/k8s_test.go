package lab

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/lab/cpio"
	"github.com/gdrconf/gdrconf/lab/kube"
	"github.com/gdrconf/gdrconf/lab/vm"
	"github.com/gdrconf/gdrconf/report"
)

// The container layer holds the VMs' userland and the suite where
// deploy/k8s runs it, never the VM's agent, jobs or daemons' secrets.
func TestLayerPath(t *testing.T) {
	for gp, want := range map[string]string{
		clusterDist + "/rounds.sh":             LayerDist + "/rounds.sh",
		clusterDist + "/bin/gotestsum":         LayerDist + "/bin/gotestsum",
		vm.AMD64.LibDir() + "/libibverbs.so.1": vm.AMD64.LibDir() + "/libibverbs.so.1",
		"/usr/bin/bash":                        "/usr/bin/bash",
		"/etc/libibverbs.d/rxe.driver":         "/etc/libibverbs.d/rxe.driver",
	} {
		got, ok := layerPath(gp)
		assert.True(t, ok, gp)
		assert.Equal(t, want, got, gp)
	}
	for _, gp := range []string{"/init", "/lab", "/lab/job-vm1.json", "/lab/modules/rdma_rxe.ko", "/etc/munge/munge.key",
		"/etc/slurm/slurm.conf", kubeletConf, containerdConfig, corefile, cniConfDir + "/10-gdrlab.conflist"} {
		_, ok := layerPath(gp)
		assert.False(t, ok, gp)
	}
}

// The archive is what ctr images import reads: a tagged docker-save tar
// of a linux/amd64 image whose one layer is ours.
func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	w := cpio.NewLayerWriter(&b)
	require.NoError(t, w.File("/bin/busybox", 0o755, []byte("bb")))
	require.NoError(t, w.Close())
	layer := filepath.Join(dir, "l.tar")
	require.NoError(t, os.WriteFile(layer, b.Bytes(), 0o644))
	out := filepath.Join(dir, "pause.tar")
	require.NoError(t, WriteArchive(ContainerImage{Ref: "localhost/gdrlab/pause:1", Layer: layer, Entrypoint: []string{"/bin/busybox", "sleep", "1"}}, out))
	tag, err := name.NewTag("localhost/gdrlab/pause:1")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &tag)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, "amd64", cf.Architecture)
	assert.Equal(t, []string{"/bin/busybox", "sleep", "1"}, cf.Config.Entrypoint)
	ls, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, ls, 1)
	rc, err := ls[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	h, err := tar.NewReader(rc).Next()
	require.NoError(t, err)
	assert.Equal(t, "bin/", h.Name)

	assert.ErrorContains(t, WriteArchive(ContainerImage{Ref: "Not A Name", Layer: layer}, out), `image name "Not A Name"`)
	assert.ErrorContains(t, WriteArchive(ContainerImage{Ref: "localhost/x:1", Layer: filepath.Join(dir, "none.tar")}, out), "none.tar")
}

// The guestfwd pipe carries one connection both ways and ends when the
// host's side closes after the guest's.
func TestPipeMain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c) // until the pipe's CloseWrite
		_, _ = c.Write(append([]byte("echo:"), b...))
		c.Close()
	}()
	var out bytes.Buffer
	done := make(chan int)
	go func() { done <- PipeMain(l.Addr().String(), strings.NewReader("GET /readyz"), &out) }()
	select {
	case rc := <-done:
		assert.Equal(t, 0, rc)
	case <-time.After(10 * time.Second):
		t.Fatal("the pipe did not end after both sides closed")
	}
	assert.Equal(t, "echo:GET /readyz", out.String())

	free, err := vm.FreePort()
	require.NoError(t, err)
	assert.Equal(t, 1, PipeMain(net.JoinHostPort("127.0.0.1", strconv.Itoa(free)), strings.NewReader(""), io.Discard), "nothing listens: rc 1, no hang")
}

// render builds the kustomization in dir with kustomize's library, as
// kubectl apply -k does, and decodes its Job and claim.
func render(t *testing.T, dir string) (*batchv1.Job, *corev1.PersistentVolumeClaim) {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, dir)
	var job *batchv1.Job
	var pvc *corev1.PersistentVolumeClaim
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		require.NoError(t, err)
		switch res.GetKind() {
		case "Job":
			job = &batchv1.Job{}
			require.NoError(t, yaml.UnmarshalStrict(y, job))
		case "PersistentVolumeClaim":
			pvc = &corev1.PersistentVolumeClaim{}
			require.NoError(t, yaml.UnmarshalStrict(y, pvc))
		}
	}
	require.NotNil(t, job)
	require.NotNil(t, pvc)
	return job, pvc
}

// The lab runs deploy/k8s as shipped: its copy differs only where a user's
// edits go (image, node count, storage class, CPU and memory, GDR_* and the
// emulated GPU's FAKE_CUDA_* in the env, the suite's arguments). Undo those
// on the rendered Job and claim and they are the shipped ones.
func TestLabEditsOnlyWhatUsersEdit(t *testing.T) {
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	r := &runner{o: Options{RepoDir: repo, Timeout: 45 * time.Second, Iters: 20, EmulatedGPU: true, StepTimeout: 10 * time.Minute,
		Cluster: ClusterOptions{Hosts: 3, Rails: 2, Suite: SuitePingpong, SrunTimeout: 25 * time.Minute, Pairing: "ring"}}}
	dir := t.TempDir()
	mdir, err := r.kubeManifests(dir)
	require.NoError(t, err)
	shipped, shippedPVC := render(t, filepath.Join(repo, "deploy", "k8s"))
	lab, labPVC := render(t, mdir)

	c := lab.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "localhost/gdrconf:lab", c.Image)
	assert.Equal(t, int32(3), *lab.Spec.Completions)
	assert.Equal(t, int32(3), *lab.Spec.Parallelism, "the manifest's own replacement follows the edited count")
	assert.Equal(t, "3", env["GDR_K8S_COMPLETIONS"])
	assert.Equal(t, "1", env["GDR_STRICT"], "strict as shipped")
	assert.Equal(t, "2", env["FAKE_CUDA_DEVICES"])
	assert.Equal(t, "0.25", env["GDR_PAIR_MIN_FRACTION"])
	assert.Equal(t, "first", env["GDR_MERGE"], "the shipped merge stays")
	assert.Equal(t, "/reports/$(GDR_K8S_JOB_NAME)-$(GDR_K8S_JOB_UID)", env["GDR_REPORTS"], "the shipped per-run folder stays")
	assert.Equal(t, []string{"-test.timeout=9m45s"}, c.Args)
	q := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
	assert.Equal(t, int64(2), q.Value())
	assert.Equal(t, labStorage, *labPVC.Spec.StorageClassName)

	// Undo the user's edits: what is left must be the shipped Job.
	sc := shipped.Spec.Template.Spec.Containers[0]
	lab.Spec.Completions, lab.Spec.Parallelism = shipped.Spec.Completions, shipped.Spec.Parallelism
	lc := &lab.Spec.Template.Spec.Containers[0]
	lc.Image, lc.Args, lc.Resources = sc.Image, sc.Args, sc.Resources
	var kept []corev1.EnvVar
	shippedEnv := map[string]corev1.EnvVar{}
	for _, e := range sc.Env {
		shippedEnv[e.Name] = e
	}
	for _, e := range lc.Env {
		se, inShipped := shippedEnv[e.Name]
		switch {
		case strings.HasPrefix(e.Name, "FAKE_CUDA_"):
		case e.Name == "GDR_K8S_COMPLETIONS" && inShipped:
			kept = append(kept, se)
		case strings.HasPrefix(e.Name, "GDR_") && !inShipped:
		case strings.HasPrefix(e.Name, "GDR_") && e.ValueFrom == nil && se.ValueFrom == nil:
			kept = append(kept, se) // a user's value of a shipped setting
		default:
			kept = append(kept, e)
		}
	}
	lc.Env = kept
	assert.Equal(t, shipped, lab, "the lab's Job differs from the shipped one beyond a user's edits")
	labPVC.Spec.StorageClassName = shippedPVC.Spec.StorageClassName
	assert.Equal(t, shippedPVC, labPVC)

	var pv corev1.PersistentVolume
	b, err := os.ReadFile(filepath.Join(dir, labPVFile))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, &pv))
	assert.Equal(t, clusterRounds, pv.Spec.HostPath.Path)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, pv.Spec.AccessModes)
	assert.Equal(t, "gdrconf-reports", pv.Spec.ClaimRef.Name)
	assert.Equal(t, k8sNamespace, pv.Spec.ClaimRef.Namespace)
	assert.Equal(t, labStorage, pv.Spec.StorageClassName, "the claim's class binds it")
	assert.Zero(t, pv.Spec.Capacity.Storage().Cmp(*shippedPVC.Spec.Resources.Requests.Storage()), "the volume holds what the claim asks, so it binds")
}

// The Job's own status must be the merged verdict: the merging pod's exit
// status (pod 0's, or where it did not finish the next one's) is the
// merge's, a pod too late for the start exited 4, and the Job is Complete
// exactly when the verdict's status is 0.
func TestJobVerdict(t *testing.T) {
	sum := func(exit int, unfinished ...report.ClusterUnfinished) *ClusterSummary {
		s := &ClusterSummary{Exit: exit, Cluster: &report.ClusterFindings{Unfinished: unfinished}}
		for i := 0; i < 4; i++ {
			s.Hosts = append(s.Hosts, ClusterHost{Host: fmt.Sprintf("gdrconf-%d", i)})
		}
		return s
	}
	ran := map[string]int{"gdrconf-0": 0, "gdrconf-1": 0, "gdrconf-2": 0, "gdrconf-3": 0}
	with := func(m map[string]int, kv ...any) map[string]int {
		out := maps.Clone(m)
		for i := 0; i+1 < len(kv); i += 2 {
			if v, ok := kv[i+1].(int); ok {
				out[kv[i].(string)] = v
			} else {
				delete(out, kv[i].(string))
			}
		}
		return out
	}
	assert.Empty(t, JobVerdict(&kubeResult{Condition: "Failed", Exits: with(ran, "gdrconf-0", 1)}, sum(1), nil), "NOT QUALIFIED: Failed")
	assert.Empty(t, JobVerdict(&kubeResult{Condition: "Complete", Exits: ran}, sum(0), nil))
	p := JobVerdict(&kubeResult{Condition: "Complete", Exits: ran}, sum(1), nil)
	require.Len(t, p, 2, "the old Job: Complete, rounds.sh exited 0, while the fleet was NOT QUALIFIED")
	assert.Contains(t, p[0], "gdrconf-0 (the merge) exited 0, the merged report's exit status is 1")
	assert.Contains(t, p[1], "the Job ended Complete, but the merged verdict's exit status 1 wants it Failed")

	// Pod 0 killed in round 1: its pod was deleted with its node, pod 1
	// merged. Pod 2 came after the start barrier closed and said so.
	stopped := report.ClusterUnfinished{Host: "gdrconf-0", Liveness: "stopped in round 1"}
	late := report.ClusterUnfinished{Host: "gdrconf-2", Liveness: isolate.DidNotStart}
	gone := map[string]string{"gdrconf-0": "stopped in round 1", "gdrconf-2": isolate.DidNotStart}
	exits := with(ran, "gdrconf-0", nil, "gdrconf-1", 1, "gdrconf-2", 4)
	assert.Empty(t, JobVerdict(&kubeResult{Condition: "Failed", Exits: exits}, sum(1, stopped, late), gone))
	assert.Equal(t, []string{"k8s: gdrconf-1 (the merge) exited 0, the merged report's exit status is 1: the Job's status is not the verdict"},
		JobVerdict(&kubeResult{Condition: "Failed", Exits: with(exits, "gdrconf-1", 0)}, sum(1, stopped, late), gone))
	assert.Equal(t, []string{"k8s: gdrconf-2 did not start, and its pod exited 0, want 4 (too late: rounds.sh)"},
		JobVerdict(&kubeResult{Condition: "Failed", Exits: with(exits, "gdrconf-2", 0)}, sum(1, stopped, late), gone))
	assert.Equal(t, []string{"k8s: gdrconf-1, the first pod that ran to the end (the merge), has no exit status (pods: map[gdrconf-2:4 gdrconf-3:0])"},
		JobVerdict(&kubeResult{Condition: "Failed", Exits: with(exits, "gdrconf-1", nil)}, sum(1, stopped, late), gone))

	assert.Equal(t, map[string]int{"gdrconf-0": 1, "gdrconf-2": 4}, podExits("gdrconf-0=1 gdrconf-1= gdrconf-2=4 =3 "))
	assert.Equal(t, map[string]bool{"vm1": true, "vm2": false, "vm3": false, "vm4": false},
		readyNodes("vm1=True,gpu=2,rdma=1 vm2=True,gpu=,rdma=1 vm3=False,gpu=2,rdma=1 vm4=True,gpu=2,rdma= "))

	rounds := t.TempDir()
	_, err := runFolder(rounds)
	assert.ErrorContains(t, err, "found 0")
	require.NoError(t, os.MkdirAll(filepath.Join(rounds, "gdrconf-5f1c0e52"), 0o755))
	got, err := runFolder(rounds)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(rounds, "gdrconf-5f1c0e52"), got)
}

// The merged report names a Kubernetes job's hosts by their pods: the
// planted faults are renamed after the pods that ran on their VMs.
func TestPodDegrade(t *testing.T) {
	d, err := ParseDegrade("vm3:1:delay=250ms vm1:0:delay=250ms,to=vm2", 4, 2)
	require.NoError(t, err)
	pods := map[string]string{"gdrconf-0": "vm4", "gdrconf-1": "vm2", "gdrconf-2": "vm3", "gdrconf-3": "vm1"}
	got, err := podDegrade(d, pods)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "gdrconf-2", got[0].Host)
	assert.Equal(t, 1, got[0].Rail)
	assert.Equal(t, "gdrconf-3", got[1].Host)
	assert.Equal(t, "gdrconf-1", got[1].To)
	assert.Equal(t, "vm3", d[0].Host, "the lab's own list is left as it was")
	delete(pods, "gdrconf-2")
	_, err = podDegrade(d, pods)
	assert.ErrorContains(t, err, "no pod ran on vm3")
	assert.Equal(t, "gdrconf-0 on vm4, gdrconf-1 on vm2, gdrconf-3 on vm1", podList(pods))

	var sum ClusterSummary
	require.NoError(t, json.Unmarshal([]byte(`{"hosts":[{"host":"gdrconf-0","identity":{"node":"vm4"}},{"host":"gdrconf-1","identity":{}}]}`), &sum))
	assert.Equal(t, []string{`k8s: the report names gdrconf-1's node "", and the API placed it on "vm2"`}, podNodes(&sum, pods, nil))

	sum = ClusterSummary{Cluster: &report.ClusterFindings{Suspects: []report.ClusterFinding{
		{Host: "gdrconf-0", Rail: 1, Part: report.PartRail, Verdict: isolate.Bad,
			AtFault: &report.Part{Kind: "nic", Name: "gdrconf-0 (node vm4) rail 1 (rxe1)"}},
		{Host: "gdrconf-3", Peer: "gdrconf-1", Rail: 0, Part: report.PartLink, Verdict: isolate.Bad,
			AtFault: &report.Part{Kind: "network path", Name: "the path between gdrconf-3 (node vm1) and gdrconf-1 on rail 0"}},
	}}}
	assert.Equal(t, []string{`k8s: link gdrconf-3 <-> gdrconf-1 rail 0's part at fault "the path between gdrconf-3 (node vm1) and gdrconf-1 on rail 0" does not name gdrconf-1's node (node vm2)`},
		podNodes(&sum, pods, nil))
}

// A node's plan: no batch job or probes, a fourth NIC for the API server, the node's own
// kubeconfig and kubelet configuration, CoreDNS on vm1 only.
func TestKubePlan(t *testing.T) {
	r := &runner{o: Options{Timeout: 45 * time.Second, Iters: 20, EmulatedGPU: true, StepTimeout: 10 * time.Minute,
		Cluster: ClusterOptions{Hosts: 4, Rails: 2, Suite: SuitePingpong, SrunTimeout: 25 * time.Minute, Pairing: "ring"}}}
	cp, err := kube.NewControlPlane("", t.TempDir(), ClusterHosts(4))
	require.NoError(t, err)
	plan := r.clusterPlan(nil)
	require.NoError(t, r.kubePlan(plan, &kubeRun{cp: cp}))
	for i, j := range plan {
		c := j.Cluster
		assert.Nil(t, c.Sbatch, j.Role)
		assert.Empty(t, c.Probes, j.Role)
		assert.Equal(t, 2, j.GPUs, "%s: a device file for each GPU the device plugin offers", j.Role)
		require.NotNil(t, c.Kube, j.Role)
		require.Len(t, c.NICs, 4)
		assert.Equal(t, GuestNIC{MAC: clusterMAC(3, i+1), Addr: apiNodeIP, Rail: -1}, c.NICs[3])
		assert.Equal(t, j.Addr, c.Kube.NodeIP)
		assert.Equal(t, 2, c.Kube.GPUs)
		assert.Contains(t, c.Kube.Files[kubeletConf], "server: "+kube.GuestServer())
		assert.Contains(t, c.Kube.Files[kubeletConf], cp.PKI.Tokens[kube.NodeClient(j.Role)].Token, "the node's own token")
		assert.Contains(t, c.Kube.Files[kubeletConfig], "address: "+j.Addr)
		assert.Contains(t, c.Kube.Files[kubeletConfig], "- 198.18.0.1", "vm1 serves the cluster DNS")
		assert.Len(t, c.Kube.Files["/etc/machine-id"], 33)
		assert.Equal(t, i == 0, c.Kube.DNS, j.Role)
		_, core := c.Kube.Files[corefile]
		assert.Equal(t, i == 0, core, j.Role)
	}
	assert.NotEqual(t, plan[0].Cluster.Kube.Files["/etc/machine-id"], plan[1].Cluster.Kube.Files["/etc/machine-id"])
	assert.Contains(t, plan[0].Cluster.Kube.Files[corefile], "bind 198.18.0.1")
}

// make lab-k8s runs the mode, and .ci/run runs make lab-k8s.
func TestMakeLabK8s(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	assert.Contains(t, string(mk), "lab-k8s: deps-unit $(LAB_BIN)\n\ttools=\"$$(GO=$(GO) $(LAB_BIN) k8s-tools)\" && GDR_LAB_K8S_TOOLS=\"$$tools\" $(GO) test -count=1 -run TestControlPlaneRuns -v ./lab/kube/\n\tGO=$(GO) $(LAB_BIN) -mode k8s")
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	assert.Contains(t, string(ci), "make lab-k8s")
}

// CI plants each kind of fault once: the rail and the path under Slurm
// (make lab-cluster, DefaultDegrade), the host under Kubernetes (make
// lab-k8s), so that make lab-cluster-host, about 12 more minutes of four VMs,
// stays out of it.
func TestCIPlantsEveryFaultKind(t *testing.T) {
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	for _, mk := range []string{"\nmake lab-cluster\n", "\nmake lab-k8s\n"} {
		assert.Contains(t, string(ci), mk)
	}
	assert.NotContains(t, string(ci), "\nmake lab-cluster-host", "the host fault is lab-k8s's")
	kinds := map[string]string{}
	for lab, spec := range map[string]string{"lab-cluster": DefaultDegrade, "lab-k8s": K8sDegrade} {
		ds, err := ParseDegrade(spec, 4, 2)
		require.NoError(t, err, spec)
		for _, d := range ds {
			kinds[d.Kind()] = lab
		}
	}
	assert.Equal(t, map[string]string{report.PartRail: "lab-cluster", report.PartLink: "lab-cluster", report.PartHost: "lab-k8s"}, kinds)
}

// The node's daemons go to a group of their own with a low CPU weight, and
// the log reads what each group used (cpu.stat's usage_usec).
func TestSystemGroup(t *testing.T) {
	root := t.TempDir()
	var out strings.Builder
	require.NoError(t, joinSystemGroup(&out, root))
	weight, err := os.ReadFile(filepath.Join(root, systemGroup, "cpu.weight"))
	require.NoError(t, err)
	assert.Equal(t, systemWeight, string(weight))
	procs, err := os.ReadFile(filepath.Join(root, systemGroup, "cgroup.procs"))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid()), string(procs))
	assert.Contains(t, out.String(), "cpu.weight 10")

	require.NoError(t, os.WriteFile(filepath.Join(root, systemGroup, "cpu.stat"), []byte("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n"), 0o644))
	assert.Regexp(t, `^system 1500 us, kubepods unknown \(open .*kubepods/cpu.stat: no such file or directory\)$`, cpuByGroup(root))

	require.NoError(t, os.Remove(filepath.Join(root, systemGroup, "cgroup.procs")))
	require.NoError(t, os.Mkdir(filepath.Join(root, systemGroup, "cgroup.procs"), 0o755))
	assert.ErrorContains(t, joinSystemGroup(&out, root), "moving the agent (pid ")
}

// Under GDR_STRICT=1 only the absences the lab's VMs have for their own
// reasons may fail, and a host failing only those is no planted fault.
func TestStrictAbsences(t *testing.T) {
	host := func(name string, failed ...[2]string) ClusterHost {
		h := ClusterHost{Host: name, Verdict: "NOT QUALIFIED (2 must requirements failed)"}
		h.Identity.Strict = true
		for _, f := range failed {
			h.Requirements = append(h.Requirements, struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Reason string `json:"reason"`
			}{f[0], "fail", f[1]})
		}
		return h
	}
	ok := host("gdrconf-0", [2]string{"TOPO-01", "GDR_STRICT=1: no NVIDIA GPU: ..."}, [2]string{"GPU-07", "GDR_STRICT=1: libnvidia-ml.so.1 does not load"})
	assert.True(t, ok.onlyLabAbsences())
	assert.Empty(t, StrictAbsences(&ClusterSummary{Hosts: []ClusterHost{ok}}, nil))

	image := host("gdrconf-1", [2]string{"TOPO-01", "GDR_STRICT=1: no NVIDIA GPU"}, [2]string{"INST-07", "GDR_STRICT=1: librdmacm.so.1 does not load"})
	assert.False(t, image.onlyLabAbsences())
	p := StrictAbsences(&ClusterSummary{Hosts: []ClusterHost{ok, image}}, nil)
	require.Len(t, p, 1)
	assert.Contains(t, p[0], "gdrconf-1: INST-07 is absent for a reason the lab's VMs do not explain")

	real := host("gdrconf-2", [2]string{"TOPO-01", "GDR_STRICT=1: no NVIDIA GPU"}, [2]string{"PP-08", "RDMA WRITE reaches 0.01 Gbit/s"})
	assert.False(t, real.onlyLabAbsences(), "a failure that is no absence is a finding")
	assert.Contains(t, StrictAbsences(&ClusterSummary{Hosts: []ClusterHost{{Host: "x", Verdict: "INCOMPLETE"}}}, nil)[0], "x did not run with GDR_STRICT=1")
	assert.Empty(t, StrictAbsences(&ClusterSummary{Hosts: []ClusterHost{host("pingpong-only")}}, nil), "strict, nothing absent: pingpong alone")
}
