package kmod

// rdma-core's user space as a host's files show it, read without loading
// or running anything: a pod judges its node's rdma-core or DOCA-OFED
// under GDR_HOST_ROOT this way (its own loader would load the image's
// libraries, and the node's ofed_info is the node's code), and a recorded
// tree the same way.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// LibDirs are where distributions and DOCA-OFED/MLNX_OFED install
// libibverbs and librdmacm (Debian's multiarch directories, RHEL's lib64);
// the directories /etc/ld.so.conf.d names are added to them.
var LibDirs = []string{"/usr/lib/*-linux-gnu", "/lib/*-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/usr/local/lib"}

// OFEDInfoPaths are where MLNX_OFED and DOCA-OFED install ofed_info.
var OFEDInfoPaths = []string{"/usr/bin/ofed_info", "/usr/sbin/ofed_info"}

// DpkgStatus is Debian's package database, a text file.
const DpkgStatus = "/var/lib/dpkg/status"

// maxStatus bounds the dpkg database read (a few MB on a full server).
const maxStatus = 64 << 20

// Stack is one rdma-core installation.
type Stack struct {
	// Verbs and RDMACM are where libibverbs.so.1 and librdmacm.so.1 are
	// (host paths); "" when not found.
	Verbs, RDMACM string
	// Version is rdma-core's version ("44.0-2", "2404mlnx51-1.2404066"),
	// VersionFrom what said so; "" when nothing did.
	Version, VersionFrom string
	// OFED is the DOCA-OFED/MLNX_OFED release its ofed_info names; nil
	// without one. OFEDFrom is the file read.
	OFED     *OFED
	OFEDFrom string
	// Looked lists where the libraries were looked for (host paths).
	Looked []string
}

// Vendor reports that the stack is NVIDIA's (DOCA-OFED or MLNX_OFED): an
// ofed_info, or an rdma-core version built by NVIDIA ("...mlnx...").
func (s Stack) Vendor() bool {
	return s.OFED != nil || strings.Contains(strings.ToLower(s.Version), "mlnx")
}

// Kind is "DOCA-OFED/MLNX_OFED <release>", "inbox rdma-core <version>", or
// "no rdma-core" when libibverbs was not found.
func (s Stack) Kind() string {
	switch {
	case s.OFED != nil:
		return "DOCA-OFED/MLNX_OFED " + s.OFED.String()
	case s.Verbs == "" && s.Version == "":
		return "no rdma-core"
	case s.Vendor():
		return "NVIDIA's rdma-core " + orUnknown(s.Version)
	}
	return "inbox rdma-core " + orUnknown(s.Version)
}

func orUnknown(v string) string {
	if v == "" {
		return "(version unknown)"
	}
	return v
}

// ReadStack finds rdma-core's libraries, version and ofed_info under r.
// Missing pieces are left empty; a file that exists but cannot be read or
// parsed is an error (with what could be read).
func ReadStack(r *hostfs.Root) (Stack, error) {
	var s Stack
	var errs []error
	dirs, err := libDirs(r)
	if err != nil {
		errs = append(errs, err)
	}
	s.Looked = dirs
	s.Verbs = findLib(r, dirs, "libibverbs.so.1")
	s.RDMACM = findLib(r, dirs, "librdmacm.so.1")
	if v, from, err := dpkgVersion(r, "libibverbs1", "rdma-core"); err != nil {
		errs = append(errs, err)
	} else if v != "" {
		s.Version, s.VersionFrom = v, from
	}
	if s.Version == "" && s.Verbs != "" {
		if target, err := r.Resolve(s.Verbs); err == nil {
			if v := VersionFromSoname(path.Base(target)); v != "" {
				s.Version, s.VersionFrom = v, r.Host(target)+" (the library's file name)"
			}
		}
	}
	for _, p := range OFEDInfoPaths {
		b, err := r.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		v, err := ParseOFEDInfoScript(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Host(p), err))
			break
		}
		s.OFED, s.OFEDFrom = &v, r.Host(p)
		break
	}
	return s, errors.Join(errs...)
}

// libDirs are LibDirs that exist under r, globs expanded, then the
// absolute directories the ld.so.conf.d files list.
func libDirs(r *hostfs.Root) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if !seen[d] && r.Exists(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, g := range LibDirs {
		ms, _ := r.Glob(g)
		for _, m := range ms {
			add(m)
		}
	}
	confs, _ := r.Glob("/etc/ld.so.conf.d/*.conf")
	for _, c := range confs {
		b, err := r.ReadFile(c)
		if err != nil {
			return out, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "/") {
				add(path.Clean(line))
			}
		}
	}
	return out, nil
}

func findLib(r *hostfs.Root, dirs []string, soname string) string {
	for _, d := range dirs {
		p := path.Join(d, soname)
		if r.Exists(p) {
			return p
		}
	}
	return ""
}

// sonameRe: rdma-core names its libraries <soname>.<ABI level>.<PACKAGE_VERSION>
// (libibverbs/CMakeLists.txt: rdma_library(ibverbs ... 1 1.14.${PACKAGE_VERSION}),
// Documentation/versioning.md): libibverbs.so.1.14.44.0 is rdma-core 44.0.
var sonameRe = regexp.MustCompile(`^lib(?:ibverbs|rdmacm)\.so\.1\.\d+\.(\d[0-9A-Za-z.]*)$`)

// VersionFromSoname is the rdma-core release in a library's real file
// name, "" when the name carries none.
func VersionFromSoname(name string) string {
	if m := sonameRe.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// dpkgVersion is the version of the first of pkgs the dpkg database lists
// as installed, and the file that said so; "" without a database.
func dpkgVersion(r *hostfs.Root, pkgs ...string) (string, string, error) {
	b, err := r.ReadFileMax(DpkgStatus, maxStatus)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	got := ParseDpkgStatus(b)
	for _, p := range pkgs {
		if v := got[p]; v != "" {
			return v, r.Host(DpkgStatus) + " (" + p + ")", nil
		}
	}
	return "", "", nil
}

// ParseDpkgStatus maps each installed package of a dpkg status file to its
// version (stanzas separated by blank lines; "Status: install ok installed").
func ParseDpkgStatus(b []byte) map[string]string {
	out := map[string]string{}
	var pkg, ver string
	installed := false
	flush := func() {
		if pkg != "" && installed && ver != "" {
			out[pkg] = ver
		}
		pkg, ver, installed = "", "", false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			pkg = v
		case "Version":
			ver = v
		case "Status":
			installed = strings.HasSuffix(v, " installed")
		}
	}
	flush()
	return out
}

// ofedScriptRe finds ofed_info's answer to -s without running it: the
// script echoes its release ('if [ "X$1" == "X-s" ]; then echo
// OFED-internal-24.01-0.3.3:; exit 0; fi').
var ofedScriptRe = regexp.MustCompile(`"X-s"\s*\]\s*;?\s*then\s+echo\s+([^;\n]+?)\s*;`)

// ParseOFEDInfoScript reads the release from an ofed_info script.
func ParseOFEDInfoScript(b []byte) (OFED, error) {
	m := ofedScriptRe.FindSubmatch(b)
	if m == nil {
		return OFED{}, errors.New(`no 'if [ "X$1" == "X-s" ]; then echo <release>' line: not the ofed_info MLNX_OFED or DOCA-OFED installs`)
	}
	return ParseOFEDInfo(strings.Trim(string(m[1]), `"'`))
}

// Compare says how a node's stack and this process's (a container's
// image) stand to each other: a fact when their versions differ, and a
// warning when the node runs NVIDIA's stack (DOCA-OFED/MLNX_OFED kernel
// modules) and the image an inbox rdma-core, whose providers then talk to
// an out-of-tree kernel driver: rdma-core promises compatibility with
// older and newer kernels (Documentation/contributing.md) for the upstream
// kernel's uAPI, and a provider refuses a device whose kernel ABI it does
// not support (libibverbs/init.c, "does not support the kernel ABI").
func Compare(node, image Stack) (fact, warning string) {
	if node.Version == "" || image.Version == "" {
		return "", ""
	}
	if node.Version != image.Version || node.Vendor() != image.Vendor() {
		fact = fmt.Sprintf("the node runs %s and this image %s: the suite's verbs calls use the image's", node.Kind(), image.Kind())
	}
	if node.Vendor() && !image.Vendor() {
		warning = fmt.Sprintf("the node runs %s but this image carries %s: the image's providers talk to the node's out-of-tree kernel driver, outside rdma-core's kernel compatibility promise (Documentation/contributing.md); a provider refuses a device whose kernel ABI it does not support (libibverbs/init.c). Workloads on this node should use DOCA's user space (the DOCA-OFED container images), and so may the suite's image", node.Kind(), image.Kind())
	}
	return fact, warning
}
