package rails

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestSysfsRails(t *testing.T) {
	s := sel(t, discover(t, "dgx"))
	rs, err := s.SysfsRails()
	require.NoError(t, err)
	assert.Equal(t, s.Rails, rs, "every GPU of the recorded DGX is in sysfs")

	var a *verdict.Finding
	empty, err := hostfs.New(t.TempDir())
	require.NoError(t, err)
	_, err = sel(t, Discover(empty)).SysfsRails()
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Contains(t, a.Cause, "no NVIDIA GPU: /sys/bus/pci/devices does not exist under ")

	h := discover(t, "rxe") // the lab VM: its emulated GPU is 0000:00:06.0
	require.NoError(t, h.AddDriverGPUs([]string{"0000:3b:00.0"}))
	_, err = sel(t, h, "GDR_GPU", "0000:3b:00.0").SysfsRails()
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Equal(t, "the selected GPUs are seen by the driver only, not in /sys/bus/pci/devices: no PCIe topology to check", a.Cause)

	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "fixtures", "hosts", "rxe"), dir)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "sys", "bus", "pci", "devices", "0000:00:06.0")))
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	h = Discover(r)
	require.NoError(t, h.AddDriverGPUs([]string{"0000:3b:00.0"}))
	_, err = sel(t, h).SysfsRails()
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Contains(t, a.Cause, "lists 1 PCI functions, none with vendor 0x10de and class 0x03xxxx", "a driver-only GPU is not in sysfs")

	dir = t.TempDir()
	copyTree(t, filepath.Join("..", "..", "fixtures", "hosts", "pix"), dir)
	gpu := filepath.Join(dir, "sys", "bus", "pci", "devices", "0000:03:00.0", "vendor")
	require.NoError(t, os.WriteFile(gpu, []byte("garbage\n"), 0o644))
	r, err = hostfs.New(dir)
	require.NoError(t, err)
	_, err = sel(t, Discover(r)).SysfsRails()
	var f *verdict.Finding
	require.ErrorAs(t, err, &f, "a GPU that cannot be read is not \"no GPU\"")
	assert.Contains(t, f.Cause, "PCI function(s) that may be NVIDIA GPUs could not be read: ")
	assert.Equal(t, "check the kernel's sysfs (or the recorded tree)", f.Remedy)
}
