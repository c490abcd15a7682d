package verbs

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

const inf = unix.RLIM_INFINITY

// The decision before a host registration: fits, raise soft to hard, or
// fail naming the limit, the need and the remedy.
func TestMemlockDecision(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name         string
		l            memlockLimit
		pinned, need uint64
		want         memlockAction
	}{
		{"unlimited", memlockLimit{Soft: inf, Hard: inf}, 0, 64 * mib, memlockOK},
		{"soft enough", memlockLimit{Soft: 8 * mib, Hard: 8 * mib}, 4 * mib, 4 * mib, memlockOK},
		{"CAP_IPC_LOCK lifts it", memlockLimit{Soft: 64 << 10, Hard: 64 << 10, CapIPCLock: true}, 0, 64 * mib, memlockOK},
		{"soft low, hard unlimited", memlockLimit{Soft: 8 * mib, Hard: inf}, 0, 64 * mib, memlockRaise},
		{"soft low, hard enough", memlockLimit{Soft: 8 << 10, Hard: 128 * mib}, 32 * mib, 64 * mib, memlockRaise},
		{"already pinned counts", memlockLimit{Soft: 8 * mib, Hard: 8 * mib}, 6 * mib, 4 * mib, memlockShort},
		{"both low (Debian default 8 MiB)", memlockLimit{Soft: 8 * mib, Hard: 8 * mib}, 0, 64 * mib, memlockShort},
	} {
		act, err := decideMemlock(c.l, c.pinned, c.need)
		assert.Equal(t, c.want, act, c.name)
		if c.want != memlockShort {
			assert.NoError(t, err, c.name)
			continue
		}
		require.Error(t, err, c.name)
		for _, s := range []string{"RLIMIT_MEMLOCK soft 8388608 bytes, hard 8388608 bytes", "needs"} {
			assert.Contains(t, err.Error(), s, c.name)
		}
		f, ok := verdict.As(fmt.Errorf("ibv_reg_mr of host memory: %w", err))
		require.True(t, ok, "the remedy travels as a field: %v", err)
		assert.Equal(t, verdict.FellShort, f.Kind(), c.name)
		assert.NotContains(t, err.Error(), "remedy", c.name)
		for _, s := range []string{"ulimit -l unlimited", "limits.conf", "LimitMEMLOCK=infinity", "--ulimit memlock=-1", "PropagateResourceLimitsExcept=MEMLOCK"} {
			assert.Contains(t, f.Remedy, s, c.name)
		}
	}
	_, err := decideMemlock(memlockLimit{Soft: 1 << 20, Hard: 2 << 20}, 0, 3<<20)
	assert.ErrorContains(t, err, "needs 3145728 bytes locked")
	// Nothing more to pin always fits, whatever this process's limits.
	memlockMu.Lock()
	assert.NoError(t, ensureMemlock(0))
	memlockMu.Unlock()
}

// ENOMEM/EPERM from ibv_reg_mr reads as the limit only where the limit can
// be the reason.
func TestMemlockCause(t *testing.T) {
	cause, why := memlockCause(memlockLimit{Soft: 1 << 20, Hard: 1 << 20}, 0, 2<<20)
	assert.True(t, cause)
	assert.Contains(t, why, "RLIMIT_MEMLOCK soft 1048576 bytes")
	assert.NotContains(t, why, "remedy", "the caller adds MemlockRemedy as a field")
	cause, why = memlockCause(memlockLimit{Soft: 64 << 20, Hard: 64 << 20}, 0, 1<<20)
	assert.True(t, cause, "a finite limit may be spent by other pinned memory")
	assert.Contains(t, why, "probably")
	cause, why = memlockCause(memlockLimit{Soft: inf, Hard: inf}, 0, 1<<20)
	assert.False(t, cause)
	assert.Contains(t, why, "not the locked-memory limit")
	cause, why = memlockCause(memlockLimit{Soft: 1 << 10, Hard: 1 << 10, CapIPCLock: true}, 0, 1<<20)
	assert.False(t, cause)
	assert.Contains(t, why, "CAP_IPC_LOCK")
}

// The raise really sets soft to hard in this process (lowering the soft
// limit needs no privilege; the original is restored).
func TestMemlockRaise(t *testing.T) {
	var orig unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &orig))
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &orig) })
	low := uint64(os.Getpagesize())
	if orig.Max != inf && orig.Max <= low {
		t.Skipf("the hard RLIMIT_MEMLOCK here is %d bytes: nothing to raise to", orig.Max)
	}
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: low, Max: orig.Max}))
	l, err := readMemlock()
	require.NoError(t, err)
	require.Equal(t, low, l.Soft)
	l.CapIPCLock = false // as an unprivileged user (this may run as root)
	memlockMu.Lock()
	saved := pinnedHost
	pinnedHost = 0
	err = ensureMemlockWith(l, 16*low)
	pinnedHost = saved
	memlockMu.Unlock()
	require.NoError(t, err)
	var now unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &now))
	assert.Equal(t, orig.Max, now.Cur, "soft raised to hard")
	assert.Contains(t, MemlockRaised(), "to the hard limit")
}

func TestPageSpan(t *testing.T) {
	ps := uint64(os.Getpagesize())
	assert.Equal(t, ps, pageSpan(uintptr(ps), 1))
	assert.Equal(t, 2*ps, pageSpan(uintptr(2*ps-1), 2))
	assert.Equal(t, ps, pageSpan(0, int(ps)))
}

// On an arm64 kernel with 64 KiB pages (Ubuntu's linux-nvidia-64k, RHEL's
// kernel-64k) every registration pins whole 64 KiB pages, and the
// locked-memory arithmetic counts them so.
func TestPageSpan64K(t *testing.T) {
	const pg = 65536
	assert.Equal(t, uint64(pg), pageSpanOf(0x10000, 4096, pg), "a 4 KiB buffer pins one 64 KiB page")
	assert.Equal(t, uint64(2*pg), pageSpanOf(0x1f000, 8192, pg), "across a 64 KiB boundary: two pages")
	assert.Equal(t, uint64(4096), pageSpanOf(0x1f000, 4096, 4096), "the same buffer on 4 KiB pages")
	assert.Equal(t, uint64(2<<20), pageSpanOf(0x200000, 2<<20, pg))

	// A 64 KiB soft and hard limit (a common default) holds one such
	// registration, not two.
	l := memlockLimit{Soft: pg, Hard: pg}
	act, err := decideMemlock(l, 0, pageSpanOf(0x10000, 4096, pg))
	assert.Equal(t, memlockOK, act)
	assert.NoError(t, err)
	act, err = decideMemlock(l, pageSpanOf(0x10000, 4096, pg), pageSpanOf(0x30000, 4096, pg))
	assert.Equal(t, memlockShort, act)
	assert.Error(t, err)
}
