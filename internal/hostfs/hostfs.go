// Package hostfs reads a host's /sys, /proc and /dev through one root directory,
// so that the same checks run against the live host ("/"), a host mounted into a
// container, or a recorded fixture tree.
//
// Symbolic links are resolved inside the root: an absolute link target is taken
// relative to the root, and ".." never climbs above it. sysfs is made of relative
// links (device -> ../../../0000:00:01.0), and fixtures recorded from real hosts
// keep them, so resolution must behave like the kernel's without leaving the tree.
package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// maxLinks bounds symlink resolution; a cycle in a fixture must give an error, not a hang.
const maxLinks = 64

// Root is a host root directory. The zero value is not usable; use New.
type Root struct {
	dir  string // absolute, cleaned, no trailing slash except for "/"
	live bool   // dir is this running host's root, mounted elsewhere (sameKernel)
}

// New returns a Root for dir. An empty dir means "/".
func New(dir string) (*Root, error) {
	if dir == "" {
		dir = "/"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("host root %q: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("host root %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("host root %q is not a directory", dir)
	}
	r := &Root{dir: filepath.Clean(abs)}
	r.live = r.dir != "/" && sameKernel(r.dir)
	return r, nil
}

// procSuperMagic is statfs(2)'s f_type of a procfs.
const procSuperMagic = 0x9fa0

// sameKernel reports whether dir is the running host's root mounted
// elsewhere: its proc is a procfs of this very kernel (the boot ID, which
// the kernel draws at boot, is this process's). That is deploy/k8s's pod,
// which sees the node's "/" at /host (GDR_HOST_ROOT): the same machine as
// "/", not a recorded tree, whose proc is plain files.
func sameKernel(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Join(dir, "proc"), &st); err != nil || int64(st.Type) != procSuperMagic {
		return false
	}
	const bootID = "proc/sys/kernel/random/boot_id"
	theirs, err1 := os.ReadFile(filepath.Join(dir, bootID))
	ours, err2 := os.ReadFile("/" + bootID)
	return err1 == nil && err2 == nil && len(strings.TrimSpace(string(ours))) > 0 && string(theirs) == string(ours)
}

// Dir is the root directory on this machine.
func (r *Root) Dir() string { return r.dir }

// IsLive reports whether the root is the running host: its own "/", or
// its root mounted elsewhere, as a container sees its node's (sameKernel).
// Driver queries (the CUDA driver's GPUs) and host tools then describe
// the same machine the files do.
func (r *Root) IsLive() bool { return r.dir == "/" || r.live }

// Own is the root of this process's own files: its mount namespace's "/"
// when r is the running host, mounted elsewhere or not, because open(2)
// and stat(2) resolve there. A pod that sees its node's "/" at /host
// (GDR_HOST_ROOT=/host) has the node's files under r, and its image's
// files (its /dev, /.dockerenv, /proc/self, the libraries it loads) under
// Own. For a recorded tree it is r: the tree stands for the recording
// process's view as well as the host's.
func (r *Root) Own() *Root {
	if r.live && r.dir != "/" {
		return &Root{dir: "/"}
	}
	return r
}

// Devices is the root under which this process opens device nodes
// (/dev/infiniband/uverbsN, /dev/nvidia*): Own. A pod finds every node
// its node has under /host/dev, yet libibverbs and the CUDA driver open
// only what the pod's own /dev holds.
func (r *Root) Devices() *Root { return r.Own() }

// NodeMounted reports whether r is the running host's root mounted
// somewhere other than "/" (a pod's GDR_HOST_ROOT=/host): the node's files
// are under r and this process's own are not.
func (r *Root) NodeMounted() bool { return r.live && r.dir != "/" }

// Host maps a host path ("/sys/bus/pci") to the path on this machine, without
// resolving links. Use it only for messages and for handing paths to tools.
func (r *Root) Host(p string) string {
	return filepath.Join(r.dir, clean(p))
}

// clean makes p an absolute, cleaned host path.
func clean(p string) string {
	return path.Clean("/" + p)
}

// Resolve follows every symlink in host path p inside the root and returns the
// resolved host path (absolute, relative to the root). Missing components are
// allowed: the result names where the file would be, and reading it gives an
// error satisfying errors.Is(err, fs.ErrNotExist).
func (r *Root) Resolve(p string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(clean(p), "/"), "/")
	resolved := "/"
	links := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, part)
		fi, err := os.Lstat(r.Host(next))
		if errors.Is(err, fs.ErrNotExist) {
			// Nothing below a missing component can be a link: the rest is
			// lexical, and the caller's read reports the missing file.
			return path.Join(append([]string{next}, parts...)...), nil
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		links++
		if links > maxLinks {
			return "", fmt.Errorf("resolve %s: more than %d symbolic links (a loop?)", p, maxLinks)
		}
		target, err := os.Readlink(r.Host(next))
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", p, err)
		}
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		parts = append(strings.Split(target, "/"), parts...)
	}
	return resolved, nil
}

// Real returns the path on this machine of host path p with links resolved.
func (r *Root) Real(p string) (string, error) {
	rp, err := r.Resolve(p)
	if err != nil {
		return "", err
	}
	return r.Host(rp), nil
}

// MaxFile caps one host-file read (ReadFile, ReadString): the largest
// kernel page size (64 KiB, arm64 kernels with 64K pages), which bounds every
// sysfs attribute; PCIe config space is 4 KiB. A larger file is an error, so
// a corrupt tree (a 100 MB "attribute") costs neither memory nor a flood of
// quoted text. Files that are legitimately larger (/proc/modules,
// modules.builtin) are read with ReadFileMax and a limit of their own.
const MaxFile = 64 << 10

// ErrTooLarge is a host file above its read limit.
var ErrTooLarge = errors.New("above the read limit")

// ReadFile reads host file p, at most MaxFile bytes.
func (r *Root) ReadFile(p string) ([]byte, error) { return r.ReadFileMax(p, MaxFile) }

// ReadFileMax reads host file p, at most limit bytes. Only regular files
// are read: a FIFO or device node in a corrupt tree gives an error, not a
// read that never ends.
func (r *Root) ReadFileMax(p string, limit int64) ([]byte, error) {
	real, err := r.Real(p)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.describe(p), unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.describe(p), unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		what := "not a regular file"
		switch t := fi.Mode().Type(); {
		case t&fs.ModeDir != 0:
			what = "a directory, not a file"
		case t&fs.ModeNamedPipe != 0:
			what = "a FIFO, not a file"
		case t&fs.ModeDevice != 0:
			what = "a device node, not a file"
		case t&fs.ModeSocket != 0:
			what = "a socket, not a file"
		}
		return nil, fmt.Errorf("read %s: %s", r.describe(p), what)
	}
	// sysfs reports a page as every attribute's size and /proc reports 0,
	// so the size is a hint only: read one byte past the limit to know.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.describe(p), unwrapPath(err))
	}
	if int64(len(b)) > limit {
		size := fmt.Sprintf("more than %d bytes", limit)
		if fi.Size() > limit {
			size = fmt.Sprintf("%d bytes", fi.Size())
		}
		hint := ""
		if limit == MaxFile {
			hint = " (a sysfs attribute is at most one page)"
		}
		return nil, fmt.Errorf("read %s: %s, %w of %d bytes for this file%s: the file is corrupt or not what its name says",
			r.describe(p), size, ErrTooLarge, limit, hint)
	}
	return b, nil
}

// ReadString reads host file p (at most MaxFile bytes) and trims
// surrounding white space, the way sysfs attribute files are meant to be read.
func (r *Root) ReadString(p string) (string, error) {
	b, err := r.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Exists reports whether host path p exists (after resolving links).
func (r *Root) Exists(p string) bool {
	real, err := r.Real(p)
	if err != nil {
		return false
	}
	_, err = os.Stat(real)
	return err == nil
}

// OpenProbe opens host path p for reading and writing and closes it at
// once, returning open(2)'s error: fs.ErrNotExist when it is missing,
// EPERM when a device cgroup denies the node (Linux fs/namei.c
// inode_permission calls include/linux/device_cgroup.h
// devcgroup_inode_permission, whose check answers -EPERM), EACCES when
// its mode does not let this process in, ENXIO when no driver serves it.
// It asks whether this process reaches a device node (/dev/nvidia0) as a
// driver library would; nothing is read or written. Call it on
// r.Devices() for the nodes this process opens.
func (r *Root) OpenProbe(p string) error {
	real, err := r.Real(p)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(real, os.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", r.describe(p), unwrapPath(err))
	}
	return f.Close()
}

// Lstat describes host path p itself, without following a final link.
func (r *Root) Lstat(p string) (fs.FileInfo, error) {
	dir, base := path.Split(clean(p))
	rd, err := r.Resolve(dir)
	if err != nil {
		return nil, err
	}
	return os.Lstat(r.Host(path.Join(rd, base)))
}

// Stat describes host path p after resolving links.
func (r *Root) Stat(p string) (fs.FileInfo, error) {
	real, err := r.Real(p)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", r.describe(p), unwrapPath(err))
	}
	return fi, nil
}

// ReadLink returns the target of the link at host path p, as written.
func (r *Root) ReadLink(p string) (string, error) {
	dir, base := path.Split(clean(p))
	rd, err := r.Resolve(dir)
	if err != nil {
		return "", err
	}
	t, err := os.Readlink(r.Host(path.Join(rd, base)))
	if err != nil {
		return "", fmt.Errorf("readlink %s: %w", r.describe(p), unwrapPath(err))
	}
	return t, nil
}

// ReadDir lists the names in host directory p, sorted. A missing directory
// gives an error that satisfies errors.Is(err, fs.ErrNotExist).
func (r *Root) ReadDir(p string) ([]string, error) {
	real, err := r.Real(p)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(real)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", r.describe(p), unwrapPath(err))
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// Glob matches a host path pattern (path.Match syntax per component) and
// returns host paths, sorted.
func (r *Root) Glob(pattern string) ([]string, error) {
	ms, err := filepath.Glob(r.Host(pattern))
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", pattern, err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		rel, err := filepath.Rel(r.dir, m)
		if err != nil {
			continue
		}
		out = append(out, clean(rel))
	}
	sort.Strings(out)
	return out, nil
}

// describe names a host path for messages, with the root when it is not "/".
func (r *Root) describe(p string) string {
	if r.dir == "/" {
		return clean(p)
	}
	return fmt.Sprintf("%s (under %s)", clean(p), r.dir)
}

// unwrapPath drops the *fs.PathError wrapper (whose path is the machine path,
// not the host path we already name) but keeps the errno for errors.Is.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
