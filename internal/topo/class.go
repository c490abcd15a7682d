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
	// PHB: through a PCIe host bridge (the CPU's root complex).
	PHB
	// NODE: between host bridges of one NUMA node.
	NODE
	// SYS: across NUMA nodes (the SMP interconnect, QPI/UPI/Infinity Fabric).
	SYS
)

var classNames = [...]string{"UNKNOWN", "PIX", "PXB", "PHB", "NODE", "SYS"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// AcceptedClasses lists the names ParseClass takes, for error messages.
const AcceptedClasses = "PIX, PXB, PHB, NODE or SYS"

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

// FartherThan reports whether c is a worse path than limit.
func (c Class) FartherThan(limit Class) bool { return c > limit }
