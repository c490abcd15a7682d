package lab

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

// rxeTree is a changeable copy of the recorded rxe host: rxe0 on eth0, port
// 1 ACTIVE, GID 1 link-local (its IPv4-mapped GIDs are 2 and 3).
func rxeTree(t *testing.T) (*hostfs.Root, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host")
	require.NoError(t, hostfstest.Copy(filepath.Join("..", "fixtures", "hosts", "rxe"), dir))
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	return r, filepath.Join(dir, "sys", "devices", "virtual", "infiniband", "rxe0", "ports", "1")
}

const ipv4GID = "0000:0000:0000:0000:0000:ffff:c612:0001\n"

func TestWaitRXE(t *testing.T) {
	r, port := rxeTree(t)
	require.NoError(t, os.WriteFile(filepath.Join(port, "gids", "1"), []byte(ipv4GID), 0o644))
	gid, err := waitRXE(r, time.Now().Add(time.Second), "rxe0")
	require.NoError(t, err)
	assert.Equal(t, ipv4GID, gid, "the GID file as written")
}

func TestWaitRXETimesOut(t *testing.T) {
	r, port := rxeTree(t)
	_, err := waitRXE(r, time.Now(), "rxe0")
	require.Error(t, err)
	assert.Equal(t, "timed out waiting for "+r.Host("/sys/class/infiniband/rxe0/ports/1/gids/1")+" (RoCE v2 IPv4 GID)", err.Error(),
		"ACTIVE, but GID 1 is link-local")

	require.NoError(t, os.WriteFile(filepath.Join(port, "state"), []byte("1: DOWN\n"), 0o644))
	_, err = waitRXE(r, time.Now(), "rxe0")
	require.Error(t, err)
	assert.Equal(t, "timed out waiting for "+r.Host("/sys/class/infiniband/rxe0/ports/1/state")+" ACTIVE", err.Error())

	_, err = waitRXE(r, time.Now(), "rxe1")
	require.Error(t, err, "no such device")
	assert.Contains(t, err.Error(), "rxe1/ports/1/state ACTIVE")
}

// The port comes up while the agent waits, as rxe's does after `rdma link add`.
func TestWaitRXEComesUp(t *testing.T) {
	r, port := rxeTree(t)
	require.NoError(t, os.WriteFile(filepath.Join(port, "state"), []byte("1: DOWN\n"), 0o644))
	done := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		err := os.WriteFile(filepath.Join(port, "state"), []byte("4: ACTIVE\n"), 0o644)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			err = os.WriteFile(filepath.Join(port, "gids", "1"), []byte(ipv4GID), 0o644)
		}
		done <- err
	}()
	gid, err := waitRXE(r, time.Now().Add(10*time.Second), "rxe0")
	require.NoError(t, <-done)
	require.NoError(t, err)
	assert.Equal(t, ipv4GID, gid)
}
