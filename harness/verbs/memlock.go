// RLIMIT_MEMLOCK: room for host memory registrations, raised or explained.

package verbs

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Locked memory. ibv_reg_mr of host memory pins its pages and the kernel
// adds them to the process's pinned_vm; past RLIMIT_MEMLOCK it fails with
// ENOMEM unless the process has CAP_IPC_LOCK (Linux
// drivers/infiniband/core/umem.c, ib_umem_get). libibverbs only warns when
// the soft limit is 32 KiB or less (rdma-core libibverbs/init.c,
// check_memlock_limit). The suite raises the soft limit to the hard one
// when a registration needs it, and otherwise names the limit before the
// kernel's bare ENOMEM.

// MemlockRemedy is how an operator raises the limit.
// Under Slurm a task inherits the soft limits of the shell that ran sbatch
// or srun (slurm.conf(5): PropagateResourceLimits, default ALL) under
// slurmd's hard limit; Slurm's documented fix is
// PropagateResourceLimitsExcept=MEMLOCK with slurmd itself unlimited.
const MemlockRemedy = "raise the locked-memory limit: `ulimit -l unlimited` in the shell that runs go test, `* - memlock unlimited` in /etc/security/limits.conf (a new login), LimitMEMLOCK=infinity for a systemd service, `--ulimit memlock=-1` for docker/podman (Kubernetes: the container runtime's default ulimit), or run with CAP_IPC_LOCK; under Slurm a task takes the limits of the shell that submitted it: set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf and LimitMEMLOCK=infinity for slurmd (its systemd unit)"

// memlockLimit is the process's RLIMIT_MEMLOCK and whether CAP_IPC_LOCK
// lifts it.
type memlockLimit struct {
	Soft, Hard uint64 // unix.RLIM_INFINITY: unlimited
	CapIPCLock bool
}

type memlockAction int

const (
	memlockOK    memlockAction = iota // the limit allows it (or does not apply)
	memlockRaise                      // soft is too low, hard is enough: raise soft to hard
	memlockShort                      // even hard is too low
)

func limitText(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprintf("%d bytes", v)
}

func (l memlockLimit) String() string {
	return fmt.Sprintf("RLIMIT_MEMLOCK soft %s, hard %s", limitText(l.Soft), limitText(l.Hard))
}

// decideMemlock says whether registering need more bytes of host memory
// fits, with pinned bytes already registered by this process.
func decideMemlock(l memlockLimit, pinned, need uint64) (memlockAction, error) {
	total := pinned + need
	switch {
	case l.CapIPCLock, l.Soft == unix.RLIM_INFINITY, l.Soft >= total:
		return memlockOK, nil
	case l.Hard == unix.RLIM_INFINITY, l.Hard >= total:
		return memlockRaise, nil
	}
	return memlockShort, verdict.Failf(MemlockRemedy, "%s; registering %d bytes of host memory needs %d bytes locked (%d already registered by this process), and without CAP_IPC_LOCK the kernel refuses the rest (ENOMEM)",
		l, need, total, pinned)
}

// memlockCause says whether the limit explains an ENOMEM/EPERM from
// ibv_reg_mr of need bytes, and in words either way; when it does, the
// remedy is MemlockRemedy.
func memlockCause(l memlockLimit, pinned, need uint64) (bool, string) {
	if l.CapIPCLock || l.Soft == unix.RLIM_INFINITY {
		why := "the limit is unlimited"
		if l.CapIPCLock {
			why = "the process has CAP_IPC_LOCK"
		}
		return false, fmt.Sprintf("not the locked-memory limit (%s, %s)", l, why)
	}
	if pinned+need > l.Soft {
		return true, fmt.Sprintf("the locked-memory limit: %s, and this registration needs %d bytes with %d already registered", l, pinned+need, pinned)
	}
	// Memory pinned outside the suite's MRs (CUDA pinned buffers, other
	// libraries) counts against the same limit.
	return true, fmt.Sprintf("probably the locked-memory limit: %s is finite and other pinned memory of this process counts against it (this registration needs %d bytes with %d registered by the suite)", l, pinned+need, pinned)
}

func readMemlock() (memlockLimit, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
		return memlockLimit{}, fmt.Errorf("getrlimit(RLIMIT_MEMLOCK): %w", err)
	}
	return memlockLimit{Soft: r.Cur, Hard: r.Max, CapIPCLock: hasCapIPCLock()}, nil
}

// hasCapIPCLock reads the effective capability set (capget(2)); false when
// it cannot be read, so that the limit is then respected.
func hasCapIPCLock() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3, Pid: 0}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[unix.CAP_IPC_LOCK/32].Effective&(1<<(unix.CAP_IPC_LOCK%32)) != 0
}

// raiseMemlock sets the soft limit to the hard one.
func raiseMemlock(l memlockLimit) error {
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: l.Hard, Max: l.Hard}); err != nil {
		return verdict.Failf(MemlockRemedy, "setrlimit(RLIMIT_MEMLOCK, soft = hard %s) from %s: %v", limitText(l.Hard), l, err)
	}
	return nil
}

var (
	memlockMu sync.Mutex
	// pinnedHost is how many bytes of host memory (whole pages) the
	// process has registered through RegMR and not yet deregistered.
	pinnedHost uint64
	// memlockRaised says when the suite raised the soft limit, for logs.
	memlockRaised string
)

// pageSpan is the bytes of whole pages [addr, addr+n) touches: what the
// kernel pins, in the running kernel's pages.
func pageSpan(addr uintptr, n int) uint64 { return pageSpanOf(addr, n, os.Getpagesize()) }

// pageSpanOf is pageSpan for pages of page bytes: 4 KiB on x86, 64 KiB on
// arm64 kernels built with 64K pages, where a 4 KiB buffer pins and is
// charged 64 KiB (Linux drivers/infiniband/core/umem.c ib_umem_get counts
// PAGE_SIZE pages against RLIMIT_MEMLOCK >> PAGE_SHIFT).
func pageSpanOf(addr uintptr, n, page int) uint64 {
	ps := uint64(page)
	start := uint64(addr) &^ (ps - 1)
	end := (uint64(addr) + uint64(n) + ps - 1) &^ (ps - 1)
	return end - start
}

// ensureMemlock makes room for registering need bytes of host memory, or
// says why there is none. The caller holds memlockMu.
func ensureMemlock(need uint64) error {
	l, err := readMemlock()
	if err != nil {
		return nil // cannot tell: let the kernel decide, its error is explained later
	}
	return ensureMemlockWith(l, need)
}

// ensureMemlockWith acts on limit l as read.
func ensureMemlockWith(l memlockLimit, need uint64) error {
	act, err := decideMemlock(l, pinnedHost, need)
	switch act {
	case memlockRaise:
		if err := raiseMemlock(l); err != nil {
			return err
		}
		memlockRaised = fmt.Sprintf("raised the RLIMIT_MEMLOCK soft limit from %s to the hard limit %s", limitText(l.Soft), limitText(l.Hard))
		return nil
	case memlockShort:
		return err
	}
	return nil
}

// MemlockRaised says whether (and how) the suite raised RLIMIT_MEMLOCK in
// this process; "" when it did not.
func MemlockRaised() string {
	memlockMu.Lock()
	defer memlockMu.Unlock()
	return memlockRaised
}
