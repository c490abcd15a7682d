package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeModule compiles an object file with a .modinfo section, which is all
// the lab reads from a .ko.
func fakeModule(t *testing.T, dir, rel, modinfo string) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler (cc) in PATH to build fake kernel modules: %v", err)
	}
	src := filepath.Join(t.TempDir(), "m.c")
	esc := strings.ReplaceAll(modinfo, "\x00", `\0`)
	require.NoError(t, os.WriteFile(src, []byte(`__attribute__((section(".modinfo"), used)) static const char mi[] = "`+esc+`";`+"\n"), 0o644))
	out := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
	b, err := exec.Command(cc, "-c", "-o", out, src).CombinedOutput()
	require.NoError(t, err, string(b))
}

func TestModuleLoadOrderFromFiles(t *testing.T) {
	dir := t.TempDir()
	fakeModule(t, dir, "drivers/infiniband/sw/rxe/rdma_rxe.ko", "depends=ib_core,udp_tunnel\x00name=rdma_rxe")
	fakeModule(t, dir, "drivers/infiniband/core/ib_core.ko", "depends=\x00name=ib_core")
	fakeModule(t, dir, "net/ipv4/udp_tunnel.ko", "name=udp_tunnel")
	fakeModule(t, dir, "crypto/crc32-generic.ko", "license=GPL") // no name=: from the file name
	builtin := filepath.Join(t.TempDir(), "modules.builtin")
	require.NoError(t, os.WriteFile(builtin, []byte("kernel/net/ipv4/udp_tunnel.ko\n"), 0o644))
	bi, err := ReadBuiltin(builtin)
	require.NoError(t, err)

	paths, err := ModuleLoadOrder(dir, []string{"crc32_generic", "rdma_rxe"}, bi)
	require.NoError(t, err)
	var names []string
	for _, p := range paths {
		names = append(names, ModName(p))
	}
	assert.Equal(t, []string{"crc32_generic", "ib_core", "rdma_rxe"}, names, "built-in udp_tunnel is not loaded")

	_, err = ModuleLoadOrder(dir, []string{"virtio_net"}, bi)
	assert.ErrorContains(t, err, "kernel module virtio_net not found under "+dir)
	_, err = ModuleLoadOrder(t.TempDir(), []string{"x"}, nil)
	assert.ErrorContains(t, err, "no kernel modules")
	none, err := ReadBuiltin(filepath.Join(t.TempDir(), "absent"))
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestLibClosureOfHostBinary(t *testing.T) {
	bin := "/bin/sh"
	d, err := ReadELFDeps(bin)
	if err != nil || d.Interp == "" {
		t.Skipf("%s is not a dynamic ELF binary here (%v)", bin, err)
	}
	dirs := []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	libs, interps, err := LibClosure([]string{bin}, dirs)
	require.NoError(t, err)
	assert.Contains(t, libs, "libc.so.6")
	assert.Equal(t, []string{d.Interp}, interps)
	_, _, err = LibClosure([]string{bin}, []string{t.TempDir()})
	assert.ErrorContains(t, err, "libc.so.6")
}
