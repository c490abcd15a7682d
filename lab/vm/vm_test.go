package vm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQEMUArgs(t *testing.T) {
	a := strings.Join(QEMUArgs(Config{Kernel: "k", Initrd: "i", Role: "client", Net: "connect=127.0.0.1:5", MAC: "52:54:00:00:00:02"}, "c.log", "r.log"), " ")
	for _, want := range []string{"-accel tcg", "-smp 1", "-m 768", "-no-reboot", "lab.role=client", "console=ttyS0",
		"-serial file:c.log -serial file:r.log", "socket,id=n0,connect=127.0.0.1:5", "mac=52:54:00:00:00:02"} {
		assert.Contains(t, a, want)
	}
}

func TestQEMUArgsCluster(t *testing.T) {
	a := strings.Join(QEMUArgs(Config{Kernel: "k", Initrd: "i", Role: "vm2",
		NICs:   []NIC{{Netdev: "stream,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=5", MAC: "52:54:00:1d:00:02"}, {Netdev: "stream,x=1", MAC: "52:54:00:1d:01:02"}},
		Shares: []Share{{Tag: "gdrshared", Path: "/r/a,b"}}}, "c.log", "r.log"), " ")
	assert.Contains(t, a, "-netdev stream,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=5,id=n0 -device virtio-net-pci,netdev=n0,mac=52:54:00:1d:00:02")
	assert.Contains(t, a, "-netdev stream,x=1,id=n1 -device virtio-net-pci,netdev=n1,mac=52:54:00:1d:01:02")
	assert.Contains(t, a, "-fsdev local,id=fs0,path=/r/a,,b,security_model=none -device virtio-9p-pci,fsdev=fs0,mount_tag=gdrshared")
	assert.NotContains(t, a, "socket", "the NICs replace the two-VM lab's socket link")
	a = strings.Join(QEMUArgs(Config{Kernel: "k", Initrd: "i", Shares: []Share{{Tag: "gdrk8s", Path: "/t", ReadOnly: true}}}, "c", "r"), " ")
	assert.Contains(t, a, "-fsdev local,id=fs0,path=/t,security_model=none,readonly=on -device virtio-9p-pci,fsdev=fs0,mount_tag=gdrk8s")
}
