// Package nvdriver reads what the NVIDIA driver and its tools say, in the
// forms they print it:
//
//   - /proc/driver/nvidia/version, the kernel module's self-description
//     (this file);
//   - CUDA versions in the two spellings a host offers: the driver's integer
//     (cuDriverGetVersion / nvmlSystemGetCudaDriverVersion, 13000 = 13.0) and
//     the toolkit compiler's `nvcc -V` text (cuda.go);
//   - the matrix `nvidia-smi topo -m` prints: GPU and NIC labels, the link
//     between every pair (X, NV#, PIX, PXB, PHB, NODE, SYS), the CPU/NUMA
//     affinity columns and the NIC legend (NIC0: mlx5_0) (nvsmi.go);
//   - why CUDA does not show this process NVIDIA GPUs the PCI bus lists:
//     the driver's binding, its per-GPU information files, its device
//     files, Slurm's and CUDA's variables (hidden.go).
//
// The version file comes in two flavours:
//
//	NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@...)  <date>
//	NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023
//
// The first is the open GPU kernel module (the one dma-buf based GPUDirect
// RDMA needs), the second the proprietary one.
package nvdriver

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Runfile names NVIDIA's .run installer for the architecture this binary
// is built for, as remedies name it: NVIDIA publishes one per architecture
// (NVIDIA-Linux-x86_64-<version>.run, NVIDIA-Linux-aarch64-<version>.run for
// Grace), and a Grace host cannot run the x86_64 one.
var Runfile = "NVIDIA-Linux-" + Machine(runtime.GOARCH) + "-<version>.run"

// Machine is the kernel's name (uname -m, and the driver's NVRM line) of a
// Go architecture: x86_64 for amd64, aarch64 for arm64.
func Machine(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return goarch
}

// VersionFile is where the driver describes itself.
const VersionFile = "/proc/driver/nvidia/version"

// Info is what /proc/driver/nvidia/version says.
type Info struct {
	Version string // "580.159.04"
	Open    bool   // open GPU kernel module
	Arch    string // x86_64, aarch64, ppc64le; "" when not stated
	GCC     string // compiler the module was built with, from the "GCC version:" line
	Line    string // the NVRM line as read
}

// Flavour is "open" or "proprietary", the value of attr gdr.kernel_module.
func (i Info) Flavour() string {
	if i.Open {
		return "open"
	}
	return "proprietary"
}

// ParseVersionFile parses the file's contents. Errors name what was wrong and
// quote the line.
func ParseVersionFile(b []byte) (Info, error) {
	var info Info
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "NVRM version:"):
			if found {
				return info, fmt.Errorf("%s: two NVRM version lines", VersionFile)
			}
			found = true
			var err error
			if info, err = parseNVRM(line); err != nil {
				return info, err
			}
		case strings.HasPrefix(line, "GCC version:"):
			info.GCC = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "GCC version:")), "gcc version"))
		}
	}
	if !found {
		return info, fmt.Errorf("%s has no \"NVRM version:\" line: %s", VersionFile, clip.QuoteN(string(b), 200))
	}
	return info, nil
}

func parseNVRM(line string) (Info, error) {
	info := Info{Line: line}
	rest := strings.TrimSpace(strings.TrimPrefix(line, "NVRM version:"))
	i := strings.Index(rest, "Kernel Module")
	if !strings.HasPrefix(rest, "NVIDIA UNIX") || i < 0 {
		return info, fmt.Errorf("%s: NVRM line is not \"NVIDIA UNIX ... Kernel Module <version> ...\": %s", VersionFile, clip.QuoteN(line, 200))
	}
	head := strings.Fields(rest[:i])
	tail := strings.Fields(rest[i+len("Kernel Module"):])
	for _, w := range head {
		switch w {
		case "Open":
			info.Open = true
		case "x86_64", "aarch64", "ppc64le", "arm64":
			info.Arch = w
		}
	}
	// "for <arch>" follows "Kernel Module" in the open flavour.
	if len(tail) >= 2 && tail[0] == "for" {
		info.Arch = tail[1]
		tail = tail[2:]
	}
	if len(tail) == 0 {
		return info, fmt.Errorf("%s: no driver version after \"Kernel Module\": %s", VersionFile, clip.QuoteN(line, 200))
	}
	if _, err := ParseDriverVersion(tail[0]); err != nil {
		return info, fmt.Errorf("%s: %w in %s", VersionFile, err, clip.QuoteN(line, 200))
	}
	info.Version = tail[0]
	return info, nil
}

// ParseDriverVersion splits a driver version ("580.159.04", "535.54.03",
// "550.54") into numbers, for comparison. Leading zeros ("04") are kept in
// the string form only.
func ParseDriverVersion(s string) ([]int, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("driver version %s is not of the form NNN.NN[.NN]", clip.QuoteN(s, 200))
	}
	out := make([]int, len(parts))
	for i, p := range parts {
		if p == "" || len(p) > 6 || strings.Trim(p, "0123456789") != "" {
			return nil, fmt.Errorf("driver version %s is not of the form NNN.NN[.NN]", clip.QuoteN(s, 200))
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("driver version %s is not of the form NNN.NN[.NN]", clip.QuoteN(s, 200))
		}
		out[i] = n
	}
	return out, nil
}

// SameVersion reports whether two driver version strings name one version
// (NVML and /proc agree on "580.159.04" but may differ in padding).
func SameVersion(a, b string) bool {
	x, err1 := ParseDriverVersion(strings.TrimSpace(a))
	y, err2 := ParseDriverVersion(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
