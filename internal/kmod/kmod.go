// Package kmod answers "is kernel module X there?" from a host root: the
// loadable modules in /proc/modules, the per-module state in /sys/module, and
// the kernel's list of built-in modules (/lib/modules/<release>/modules.builtin).
//
// A module counts as present when it is loaded and live, or built into the
// kernel. Names are compared with '-' and '_' equal, as modprobe does
// (nvidia-peermem and nvidia_peermem are one module).
//
// The kernel's release (release.go: it names /lib/modules/<release>) and
// the OFED release that may have replaced its RDMA modules (ofed.go,
// `ofed_info -s`) live here too: both say which modules a host runs; so do
// the libibverbs providers beside them (providers.go: rdma-core's user-space
// drivers, and which serves each kernel driver).
package kmod

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Module is one line of /proc/modules.
type Module struct {
	Name  string
	Size  uint64
	Refs  int      // reference count
	Users []string // modules that use this one ("-" in the file: none)
	State string   // Live, Loading or Unloading
	Taint string   // "(OE)" flags without parentheses; empty when untainted
}

// Normalize spells a module name the way the kernel lists it ('_', not '-').
func Normalize(name string) string { return strings.ReplaceAll(strings.TrimSpace(name), "-", "_") }

// ParseProcModules parses /proc/modules. A malformed line is an error naming
// its number and text; an empty file is no modules (a kernel without
// loadable modules, or a container that hides them).
func ParseProcModules(b []byte) ([]Module, error) {
	var out []Module
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		m, err := parseModuleLine(line)
		if err != nil {
			return out, fmt.Errorf("/proc/modules line %d %s: %w", n, clip.QuoteN(line, 120), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("/proc/modules: %w", err)
	}
	return out, nil
}

// parseModuleLine reads "name size refs users state addr [(taint)]".
func parseModuleLine(line string) (Module, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return Module{}, fmt.Errorf("want at least 5 fields (name size refcount users state), got %d", len(f))
	}
	m := Module{Name: f[0]}
	if !validName(m.Name) {
		return m, fmt.Errorf("bad module name %s", clip.Quote(m.Name))
	}
	var err error
	if m.Size, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return m, fmt.Errorf("bad size %s", clip.Quote(f[1]))
	}
	refs, err := strconv.ParseInt(f[2], 10, 32)
	if err != nil || refs < 0 {
		// The kernel prints "-" for modules that cannot be unloaded.
		if f[2] != "-" {
			return m, fmt.Errorf("bad refcount %s", clip.Quote(f[2]))
		}
		refs = -1
	}
	m.Refs = int(refs)
	if f[3] != "-" {
		for _, u := range strings.Split(f[3], ",") {
			if u == "" {
				continue
			}
			if !validName(u) && u != "[permanent]" {
				return m, fmt.Errorf("bad user list %s", clip.Quote(f[3]))
			}
			m.Users = append(m.Users, u)
		}
	}
	switch f[4] {
	case "Live", "Loading", "Unloading":
		m.State = f[4]
	default:
		return m, fmt.Errorf("bad state %s (want Live, Loading or Unloading)", clip.Quote(f[4]))
	}
	if len(f) >= 7 {
		t := f[6]
		if !strings.HasPrefix(t, "(") || !strings.HasSuffix(t, ")") || len(t) < 2 {
			return m, fmt.Errorf("bad taint field %s", clip.Quote(t))
		}
		m.Taint = t[1 : len(t)-1]
	}
	return m, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// ParseBuiltin parses modules.builtin ("kernel/drivers/infiniband/core/ib_core.ko"
// per line) into normalised module names.
func ParseBuiltin(b []byte) (map[string]bool, error) {
	out := map[string]bool{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		base := path.Base(line)
		name, ok := strings.CutSuffix(base, ".ko")
		if !ok || !validName(name) {
			return out, fmt.Errorf("modules.builtin line %d %s: want a path ending in <name>.ko", n+1, clip.QuoteN(line, 120))
		}
		out[Normalize(name)] = true
	}
	return out, nil
}

// Status is what the host says about one module.
type Status struct {
	Name      string  // normalised
	Proc      *Module // its /proc/modules line, if any
	SysModule bool    // /sys/module/<name> exists
	InitState string  // /sys/module/<name>/initstate: live, coming, going; "" for built-in
	Builtin   bool    // built into the kernel
	Version   string  // /sys/module/<name>/version, if the module declares one
	// SrcVersion is /sys/module/<name>/srcversion: a hash of the module's
	// sources, which in-tree modules without a version still carry.
	SrcVersion string
	Holders    []string
	Taint      string // /sys/module/<name>/taint
}

// Loaded reports whether the module is usable: built in, or loaded and live.
func (s Status) Loaded() bool {
	if s.Builtin {
		return true
	}
	if s.Proc != nil {
		return s.Proc.State == "Live"
	}
	return s.InitState == "live"
}

// String describes the status for messages: "loaded (live, used by rdma_ucm,mlx5_ib)".
func (s Status) String() string {
	switch {
	case s.Builtin:
		return "built into the kernel"
	case s.Proc != nil:
		st := "loaded (" + strings.ToLower(s.Proc.State)
		if len(s.Proc.Users) > 0 {
			st += ", used by " + strings.Join(s.Proc.Users, ",")
		}
		return st + ")"
	case s.InitState != "":
		return "in /sys/module with initstate " + s.InitState
	}
	return "not loaded"
}

// Host reads module state from a host root. It caches /proc/modules and
// modules.builtin for its lifetime; make a new one to re-read.
type Host struct {
	root     *hostfs.Root
	mods     map[string]Module
	builtin  map[string]bool
	release  string
	procRead bool
}

// New reads /proc/modules and modules.builtin under root. Neither being
// there is not an error (containers, static kernels); a malformed file is.
func New(root *hostfs.Root) (*Host, error) {
	h := &Host{root: root, mods: map[string]Module{}}
	b, err := root.ReadFileMax("/proc/modules", MaxListFile)
	switch {
	case err == nil:
		h.procRead = true
		ms, perr := ParseProcModules(b)
		if perr != nil {
			return nil, perr
		}
		for _, m := range ms {
			h.mods[Normalize(m.Name)] = m
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, err
	}
	if rel, err := root.ReadString(ReleaseFile); err == nil && rel != "" && !strings.ContainsAny(rel, "/ ") {
		h.release = rel
		bb, err := root.ReadFileMax(path.Join("/lib/modules", rel, "modules.builtin"), MaxListFile)
		switch {
		case err == nil:
			if h.builtin, err = ParseBuiltin(bb); err != nil {
				return nil, err
			}
		case errors.Is(err, fs.ErrNotExist):
		default:
			return nil, err
		}
	}
	return h, nil
}

// MaxListFile caps the read of /proc/modules and modules.builtin, which
// outgrow hostfs.MaxFile: about 100 bytes a line, 4 MiB is some 40000 modules.
const MaxListFile = 4 << 20

// ReleaseFile holds the running kernel's release.
const ReleaseFile = "/proc/sys/kernel/osrelease"

// Release is the kernel release (ReleaseFile), "" if unknown.
func (h *Host) Release() string { return h.release }

// Sources says what the host offered, for skip messages.
func (h *Host) Sources() string {
	var s []string
	if h.procRead {
		s = append(s, fmt.Sprintf("/proc/modules (%d modules)", len(h.mods)))
	} else {
		s = append(s, "/proc/modules (missing)")
	}
	s = append(s, "/sys/module")
	if h.builtin != nil {
		s = append(s, fmt.Sprintf("/lib/modules/%s/modules.builtin", h.release))
	}
	return strings.Join(s, ", ")
}

// Modules returns the /proc/modules entries by normalised name.
func (h *Host) Modules() map[string]Module { return h.mods }

// Lookup gathers everything the host says about module name.
func (h *Host) Lookup(name string) (Status, error) {
	name = Normalize(name)
	if !validName(name) {
		return Status{}, fmt.Errorf("bad module name %s", clip.Quote(name))
	}
	st := Status{Name: name}
	if m, ok := h.mods[name]; ok {
		st.Proc = &m
	}
	dir := "/sys/module/" + name
	if fi, err := h.root.Stat(dir); err == nil && fi.IsDir() {
		st.SysModule = true
		read := func(file string) (string, error) {
			v, err := h.root.ReadString(dir + "/" + file)
			if errors.Is(err, fs.ErrNotExist) {
				return "", nil
			}
			return v, err
		}
		var err error
		if st.InitState, err = read("initstate"); err != nil {
			return st, err
		}
		switch st.InitState {
		case "", "live", "coming", "going", "unformed":
		default:
			return st, fmt.Errorf("%s/initstate: unknown state %s", dir, clip.QuoteN(st.InitState, 120))
		}
		if st.Version, err = read("version"); err != nil {
			return st, err
		}
		if st.SrcVersion, err = read("srcversion"); err != nil {
			return st, err
		}
		if st.Taint, err = read("taint"); err != nil {
			return st, err
		}
		if hs, err := h.root.ReadDir(dir + "/holders"); err == nil {
			st.Holders = hs
		}
		// Only loadable modules have initstate; a /sys/module entry
		// without one (and without a /proc/modules line) is built in.
		if st.InitState == "" && st.Proc == nil {
			st.Builtin = true
		}
	}
	if h.builtin[name] && st.Proc == nil {
		st.Builtin = true
	}
	return st, nil
}
