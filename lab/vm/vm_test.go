package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// The arm64 guest: virt board, its PL011 as the console, the record stream
// through a PCI 16550 (ttyS0 in the guest), named on the command line.
func TestQEMUArgsARM64(t *testing.T) {
	a := strings.Join(QEMUArgs(Config{Arch: ARM64, Kernel: "k", Initrd: "i", Role: "server", Net: "listen=127.0.0.1:5", MAC: "52:54:00:00:00:01"}, "c.log", "r.log"), " ")
	for _, want := range []string{"-M virt -cpu cortex-a57 -accel tcg", "console=ttyAMA0", "lab.results=ttyS0",
		"-serial file:c.log -chardev file,id=res,path=r.log -device pci-serial,chardev=res", "virtio-net-pci,netdev=n0"} {
		assert.Contains(t, a, want)
	}
	assert.NotContains(t, a, "file:r.log", "virt has one UART: the records take the PCI serial port")
	a = strings.Join(QEMUArgs(Config{Kernel: "k", Initrd: "i", Role: "server", Net: "listen=127.0.0.1:5"}, "c.log", "r.log"), " ")
	assert.Contains(t, a, "lab.results=ttyS1", "the zero Arch is a PC")
	assert.NotContains(t, a, "-M virt")
}

func TestArchFor(t *testing.T) {
	for name, want := range map[string]string{"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"} {
		a, err := ArchFor(name)
		require.NoError(t, err)
		assert.Equal(t, want, a.GOARCH, name)
	}
	_, err := ArchFor("riscv64")
	assert.ErrorContains(t, err, "want amd64 or arm64")
	assert.Equal(t, "/usr/lib/aarch64-linux-gnu", ARM64.LibDir())
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu", Arch{}.LibDir())
	foreign := ARM64
	if foreign.Native() {
		foreign = AMD64
	}
	assert.Equal(t, "libc6:"+foreign.GOARCH, foreign.Pkg("libc6"))
	want := map[string]string{"arm64": "aarch64-linux-gnu-gcc", "amd64": "x86_64-linux-gnu-gcc"}[foreign.GOARCH]
	assert.Equal(t, want, foreign.Compiler(), "Debian's cross compiler")
	native, err := ArchFor("")
	require.NoError(t, err)
	assert.Empty(t, native.Compiler(), "this host's own architecture: cc")
}

// The page size of Debian's arm64 kernels, read from their Image header,
// picks a CPU that has it: cortex-a57 lacks the 16 KiB granule.
func TestImagePageKiB(t *testing.T) {
	dir := t.TempDir()
	img := func(flags byte) string {
		h := make([]byte, 64)
		h[24] = flags
		copy(h[56:], "ARM\x64")
		p := filepath.Join(dir, fmt.Sprintf("Image-%d", flags))
		require.NoError(t, os.WriteFile(p, h, 0o644))
		return p
	}
	assert.Equal(t, 4, ImagePageKiB(img(0b010)))
	assert.Equal(t, 16, ImagePageKiB(img(0b100)))
	assert.Equal(t, 64, ImagePageKiB(img(0b110)))
	assert.Equal(t, 0, ImagePageKiB(img(0)), "unspecified")
	assert.Equal(t, 0, ImagePageKiB("/nonexistent"))
	assert.Equal(t, ARM64.Machine, ARM64.ForKernel(&Parts{PageKiB: 4}).Machine)
	assert.Contains(t, strings.Join(ARM64.ForKernel(&Parts{PageKiB: 16}).Machine, " "), "-cpu max")
	assert.Nil(t, AMD64.ForKernel(&Parts{PageKiB: 16}).Machine)
}
