package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Version is the Kubernetes release build/k8s builds (its go.mod requires
// k8s.io/kubernetes at this version; TestToolsPinned keeps them equal).
const Version = "v1.37.2"

// Tool is one binary the lab builds from a module of the repository.
type Tool struct {
	Name   string // file name in the tools folder
	Module string // folder of the module, relative to the repository
	Pkg    string // main package
}

// Tools are the control plane, the node's kubelet and runtime, kubectl and
// CoreDNS. Debian 12 has none of them at a release Kubernetes 1.37
// supports (its etcd is 3.4, its containerd 1.6); runc and the CNI plugins
// come from Debian.
var Tools = []Tool{
	{"etcd", "build/k8s", "go.etcd.io/etcd/server/v3"},
	{"kube-apiserver", "build/k8s", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"kube-controller-manager", "build/k8s", "k8s.io/kubernetes/cmd/kube-controller-manager"},
	{"kube-scheduler", "build/k8s", "k8s.io/kubernetes/cmd/kube-scheduler"},
	{"kubelet", "build/k8s", "k8s.io/kubernetes/cmd/kubelet"},
	{"kubectl", "build/k8s", "k8s.io/kubernetes/cmd/kubectl"},
	{"coredns", "build/k8s", "./coredns"},
	{"gdrlab-deviceplugin", "build/k8s", "./deviceplugin"},
	{"containerd", "build/containerd", "github.com/containerd/containerd/v2/cmd/containerd"},
	{"containerd-shim-runc-v2", "build/containerd", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"},
	{"ctr", "build/containerd", "github.com/containerd/containerd/v2/cmd/ctr"},
}

// versionFlags stamp the Kubernetes binaries as their release does
// (hack/lib/version.sh): without them they call themselves v0.0.0-master.
func versionFlags() string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(Version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var f []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		f = append(f, "-X", pkg+".gitVersion="+Version, "-X", pkg+".gitMajor="+major, "-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean")
	}
	return strings.Join(f, " ")
}

// ToolsKey names a build of Tools: the modules' go.mod and go.sum, the Go
// version and the flags. A change to any builds them again.
func ToolsKey(repo, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", goVersion, versionFlags())
	seen := map[string]bool{}
	for _, t := range Tools {
		if seen[t.Module] {
			continue
		}
		seen[t.Module] = true
		for _, f := range []string{"go.mod", "go.sum"} {
			b, err := os.ReadFile(filepath.Join(repo, t.Module, f))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s/%s %d\n", t.Module, f, len(b))
			h.Write(b)
		}
	}
	for _, f := range []string{"build/k8s/coredns/main.go", "build/k8s/deviceplugin/main.go"} {
		if b, err := os.ReadFile(filepath.Join(repo, f)); err == nil {
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

// BuildTools returns cacheDir/k8s-<key> with every tool, building the
// folder when no earlier run completed it (it appears only whole: the
// build goes to a temporary folder renamed at the end). logf gets one line
// per tool with its time.
func BuildTools(ctx context.Context, goCmd, repo, cacheDir string, logf func(string, ...any)) (string, error) {
	gv, err := exec.CommandContext(ctx, goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("%s env GOVERSION: %w", goCmd, err)
	}
	key, err := ToolsKey(repo, strings.TrimSpace(string(gv)))
	if err != nil {
		return "", err
	}
	// go build runs in each module's folder: a relative -o would land there.
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, "k8s-"+key)
	if complete(dir) {
		logf("kubernetes tools: cached %s (%s)", dir, Version)
		return dir, nil
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	for _, t := range Tools {
		start := time.Now()
		bctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		cmd := exec.CommandContext(bctx, goCmd, "build", "-trimpath", "-ldflags", "-s -w "+versionFlags(), "-o", filepath.Join(tmp, t.Name), t.Pkg)
		cmd.Dir = filepath.Join(repo, t.Module)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return "", fmt.Errorf("building %s (%s in %s): %v: %s", t.Name, t.Pkg, t.Module, err, clip.LastLines(string(out), 8))
		}
		logf("kubernetes tools: built %s in %.0fs", t.Name, time.Since(start).Seconds())
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	old, _ := filepath.Glob(filepath.Join(cacheDir, "k8s-*"))
	for _, o := range old {
		if o != dir {
			_ = os.RemoveAll(o)
		}
	}
	return dir, nil
}

func complete(dir string) bool {
	for _, t := range Tools {
		if st, err := os.Stat(filepath.Join(dir, t.Name)); err != nil || st.Size() == 0 {
			return false
		}
	}
	return true
}
