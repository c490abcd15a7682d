// Package suitelock keeps the suite's conformance binaries on one host from
// running at the same time. go test runs up to -p package binaries at once
// (the CPU count by default): on a many-core host the GPU copy tests would
// load the PCIe links another package's RDMA traffic crosses, and counter
// deltas would rise on the wrong package. make conformance and dist/run.sh
// run the packages one at a time; this lock lets a binary tell when it is
// not alone anyway (go test without -p 1, two runs started by hand).
//
// Each binary that touches the live host takes an exclusive flock(2) on one
// file and keeps it until it exits (the kernel drops it then, also when the
// process is killed). A binary that finds it taken is not alone; the holder
// is named from /proc/locks and the holder's command line.
package suitelock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Path is the lock file every conformance binary of this host (of this
// mount namespace: a container has its own /tmp) shares.
const Path = "/tmp/gdrconf-conformance.lock"

// Lock is a held lock; it lasts until Release or the process's exit. It
// keeps a raw descriptor, not an *os.File, so that no finalizer closes it
// (and drops the lock) when the caller keeps no reference.
type Lock struct{ fd int }

// Holder is the process that holds the lock when Acquire finds it taken.
type Holder struct {
	PID     int    // 0 when /proc/locks did not tell
	Command string // its program's base name, "" when unknown
}

func (h Holder) String() string {
	switch {
	case h.PID == 0:
		return "another process (its PID is not visible here)"
	case h.Command == "":
		return fmt.Sprintf("PID %d", h.PID)
	}
	return fmt.Sprintf("%s (PID %d)", h.Command, h.PID)
}

// BusyError says the lock is held by another process.
type BusyError struct {
	Path   string
	Holder Holder
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s is held by %s", e.Path, e.Holder)
}

// Acquire takes the lock at path without waiting. A *BusyError says another
// process holds it; any other error says the lock could not be used at all
// (the caller goes on, unguarded, and says so).
func Acquire(path string) (*Lock, error) {
	fd, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return &Lock{fd: fd}, nil
	}
	defer syscall.Close(fd)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, &BusyError{Path: path, Holder: holderOf(fd, "/proc")}
	}
	return nil, fmt.Errorf("flock %s: %w", path, err)
}

// open opens the lock file for reading (flock needs no write access, so a
// file another user created serves every user), creating it world-readable
// when missing. An existing file is opened without O_CREAT: with
// fs.protected_regular set, O_CREAT on another user's file in a sticky
// directory such as /tmp is refused even when its mode allows reading.
func open(path string) (int, error) {
	const flags = syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	fd, err := syscall.Open(path, flags, 0)
	if err != syscall.ENOENT {
		return fd, err
	}
	fd, err = syscall.Open(path, flags|syscall.O_CREAT|syscall.O_EXCL, 0o644)
	if err == syscall.EEXIST { // another binary created it just now
		return syscall.Open(path, flags, 0)
	}
	return fd, err
}

// Release drops the lock; safe on nil and twice.
func (l *Lock) Release() error {
	if l == nil || l.fd < 0 {
		return nil
	}
	err := syscall.Close(l.fd)
	l.fd = -1
	return err
}

// holderOf finds who holds a flock on fd's inode in proc's locks table
// (proc(5): "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; the device is
// major:minor in hex, the inode in decimal).
func holderOf(fd int, proc string) Holder {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return Holder{}
	}
	pid := lockPID(filepath.Join(proc, "locks"), uint64(st.Dev), st.Ino)
	if pid == 0 {
		return Holder{}
	}
	return Holder{PID: pid, Command: command(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))}
}

// lockPID is the PID of the FLOCK WRITE lock on (dev, ino) in the locks
// file, 0 when none is listed or the file cannot be read.
func lockPID(locks string, dev, ino uint64) int {
	f, err := os.Open(locks)
	if err != nil {
		return 0
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// "1:" "FLOCK" "ADVISORY" "WRITE" pid dev:ino start end; a waiter's
		// line has "->" after the number.
		if len(fs) >= 6 && fs[1] == "FLOCK" && fs[3] == "WRITE" && sameInode(fs[5], want) {
			if pid, err := strconv.Atoi(fs[4]); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}

// sameInode compares "mj:mn:ino" fields numerically (the kernel prints the
// major and minor with at least two hex digits).
func sameInode(got, want string) bool {
	g, w := strings.Split(got, ":"), strings.Split(want, ":")
	if len(g) != 3 || len(w) != 3 {
		return false
	}
	for i, base := range []int{16, 16, 10} {
		a, err1 := strconv.ParseUint(g[i], base, 64)
		b, err2 := strconv.ParseUint(w[i], base, 64)
		if err1 != nil || err2 != nil || a != b {
			return false
		}
	}
	return true
}

// command is the base name of a process's program from its cmdline file
// ("pingpong.test"), at most 100 bytes; "" when unreadable.
func command(cmdline string) string {
	b, err := os.ReadFile(cmdline)
	if err != nil || len(b) == 0 {
		return ""
	}
	prog, _, _ := strings.Cut(string(b), "\x00")
	s := filepath.Base(prog)
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
