package jobenv

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/yaml"
)

// The manifests under deploy/k8s are decoded strictly with the Kubernetes
// API types, so a misspelt or misplaced field fails here, not on a cluster;
// and they are checked against what FromKubernetes reads.

const manifests = "../../deploy/k8s"

// kustomization is the part of kustomize's Kustomization the manifests use;
// an unknown key is an error (strict), as for the API objects.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources,omitempty"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path   string `json:"path"`
		Target struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches,omitempty"`
}

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

// docs splits a YAML stream into its documents.
func docs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

// load decodes every manifest file under deploy/k8s.
func load(t *testing.T) (objs map[string]runtime.Object, kusts map[string]kustomization) {
	t.Helper()
	dec := strictDecoder()
	objs, kusts = map[string]runtime.Object{}, map[string]kustomization{}
	err := filepath.WalkDir(manifests, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			t.Errorf("%s: only YAML manifests belong in deploy/k8s", path)
			return nil
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		rel, _ := filepath.Rel(manifests, path)
		if filepath.Base(path) == "kustomization.yaml" {
			var k kustomization
			require.NoError(t, yaml.UnmarshalStrict(b, &k), rel)
			kusts[rel] = k
			return nil
		}
		ds := docs(b)
		require.Len(t, ds, 1, "%s: one object per file", rel)
		obj, gvk, err := dec.Decode(ds[0], nil, nil)
		require.NoError(t, err, rel)
		require.NotNil(t, gvk, rel)
		objs[rel] = obj
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs, kusts
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs, kusts := load(t)
	require.Contains(t, kusts, "kustomization.yaml")
	for rel, k := range kusts {
		assert.Equal(t, "kustomize.config.k8s.io/v1beta1", k.APIVersion, rel)
		assert.Equal(t, "Kustomization", k.Kind, rel)
		dir := filepath.Join(manifests, filepath.Dir(rel))
		for _, r := range k.Resources {
			_, err := os.Stat(filepath.Join(dir, r))
			assert.NoError(t, err, "%s: resource %s", rel, r)
		}
		for _, p := range k.Patches {
			prel, _ := filepath.Rel(manifests, filepath.Join(dir, p.Path))
			obj, ok := objs[prel]
			require.True(t, ok, "%s: patch %s", rel, p.Path)
			j, ok := obj.(*batchv1.Job)
			require.True(t, ok && p.Target.Kind == "Job", "%s: patch %s targets a Job", rel, p.Path)
			assert.Equal(t, p.Target.Name, j.Name)
		}
	}
	// Every file is listed by some kustomization (nothing stale).
	listed := map[string]bool{}
	for rel, k := range kusts {
		for _, r := range append(k.Resources, func() (ps []string) {
			for _, p := range k.Patches {
				ps = append(ps, p.Path)
			}
			return
		}()...) {
			l, _ := filepath.Rel(manifests, filepath.Join(manifests, filepath.Dir(rel), r))
			listed[l] = true
		}
	}
	for rel := range objs {
		assert.True(t, listed[rel], "%s is in no kustomization", rel)
	}
}

// A typo, a misplaced field or a duplicate fails the strict decoder.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	dec := strictDecoder()
	for name, doc := range map[string]string{
		"typo":      "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  completionMod: Indexed\n",
		"misplaced": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      subdomain: x\n      hostname: y\n      containers: [{name: c, image: i, capabilities: {add: [IPC_LOCK]}}]\n",
		"duplicate": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIP: None\n  clusterIP: None\n",
		"kind":      "apiVersion: batch/v1\nkind: Jobb\nmetadata: {name: x}\n",
	} {
		_, _, err := dec.Decode([]byte(doc), nil, nil)
		assert.Error(t, err, name)
	}
	var k kustomization
	assert.Error(t, yaml.UnmarshalStrict([]byte("apiVersion: v1\nkind: Kustomization\nresource: [a.yaml]\n"), &k))
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// The Job, the Service and FromKubernetes agree.
func TestManifestsMatchFromKubernetes(t *testing.T) {
	objs, _ := load(t)
	job := objs["job.yaml"].(*batchv1.Job)
	svc := objs["service.yaml"].(*corev1.Service)
	pvc := objs["reports-pvc.yaml"].(*corev1.PersistentVolumeClaim)
	spec := job.Spec
	pod := spec.Template.Spec

	require.NotNil(t, spec.CompletionMode)
	assert.Equal(t, batchv1.IndexedCompletion, *spec.CompletionMode)
	require.NotNil(t, spec.Completions)
	require.NotNil(t, spec.Parallelism)
	n := int(*spec.Completions)
	assert.Equal(t, n, int(*spec.Parallelism), "every pod runs at once: pods pair with each other")
	assert.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)

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

	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	env := envOf(c)
	assert.Equal(t, strconv.Itoa(n), env[EnvCompletions].Value, "GDR_K8S_COMPLETIONS equals spec.completions")
	assert.Equal(t, svc.Name, env[EnvService].Value)
	for name, path := range map[string]string{
		EnvJobName:   "metadata.labels['batch.kubernetes.io/job-name']",
		EnvJobUID:    "metadata.labels['batch.kubernetes.io/controller-uid']",
		EnvNamespace: "metadata.namespace",
	} {
		require.NotNil(t, env[name].ValueFrom, name)
		require.NotNil(t, env[name].ValueFrom.FieldRef, name)
		assert.Equal(t, path, env[name].ValueFrom.FieldRef.FieldPath, name)
	}

	gpu := c.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]
	assert.Equal(t, int64(8), gpu.Value(), "every GPU of an 8-GPU node")
	var rdma []string
	for r := range c.Resources.Limits {
		if strings.HasPrefix(string(r), "rdma/") || strings.HasPrefix(string(r), "nvidia.com/") && r != "nvidia.com/gpu" {
			rdma = append(rdma, string(r))
		}
	}
	assert.NotEmpty(t, rdma, "an RDMA resource from the network operator")
	require.NotNil(t, c.SecurityContext)
	require.NotNil(t, c.SecurityContext.Capabilities)
	assert.Contains(t, c.SecurityContext.Capabilities.Add, corev1.Capability("IPC_LOCK"))

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
	assert.Equal(t, env["GDR_REPORTS"].Value, reportsMount.MountPath, "GDR_REPORTS is the shared volume")
	assert.Contains(t, pvc.Spec.AccessModes, corev1.ReadWriteMany, "every pod writes the reports volume")
	secretFile := env["GDR_CLUSTER_SECRET_FILE"].Value
	var inSecret bool
	for name, v := range vols {
		if v.Secret != nil && strings.HasPrefix(secretFile, mounts[name].MountPath+"/") {
			inSecret = true
		}
	}
	assert.True(t, inSecret, "GDR_CLUSTER_SECRET_FILE=%s lies in a Secret volume", secretFile)
	assert.NotContains(t, env, "GDR_CLUSTER_SECRET", "the secret is never a literal in a manifest")
	assert.Equal(t, mounts["host"].MountPath, env["GDR_HOST_ROOT"].Value)
	assert.True(t, mounts["host"].ReadOnly)

	// Every pod of the Job derives its task from what the manifest gives it.
	for i := range n {
		lookup := func(k string) (string, bool) {
			switch k {
			case EnvIndex:
				return strconv.Itoa(i), true
			case EnvJobName:
				return job.Name, true
			case EnvJobUID:
				return "5f1c0e52-7a3b-4c8e-9d21-0a6b3c4d5e6f", true
			case EnvNamespace:
				return "qualification", true
			}
			e, ok := env[k]
			return e.Value, ok
		}
		task, err := FromKubernetes(lookup)
		require.NoError(t, err)
		assert.Equal(t, i, task.Index)
		assert.Equal(t, job.Name+"-"+strconv.Itoa(i)+"."+svc.Name, task.Addrs[i])
	}
}

func TestPodNetworkOverlay(t *testing.T) {
	objs, _ := load(t)
	patch := objs[filepath.Join("overlays", "pod-network", "patch.yaml")].(*batchv1.Job)
	assert.False(t, patch.Spec.Template.Spec.HostNetwork)
	assert.Equal(t, corev1.DNSClusterFirst, patch.Spec.Template.Spec.DNSPolicy)
	nets := patch.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"]
	assert.Len(t, strings.Split(nets, ","), 8, "one attachment per rail")
	b, err := os.ReadFile(filepath.Join(manifests, "overlays", "pod-network", "patch.yaml"))
	require.NoError(t, err)
	assert.True(t, bytes.Contains(b, []byte("hostNetwork: false")), "the patch must say false, not leave it out")
}
