package lab

import (
	"os/exec"
	"syscall"

	"github.com/gdrconf/gdrconf/lab/vm"
)

// startLoad starts n busy loops on the host (each a shell spinning on ':'),
// as other jobs on a shared CI machine would, and returns a func that ends
// them. They run in their own process group, so nothing else is touched.
func startLoad(n int, logf vm.Logf) (stop func()) {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			logf("load: could not start a busy loop: %v", err)
			continue
		}
		cmds = append(cmds, c)
	}
	if len(cmds) > 0 {
		logf("load: %d busy loops running on the host beside the VMs", len(cmds))
	}
	return func() {
		for _, c := range cmds {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
		if len(cmds) > 0 {
			logf("load: %d busy loops stopped", len(cmds))
		}
	}
}
