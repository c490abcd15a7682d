//go:build rdma

// Loading libibverbs.so.1 at run time, and the error every failed verb returns.

package verbs

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Library is the soname opened at run time.
const Library = "libibverbs.so.1"

// LoadError is libibverbs.so.1 missing or unusable; tests turn it into an absence.
type LoadError struct{ Msg string }

func (e *LoadError) Error() string {
	return fmt.Sprintf("%s does not load (%s): %s", Library, e.Msg, LoadRemedy)
}

// LoadRemedy is what to do when libibverbs.so.1 does not load.
const LoadRemedy = "install rdma-core's verbs library (Debian/Ubuntu: libibverbs1 and ibverbs-providers; RHEL: libibverbs / rdma-core; or MLNX_OFED)"

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens libibverbs.so.1 once; later calls return the first result.
func Load() error {
	loadOnce.Do(func() {
		cs := C.CString(Library)
		defer C.free(unsafe.Pointer(cs))
		if e := C.gdr_load(cs); e != nil {
			loadErr = &LoadError{Msg: C.GoString(e)}
		}
	})
	return loadErr
}

// HasDmabuf reports whether the loaded libibverbs exports ibv_reg_dmabuf_mr.
func HasDmabuf() bool { return Load() == nil && C.gdr_has_dmabuf() != 0 }

// Error is a failed verb: its name, errno and errno's symbolic name. Its
// text is the cause alone; when the suite knows what to do, the error
// wraps a verdict.Finding (Unwrap) with the hint as cause and the remedy
// as a field, so a caller's verdict.As or verdict.Of finds it and nobody
// cuts a remedy out of text.
type Error struct {
	Verb  string // e.g. "ibv_modify_qp(RTR)"
	Errno syscall.Errno
	Hint  string // what usually causes this errno for this verb, if known
	found *verdict.Finding
}

func (e *Error) Error() string {
	name := errnoName(e.Errno)
	s := fmt.Sprintf("%s: errno %d (%s)", e.Verb, int(e.Errno), name)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Unwrap is the errno and the finding, when there is one.
func (e *Error) Unwrap() []error {
	if e.found == nil {
		return []error{e.Errno}
	}
	return []error{e.Errno, e.found}
}

func verr(verb string, errno C.int, hint string) error {
	if errno == 0 {
		errno = C.int(syscall.EIO)
	}
	return &Error{Verb: verb, Errno: syscall.Errno(errno), Hint: hint}
}

// verrFinding is verr whose hint is f's cause, wrapping f (its remedy) when
// f has a remedy.
func verrFinding(verb string, errno C.int, f verdict.Finding) error {
	return withFinding(verr(verb, errno, f.Cause).(*Error), f)
}

// withFinding makes e wrap f when f has a remedy.
func withFinding(e *Error, f verdict.Finding) *Error {
	if f.Remedy != "" {
		e.found = &f
	}
	return e
}
