package lab

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The NVIDIA driver's character devices (NVIDIA/open-gpu-kernel-modules,
// kernel-open/common/inc/nv-chardev-numbers.h: major 195, minors 0..247
// for the GPUs, 255 for the control device; kernel-open/nvidia/nv.c
// registers them as "nvidia" and "nvidiactl").
const (
	nvidiaMajor      = 195
	nvidiaCtlMinor   = 255
	nvidiaCtlNode    = "nvidiactl"
	nvidiaNodePrefix = "nvidia"
)

// gpuNode is GPU i's device file under dir (/dev/nvidia<i>).
func gpuNode(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("%s%d", nvidiaNodePrefix, i))
}

// makeGPUNodes makes the device files of n emulated GPUs in dir (/dev in
// the VMs) with the driver's numbers and the modes nvidia-modprobe gives
// them (0666). The emulated libcuda.so.1 opens them as the driver does
// (lab/emugpu/src/libcuda.c, "device files"): no driver serves major 195
// in a VM, so an open nothing denies fails with ENXIO (reachable), one a
// device cgroup denies with EPERM (hidden). Slurm's gres.conf names them
// (File=), and reads their numbers for its device cgroup; the Kubernetes
// device plugin hands them to the pods.
func makeGPUNodes(w io.Writer, dir string, n int) error {
	if n <= 0 {
		return nil
	}
	nodes := map[string]int{filepath.Join(dir, nvidiaCtlNode): nvidiaCtlMinor}
	for i := 0; i < n; i++ {
		nodes[gpuNode(dir, i)] = i
	}
	for p, minor := range nodes {
		err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(nvidiaMajor, uint32(minor))))
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mknod %s c %d %d: %w", p, nvidiaMajor, minor, err)
		}
		// mknod applies the umask; the driver's nodes are 0666.
		if err := unix.Chmod(p, 0o666); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	fmt.Fprintf(w, "emulated GPU: %s and %s..%d (char %d:0..%d, %d), mode 0666\n",
		filepath.Join(dir, nvidiaCtlNode), gpuNode(dir, 0), n-1, nvidiaMajor, n-1, nvidiaCtlMinor)
	return nil
}

// emulatedGPUCount is how many GPUs the emulated libcuda.so.1 has with
// environment env (the last FAKE_CUDA_DEVICES wins, as in a process's
// environment): its default of one, at most eight, as src/libcuda.c
// reads it.
func emulatedGPUCount(env []string) int {
	n := 1
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "FAKE_CUDA_DEVICES="); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v)) // atoi's 0 for junk, as in C
		}
	}
	return max(1, min(n, 8))
}
