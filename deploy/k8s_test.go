package deploy

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// The kustomizations under deploy/ are rendered with kustomize's own
// library, as kubectl apply -k does, and every object it emits is decoded
// strictly with the Kubernetes API types: a misspelt or misplaced field, a
// kustomization that does not build (an overlay inside its base is a
// cycle), or a replacement that writes the wrong type fails here, not on a
// cluster.

// kustomizations are the ones a user applies.
var kustomizations = []string{"k8s", "k8s-pod-network"}

func strictDecoder() runtime.Decoder {
	s := runtime.NewScheme()
	if err := batchv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

// rendered is one kustomization's output, decoded.
type rendered struct {
	ns  *corev1.Namespace
	svc *corev1.Service
	pvc *corev1.PersistentVolumeClaim
	job *batchv1.Job
}

// render builds the kustomization at dir of fs and decodes every object.
func render(t *testing.T, fs filesys.FileSystem, dir string) rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	require.NoError(t, err, "kustomize build %s", dir)
	dec := strictDecoder()
	var r rendered
	for _, res := range m.Resources() {
		y, err := res.AsYAML()
		require.NoError(t, err)
		obj, _, err := dec.Decode(y, nil, nil)
		require.NoError(t, err, "%s: %s/%s", dir, res.GetKind(), res.GetName())
		switch o := obj.(type) {
		case *corev1.Namespace:
			r.ns = o
		case *corev1.Service:
			r.svc = o
		case *corev1.PersistentVolumeClaim:
			r.pvc = o
		case *batchv1.Job:
			r.job = o
		default:
			t.Errorf("%s: unexpected %T", dir, obj)
		}
	}
	require.NotNil(t, r.job, dir)
	require.NotNil(t, r.svc, dir)
	require.NotNil(t, r.pvc, dir)
	require.NotNil(t, r.ns, dir)
	return r
}

func container(t *testing.T, j *batchv1.Job) corev1.Container {
	t.Helper()
	require.Len(t, j.Spec.Template.Spec.Containers, 1)
	return j.Spec.Template.Spec.Containers[0]
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestKustomizationsRender(t *testing.T) {
	for _, k := range kustomizations {
		render(t, filesys.MakeFsOnDisk(), k)
	}
	// Every file under the kustomizations is used by one (nothing stale).
	used := map[string]bool{}
	for _, k := range kustomizations {
		b, err := os.ReadFile(filepath.Join(k, "kustomization.yaml"))
		require.NoError(t, err)
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
			l = strings.TrimPrefix(l, "path: ")
			if strings.HasSuffix(l, ".yaml") {
				used[filepath.Join(k, l)] = true
			}
		}
		used[filepath.Join(k, "kustomization.yaml")] = true
	}
	for _, k := range kustomizations {
		files, err := filepath.Glob(filepath.Join(k, "*"))
		require.NoError(t, err)
		for _, f := range files {
			assert.True(t, used[f], "%s is in no kustomization", f)
		}
	}
}

// A typo, a misplaced field or a duplicate fails the strict decoder.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	dec := strictDecoder()
	for name, doc := range map[string]string{
		"typo":      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  completionMod: Indexed\n",
		"misplaced": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      subdomain: x\n      containers: [{name: c, image: i, capabilities: {add: [IPC_LOCK]}}]\n",
		"duplicate": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIP: None\n  clusterIP: None\n",
		"kind":      "apiVersion: batch/v1\nkind: Jobb\nmetadata: {name: x}\n",
	} {
		_, _, err := dec.Decode([]byte(doc), nil, nil)
		assert.Error(t, err, name)
	}
}

// The Job, the Service and jobenv.FromKubernetes agree, and the Job has
// what a real cluster needs: the verdict as its status, one node's fault
// not ending the others, a deadline, Guaranteed QoS, a namespace at the
// Pod Security level it needs, a claim that is ReadWriteMany.
func TestJobAsShipped(t *testing.T) {
	r := render(t, filesys.MakeFsOnDisk(), "k8s")
	job, svc, pvc, ns := r.job, r.svc, r.pvc, r.ns
	spec := job.Spec
	pod := spec.Template.Spec

	assert.Equal(t, "privileged", ns.Labels["pod-security.kubernetes.io/enforce"],
		"hostNetwork, hostPath and added capabilities each break baseline")
	for _, o := range []string{job.Namespace, svc.Namespace, pvc.Namespace} {
		assert.Equal(t, ns.Name, o, "every object in the namespace")
	}

	require.NotNil(t, spec.CompletionMode)
	assert.Equal(t, batchv1.IndexedCompletion, *spec.CompletionMode)
	require.NotNil(t, spec.Completions)
	require.NotNil(t, spec.Parallelism)
	n := int(*spec.Completions)
	assert.Equal(t, n, int(*spec.Parallelism), "every pod runs at once: pods pair with each other")
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.NotNil(t, spec.BackoffLimitPerIndex, "a failed index must not end the other pods (backoffLimit would)")
	assert.Equal(t, int32(0), *spec.BackoffLimitPerIndex, "no index is retried: it would re-run rounds its peers left")
	require.NotNil(t, spec.PodFailurePolicy)
	var disruption, exit bool
	for _, rule := range spec.PodFailurePolicy.Rules {
		assert.Equal(t, batchv1.PodFailurePolicyActionFailIndex, rule.Action)
		for _, c := range rule.OnPodConditions {
			disruption = disruption || c.Type == corev1.DisruptionTarget
		}
		exit = exit || rule.OnExitCodes != nil && rule.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn
	}
	assert.True(t, disruption && exit, "a drained node and a non-zero exit each fail their index")

	// The deadline covers the start barrier, every round of the pairing at
	// this count and at an odd one, each waited out to GDR_ROUND_TIMEOUT,
	// plus the merge.
	require.NotNil(t, spec.ActiveDeadlineSeconds)
	def := cluster.DefaultConfig()
	for _, hosts := range []int{n, 5, 1023} {
		rounds := len(pairing.Base(pairing.Ring, hosts)) + def.RepairRounds
		need := def.StartTimeout + time.Duration(rounds)*def.RoundTimeout + 30*time.Minute
		assert.GreaterOrEqual(t, time.Duration(*spec.ActiveDeadlineSeconds)*time.Second, need,
			"%d hosts: the start of up to %v, %d rounds of up to %v and the merge", hosts, def.StartTimeout, rounds, def.RoundTimeout)
	}

	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless")
	assert.True(t, svc.Spec.PublishNotReadyAddresses)
	assert.Equal(t, svc.Name, pod.Subdomain, "pod host names live under the Service")
	assert.Equal(t, job.Name, svc.Spec.Selector["batch.kubernetes.io/job-name"])
	if pod.HostNetwork {
		assert.Equal(t, corev1.DNSClusterFirstWithHostNet, pod.DNSPolicy, "host network pods still resolve peers through cluster DNS")
	}
	require.NotNil(t, pod.Affinity)
	require.NotNil(t, pod.Affinity.PodAntiAffinity)
	anti := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, anti, 1)
	assert.Equal(t, "kubernetes.io/hostname", anti[0].TopologyKey, "one pod per node")
	assert.NotEmpty(t, pod.NodeSelector, "a placeholder for the GPU nodes")
	assert.NotEmpty(t, pod.Tolerations, "a placeholder for the GPU nodes' taint")

	c := container(t, job)
	env := envOf(c)
	assert.Equal(t, strconv.Itoa(n), env[jobenv.EnvCompletions].Value, "GDR_K8S_COMPLETIONS equals spec.completions")
	assert.Equal(t, svc.Name, env[jobenv.EnvService].Value)
	assert.Equal(t, "first", env["GDR_MERGE"].Value, "pod 0 merges and exits with the verdict")
	assert.Equal(t, "1", env["GDR_STRICT"].Value)
	for name, path := range map[string]string{
		jobenv.EnvJobName:   "metadata.labels['batch.kubernetes.io/job-name']",
		jobenv.EnvJobUID:    "metadata.labels['batch.kubernetes.io/controller-uid']",
		jobenv.EnvNamespace: "metadata.namespace",
	} {
		require.NotNil(t, env[name].ValueFrom, name)
		require.NotNil(t, env[name].ValueFrom.FieldRef, name)
		assert.Equal(t, path, env[name].ValueFrom.FieldRef.FieldPath, name)
	}

	// Guaranteed QoS: requests equal limits for CPU and memory.
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
		assert.False(t, lim.IsZero(), "a %s limit", res)
		assert.Zero(t, req.Cmp(lim), "%s request %s equals its limit %s", res, req.String(), lim.String())
	}
	gpu := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
	assert.Equal(t, int64(8), gpu.Value(), "every GPU of an 8-GPU node")
	assert.Contains(t, c.Resources.Limits, corev1.ResourceName("rdma/rdma_shared_device_a"), "an RDMA resource from the network operator")
	require.NotNil(t, c.SecurityContext)
	require.NotNil(t, c.SecurityContext.Capabilities)
	// What the judged requirements need (reqs.ContainerRule.Needs), and no
	// more: not privileged.
	assert.ElementsMatch(t, []corev1.Capability{"IPC_LOCK", "SYS_ADMIN", "NET_ADMIN"}, c.SecurityContext.Capabilities.Add)
	assert.True(t, c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged, "not privileged")

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for name := range mounts {
		assert.Contains(t, vols, name, "mount %s has a volume", name)
	}
	var reportsMount corev1.VolumeMount
	for name, v := range vols {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			reportsMount = mounts[name]
		}
	}
	reports := env["GDR_REPORTS"].Value
	assert.True(t, strings.HasPrefix(reports, reportsMount.MountPath+"/"), "GDR_REPORTS=%s is on the shared volume", reports)
	assert.Contains(t, reports, "$("+jobenv.EnvJobUID+")", "a folder per run: a rerun on the claim never mixes with the last")
	assert.Contains(t, pvc.Spec.AccessModes, corev1.ReadWriteMany, "every pod writes the reports volume")
	require.NotNil(t, pvc.Spec.StorageClassName, "without one the claim binds the default class, rarely ReadWriteMany")
	assert.NotEmpty(t, *pvc.Spec.StorageClassName)
	secretFile := env["GDR_CLUSTER_SECRET_FILE"].Value
	var inSecret bool
	for name, v := range vols {
		if v.Secret != nil && strings.HasPrefix(secretFile, mounts[name].MountPath+"/") {
			inSecret = true
		}
	}
	assert.True(t, inSecret, "GDR_CLUSTER_SECRET_FILE=%s lies in a Secret volume", secretFile)
	assert.NotContains(t, env, "GDR_CLUSTER_SECRET", "the secret is never a literal in a manifest")
	// The node's directories the suite reads (reqs.NodePaths), each at its
	// own place under GDR_HOST_ROOT, read-only down to every submount; no
	// other hostPath (the node's / would bring its runtime's socket).
	root := env["GDR_HOST_ROOT"].Value
	var hostPaths []string
	for name, v := range vols {
		if v.HostPath == nil {
			continue
		}
		hostPaths = append(hostPaths, v.HostPath.Path)
		m, ok := mounts[name]
		if !assert.True(t, ok, "hostPath %s is mounted", v.HostPath.Path) {
			continue
		}
		assert.Equal(t, path.Join(root, v.HostPath.Path), m.MountPath, "the node's %s under GDR_HOST_ROOT", v.HostPath.Path)
		assert.True(t, m.ReadOnly, "%s read-only", m.MountPath)
		if assert.NotNil(t, m.RecursiveReadOnly, "%s: readOnly alone leaves its submounts writable", m.MountPath) {
			assert.Equal(t, corev1.RecursiveReadOnlyEnabled, *m.RecursiveReadOnly, m.MountPath)
		}
		require.NotNil(t, v.HostPath.Type)
		assert.Equal(t, corev1.HostPathDirectory, *v.HostPath.Type, "%s: containerd creates a missing source; Directory refuses it", v.HostPath.Path)
	}
	assert.ElementsMatch(t, reqs.NodePaths, hostPaths)
	sc := c.SecurityContext
	require.NotNil(t, sc.RunAsUser)
	assert.Zero(t, *sc.RunAsUser, "added capabilities reach only a root process (no ambient set)")

	// Every pod of the Job derives its task from what the manifest gives it.
	for i := range n {
		lookup := func(k string) (string, bool) {
			switch k {
			case jobenv.EnvIndex:
				return strconv.Itoa(i), true
			case jobenv.EnvJobName:
				return job.Name, true
			case jobenv.EnvJobUID:
				return "5f1c0e52-7a3b-4c8e-9d21-0a6b3c4d5e6f", true
			case jobenv.EnvNamespace:
				return ns.Name, true
			}
			e, ok := env[k]
			return e.Value, ok
		}
		task, err := jobenv.FromKubernetes(lookup)
		require.NoError(t, err)
		assert.Equal(t, i, task.Index)
		assert.Equal(t, job.Name+"-"+strconv.Itoa(i)+"."+svc.Name, task.Addrs[i])
	}
}

// The node count is set in one place, spec.completions: the user's edit of
// it reaches parallelism and GDR_K8S_COMPLETIONS (a string there).
func TestNodeCountInOnePlace(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	files, err := filepath.Glob("k8s/*")
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if filepath.Base(f) == "job.yaml" {
			require.Contains(t, string(b), "\n  completions: 4\n")
			b = []byte(strings.Replace(string(b), "\n  completions: 4\n", "\n  completions: 16\n", 1))
		}
		require.NoError(t, fs.WriteFile("/"+f, b))
	}
	r := render(t, fs, "/k8s")
	assert.Equal(t, int32(16), *r.job.Spec.Parallelism)
	assert.Equal(t, "16", envOf(container(t, r.job))[jobenv.EnvCompletions].Value)
}

// The Multus variant builds (a sibling of the base: inside it, kustomize
// refuses the cycle), takes one SR-IOV VF per rail instead of the shared
// RDMA device, and reads the node through the pod's own /sys so that a
// VF's RDMA device and GIDs are those of the pod's network namespace.
func TestPodNetworkOverlay(t *testing.T) {
	r := render(t, filesys.MakeFsOnDisk(), "k8s-pod-network")
	pod := r.job.Spec.Template.Spec
	assert.False(t, pod.HostNetwork)
	assert.Equal(t, corev1.DNSClusterFirst, pod.DNSPolicy)
	nets := r.job.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"]
	assert.Len(t, strings.Split(nets, ","), 8, "one attachment per rail")
	c := container(t, r.job)
	assert.Equal(t, "/", envOf(c)["GDR_HOST_ROOT"].Value)
	for _, m := range c.VolumeMounts {
		assert.NotContains(t, m.MountPath, "/host", "none of the node's directories in the pod-network variant")
	}
	for _, v := range pod.Volumes {
		assert.Nil(t, v.HostPath, "volume %s: no hostPath in the pod-network variant", v.Name)
	}
	assert.NotContains(t, c.Resources.Limits, corev1.ResourceName("rdma/rdma_shared_device_a"))
	one := resource.MustParse("1")
	for i := range 8 {
		q := c.Resources.Limits[corev1.ResourceName("nvidia.com/sriov_rail"+strconv.Itoa(i))]
		assert.Zero(t, q.Cmp(one), "a VF for rail %d", i)
	}
	// The base's settings stay: the verdict, the deadline, the QoS.
	assert.Equal(t, "first", envOf(c)["GDR_MERGE"].Value)
	assert.NotNil(t, r.job.Spec.ActiveDeadlineSeconds)
}
