// Package dl opens shared libraries at run time with dlopen, so an install
// check can say "libibverbs.so.1 does not open: <dlerror text>" instead of the
// loader refusing to start the test binary.
//
// The loader calls are go-nvml's pkg/dl (the one go-nvml loads NVML with).
// This wrapper adds what that package leaves to its callers:
//   - an *Error with the operation, the name and the loader's own text
//     (harness/nvml puts the dlopen text in its "does not load" message);
//   - no lookup through a closed library: go-nvml's Lookup after Close calls
//     dlsym with a NULL handle, which glibc reads as RTLD_DEFAULT and
//     resolves in the process's global scope, a false "the symbol is there";
//   - no empty name: glibc's dlopen("") returns the main program, as for
//     NULL (dlopen(3)), so it would "open" every time;
//   - a symbol whose value is NULL resolves (go-nvml reports it missing
//     with no dlerror text), and Close and Lookup may race.
package dl

import (
	"errors"
	"fmt"
	"sync"

	nvdl "github.com/NVIDIA/go-nvml/pkg/dl"
)

// Library is an open shared library. Close releases it.
type Library struct {
	name string
	mu   sync.Mutex
	lib  *nvdl.DynamicLibrary // nil once closed
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

// loaderText is the dlerror text go-nvml returned, "" without one.
func loaderText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Open dlopens name (a soname like "libibverbs.so.1" searched the loader's
// way, or a path) with RTLD_NOW|RTLD_LOCAL: RTLD_NOW makes a library with
// missing dependencies fail here, where the error can name them.
func Open(name string) (*Library, error) {
	if name == "" {
		return nil, errors.New("dlopen: empty library name")
	}
	lib := nvdl.New(name, nvdl.RTLD_NOW|nvdl.RTLD_LOCAL)
	if err := lib.Open(); err != nil {
		return nil, &Error{Op: "dlopen", Name: name, Msg: loaderText(err)}
	}
	return &Library{name: name, lib: lib}, nil
}

// Name is the name the library was opened with.
func (l *Library) Name() string { return l.name }

// Lookup reports whether symbol sym resolves in the library.
func (l *Library) Lookup(sym string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lib == nil {
		return &Error{Op: "dlsym", Name: sym, Msg: l.name + " is closed"}
	}
	err := l.lib.Lookup(sym)
	if err == nil {
		return nil
	}
	// go-nvml wraps dlerror's text; none means dlsym found the symbol and
	// its value is NULL, which is a symbol that resolves.
	why := errors.Unwrap(err)
	if why == nil {
		return nil
	}
	return &Error{Op: "dlsym", Name: sym, Msg: why.Error()}
}

// Close dlcloses the library; a second Close is a no-op.
func (l *Library) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lib == nil {
		return nil
	}
	err := l.lib.Close()
	l.lib = nil
	if err != nil {
		return &Error{Op: "dlclose", Name: l.name, Msg: loaderText(err)}
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

// Has says whether library lib exports sym. err is the dlopen error when
// lib does not open; a dlclose failure after the lookup does not change
// what the lookup found, so it is not returned.
func Has(lib, sym string) (bool, error) {
	l, err := Open(lib)
	if err != nil {
		return false, err
	}
	has := l.Lookup(sym) == nil
	_ = l.Close()
	return has, nil
}
