// Package kube is the Kubernetes of make lab-k8s: the control plane built
// from the published modules (build/k8s, build/containerd) and run on the
// lab's host, its keys and tokens, and the files each VM's node needs
// (kubelet, containerd, CoreDNS). It knows nothing of the VMs: lab/k8s.go
// joins them.
package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// PKI is the control plane's keys and credentials, made fresh for each
// run: a CA, the API server's serving certificate for the addresses its
// clients dial, the service-account signing key, and one bearer token per
// client (the API server's --token-auth-file).
type PKI struct {
	Dir string // ca.crt, apiserver.crt|key, sa.key|pub, tokens.csv

	CA     []byte            // PEM: clients trust it
	Tokens map[string]Client // by name: admin, controller-manager, scheduler, coredns, node:<n>
}

// Client is one token's identity as the API server sees it.
type Client struct {
	Token  string
	User   string
	Groups []string
}

// Well-known identities: the groups bind them to the roles Kubernetes
// ships (system:masters is cluster-admin; system:nodes goes through the
// Node authorizer and NodeRestriction).
const (
	ClientAdmin     = "admin"
	ClientKCM       = "controller-manager"
	ClientScheduler = "scheduler"
	ClientCoreDNS   = "coredns"
)

// NodeClient names the token of node n: its user is system:node:<n>.
func NodeClient(n string) string { return "node:" + n }

// NewPKI writes fresh keys into dir. sans are the addresses and names the
// API server's certificate must carry: every address a client dials (the
// host's 127.0.0.1, the address the VMs reach it by) and the Service IP.
func NewPKI(dir string, ips []net.IP, names []string, nodes []string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "gdrlab kubernetes CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips, DNSNames: names,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	// The service-account key: RSA, which every Kubernetes release verifies.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CA: pemBlock("CERTIFICATE", caDER), Tokens: map[string]Client{}}
	files := map[string][]byte{
		"ca.crt":        p.CA,
		"apiserver.crt": pemBlock("CERTIFICATE", srvDER),
		"apiserver.key": pemBlock("EC PRIVATE KEY", srvKeyDER),
		"sa.key":        pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		"sa.pub":        pemBlock("PUBLIC KEY", saPub),
	}
	add := func(name, user string, groups ...string) {
		p.Tokens[name] = Client{Token: token(), User: user, Groups: groups}
	}
	add(ClientAdmin, "gdrlab-admin", "system:masters")
	add(ClientKCM, "system:kube-controller-manager")
	add(ClientScheduler, "system:kube-scheduler")
	add(ClientCoreDNS, "system:gdrlab:coredns")
	for _, n := range nodes {
		add(NodeClient(n), "system:node:"+n, "system:nodes")
	}
	files["tokens.csv"] = p.tokensCSV()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// tokensCSV is the API server's token file: token,user,uid,"group,group".
func (p *PKI) tokensCSV() []byte {
	var names []string
	for n := range p.Tokens {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		c := p.Tokens[n]
		fmt.Fprintf(&b, "%s,%s,%s", c.Token, c.User, c.User)
		if len(c.Groups) > 0 {
			fmt.Fprintf(&b, ",\"%s\"", strings.Join(c.Groups, ","))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// Path is a file of the PKI folder.
func (p *PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func token() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
