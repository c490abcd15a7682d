package vm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Modinfo is what the lab needs from a kernel module's .modinfo section.
type Modinfo struct {
	Name    string   // name= (underscores), or derived from the file name
	Depends []string // depends=, split on commas
}

// ModName normalises a module name the way the kernel does ("-" == "_").
func ModName(s string) string {
	s = strings.TrimSuffix(filepath.Base(s), ".ko")
	return strings.ReplaceAll(s, "-", "_")
}

// ParseModinfo parses the NUL-separated key=value strings of a .modinfo
// section.
func ParseModinfo(section []byte) Modinfo {
	var mi Modinfo
	for _, kv := range bytes.Split(section, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			mi.Name = ModName(v)
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					mi.Depends = append(mi.Depends, ModName(d))
				}
			}
		}
	}
	return mi
}

// ReadModinfo reads the .modinfo section of a .ko file.
func ReadModinfo(path string) (Modinfo, error) {
	f, err := elf.Open(path)
	if err != nil {
		return Modinfo{}, fmt.Errorf("kernel module %s: %w", path, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return Modinfo{}, fmt.Errorf("kernel module %s: no .modinfo section", path)
	}
	b, err := s.Data()
	if err != nil {
		return Modinfo{}, fmt.Errorf("kernel module %s: .modinfo: %w", path, err)
	}
	mi := ParseModinfo(b)
	if mi.Name == "" {
		mi.Name = ModName(path)
	}
	return mi, nil
}

// IndexModules maps module name -> path for every .ko under dir.
func IndexModules(dir string) (map[string]string, error) {
	idx := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			idx[ModName(p)] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("indexing kernel modules under %s: %w", dir, err)
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("no kernel modules (.ko) under %s", dir)
	}
	return idx, nil
}

// LoadOrder returns roots and everything they depend on, each module after
// all of its dependencies. Roots keep their given order where dependencies
// allow, so a module without a declared dependency (crc32_generic, which
// rdma_rxe only asks the crypto API for) can be put first by the caller.
// deps returns a module's dependencies or an error (unknown module).
func LoadOrder(roots []string, deps func(string) ([]string, error)) ([]string, error) {
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var order []string
	var visit func(m string, chain []string) error
	visit = func(m string, chain []string) error {
		switch state[m] {
		case done:
			return nil
		case active:
			return fmt.Errorf("kernel module dependency cycle: %s -> %s", strings.Join(chain, " -> "), m)
		}
		state[m] = active
		ds, err := deps(m)
		if err != nil {
			if len(chain) > 0 {
				return fmt.Errorf("%w (needed by %s)", err, chain[len(chain)-1])
			}
			return err
		}
		ds = append([]string(nil), ds...)
		sort.Strings(ds) // deterministic order between siblings
		for _, d := range ds {
			if err := visit(d, append(chain, m)); err != nil {
				return err
			}
		}
		state[m] = done
		order = append(order, m)
		return nil
	}
	for _, r := range roots {
		if err := visit(ModName(r), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// ModuleLoadOrder resolves roots against the .ko files under dir (the
// lib/modules/<version>/kernel tree) and returns the paths in load order.
// builtin lists modules compiled into the kernel (modules.builtin), which
// are dependencies that need no loading.
func ModuleLoadOrder(dir string, roots []string, builtin map[string]bool) ([]string, error) {
	idx, err := IndexModules(dir)
	if err != nil {
		return nil, err
	}
	cache := map[string]Modinfo{}
	deps := func(m string) ([]string, error) {
		if builtin[m] {
			return nil, nil
		}
		p, ok := idx[m]
		if !ok {
			return nil, fmt.Errorf("kernel module %s not found under %s", m, dir)
		}
		mi, ok := cache[m]
		if !ok {
			if mi, err = ReadModinfo(p); err != nil {
				return nil, err
			}
			cache[m] = mi
		}
		return mi.Depends, nil
	}
	names, err := LoadOrder(roots, deps)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, n := range names {
		if !builtin[n] {
			paths = append(paths, idx[n])
		}
	}
	return paths, nil
}

// ReadBuiltin parses modules.builtin (one kernel/.../name.ko per line).
func ReadBuiltin(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return map[string]bool{}, nil
		}
		return nil, err
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			m[ModName(l)] = true
		}
	}
	return m, nil
}
