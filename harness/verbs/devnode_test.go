package verbs

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// A node the process may not open is named with its mode, owner and group
// and a remedy that fits how it is set; never a crash.
func TestNodeAccess(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dev/infiniband"), 0o755))
	node := filepath.Join(dir, "dev/infiniband/uverbs0")
	require.NoError(t, os.WriteFile(node, nil, 0o600))
	require.NoError(t, os.Chmod(node, 0o600))
	root, err := hostfs.New(dir)
	require.NoError(t, err)

	f := NodeAccess(root, "/dev/infiniband/uverbs0", syscall.EACCES)
	for _, s := range []string{node, "EACCES", "mode 0600", "-rw-------", "uid " + itoa(os.Getuid()), "gid " + itoa(os.Getgid())} {
		assert.Contains(t, f.Cause, s)
	}
	for _, s := range []string{"udev rule", "group rdma", "--device /dev/infiniband/uverbs0", "run as root"} {
		assert.Contains(t, f.Remedy, s)
	}
	assert.Equal(t, verdict.FellShort, f.Kind(), "the host's configuration")
	assert.NotContains(t, f.Cause, "remedy", "cause and remedy are fields, apart")
	msg := f.Line()

	// Open to all and still EPERM: not the mode, a cgroup or LSM.
	require.NoError(t, os.Chmod(node, 0o666))
	f = NodeAccess(root, "/dev/infiniband/uverbs0", syscall.EPERM)
	for _, s := range []string{"EPERM", "mode 0666", "device cgroup"} {
		assert.Contains(t, f.Cause, s)
	}
	assert.Contains(t, f.Remedy, "--device /dev/infiniband/uverbs0")

	// A node its group may use: join the group (needs a non-root group).
	require.NoError(t, os.Chmod(node, 0o660))
	if err := os.Chown(node, -1, 12345); err == nil {
		f = NodeAccess(root, "/dev/infiniband/uverbs0", syscall.EACCES)
		assert.Contains(t, f.Cause, "gid 12345")
		assert.Contains(t, f.Remedy, "add the user to group")
	} else {
		t.Logf("chown to gid 12345 not permitted here (%v): the group remedy is not exercised", err)
	}

	// No node at all: say so, with where the suite looked.
	f = NodeAccess(root, "/dev/infiniband/rdma_cm", syscall.EACCES)
	assert.Contains(t, f.Cause, filepath.Join(dir, "dev/infiniband/rdma_cm")+" does not exist")
	assert.Contains(t, f.Remedy, "rdma_ucm")
	assert.Contains(t, msg, "; remedy: a udev rule", "the log line joins them as every line of the suite does")
}

func itoa(i int) string { return strconv.Itoa(i) }
