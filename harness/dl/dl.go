// Package dl opens shared libraries at run time with dlopen, so an install
// check can say "libibverbs.so.1 does not open: <dlerror text>" instead of the
// loader refusing to start the test binary. It links only libdl/libc.
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// dlerror's text is per thread; callers hold the OS thread across the call
// and this read.
static const char *gdr_dlerror(void) {
	const char *e = dlerror();
	return e ? e : "";
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Library is an open shared library. Close releases it.
type Library struct {
	name string
	mu   sync.Mutex
	h    unsafe.Pointer
}

// Error is a dlopen/dlsym/dlclose failure with the loader's own text.
type Error struct {
	Op   string // dlopen, dlsym, dlclose
	Name string // library or symbol
	Msg  string // dlerror text
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s %s failed", e.Op, e.Name)
	}
	return fmt.Sprintf("%s %s: %s", e.Op, e.Name, e.Msg)
}

// Open dlopens name (a soname like "libibverbs.so.1" searched the loader's
// way, or a path) with RTLD_NOW|RTLD_LOCAL: RTLD_NOW makes a library with
// missing dependencies fail here, where the error can name them.
func Open(name string) (*Library, error) {
	if name == "" {
		return nil, errors.New("dlopen: empty library name")
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.gdr_dlerror() // clear any stale error on this thread
	h := C.dlopen(cname, C.RTLD_NOW|C.RTLD_LOCAL)
	if h == nil {
		return nil, &Error{Op: "dlopen", Name: name, Msg: C.GoString(C.gdr_dlerror())}
	}
	return &Library{name: name, h: h}, nil
}

// Name is the name the library was opened with.
func (l *Library) Name() string { return l.name }

// Lookup reports whether symbol sym resolves in the library.
func (l *Library) Lookup(sym string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return &Error{Op: "dlsym", Name: sym, Msg: l.name + " is closed"}
	}
	csym := C.CString(sym)
	defer C.free(unsafe.Pointer(csym))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.gdr_dlerror()
	p := C.dlsym(l.h, csym)
	// A symbol may legitimately be NULL; dlerror tells the two cases apart.
	if msg := C.GoString(C.gdr_dlerror()); p == nil && msg != "" {
		return &Error{Op: "dlsym", Name: sym, Msg: msg}
	}
	return nil
}

// Close dlcloses the library; a second Close is a no-op.
func (l *Library) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == nil {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.gdr_dlerror()
	rc := C.dlclose(l.h)
	l.h = nil
	if rc != 0 {
		return &Error{Op: "dlclose", Name: l.name, Msg: C.GoString(C.gdr_dlerror())}
	}
	return nil
}

// Probe opens and closes name, returning the dlopen error if it does not
// open. It is the check "this library is installed and loadable".
func Probe(name string) error {
	l, err := Open(name)
	if err != nil {
		return err
	}
	return l.Close()
}
