package kmod

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Lines in the shapes real kernels print (6.x, with and without taint).
const procModules = `nvidia_uvm 2076672 0 - Live 0x0000000000000000 (OE)
nvidia 14323712 1 nvidia_uvm, Live 0xffffffffc0e00000 (OE)
ib_uverbs 184320 2 rdma_ucm,mlx5_ib, Live 0xffffffffc0a4e000
rdma_ucm 32768 0 - Live 0x0000000000000000
nvidia_peermem 16384 0 - Loading 0x0000000000000000 (OE)
mlx5_core 2433024 1 mlx5_ib, Live 0xffffffffc1000000
`

func TestParseProcModules(t *testing.T) {
	ms, err := ParseProcModules([]byte(procModules))
	require.NoError(t, err)
	require.Len(t, ms, 6)
	assert.Equal(t, Module{Name: "nvidia_uvm", Size: 2076672, Refs: 0, State: "Live", Taint: "OE"}, ms[0])
	assert.Equal(t, []string{"nvidia_uvm"}, ms[1].Users)
	assert.Equal(t, []string{"rdma_ucm", "mlx5_ib"}, ms[2].Users)
	assert.Equal(t, "", ms[3].Taint)
	assert.Equal(t, "Loading", ms[4].State)

	ms, err = ParseProcModules(nil)
	require.NoError(t, err)
	assert.Empty(t, ms)
}

func TestParseProcModulesErrors(t *testing.T) {
	for name, line := range map[string]string{
		"short":     "nvidia 123 0 -",
		"size":      "nvidia 12x3 0 - Live 0x0",
		"refs":      "nvidia 123 many - Live 0x0",
		"negative":  "nvidia 123 -5 - Live 0x0",
		"state":     "nvidia 123 0 - Dead 0x0",
		"name":      "nvi/dia 123 0 - Live 0x0",
		"users":     "nvidia 123 0 a/b, Live 0x0",
		"taint":     "nvidia 123 0 - Live 0x0 OE",
		"taintOpen": "nvidia 123 0 - Live 0x0 (",
	} {
		_, err := ParseProcModules([]byte("ib_core 1 0 - Live 0x0\n" + line + "\n"))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "line 2", name)
	}
}

func TestParseBuiltin(t *testing.T) {
	m, err := ParseBuiltin([]byte("kernel/drivers/infiniband/core/ib_core.ko\nkernel/drivers/infiniband/core/ib-uverbs.ko\n\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"ib_core": true, "ib_uverbs": true}, m)
	_, err = ParseBuiltin([]byte("kernel/x/ib_core.ko\nnot a module\n"))
	require.ErrorContains(t, err, "line 2")
}

func write(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
	require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
}

func TestHostLookup(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "proc/modules", procModules)
	write(t, dir, "proc/sys/kernel/osrelease", "6.18.0-gdr\n")
	write(t, dir, "lib/modules/6.18.0-gdr/modules.builtin", "kernel/drivers/infiniband/core/ib_core.ko\n")
	write(t, dir, "sys/module/nvidia/initstate", "live\n")
	write(t, dir, "sys/module/nvidia/version", "580.159.04\n")
	write(t, dir, "sys/module/nvidia/taint", "OE\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/module/nvidia/holders/nvidia_uvm"), 0o755))
	// ib_uverbs built in, known only by its /sys/module directory (parameters).
	write(t, dir, "sys/module/ib_uverbs/parameters/x", "0\n")
	write(t, dir, "sys/module/odd/initstate", "sleepy\n")

	root, err := hostfs.New(dir)
	require.NoError(t, err)
	h, err := New(root)
	require.NoError(t, err)
	assert.Equal(t, "6.18.0-gdr", h.Release())
	assert.Contains(t, h.Sources(), "/proc/modules (6 modules)")

	for _, tc := range []struct {
		name    string
		loaded  bool
		builtin bool
		desc    string
	}{
		{"nvidia", true, false, "loaded (live, used by nvidia_uvm)"},
		{"nvidia-uvm", true, false, "loaded (live)"},
		{"ib_core", true, true, "built into the kernel"},
		{"ib_uverbs", true, false, "loaded (live, used by rdma_ucm,mlx5_ib)"}, // /proc/modules wins
		{"nvidia_peermem", false, false, "loaded (loading)"},
		{"nv_peer_mem", false, false, "not loaded"},
	} {
		st, err := h.Lookup(tc.name)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.loaded, st.Loaded(), tc.name)
		assert.Equal(t, tc.builtin, st.Builtin, tc.name)
		assert.Equal(t, tc.desc, st.String(), tc.name)
	}
	st, err := h.Lookup("nvidia")
	require.NoError(t, err)
	assert.Equal(t, "580.159.04", st.Version)
	assert.Equal(t, "OE", st.Taint)
	assert.Equal(t, []string{"nvidia_uvm"}, st.Holders)

	_, err = h.Lookup("odd")
	assert.ErrorContains(t, err, `"sleepy"`)
	_, err = h.Lookup("../etc")
	assert.Error(t, err)
}

func TestHostBuiltinOnlyBySysModule(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "sys/module/ib_uverbs/parameters/x", "0\n")
	root, err := hostfs.New(dir)
	require.NoError(t, err)
	h, err := New(root)
	require.NoError(t, err, "no /proc/modules is not an error")
	st, err := h.Lookup("ib_uverbs")
	require.NoError(t, err)
	assert.True(t, st.Builtin)
	assert.True(t, st.Loaded())
	assert.Contains(t, h.Sources(), "/proc/modules (missing)")
}

func TestHostMalformed(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "proc/modules", "garbage\n")
	root, err := hostfs.New(dir)
	require.NoError(t, err)
	_, err = New(root)
	assert.ErrorContains(t, err, `line 1 "garbage"`)
}

func FuzzParseProcModules(f *testing.F) {
	f.Add([]byte(procModules))
	f.Add([]byte("a 1 - - Unloading 0x0 (P)\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseProcModules(b)
		if err != nil {
			return
		}
		for _, m := range ms {
			if !validName(m.Name) || m.State == "" {
				t.Fatalf("accepted bad module %+v", m)
			}
		}
	})
}

func FuzzParseBuiltin(f *testing.F) {
	f.Add([]byte("kernel/drivers/infiniband/core/ib_core.ko\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseBuiltin(b)
		if err != nil {
			return
		}
		for n := range m {
			if !validName(n) {
				t.Fatalf("accepted bad name %q", n)
			}
		}
	})
}
