package gpumr

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// BufSize is what each registration covers: one 2 MiB GPU page, the unit
// nvidia_peermem pins and the smallest a dma-buf export maps.
const BufSize = 2 << 20

// State of one registration path, recorded as gdr.peermem / gdr.dmabuf.
type State string

const (
	OK          State = "ok"          // the path registered GPU memory
	Failed      State = "fail"        // it was tried and refused
	Unsupported State = "unsupported" // this host cannot offer it (not tried, or refused as unsupported)
)

// Outcome of one registration path.
type Outcome struct {
	State State
	Err   error
	// Detail is what registered (State OK): the module state, the MR.
	Detail string
	// Finding is why it did not (State Failed or Unsupported): its cause,
	// its remedy and whether the path is absent here (nvidia_peermem not
	// loaded, dma-buf unsupported) or fell short.
	Finding verdict.Finding
	// Unproven, on State OK, is why the registration is not credited to
	// its path (JudgePlainRegistration: a GPU on NVLink-C2C registered
	// without a peer client); nil when it is.
	Unproven *verdict.Finding
}

// Why is what a person reads about o: what registered, or why not (the
// cause; the remedy is the Finding's).
func (o Outcome) Why() string {
	if o.State == OK {
		return o.Detail
	}
	return o.Finding.Cause
}

func failed(err error, remedy, format string, args ...any) Outcome {
	return Outcome{State: Failed, Err: err, Finding: *verdict.Failf(remedy, format, args...)}
}

// PeermemState describes nvidia_peermem and the legacy nv_peer_mem as the
// host under root shows them.
func PeermemState(root *hostfs.Root) (loaded bool, legacy bool, desc string) {
	h, err := kmod.New(root)
	if err != nil {
		return false, false, fmt.Sprintf("module state unreadable: %v", err)
	}
	st, err := h.Lookup("nvidia_peermem")
	if err != nil {
		return false, false, fmt.Sprintf("nvidia_peermem state unreadable: %v", err)
	}
	old, _ := h.Lookup("nv_peer_mem")
	desc = fmt.Sprintf("nvidia_peermem %s (%s %s)", st, root.Host("/sys/module/nvidia_peermem"), map[bool]string{true: "present", false: "absent"}[st.SysModule])
	if old.Loaded() {
		desc += "; legacy nv_peer_mem " + old.String()
	}
	return st.Loaded(), old.Loaded(), desc
}

// peermemFailure says why ibv_reg_mr of GPU memory failed with err, given
// the module state (desc as PeermemState words it) and whether the memory
// came from cuMemCreate (vmm).
func peermemFailure(err error, loaded, legacy, vmm bool, desc string) Outcome {
	var errno syscall.Errno
	errors.As(err, &errno)
	switch {
	case legacy:
		return failed(err, "rmmod nv_peer_mem; modprobe nvidia-peermem", "the legacy nv_peer_mem module is loaded (%s)", desc)
	case loaded && vmm:
		// The driver says VMM memory registers (GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
		// is the precondition of this case) and the buffer is RDMA-capable
		// (RequireDevice), yet the peer-memory path refused it.
		return failed(err, "update the NVIDIA driver and nvidia_peermem together, use dma-buf (MREG-04), or set NCCL_CUMEM_ENABLE=0 until then; look for nvidia_peermem/ib_umem lines in dmesg",
			"nvidia_peermem is loaded but the NIC stack refused cuMemCreate memory created RDMA-capable (gpuDirectRDMACapable=1, IS_GPU_DIRECT_RDMA_CAPABLE=1, GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED=1); where the cuMemAlloc case passes, peer memory on this host takes cuMemAlloc memory only, and NCCL, which allocates with cuMemCreate by default, fails to register (%s)", desc)
	case loaded:
		return failed(err, "reinstall the NVIDIA driver after MLNX_OFED, or rebuild nvidia_peermem with DKMS; look for nvidia_peermem/ib_umem lines in dmesg",
			"nvidia_peermem is loaded but the NIC stack refused GPU memory: nvidia_peermem was probably built against another OFED/rdma-core kernel stack than the running one, or the NIC driver lacks peer-memory support (%s)", desc)
	case errno == syscall.EFAULT || errno == syscall.EINVAL:
		// Absent, not failed: dma-buf is the other way (MREG-04), and
		// MREG-05 fails when neither works.
		o := failed(err, "modprobe nvidia-peermem", "nvidia_peermem is not loaded, so the NIC cannot pin GPU memory through ibv_reg_mr (%s)", desc)
		o.Finding.Outcome = verdict.Absent
		return o
	}
	return failed(err, "", "unexpected error registering GPU memory (%s)", desc)
}

// refusedAsUnsupported says whether err, from registering an exported GPU
// buffer after an inconclusive probe, means dma-buf MRs are unsupported
// rather than broken.
func refusedAsUnsupported(inconclusive bool, err error) bool {
	return err != nil && inconclusive && (errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EPROTONOSUPPORT))
}
