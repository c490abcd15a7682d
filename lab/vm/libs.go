package vm

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ELFDeps is the dynamic-linking view of one ELF file.
type ELFDeps struct {
	Interp string   // PT_INTERP, "" for static binaries
	Needed []string // DT_NEEDED sonames
}

// ReadELFDeps reads the interpreter and DT_NEEDED entries of path.
func ReadELFDeps(path string) (ELFDeps, error) {
	f, err := elf.Open(path)
	if err != nil {
		return ELFDeps{}, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	var d ELFDeps
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return ELFDeps{}, fmt.Errorf("%s: reading PT_INTERP: %w", path, err)
			}
			for len(b) > 0 && b[len(b)-1] == 0 {
				b = b[:len(b)-1]
			}
			d.Interp = string(b)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && f.Section(".dynamic") != nil {
		return ELFDeps{}, fmt.Errorf("%s: reading DT_NEEDED: %w", path, err)
	}
	d.Needed = libs
	return d, nil
}

// LibClosure returns, for the given ELF files, every shared library they need
// (transitively), as soname -> file found in the first of dirs that has it,
// plus the interpreters named. This is ldd without running anything, so it
// works for binaries built for another root (Debian packages unpacked in the
// cache) as well as for this host's.
func LibClosure(files []string, dirs []string) (libs map[string]string, interps []string, err error) {
	libs = map[string]string{}
	seenInterp := map[string]bool{}
	queue := append([]string(nil), files...)
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		d, err := ReadELFDeps(f)
		if err != nil {
			return nil, nil, err
		}
		if d.Interp != "" && !seenInterp[d.Interp] {
			seenInterp[d.Interp] = true
			interps = append(interps, d.Interp)
		}
		for _, so := range d.Needed {
			if _, ok := libs[so]; ok {
				continue
			}
			p := findLib(so, dirs)
			if p == "" {
				return nil, nil, fmt.Errorf("shared library %s (needed by %s) not found in %v", so, f, dirs)
			}
			libs[so] = p
			queue = append(queue, p)
		}
	}
	sort.Strings(interps)
	return libs, interps, nil
}

func findLib(so string, dirs []string) string {
	for _, d := range dirs {
		p := filepath.Join(d, so)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}
