package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ToolsEnv names a folder of built tools (BuildTools' k8s-<key>) for the
// test that starts the control plane for real; make lab-k8s sets it.
const ToolsEnv = "GDR_LAB_K8S_TOOLS"

// The control plane starts on the host and does its three jobs: the API
// server serves, the controller manager makes a namespace's default
// service account, the scheduler binds a pod to the one node that fits.
func TestControlPlaneRuns(t *testing.T) {
	tools := os.Getenv(ToolsEnv)
	if tools == "" {
		t.Skipf("%s is not set: no built Kubernetes tools to start (make lab-k8s builds them into .cache/lab/k8s-<key> and runs this)", ToolsEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := NewControlPlane(tools, dir, []string{"vm1"})
	require.NoError(t, err)
	defer c.Stop()
	require.NoError(t, c.Start(ctx, 2*time.Minute, t.Logf))
	admin, err := c.Kubeconfig(ClientAdmin, c.Server())
	require.NoError(t, err)
	kubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(tools, "kubectl"), append([]string{"--kubeconfig", admin}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out, err := kubectl("", "version", "-o", "yaml")
	require.NoError(t, err, out)
	require.Contains(t, out, "gitVersion: "+Version)
	out, err = kubectl("", "create", "namespace", "probe")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := kubectl("", "-n", "probe", "get", "serviceaccount", "default")
		return err == nil
	}, time.Minute, time.Second, "the controller manager makes the default service account")
	node := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"vm1","labels":{"kubernetes.io/hostname":"vm1"}}}`
	out, err = kubectl(node, "create", "-f", "-")
	require.NoError(t, err, out)
	patch := `{"status":{"capacity":{"cpu":"2","memory":"1Gi","pods":"10"},"allocatable":{"cpu":"2","memory":"1Gi","pods":"10"},"conditions":[{"type":"Ready","status":"True","reason":"probe","message":"probe"}]}}`
	out, err = kubectl("", "patch", "node", "vm1", "--subresource=status", "--type=merge", "-p", patch)
	require.NoError(t, err, out)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"probe"},"spec":{"tolerations":[{"operator":"Exists"}],"containers":[{"name":"c","image":"x"}]}}`
	out, err = kubectl(pod, "create", "-f", "-")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		out, _ := kubectl("", "-n", "probe", "get", "pod", "p", "-o", "jsonpath={.spec.nodeName}")
		return out == "vm1"
	}, time.Minute, time.Second, "the scheduler binds the pod to vm1")
	require.Empty(t, c.Exited())
}
