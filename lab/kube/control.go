package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// GuestAPIAddr is where the VMs reach the API server: qemu's user network
// forwards connections to it to the host's 127.0.0.1 (guestfwd), so the
// control plane listens on the host's loopback only.
const GuestAPIAddr = "10.0.2.100"

// ServiceCIDR is the cluster's Service range; the API server's own
// Service (kubernetes.default) takes its first address.
const ServiceCIDR = "10.96.0.0/16"

// ControlPlane is etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler running on the lab's host, on 127.0.0.1.
type ControlPlane struct {
	Tools string // BuildTools' folder
	Dir   string // data, logs, kubeconfigs
	PKI   *PKI

	APIPort  int // 127.0.0.1:APIPort, the API server's secure port
	EtcdPort int

	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// NewControlPlane picks free loopback ports and writes the PKI for the
// given nodes under dir.
func NewControlPlane(tools, dir string, nodes []string) (*ControlPlane, error) {
	c := &ControlPlane{Tools: tools, Dir: dir}
	var err error
	if c.APIPort, err = freePort(); err != nil {
		return nil, err
	}
	if c.EtcdPort, err = freePort(); err != nil {
		return nil, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(GuestAPIAddr), net.ParseIP("10.96.0.1")}
	names := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if c.PKI, err = NewPKI(filepath.Join(dir, "pki"), ips, names, nodes); err != nil {
		return nil, err
	}
	return c, nil
}

// Server is the API server's address from the host.
func (c *ControlPlane) Server() string { return fmt.Sprintf("https://127.0.0.1:%d", c.APIPort) }

// GuestServer is the API server's address from a VM.
func GuestServer() string { return "https://" + GuestAPIAddr + ":6443" }

// Kubeconfig writes the kubeconfig of client name for server and returns
// its path.
func (c *ControlPlane) Kubeconfig(name, server string) (string, error) {
	cl, ok := c.PKI.Tokens[name]
	if !ok {
		return "", fmt.Errorf("no token for %q", name)
	}
	b, err := Kubeconfig(server, c.PKI.CA, cl)
	if err != nil {
		return "", err
	}
	p := filepath.Join(c.Dir, strings.ReplaceAll(name, ":", "-")+".kubeconfig")
	return p, os.WriteFile(p, b, 0o600)
}

// Start runs etcd and the API server, waits until the API server is ready
// (/readyz with the admin token), then starts the controller manager and
// the scheduler. Each writes its log to Dir/<name>.log. A process that
// exits before ready fails Start with its log's tail.
func (c *ControlPlane) Start(ctx context.Context, deadline time.Duration, logf func(string, ...any)) error {
	p := c.PKI
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", c.EtcdPort)
	peer, err := freePort()
	if err != nil {
		return err
	}
	if err := c.run(ctx, "etcd", "--name=gdrlab", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peer), fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-cluster=gdrlab=http://127.0.0.1:%d", peer),
		"--unsafe-no-fsync", "--quota-backend-bytes=1073741824"); err != nil {
		return err
	}
	if err := c.run(ctx, "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(c.APIPort),
		// Not loopback: the API server publishes it as its endpoint and
		// refuses 127.0.0.0/8. It is the address the VMs dial.
		"--advertise-address="+GuestAPIAddr,
		"--tls-cert-file="+p.Path("apiserver.crt"), "--tls-private-key-file="+p.Path("apiserver.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.Path("sa.pub"), "--service-account-signing-key-file="+p.Path("sa.key"),
		"--token-auth-file="+p.Path("tokens.csv"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true", "--profiling=false"); err != nil {
		return err
	}
	if err := c.waitReady(ctx, deadline); err != nil {
		return err
	}
	logf("kube-apiserver ready on %s (etcd %s)", c.Server(), etcdURL)
	kcm, err := c.Kubeconfig(ClientKCM, c.Server())
	if err != nil {
		return err
	}
	sched, err := c.Kubeconfig(ClientScheduler, c.Server())
	if err != nil {
		return err
	}
	if err := c.run(ctx, "kube-controller-manager", "--kubeconfig="+kcm, "--secure-port=0", "--leader-elect=false",
		"--service-account-private-key-file="+p.Path("sa.key"), "--root-ca-file="+p.Path("ca.crt"),
		// Each controller acts as its own service account with the
		// system:controller:* role Kubernetes ships (as kubeadm runs it):
		// the manager's own user may not create the Job's pods.
		"--use-service-account-credentials=true", "--cluster-name=gdrlab"); err != nil {
		return err
	}
	return c.run(ctx, "kube-scheduler", "--kubeconfig="+sched, "--secure-port=0", "--leader-elect=false")
}

func (c *ControlPlane) run(ctx context.Context, name string, args ...string) error {
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.Tools, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	pr := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		f.Close()
		close(pr.done)
	}()
	c.procs = append(c.procs, pr)
	return nil
}

// Exited names a control-plane process that has stopped, with its log's
// last lines, or "".
func (c *ControlPlane) Exited() string {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Sprintf("%s exited (%v): %s", p.name, p.err, logTail(p.log, 6))
		default:
		}
	}
	return ""
}

func (c *ControlPlane) waitReady(ctx context.Context, deadline time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.PKI.CA)
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	end := time.Now().Add(deadline)
	last := ""
	for time.Now().Before(end) {
		if x := c.Exited(); x != "" {
			return errors.New(x)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Server()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.PKI.Tokens[ClientAdmin].Token)
		resp, err := cl.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, firstLines(b, 3))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready within %s (last: %s); its log: %s", deadline, last, logTail(filepath.Join(c.Dir, "kube-apiserver.log"), 6))
}

// Stop ends every process (SIGTERM, then SIGKILL after 10 s), last started
// first.
func (c *ControlPlane) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func logTail(p string, n int) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return clip.LastLines(string(b), n)
}

func firstLines(b []byte, n int) string {
	l := bytes.SplitN(b, []byte("\n"), n+1)
	if len(l) > n {
		l = l[:n]
	}
	return string(bytes.Join(l, []byte(" | ")))
}
