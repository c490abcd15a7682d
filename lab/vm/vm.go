// Package vm is the labs' VM machinery on the host: the Debian parts
// (FetchParts: kernel, modules, tools and libraries, cached by their
// versions), the initramfs built from them (Image: module load order, the
// libraries' closure), a qemu guest's process (Start, Kill, its console and
// record stream) and the learning switches the cluster labs' VMs join.
// What the VMs run (the agent, its jobs) and what each scheduler adds is
// package lab's; this package never imports it.
package vm

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/lab/wait"
)

// VM is one running qemu guest.
type VM struct {
	Name    string
	Console string // the console's log (kernel and agent messages)
	Result  string // the record stream (Arch.ResultPort)
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	Killed  string // why the host killed it, if it did
}

// Config is what Start needs.
type Config struct {
	Arch    Arch // the guest's architecture; the zero Arch is AMD64
	QEMU    string
	Kernel  string
	Initrd  string
	Dir     string // where the logs go
	Name    string // server, client
	Role    string // lab.role
	Net     string // -netdev socket option: "listen=127.0.0.1:P" or "connect=127.0.0.1:P"
	MAC     string
	MemMiB  int
	Accel   string // tcg (default); kvm only where the caller knows it is usable
	Cmdline string // extra kernel parameters
	// NICs, when set, replace Net and MAC: one virtio-net device per entry,
	// in order (eth0, eth1, ...). The cluster lab joins each to a Switch.
	NICs []NIC
	// Shares are host folders the guest mounts over virtio-9p.
	Shares []Share
}

// NIC is one virtio-net device and its qemu netdev.
type NIC struct {
	Netdev string // -netdev value without id: "stream,server=off,addr.type=inet,..."
	MAC    string
}

// Share is a host folder exported to the guest with virtio-9p as mount tag Tag.
type Share struct {
	Tag, Path string
	ReadOnly  bool
}

// QEMUArgs returns qemu's command line for c.
func QEMUArgs(c Config, console, result string) []string {
	accel := c.Accel
	if accel == "" {
		accel = "tcg"
	}
	mem := c.MemMiB
	if mem == 0 {
		mem = 768
	}
	arch := c.Arch.or()
	args := append(append([]string(nil), arch.Machine...),
		"-accel", accel, "-smp", "1", "-m", strconv.Itoa(mem),
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none", "-no-reboot",
		"-kernel", c.Kernel, "-initrd", c.Initrd,
		"-append", strings.TrimSpace("console="+arch.Console+" loglevel=4 panic=-1 lab.results="+arch.ResultPort+" lab.role="+c.Role+" "+c.Cmdline),
		"-serial", "file:"+console,
	)
	if arch.ResultDevice == "" {
		args = append(args, "-serial", "file:"+result)
	} else {
		args = append(args, "-chardev", "file,id=res,path="+result, "-device", arch.ResultDevice+",chardev=res")
	}
	if len(c.NICs) == 0 {
		args = append(args, "-netdev", "socket,id=n0,"+c.Net, "-device", "virtio-net-pci,netdev=n0,mac="+c.MAC)
	}
	for i, n := range c.NICs {
		args = append(args, "-netdev", fmt.Sprintf("%s,id=n%d", n.Netdev, i), "-device", fmt.Sprintf("virtio-net-pci,netdev=n%d,mac=%s", i, n.MAC))
	}
	// security_model=none: files are created as qemu's user, and ownership
	// changes the guest asks for are not refused (the lab runs as root or not).
	for i, sh := range c.Shares {
		ro := ""
		if sh.ReadOnly {
			ro = ",readonly=on"
		}
		args = append(args, "-fsdev", fmt.Sprintf("local,id=fs%d,path=%s,security_model=none%s", i, strings.ReplaceAll(sh.Path, ",", ",,"), ro),
			"-device", fmt.Sprintf("virtio-9p-pci,fsdev=fs%d,mount_tag=%s", i, sh.Tag))
	}
	return args
}

// Start starts qemu; the VM runs until its agent powers it off or Kill.
func Start(c Config) (*VM, error) {
	v := &VM{
		Name:    c.Name,
		Console: filepath.Join(c.Dir, c.Name+".console.log"),
		Result:  filepath.Join(c.Dir, c.Name+".results"),
		done:    make(chan struct{}),
	}
	_ = os.Remove(v.Console)
	_ = os.Remove(v.Result)
	cmd := exec.Command(c.QEMU, QEMUArgs(c, v.Console, v.Result)...)
	qlog, err := os.Create(filepath.Join(c.Dir, c.Name+".qemu.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = qlog, qlog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		qlog.Close()
		return nil, fmt.Errorf("starting qemu for %s: %w", c.Name, err)
	}
	v.cmd = cmd
	go func() {
		v.waitErr = cmd.Wait()
		qlog.Close()
		close(v.done)
	}()
	return v, nil
}

// Pid is qemu's process id.
func (v *VM) Pid() int { return v.cmd.Process.Pid }

// Done is closed when qemu has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Exited reports whether qemu has exited.
func (v *VM) Exited() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// Kill stops qemu at once (SIGKILL), recording why.
func (v *VM) Kill(why string) {
	if v.Exited() {
		return
	}
	v.Killed = why
	_ = v.cmd.Process.Kill()
	<-v.done
}

// Wait waits for qemu to exit until ctx ends; then it kills the VM.
func (v *VM) Wait(ctx context.Context) error {
	select {
	case <-v.done:
		if v.waitErr != nil {
			return fmt.Errorf("qemu %s: %v (see %s)", v.Name, v.waitErr, v.Console)
		}
		return nil
	case <-ctx.Done():
		v.Kill(fmt.Sprintf("did not power off in time (%v)", context.Cause(ctx)))
		return fmt.Errorf("VM %s %s: killed; its console is %s", v.Name, v.Killed, v.Console)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitListening waits until a socket listens on 127.0.0.1:port, reading
// /proc/net/tcp so as not to take qemu's single connection.
func WaitListening(port int, deadline time.Time, alive func() bool) error {
	want := fmt.Sprintf("0100007F:%04X", port)
	listening := func() bool {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && f[1] == want && f[3] == "0A" { // 0A: LISTEN
				return true
			}
		}
		return false
	}
	up := false
	err := wait.For(context.Background(), deadline, 50*time.Millisecond, fmt.Sprintf("a listener on 127.0.0.1:%d", port), func() bool {
		up = listening()
		return up || !alive()
	})
	switch {
	case up:
		return nil
	case err == nil:
		return fmt.Errorf("qemu exited before listening on 127.0.0.1:%d", port)
	}
	return fmt.Errorf("nothing listened on 127.0.0.1:%d in time", port)
}
