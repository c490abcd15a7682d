package topo

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Class is a PCIe path class between two devices, with the meaning
// `nvidia-smi topo -m` gives it. Larger is farther.
type Class int

const (
	Unknown Class = iota
	// PIX: through at most one PCIe switch.
	PIX
	// PXB: through several PCIe switches, no host bridge.
	PXB
	// P2C: a GPU that reaches its CPU over NVLink-C2C (GH200, GB200,
	// GB300), then PCIe from that CPU to the NIC: NCCL's P2C, which NCCL
	// ranks between PXB and PHB and uses GPUDirect RDMA over by default
	// (NVIDIA/nccl src/graph/paths.cc mergePathType: C2C+PHB is P2C;
	// ncclTopoCheckGdr: NCCL_NET_GDR_C2C=1 raises the level to P2C).
	P2C
	// PHB: through a PCIe host bridge (the CPU's root complex).
	PHB
	// NODE: between host bridges of one NUMA node.
	NODE
	// SYS: across NUMA nodes (the SMP interconnect, QPI/UPI/Infinity Fabric).
	SYS
)

var classNames = [...]string{"UNKNOWN", "PIX", "PXB", "P2C", "PHB", "NODE", "SYS"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// AcceptedClasses lists the names ParseClass takes, for error messages.
const AcceptedClasses = "PIX, PXB, P2C, PHB, NODE or SYS"

// ParseClass reads a class name, case-insensitively.
func ParseClass(s string) (Class, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	for i, n := range classNames {
		if i > 0 && n == u {
			return Class(i), nil
		}
	}
	return Unknown, fmt.Errorf("%s is not a path class (want %s)", clip.Quote(s), AcceptedClasses)
}

// ViaC2C is the class of a path from a GPU attached to its CPU over
// NVLink-C2C: one that leaves the PCIe tree at the CPU of that GPU (PHB, or
// NODE: another root port of the same Grace, each its own PCI domain) is
// P2C; PIX and PXB (a NIC sharing a switch with the GPU, ConnectX-8's) stay
// PCIe paths, and SYS (the other Grace of a tray) stays SYS: NCCL merges
// only C2C with PHB (paths.cc mergePathType).
func (c Class) ViaC2C() Class {
	if c == PHB || c == NODE {
		return P2C
	}
	return c
}

// FartherThan reports whether c is a worse path than limit.
func (c Class) FartherThan(limit Class) bool { return c > limit }

// Through names what a path of class c crosses, for messages: the CPU's
// host bridge (PHB), the link between host bridges (NODE), the
// inter-socket link (SYS); the PCIe fabric otherwise.
func (c Class) Through() string {
	switch c {
	case P2C:
		return "NVLink-C2C to the CPU and the CPU's PCIe"
	case PHB:
		return "CPU's host bridge"
	case NODE:
		return "interconnect between host bridges"
	case SYS:
		return "inter-socket link"
	}
	return "PCIe fabric"
}
