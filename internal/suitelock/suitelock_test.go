package suitelock

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestSecondAcquireIsBusyAndNamesTheHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l, err := Acquire(p)
	require.NoError(t, err)
	// flock conflicts between open file descriptions, also of one process:
	// the second open is what another binary would see.
	_, err = Acquire(p)
	var busy *BusyError
	require.True(t, errors.As(err, &busy), "got %v", err)
	assert.Equal(t, os.Getpid(), busy.Holder.PID, "/proc/locks names this process")
	assert.Equal(t, filepath.Base(os.Args[0]), busy.Holder.Command)
	assert.Contains(t, err.Error(), p)

	require.NoError(t, l.Release())
	l2, err := Acquire(p)
	require.NoError(t, err, "a released lock is free again")
	require.NoError(t, l2.Release())
	require.NoError(t, (*Lock)(nil).Release())
}

// A binary killed while it holds the lock frees it: the kernel drops a
// flock with the last descriptor, so a killed run never blocks the next.
func TestLockDiesWithItsHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsLock$")
	cmd.Env = append(os.Environ(), "SUITELOCK_HOLD="+p)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 4)
	_, err = io.ReadFull(out, buf) // "held" once the child has it
	require.NoError(t, err)
	_, err = Acquire(p)
	var busy *BusyError
	require.True(t, errors.As(err, &busy), "the child holds the lock: %v", err)
	assert.Equal(t, cmd.Process.Pid, busy.Holder.PID)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	l, err := Acquire(p)
	require.NoError(t, err, "the killed holder's lock is gone")
	require.NoError(t, l.Release())
}

// TestHelperHoldsLock is the child of TestLockDiesWithItsHolder.
func TestHelperHoldsLock(t *testing.T) {
	p := os.Getenv("SUITELOCK_HOLD")
	if p == "" {
		t.Skip("a child process of TestLockDiesWithItsHolder only")
	}
	_, err := Acquire(p)
	require.NoError(t, err)
	os.Stdout.WriteString("held")
	time.Sleep(time.Minute)
}

func TestHolderFromLocksTable(t *testing.T) {
	proc := t.TempDir()
	f, err := os.Create(filepath.Join(t.TempDir(), "lock"))
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	id := strconv.FormatUint(st.Ino, 10)
	dev := devField(uint64(st.Dev))
	locks := "1: POSIX  ADVISORY  WRITE 99 " + dev + ":" + id + " 0 EOF\n" + // another kind of lock
		"2: FLOCK  ADVISORY  WRITE 4242 " + dev + ":" + id + " 0 EOF\n" +
		"2: -> FLOCK  ADVISORY  WRITE 5151 " + dev + ":" + id + " 0 EOF\n" // a waiter
	require.NoError(t, os.WriteFile(filepath.Join(proc, "locks"), []byte(locks), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(proc, "4242"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proc, "4242", "cmdline"), []byte("/opt/gdrconf/bin/ping\x1b[31mpong.test\x00-test.v=test2json\x00"), 0o644))
	h := holderOf(int(f.Fd()), proc)
	assert.Equal(t, 4242, h.PID)
	assert.Equal(t, "ping?[31mpong.test", h.Command, "the program's base name; control characters replaced")
	assert.Equal(t, "ping?[31mpong.test (PID 4242)", h.String())

	require.NoError(t, os.WriteFile(filepath.Join(proc, "locks"), []byte("garbage\n1: FLOCK ADVISORY WRITE x 0:0:1 0 EOF\n"), 0o644))
	assert.Equal(t, Holder{}, holderOf(int(f.Fd()), proc), "an unreadable table names nobody")
	assert.Equal(t, "another process (its PID is not visible here)", Holder{}.String())
}

func devField(dev uint64) string {
	return strconv.FormatUint(uint64(unix.Major(dev)), 16) + ":" + strconv.FormatUint(uint64(unix.Minor(dev)), 16)
}
