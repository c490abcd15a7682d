package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/lab/wait"
	"github.com/gdrconf/gdrconf/report"
)

// GuestMain is the lab VM's /init: it mounts the pseudo file systems, loads
// the modules, brings up eth0 and rxe0, runs the job's steps and powers the
// VM off. Results go to ttyS1 (lab.results=) as records; the console only gets a
// human-readable log. It never returns.
func GuestMain() {
	g := &guest{console: os.Stdout}
	err := g.main()
	if err != nil {
		g.logf("lab agent: %v", err)
	}
	if g.rec != nil {
		_ = g.rec.Write(RecDone, "-", nil)
	}
	// As an init does before it powers off: no daemon (slurmctld,
	// containerd, a stray test) may still write to a 9p share while the
	// kernel shuts its devices down.
	_ = unix.Kill(-1, unix.SIGKILL)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

type guest struct {
	console *os.File
	sys     *hostfs.Root // the VM's own /, once /sys is mounted
	rec     *RecordWriter
	job     Job
	ln      net.Listener
	lost    string // why the peer is gone: later two-host steps are not run
}

func (g *guest) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(g.console, "gdrlab: "+msg)
	if g.rec != nil {
		_ = g.rec.Write(RecLog, "-", []byte(msg))
	}
}

func (g *guest) main() error {
	for _, m := range []struct{ src, dst, typ string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"}, {"tmpfs", "/run", "tmpfs"},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	sys, err := hostfs.New("/")
	if err != nil {
		return err
	}
	g.sys = sys
	cmdline, _ := os.ReadFile("/proc/cmdline")
	// The record stream's port: lab.results= (vm.Arch.ResultPort), ttyS1
	// on a PC.
	port := "ttyS1"
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "lab.results="); ok && v != "" && !strings.Contains(v, "/") {
			port = v
		}
	}
	out, err := os.OpenFile("/dev/"+port, os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("result port /dev/%s: %w", port, err)
	}
	// Raw output: no \n -> \r\n and no other post-processing.
	if t, err := unix.IoctlGetTermios(int(out.Fd()), unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST
		_ = unix.IoctlSetTermios(int(out.Fd()), unix.TCSETS, t)
	}
	g.rec = NewRecordWriter(out)

	role, key := "", ""
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "lab.role="); ok {
			role = v
		}
		if v, ok := strings.CutPrefix(f, "lab.job="); ok {
			key = v // one of several jobs in the image (lab-faults)
		}
	}
	if key == "" {
		key = role
	}
	b, err := os.ReadFile("/lab/job-" + key + ".json")
	if err != nil {
		return fmt.Errorf("job for lab.role=%q: %w", role, err)
	}
	if err := json.Unmarshal(b, &g.job); err != nil {
		return fmt.Errorf("job for lab.role=%q: %w", role, err)
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	g.logf("role %s, %d steps; %s %s", role, len(g.job.Steps), unix.ByteSliceToString(u.Machine[:]), unix.ByteSliceToString(u.Release[:]))
	if g.job.Cluster != nil {
		return g.clusterMain()
	}

	setup := Step{ID: "setup-" + role, Host: role, Pkg: "lab", Kind: "setup", Timeout: g.job.Setup}
	_ = g.rec.Write(RecBegin, setup.ID, mustJSON(setup))
	start := time.Now()
	serr := g.setup(g.rec.StepOutput(setup.ID))
	end := StepEnd{Duration: time.Since(start)}
	if serr != nil {
		end.RC, end.Err = 1, serr.Error()
	}
	_ = g.rec.Write(RecEnd, setup.ID, mustJSON(end))
	if serr != nil {
		return serr
	}
	_ = g.rec.Write(RecIdentity, "-", mustJSON(report.Collect()))
	for _, st := range g.job.Steps {
		g.runStep(st)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs are marshalled
	}
	return b
}

// setup loads modules, configures eth0 and adds rxe0, all within job.Setup.
func (g *guest) setup(w io.Writer) error {
	deadline := time.Now().Add(g.job.Setup)
	for _, m := range g.job.Modules {
		if err := loadModule(m); err != nil {
			return err
		}
		fmt.Fprintf(w, "loaded %s\n", m)
	}
	if err := makeGPUNodes(w, "/dev", g.job.GPUs); err != nil {
		return err
	}
	if len(g.job.NICs) > 0 {
		if err := command(w, deadline, "/usr/sbin/ip", "link", "set", "lo", "up"); err != nil {
			return err
		}
		if _, err := g.setupNICs(w, deadline, g.job.NICs); err != nil {
			return err
		}
	} else if err := g.setupEth0(w, deadline); err != nil {
		return err
	}
	if g.job.Role == "server" {
		ln, err := net.Listen("tcp", net.JoinHostPort(g.job.Addr, fmt.Sprint(BarrierPort)))
		if err != nil {
			return fmt.Errorf("barrier listener: %w", err)
		}
		g.ln = ln
	}
	return nil
}

// setupEth0 configures the two-VM lab's one NIC and adds rxe0.
func (g *guest) setupEth0(w io.Writer, deadline time.Time) error {
	if err := wait.For(context.Background(), deadline, 50*time.Millisecond, "eth0 to appear in /sys/class/net", func() bool {
		_, err := os.Stat("/sys/class/net/eth0")
		return err == nil
	}); err != nil {
		return err
	}
	// iproute2 by full path: busybox's ip applet does not know rdma links.
	cmds := [][]string{
		{"/usr/sbin/ip", "link", "set", "lo", "up"},
		{"/usr/sbin/ip", "addr", "add", fmt.Sprintf("%s/%d", g.job.Addr, NetMask), "dev", "eth0"},
		{"/usr/sbin/ip", "link", "set", "eth0", "up"},
		{"/usr/bin/rdma", "link", "add", RXEDevice, "type", "rxe", "netdev", "eth0"},
	}
	for _, c := range cmds {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		cmd := exec.CommandContext(ctx, c[0], c[1:]...)
		cmd.Stdout, cmd.Stderr = w, w
		fmt.Fprintf(w, "+ %s\n", strings.Join(c, " "))
		err := cmd.Run()
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(c, " "), err)
		}
	}
	b, err := waitRXE(g.sys, deadline, RXEDevice)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s ACTIVE, gid 1 %s", RXEDevice, b)
	return nil
}

// waitRXE waits, until deadline, for port 1 of rxe device dev to be ACTIVE
// and then for its GID 1 to be IPv4-mapped (RoCE v2 over the VM's address),
// and returns that GID file as the kernel wrote it. The device is read with
// rdmadev, as the suite reads it, so the agent and the tests agree on what
// ACTIVE means.
func waitRXE(sys *hostfs.Root, deadline time.Time, dev string) (string, error) {
	port := rdmadev.ClassDir + "/" + dev + "/ports/1"
	if err := wait.For(context.Background(), deadline, 50*time.Millisecond, sys.Host(port+"/state")+" ACTIVE", func() bool {
		d, err := rdmadev.Load(sys, dev)
		return err == nil && d.Port(1) != nil && d.Port(1).Active()
	}); err != nil {
		return "", err
	}
	gid := port + "/gids/1"
	if err := wait.For(context.Background(), deadline, 50*time.Millisecond, sys.Host(gid)+" (RoCE v2 IPv4 GID)", func() bool {
		d, err := rdmadev.Load(sys, dev)
		if err != nil {
			return false
		}
		g, ok, err := d.GID(1, 1)
		return err == nil && ok && g.IPv4()
	}); err != nil {
		return "", err
	}
	b, _ := sys.ReadFile(gid)
	return string(b), nil
}

// barrier makes server and client start a step together: the client dials
// the server and both check they are at the same step.
func (g *guest) barrier(id string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if g.job.Role == "server" {
		if g.ln == nil {
			return errors.New("no barrier listener")
		}
		for {
			_ = g.ln.(*net.TCPListener).SetDeadline(deadline)
			c, err := g.ln.Accept()
			if err != nil {
				return fmt.Errorf("client %s did not reach step %s within %v: %w", g.job.Peer, id, timeout, err)
			}
			_ = c.SetDeadline(deadline)
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				c.Close()
				continue
			}
			got := strings.TrimSpace(line)
			_, _ = fmt.Fprintf(c, "%s\n", id)
			c.Close()
			if got != id {
				return fmt.Errorf("client %s is at step %s, server at %s", g.job.Peer, got, id)
			}
			return nil
		}
	}
	addr := net.JoinHostPort(g.job.Peer, fmt.Sprint(BarrierPort))
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		_ = c.SetDeadline(deadline)
		_, _ = fmt.Fprintf(c, "%s\n", id)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			last = err
			continue
		}
		if got := strings.TrimSpace(line); got != id {
			return fmt.Errorf("server %s is at step %s, client at %s", g.job.Peer, got, id)
		}
		return nil
	}
	return fmt.Errorf("server %s did not reach step %s within %v: %v", addr, id, timeout, last)
}

func (g *guest) runStep(st Step) {
	_ = g.rec.Write(RecBegin, st.ID, mustJSON(st))
	w := g.rec.StepOutput(st.ID)
	start := time.Now()
	var end StepEnd
	defer func() {
		end.Duration = time.Since(start)
		_ = g.rec.Write(RecEnd, st.ID, mustJSON(end))
		g.logf("step %s: rc=%d %s %s", st.ID, end.RC, end.Duration.Round(time.Millisecond), end.Err)
	}()
	if st.Barrier && g.lost != "" {
		end.RC, end.Err = -1, "not run: "+g.lost
		return
	}
	if st.Barrier {
		if err := g.barrier(st.ID, 2*time.Minute); err != nil {
			// Run this step anyway: its own failure says more about a lost
			// peer. Later two-host steps are not run, so a dead peer costs
			// one barrier wait, not one per step.
			fmt.Fprintf(w, "gdrlab: barrier: %v\n", err)
			g.logf("step %s: barrier: %v", st.ID, err)
			g.lost = fmt.Sprintf("the peer %s did not reach step %s", g.job.Peer, st.ID)
		}
	}
	time.Sleep(st.Delay)
	ctx, cancel := context.WithTimeout(context.Background(), st.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, st.Argv[0], st.Argv[1:]...)
	cmd.Dir = "/tmp"
	cmd.Env = append([]string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/tmp"}, st.Env...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var pgid atomic.Int64 // the step's process group, once it started (FaultSignal)
	stop := g.startFaults(st, &pgid)
	err := cmd.Start()
	if err == nil {
		pgid.Store(int64(cmd.Process.Pid))
		err = cmd.Wait()
		if st.KillWait > 0 {
			waitGroup(w, cmd.Process.Pid, st.KillWait)
		}
	}
	stop()
	if ctx.Err() == context.DeadlineExceeded {
		end.RC, end.Err = -1, fmt.Sprintf("killed after the step's limit of %v", st.Timeout)
		return
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		end.RC = ee.ExitCode()
	case err != nil:
		end.RC, end.Err = -1, err.Error()
	}
}

// waitGroup waits, at most within, for the processes left in process group
// pg after its leader ended, says which were there and how long they took,
// and kills those still there at the deadline.
func waitGroup(w io.Writer, pg int, within time.Duration) {
	start := time.Now()
	left := groupProcs(pg, "")
	if len(left) == 0 {
		return
	}
	fmt.Fprintf(w, "gdrlab: the step's command ended; its process group %d still holds %s: waiting at most %v\n", pg, strings.Join(left, " "), within)
	_ = wait.For(context.Background(), start.Add(within), 100*time.Millisecond, "process group to end", func() bool {
		left = groupProcs(pg, "")
		return len(left) == 0
	})
	if len(left) == 0 {
		fmt.Fprintf(w, "gdrlab: process group %d ended %.1fs after its leader\n", pg, time.Since(start).Seconds())
		return
	}
	fmt.Fprintf(w, "gdrlab: process group %d still held %s after %v: killed\n", pg, strings.Join(left, " "), within)
	_ = syscall.Kill(-pg, syscall.SIGKILL)
}

// loadModule loads the kernel module at path (one already loaded is fine).
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	err = unix.FinitModule(int(f.Fd()), "", 0)
	f.Close()
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("loading module %s: %w", path, err)
	}
	return nil
}
