// Package emugpu builds the emulated GPU: a stand-in libcuda.so.1 (src/libcuda.c)
// for machines without an NVIDIA GPU. Its unit tests load it through harness/cuda in
// place of the driver, and the Soft-RoCE lab installs it in its VMs so that
// the suite's GPU code paths run against rxe on memory that behaves like GPU
// memory where the suite could get it wrong: the CPU cannot touch it (an
// access faults), the NIC can, data enters and leaves only through
// cuMemcpy*, and data the NIC wrote is refused until
// cuFlushGPUDirectRDMAWrites. See src/libcuda.c for how. The virtual
// memory management calls (cuMemCreate, cuMemAddressReserve, cuMemMap,
// cuMemSetAccess: NCCL's allocator) give the same memory, with the real
// driver's answers to misuse.
//
// With FAKE_CUDA_DEVICES=<n> it has n devices that reach each other's
// memory (peer access, cuMemcpyPeer under the same flush rule), so the
// suite's multi-GPU checks run on it; no link (NVLink, a PCIe path) is
// emulated, and the checks that judge one say so.
//
// It finds its GPUs through their device files as the NVIDIA driver does
// (/dev/nvidiactl, /dev/nvidia<N>, or FAKE_CUDA_DEV_DIR's): a device cgroup
// that denies them (Slurm's ConstrainDevices, a container runtime) or a
// missing node hides a GPU, and without the control device or any GPU
// cuInit says CUDA_ERROR_NO_DEVICE, the real driver's answer. The lab's VMs
// make the nodes (major 195, as the driver numbers them), and an open no
// cgroup denies fails there with ENXIO, which counts as reachable.
//
// Results on it are labelled gdr.mem=gpu-emulated and never count as
// hardware evidence; the dma-buf path is not emulated (rxe has none).
package emugpu

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed src/libcuda.c
var source []byte

// Source is the C source of the emulated libcuda.so.1.
func Source() []byte { return source }

// Build compiles the emulated driver with cc ($CC) into dir/libcuda.so.1
// and returns its path. Extra flags (e.g. -DOMIT_MANAGED) go to the
// compiler.
func Build(dir string, flags ...string) (string, error) {
	return BuildWith("", dir, flags...)
}

// BuildWith is Build with the C compiler cc ("" is $CC, else cc): a cross
// compiler builds it for another architecture's lab (make lab-arm64).
func BuildWith(cc, dir string, flags ...string) (string, error) {
	if cc == "" {
		cc = os.Getenv("CC")
	}
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("emulated GPU: no C compiler (%s): %w", cc, err)
	}
	src := filepath.Join(dir, "gdr-emulated-libcuda.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "libcuda.so.1")
	args := append([]string{"-shared", "-fPIC", "-O2", "-Wall", "-o", out, src}, flags...)
	args = append(args, "-lpthread")
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("emulated GPU: %s %v: %w\n%s", cc, args, err, b)
	}
	return out, nil
}
