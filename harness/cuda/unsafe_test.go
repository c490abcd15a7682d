//go:build gpu

package cuda

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Test-only views of raw addresses (the emulated GPU's memory).

// ptrOf turns a C address (not Go memory) into a pointer without vet's
// uintptr-to-Pointer warning, which is about Go memory moving.
func ptrOf(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }

func mprotectRW(a uintptr, n int) error {
	return unix.Mprotect(unsafe.Slice((*byte)(ptrOf(a)), n), unix.PROT_READ|unix.PROT_WRITE)
}

func mprotectNone(a uintptr, n int) error {
	return unix.Mprotect(unsafe.Slice((*byte)(ptrOf(a)), n), unix.PROT_NONE)
}
