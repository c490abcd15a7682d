package kube

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestPKI(t *testing.T) {
	dir := t.TempDir()
	p, err := NewPKI(dir, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(GuestAPIAddr)}, []string{"kubernetes.default.svc"}, []string{"vm1", "vm2"})
	require.NoError(t, err)
	ca := parseCert(t, p.CA)
	assert.True(t, ca.IsCA)
	b, err := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
	require.NoError(t, err)
	srv := parseCert(t, b)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, host := range []string{"127.0.0.1", GuestAPIAddr, "kubernetes.default.svc"} {
		_, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		assert.NoError(t, err, "the API server's certificate is good for %s", host)
	}
	_, err = srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.2.15"})
	assert.Error(t, err, "an address it was not made for")
	for _, f := range []string{"apiserver.key", "sa.key", "sa.pub", "tokens.csv"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}

	csv, err := os.ReadFile(filepath.Join(dir, "tokens.csv"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	require.Len(t, lines, 6, "admin, controller manager, scheduler, coredns, two nodes")
	row := regexp.MustCompile(`^[0-9a-f]{48},[^,"]+,[^,"]+(,"[^"]+")?$`)
	for _, l := range lines {
		assert.Regexp(t, row, l, "the API server's token file: token,user,uid,\"groups\"")
	}
	n := p.Tokens[NodeClient("vm2")]
	assert.Contains(t, string(csv), n.Token+",system:node:vm2,system:node:vm2,\"system:nodes\"", "the Node authorizer's identity")
	assert.Contains(t, string(csv), p.Tokens[ClientAdmin].Token+",gdrlab-admin,gdrlab-admin,\"system:masters\"")
	assert.NotEqual(t, p.Tokens[ClientAdmin].Token, n.Token)
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	require.NotNil(t, blk)
	c, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	return c
}

func TestKubeconfig(t *testing.T) {
	b, err := Kubeconfig("https://10.0.2.100:6443", []byte("PEM"), Client{Token: "tok", User: "system:node:vm1"})
	require.NoError(t, err)
	var doc struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CA     string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			Name string            `json:"name"`
			User map[string]string `json:"user"`
		} `json:"users"`
		Current string `json:"current-context"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	require.Len(t, doc.Clusters, 1)
	assert.Equal(t, "https://10.0.2.100:6443", doc.Clusters[0].Cluster.Server)
	assert.Equal(t, "UEVN", doc.Clusters[0].Cluster.CA, "base64 of the CA")
	assert.Equal(t, "tok", doc.Users[0].User["token"])
	assert.Equal(t, "gdrlab", doc.Current)
}

func TestNodeFiles(t *testing.T) {
	b, err := KubeletConfig(Node{Name: "vm2", IP: "198.18.0.2", ClusterDNS: "198.18.0.1"})
	require.NoError(t, err)
	var kc map[string]any
	require.NoError(t, yaml.Unmarshal(b, &kc))
	assert.Equal(t, "KubeletConfiguration", kc["kind"])
	assert.Equal(t, "cgroupfs", kc["cgroupDriver"], "no systemd in the VMs")
	assert.Equal(t, []any{"198.18.0.1"}, kc["clusterDNS"])
	assert.Equal(t, "198.18.0.2", kc["address"])

	c := string(ContainerdConfig("/var/lib/containerd", "/run/containerd", "/usr/sbin/runc", "/usr/lib/cni", "/etc/cni/net.d"))
	assert.Contains(t, c, "version = 3\n")
	assert.Contains(t, c, `sandbox = "`+SandboxImage+`"`)
	assert.Contains(t, c, `BinaryName = "/usr/sbin/runc"`)
	assert.Contains(t, c, "SystemdCgroup = false")
	assert.Contains(t, c, "NoPivotRoot = true", "the VMs' root is an initramfs")
	assert.Contains(t, CNIConfig, `"cniVersion": "1.0.0"`)
	assert.Contains(t, string(Corefile("198.18.0.1", "/etc/coredns/kubeconfig")), "kubeconfig /etc/coredns/kubeconfig")
}

// build/k8s requires the Kubernetes release Version names, and every
// staging module at the same minor.
func TestToolsPinned(t *testing.T) {
	b, err := os.ReadFile("../../build/k8s/go.mod")
	require.NoError(t, err)
	mod := string(b)
	assert.Contains(t, mod, "k8s.io/kubernetes "+Version)
	staging := "v0." + strings.SplitN(strings.TrimPrefix(Version, "v1."), ".", 2)[0] + "."
	for _, m := range regexp.MustCompile(`(?m)^replace (k8s\.io/\S+) => \S+ (\S+)$`).FindAllStringSubmatch(mod, -1) {
		assert.True(t, strings.HasPrefix(m[2], staging), "%s is replaced by %s, want %s*", m[1], m[2], staging)
	}
	key, err := ToolsKey("../..", "go1.26.8")
	require.NoError(t, err)
	other, err := ToolsKey("../..", "go1.26.9")
	require.NoError(t, err)
	assert.NotEqual(t, key, other, "another Go builds them again")
	assert.Contains(t, versionFlags(), "k8s.io/component-base/version.gitVersion="+Version)
	assert.Contains(t, versionFlags(), "gitMinor=37")
}
