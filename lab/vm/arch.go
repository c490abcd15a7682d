package vm

import (
	"fmt"
	"runtime"
)

// Arch is what differs between the labs' guest architectures, in one
// place: Debian's names for the guest's packages and library folders,
// qemu's system emulator and machine, and the serial ports the guest's
// console and record stream use. Everything else (the parts, the image,
// the agent and its jobs) is the same code for every architecture.
type Arch struct {
	GOARCH    string // Go's and Debian's name: amd64, arm64
	Multiarch string // Debian's multiarch triplet: the guest's library folders and cross compiler
	// QEMU is the system emulator, QEMUPackage Debian's package of it.
	QEMU, QEMUPackage string
	// Machine is qemu's machine and CPU options; empty: qemu's default PC.
	Machine []string
	// KernelMeta is the Debian meta package whose dependency names the kernel.
	KernelMeta string
	// Console is the kernel's console device (qemu's first -serial), and
	// ResultPort the guest's device of the agent's record stream.
	Console, ResultPort string
	// ResultDevice is the qemu device the record stream is written
	// through, chardev "res"; empty: a second -serial (ttyS1 on a PC).
	ResultDevice string
	// Packages are Debian packages a guest of this architecture needs from
	// the parts besides Packages: on a foreign architecture the C library
	// (this host's serves only its own).
	Packages []string
}

// AMD64 is the x86_64 guest: a PC, its first two UARTs.
var AMD64 = Arch{
	GOARCH: "amd64", Multiarch: "x86_64-linux-gnu",
	QEMU: "qemu-system-x86_64", QEMUPackage: "qemu-system-x86",
	KernelMeta: "linux-image-amd64",
	Console:    "ttyS0", ResultPort: "ttyS1",
}

// ARM64 is the aarch64 guest: qemu's virt board booted straight into the
// kernel (-kernel, no firmware), Debian's arm64 kernel. The board has one
// UART (PL011, ttyAMA0: the console); the record stream goes through a PCI
// 16550 (pci-serial), which the kernel's built-in 8250_pci driver names
// ttyS0. cortex-a57 (ARMv8.0): "max" adds pointer authentication, whose
// emulation under TCG makes every function return slow.
var ARM64 = Arch{
	GOARCH: "arm64", Multiarch: "aarch64-linux-gnu",
	QEMU: "qemu-system-aarch64", QEMUPackage: "qemu-system-arm",
	Machine:    []string{"-M", "virt", "-cpu", "cortex-a57"},
	KernelMeta: "linux-image-arm64",
	Console:    "ttyAMA0", ResultPort: "ttyS0", ResultDevice: "pci-serial",
	Packages: []string{"libc6", "libgcc-s1"},
}

// largePageCPU is the arm64 guest's CPU for a kernel of 16 or 64 KiB
// pages: cortex-a57 implements the 4 and 64 KiB granules only, qemu's
// "max" all three; pauth-impdef keeps its pointer authentication cheap
// under TCG.
var largePageCPU = []string{"-M", "virt", "-cpu", "max,pauth-impdef=on"}

// ForKernel returns a for booting parts' kernel: on arm64, a CPU that
// has the kernel's page size (Parts.PageKiB).
func (a Arch) ForKernel(p *Parts) Arch {
	if a.or().GOARCH == ARM64.GOARCH && p != nil && p.PageKiB > 4 {
		a.Machine = largePageCPU
	}
	return a
}

// ArchFor returns the guest architecture named by a GOARCH or uname -m
// name; "" is this host's.
func ArchFor(name string) (Arch, error) {
	if name == "" {
		name = runtime.GOARCH
	}
	switch name {
	case "amd64", "x86_64":
		return AMD64, nil
	case "arm64", "aarch64":
		return ARM64, nil
	}
	return Arch{}, fmt.Errorf("lab architecture %q: want amd64 or arm64", name)
}

// or returns a, or AMD64 when a is the zero Arch (callers that predate
// the architecture parameter).
func (a Arch) or() Arch {
	if a.GOARCH == "" {
		return AMD64
	}
	return a
}

// Native reports whether the guest runs this host's architecture: then
// this host's C library and compiler serve it.
func (a Arch) Native() bool { return a.or().GOARCH == runtime.GOARCH }

// LibDir is where the image puts shared libraries (and the emulated GPU's
// libcuda.so.1): /usr/lib/<multiarch>.
func (a Arch) LibDir() string { return "/usr/lib/" + a.or().Multiarch }

// Compiler is the C compiler for the guest's code: this host's cc for its
// own architecture, else Debian's cross compiler, <triplet>-gcc
// (build/arch.sh's arch_cc).
func (a Arch) Compiler() string {
	if a.Native() {
		return ""
	}
	return a.or().Multiarch + "-gcc"
}

// Pkg is Debian's name of package p for this architecture: p itself for
// this host's, p:<arch> (multiarch) for another.
func (a Arch) Pkg(p string) string {
	if a.Native() {
		return p
	}
	return p + ":" + a.or().GOARCH
}
