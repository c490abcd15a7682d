package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree builds a small sysfs-like tree: relative and absolute links, a loop and
// a dangling link.
func tree(t testing.TB) *Root {
	t.Helper()
	dir := t.TempDir()
	mk := func(p, content string) {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	ln := func(target, p string) {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.Symlink(target, full))
	}
	mk("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", "0x10de\n")
	ln("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", "sys/bus/pci/devices/0000:01:00.0")
	ln("/sys/devices/pci0000:00/0000:00:01.0", "sys/bus/pci/devices/0000:00:01.0")
	ln("../../../../../../etc/passwd", "sys/devices/pci0000:00/escape")
	ln("loop2", "sys/loop1")
	ln("loop1", "sys/loop2")
	ln("nowhere/at/all", "sys/dangling")
	r, err := New(dir)
	require.NoError(t, err)
	return r
}

func TestResolveRelativeAndAbsoluteLinks(t *testing.T) {
	r := tree(t)
	got, err := r.Resolve("/sys/bus/pci/devices/0000:01:00.0/vendor")
	require.NoError(t, err)
	assert.Equal(t, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", got)

	got, err = r.Resolve("/sys/bus/pci/devices/0000:00:01.0")
	require.NoError(t, err)
	assert.Equal(t, "/sys/devices/pci0000:00/0000:00:01.0", got, "absolute targets are taken inside the root")

	s, err := r.ReadString("/sys/bus/pci/devices/0000:01:00.0/vendor")
	require.NoError(t, err)
	assert.Equal(t, "0x10de", s)
}

func TestResolveStaysInsideRoot(t *testing.T) {
	r := tree(t)
	got, err := r.Resolve("/sys/devices/pci0000:00/escape")
	require.NoError(t, err)
	assert.Equal(t, "/etc/passwd", got, ".. stops at the root")
	_, err = r.ReadFile("/sys/devices/pci0000:00/escape")
	require.Error(t, err, "the host's /etc/passwd must not be read through a fixture")
	assert.True(t, errors.Is(err, fs.ErrNotExist))
}

func TestLoopsAndDanglingLinksAreErrors(t *testing.T) {
	r := tree(t)
	_, err := r.ReadFile("/sys/loop1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "symbolic links")

	_, err = r.ReadFile("/sys/dangling")
	require.Error(t, err)
	_, err = r.ReadFile("/sys/dangling/x")
	require.Error(t, err)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	assert.Contains(t, err.Error(), "/sys/dangling/x")
	assert.False(t, r.Exists("/sys/dangling"))
}

func TestReadDirGlobLink(t *testing.T) {
	r := tree(t)
	names, err := r.ReadDir("/sys/bus/pci/devices")
	require.NoError(t, err)
	assert.Equal(t, []string{"0000:00:01.0", "0000:01:00.0"}, names)

	_, err = r.ReadDir("/sys/class/infiniband")
	require.Error(t, err)
	assert.True(t, errors.Is(err, fs.ErrNotExist))
	assert.Contains(t, err.Error(), "/sys/class/infiniband (under ")

	g, err := r.Glob("/sys/bus/pci/devices/*")
	require.NoError(t, err)
	assert.Equal(t, []string{"/sys/bus/pci/devices/0000:00:01.0", "/sys/bus/pci/devices/0000:01:00.0"}, g)

	target, err := r.ReadLink("/sys/bus/pci/devices/0000:01:00.0")
	require.NoError(t, err)
	assert.Equal(t, "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0", target)

	fi, err := r.Lstat("/sys/bus/pci/devices/0000:01:00.0")
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&fs.ModeSymlink)
}

func TestNewRejectsBadRoots(t *testing.T) {
	_, err := New(filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = New(f)
	require.ErrorContains(t, err, "not a directory")
	r, err := New("")
	require.NoError(t, err)
	assert.True(t, r.IsLive())
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"/sys/bus/pci/devices/0000:01:00.0/vendor", "../..", "/sys/loop1/x", "//a/./b/../c", ""} {
		f.Add(s)
	}
	r := tree(f)
	f.Fuzz(func(t *testing.T, p string) {
		got, err := r.Resolve(p)
		if err == nil && (len(got) == 0 || got[0] != '/') {
			t.Fatalf("Resolve(%q) = %q: not an absolute host path", p, got)
		}
	})
}

// Every read is capped: a huge "attribute" is an error naming the file and
// the limit, read no further than the limit; larger files use ReadFileMax.
func TestReadCap(t *testing.T) {
	dir := t.TempDir()
	r, err := New(dir)
	require.NoError(t, err)
	big := filepath.Join(dir, "vendor")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(100<<20)) // 100 MB, sparse
	require.NoError(t, f.Close())
	_, err = r.ReadFile("/vendor")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "/vendor (under "+dir+")")
	assert.Contains(t, err.Error(), "104857600 bytes, above the read limit of 65536 bytes")
	assert.Contains(t, err.Error(), "a sysfs attribute is at most one page")
	assert.Less(t, len(err.Error()), 400)
	_, err = r.ReadString("/vendor")
	assert.ErrorIs(t, err, ErrTooLarge)

	exact := make([]byte, MaxFile)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "page"), exact, 0o644))
	b, err := r.ReadFile("/page")
	require.NoError(t, err)
	assert.Len(t, b, MaxFile, "a file of exactly the limit reads")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "page1"), append(exact, 'x'), 0o644))
	_, err = r.ReadFile("/page1")
	assert.ErrorContains(t, err, "65537 bytes, above the read limit")
	b, err = r.ReadFileMax("/page1", 1<<20)
	require.NoError(t, err)
	assert.Len(t, b, MaxFile+1)
	_, err = r.ReadFileMax("/page1", 10)
	assert.ErrorContains(t, err, "above the read limit of 10 bytes for this file: the file is corrupt")
}

// A FIFO, a device-like entry or a directory where a file belongs is an
// error at once, never a read that waits forever.
func TestReadNonRegular(t *testing.T) {
	dir := t.TempDir()
	r, err := New(dir)
	require.NoError(t, err)
	require.NoError(t, syscallMkfifo(filepath.Join(dir, "fifo")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir"), 0o755))
	done := make(chan error, 1)
	go func() { _, err := r.ReadFile("/fifo"); done <- err }()
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "/fifo (under "+dir+"): a FIFO, not a file")
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO hangs")
	}
	_, err = r.ReadFile("/dir")
	assert.ErrorContains(t, err, "a directory, not a file")
	// What /proc files look like: size 0, content anyway.
	b, err := New("/")
	require.NoError(t, err)
	s, err := b.ReadString("/proc/self/stat")
	require.NoError(t, err)
	assert.NotEmpty(t, s)
}

func syscallMkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

// A root whose proc is this kernel's procfs is the running host mounted
// elsewhere (deploy/k8s's /host); a tree with a copied boot ID is not.
func TestIsLiveMountedElsewhere(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skipf("no /proc/sys/kernel/random/boot_id on this machine: %v", err)
	}
	live, err := New("/")
	require.NoError(t, err)
	assert.True(t, live.IsLive())

	mounted := t.TempDir()
	require.NoError(t, os.Symlink("/proc", filepath.Join(mounted, "proc")))
	r, err := New(mounted)
	require.NoError(t, err)
	assert.True(t, r.IsLive(), "proc is this kernel's procfs")
	assert.Equal(t, "/sys/x (under "+mounted+")", r.describe("/sys/x"), "messages still name where the files are")
	// Device nodes are opened in this process's own /dev, not the mounted
	// host's: a pod sees all of its node's nodes at /host/dev.
	assert.Equal(t, "/", r.Devices().Dir())
	assert.Equal(t, "/", live.Devices().Dir())
	assert.Equal(t, "/", r.Own().Dir(), "the pod's own files are its image's")
	assert.True(t, r.NodeMounted())
	assert.False(t, live.NodeMounted(), "/ is not mounted elsewhere")

	recorded := t.TempDir()
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(recorded, "proc/sys/kernel/random"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(recorded, "proc/sys/kernel/random/boot_id"), id, 0o644))
	r, err = New(recorded)
	require.NoError(t, err)
	assert.False(t, r.IsLive(), "a recorded tree with this boot's ID is still a recorded tree: its proc is no procfs")
	assert.Same(t, r, r.Devices(), "a recorded tree's /dev is the recorded process's")
	assert.Same(t, r, r.Own())
	assert.False(t, r.NodeMounted())
}

// OpenProbe answers with open(2)'s error, which says why a node is out of
// reach; it reads and writes nothing. /dev/null is a character device
// every process may open.
func TestOpenProbe(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev", "nvidiactl"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("/dev/nvidiactl", filepath.Join(dir, "dev", "link")))
	r, err := New(dir)
	require.NoError(t, err)
	assert.NoError(t, r.OpenProbe("/dev/nvidiactl"))
	assert.NoError(t, r.OpenProbe("/dev/link"), "an absolute link resolves inside the root")
	b, err := os.ReadFile(filepath.Join(dir, "dev", "nvidiactl"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(b), "nothing written")
	err = r.OpenProbe("/dev/nvidia0")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "open /dev/nvidia0 (under "+dir+")")
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(filepath.Join(dir, "dev", "nvidiactl"), 0))
		assert.ErrorIs(t, r.OpenProbe("/dev/nvidiactl"), syscall.EACCES)
	}
	live, err := New("/")
	require.NoError(t, err)
	if _, err := os.Stat("/dev/null"); err == nil {
		assert.NoError(t, live.OpenProbe("/dev/null"))
	}
}
