package kube

import (
	"encoding/base64"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Kubeconfig is a client's kubeconfig: one cluster (server, CA), one user
// (a bearer token), one context.
func Kubeconfig(server string, ca []byte, c Client) ([]byte, error) {
	type named struct {
		Name    string         `json:"name"`
		Cluster map[string]any `json:"cluster,omitempty"`
		User    map[string]any `json:"user,omitempty"`
		Context map[string]any `json:"context,omitempty"`
	}
	doc := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []named{{Name: "gdrlab", Cluster: map[string]any{"server": server, "certificate-authority-data": base64.StdEncoding.EncodeToString(ca)}}},
		"users":           []named{{Name: c.User, User: map[string]any{"token": c.Token}}},
		"contexts":        []named{{Name: "gdrlab", Context: map[string]any{"cluster": "gdrlab", "user": c.User}}},
		"current-context": "gdrlab",
	}
	return yaml.Marshal(doc)
}

// Node is what one VM's kubelet is told.
type Node struct {
	Name       string // vm1: the node's name, as Slurm's
	IP         string // the address its pods (hostNetwork) and peers use: the management network's
	ClusterDNS string // the cluster DNS the pods' resolv.conf names
}

// KubeletConfig is the node's KubeletConfiguration (kubelet.config.k8s.io
// v1beta1). The VMs run no systemd: cgroupfs, and containerd 2 reports the
// same driver through the CRI's RuntimeConfig. The kubelet serves no API
// to the control plane (it cannot be reached from the host), so its own
// authentication is off and it authorizes everything on its port.
func KubeletConfig(n Node) ([]byte, error) {
	doc := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "cgroupfs",
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"clusterDomain":            "cluster.local",
		"clusterDNS":               []string{n.ClusterDNS},
		"resolvConf":               "/etc/resolv.conf",
		"failSwapOn":               false,
		"address":                  n.IP,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization": map[string]any{"mode": "AlwaysAllow"},
		// A lab VM has a few hundred MiB: the default hard eviction
		// thresholds (memory.available<100Mi, nodefs 10%) would evict the
		// suite on a tmpfs root.
		"evictionHard":                map[string]string{"memory.available": "20Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		"imageGCHighThresholdPercent": 100,
		"registerNode":                true,
		"serializeImagePulls":         false,
		"staticPodPath":               "",
		"syncFrequency":               "10s",
		"nodeStatusUpdateFrequency":   "10s",
		"maxPods":                     16,
	}
	return yaml.Marshal(doc)
}

// SandboxImage is the pause image each VM imports (the lab builds it: no
// registry can be reached).
const SandboxImage = "localhost/gdrlab/pause:1"

// ContainerdConfig is containerd 2's config.toml (version 3) for a VM:
// runc from Debian, the lab's own pause image, the CNI folders, and the
// overlayfs snapshotter on the VM's tmpfs.
func ContainerdConfig(root, state, runc, cniBin, cniConf string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "version = 3\nroot = %q\nstate = %q\n\n", root, state)
	fmt.Fprintf(&b, "[grpc]\n  address = \"/run/containerd/containerd.sock\"\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.images']\n  snapshotter = \"overlayfs\"\n\n")
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = %q\n\n", SandboxImage)
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = [%q]\n  conf_dir = %q\n\n", cniBin, cniConf)
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n")
	// NoPivotRoot: the VMs' root is the initramfs, which pivot_root(2)
	// refuses to move (EINVAL); runc then enters the container's root with
	// MS_MOVE and chroot, as it does for a ramdisk host.
	fmt.Fprintf(&b, "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  BinaryName = %q\n  SystemdCgroup = false\n  NoPivotRoot = true\n", runc)
	return []byte(b.String())
}

// CNIConfig is the node's one network list. Every pod of the lab runs on
// the host's network, so no plugin ever runs; containerd reports the
// network ready only once a list is there (its CRI counts the built-in
// loopback and the first file of conf_dir), and the node is not Ready
// without it.
const CNIConfig = `{"cniVersion": "1.0.0", "name": "gdrlab-host", "plugins": [{"type": "loopback"}]}` + "\n"

// Corefile serves the cluster domain from the API server (the kubernetes
// plugin: the headless Service's pod records) on addr:53.
func Corefile(addr, kubeconfig string) []byte {
	return []byte(fmt.Sprintf(`cluster.local:53 {
    bind %s
    errors
    kubernetes cluster.local {
        kubeconfig %s
    }
}
`, addr, kubeconfig))
}
