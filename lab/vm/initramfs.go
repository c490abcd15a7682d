package vm

import (
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/lab/cpio"
)

// ModuleRoots are the modules the lab needs; LoadOrder adds their
// dependencies. crc32_generic comes first because rdma_rxe asks the crypto
// API for "crc32" instead of declaring a dependency. rdma_ucm (and with it
// rdma_cm, /dev/infiniband/rdma_cm) is there because real hosts load it and
// the install checks ask for it.
// sch_netem is the qdisc make lab-faults plants packet loss and delay with.
var ModuleRoots = []string{"crc32_generic", "rdma_rxe", "rdma_ucm", "virtio_pci", "virtio_net", "sch_netem"}

// Tools are the binaries copied from the unpacked packages into the image
// (guest path -> candidate paths inside Parts.Root).
var Tools = map[string][]string{
	"/bin/busybox":              {"bin/busybox", "usr/bin/busybox"},
	"/usr/sbin/ip":              {"sbin/ip", "bin/ip", "usr/sbin/ip", "usr/bin/ip"},
	"/usr/bin/rdma":             {"usr/bin/rdma", "sbin/rdma", "bin/rdma"},
	"/usr/sbin/tc":              {"sbin/tc", "usr/sbin/tc", "bin/tc"},
	"/usr/bin/ibv_devinfo":      {"usr/bin/ibv_devinfo"},
	"/usr/bin/ibv_devices":      {"usr/bin/ibv_devices"},
	"/usr/bin/ibv_rc_pingpong":  {"usr/bin/ibv_rc_pingpong"},
	"/usr/bin/ib_write_bw":      {"usr/bin/ib_write_bw"},
	"/usr/bin/ib_write_lat":     {"usr/bin/ib_write_lat"},
	"/usr/bin/ib_read_bw":       {"usr/bin/ib_read_bw"},
	"/usr/bin/ib_send_lat":      {"usr/bin/ib_send_lat"},
	"/usr/bin/ibv_asyncwatch":   {"usr/bin/ibv_asyncwatch"},
	"/usr/bin/ibv_srq_pingpong": {"usr/bin/ibv_srq_pingpong"},
}

// busybox applets linked for interactive debugging of a lab image.
var busyboxApplets = []string{"sh", "ls", "cat", "dmesg", "ps", "sleep", "mount", "echo", "grep", "cp", "mkdir", "poweroff", "sync", "base64", "ping", "lsmod", "insmod", "timeout", "env", "free", "df", "uname", "kill"}

// Job is what the image writes as /lab/job-<name>.json for the guest's
// agent: JobJSON is its file, told the modules' guest paths in load order.
type Job interface {
	JobJSON(modules []string) ([]byte, error)
}

// Image describes one initramfs.
type Image struct {
	Parts    *Parts
	Agent    string            // the gdrlab binary, becomes /init
	Binaries map[string]string // guest path -> host file (test binaries)
	Jobs     map[string]Job    // role -> job, written as /lab/job-<role>.json

	// What the cluster lab adds (the two-VM lab leaves these empty):
	Files    map[string]string // guest path -> host file, copied as is (scripts, data)
	Data     map[string]DataFile
	Symlinks map[string]string // guest path -> target
	Modules  []string          // more module roots than ModuleRoots (9p, sch_netem)
	Applets  []string          // more busybox applets
	// PrivateLibDirs are package folders (inside Parts.Root) whose
	// libraries keep their folder in the image, searched after the
	// standard ones: Slurm loads its plugins, and libslurmfull.so, from its
	// own directory (RUNPATH and PluginDir), not the default search path.
	PrivateLibDirs []string
}

// DataFile is a file made by the lab itself (slurm.conf, the munge key).
type DataFile struct {
	Mode  uint32
	Bytes []byte
}

// Build writes the gzip-compressed newc initramfs to dst and returns the
// guest paths of the modules in load order (already filled into the jobs).
func (im *Image) Build(dst string) error {
	files, guestMods, err := im.files()
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if err := im.write(cpio.NewWriter(zw), files, guestMods, nil); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// files is every file of the image, guest path -> host path, and the
// modules' guest paths in load order.
func (im *Image) files() (map[string]string, []string, error) {
	p := im.Parts
	modDir := filepath.Join(p.Root, "lib", "modules", p.KernelVer)
	builtin, err := ReadBuiltin(filepath.Join(modDir, "modules.builtin"))
	if err != nil {
		return nil, nil, err
	}
	mods, err := ModuleLoadOrder(filepath.Join(modDir, "kernel"), append(append([]string(nil), ModuleRoots...), im.Modules...), builtin)
	if err != nil {
		return nil, nil, err
	}
	var guestMods []string
	for _, m := range mods {
		guestMods = append(guestMods, "/lab/modules/"+filepath.Base(m))
	}

	// Every file goes in as guest path -> host path.
	files := map[string]string{"/init": im.Agent}
	var elfs []string
	for gp, cands := range Tools {
		found := ""
		for _, c := range cands {
			if hp, ok := inRoot(p.Root, c); ok {
				found = hp
				break
			}
		}
		if found == "" {
			return nil, nil, fmt.Errorf("%s not found in the unpacked packages under %s (looked at %v)", gp, p.Root, cands)
		}
		files[gp] = found
		elfs = append(elfs, found)
	}
	libDir := p.Arch.LibDir()
	provider := filepath.Join(p.Root, libDir[1:], "libibverbs/librxe-rdmav34.so")
	files[libDir+"/libibverbs/librxe-rdmav34.so"] = provider
	files["/etc/libibverbs.d/rxe.driver"] = filepath.Join(p.Root, "etc/libibverbs.d/rxe.driver")
	elfs = append(elfs, provider, im.Agent)
	for gp, hp := range im.Binaries {
		files[gp] = hp
		elfs = append(elfs, hp)
	}
	dirs := p.LibDirs(im.PrivateLibDirs...)
	libs, interps, err := LibClosure(elfs, dirs)
	if err != nil {
		return nil, nil, err
	}
	for so, hp := range libs {
		files[im.guestLibPath(so, hp)] = hp
	}
	for gp, hp := range im.Files {
		files[gp] = hp
	}
	for _, ip := range interps {
		hp := findLib(path.Base(ip), dirs)
		if hp == "" {
			return nil, nil, fmt.Errorf("ELF interpreter %s not found in %v", ip, dirs)
		}
		// /lib is the image's link to usr/lib (write): arm64's
		// /lib/ld-linux-aarch64.so.1 goes in under its target, or the
		// kernel, unpacking entries in order, would create it through
		// the link before usr/lib exists.
		if rest, ok := strings.CutPrefix(ip, "/lib/"); ok {
			ip = "/usr/lib/" + rest
		}
		files[ip] = hp
	}
	for i, m := range mods {
		files[guestMods[i]] = m
	}

	return files, guestMods, nil
}

// inRoot resolves rel inside the unpacked packages at root to a regular
// file, following symbolic links as the guest would: an absolute target
// is inside root too (Debian's /sbin/ip -> /bin/ip), never this host's
// file of that name, which is another build, or another architecture's.
func inRoot(root, rel string) (string, bool) {
	p := filepath.Join(root, rel)
	for range 16 {
		st, err := os.Lstat(p)
		switch {
		case err != nil:
			return "", false
		case st.Mode().IsRegular():
			return p, true
		case st.Mode()&os.ModeSymlink == 0:
			return "", false
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", false
		}
		if filepath.IsAbs(t) {
			p = filepath.Join(root, t)
		} else {
			p = filepath.Join(filepath.Dir(p), t)
		}
	}
	return "", false
}

// Layer writes the image's userland as an uncompressed tar, the one layer
// of the container image make lab-k8s runs: the same libraries, tools and
// suite the VMs have. place says where a guest path goes in the layer, or
// false when it stays out (the caller's: the VM's own parts, its agent
// /init, modules, jobs and daemons' keys and configs, stay out, and the
// suite moves where deploy/k8s expects it). Device nodes and jobs never go
// in.
func (im *Image) Layer(dst string, place func(gp string) (string, bool)) error {
	files, mods, err := im.files()
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := im.write(cpio.NewLayerWriter(f), files, mods, place); err != nil {
		return err
	}
	return f.Close()
}

// write adds the image's entries to cw: every one for the initramfs
// (layer nil), those layer keeps (and where it puts them) for the
// container layer.
func (im *Image) write(cw *cpio.Writer, files map[string]string, guestMods []string, layer func(string) (string, bool)) error {
	place := func(gp string) (string, bool) {
		if layer == nil {
			return gp, true
		}
		return layer(gp)
	}
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run", "/etc", "/usr/bin", "/usr/sbin", "/lab"} {
		if d, ok := place(d); ok {
			if err := cw.Dir(d, 0o755); err != nil {
				return err
			}
		}
	}
	if layer == nil {
		if err := cw.CharDev("/dev/console", 0o600, 5, 1); err != nil {
			return err
		}
		if err := cw.CharDev("/dev/null", 0o666, 1, 3); err != nil {
			return err
		}
	}
	// /lib points at /usr/lib as on Debian, so either path of a library works.
	if err := cw.Symlink("/lib", "usr/lib"); err != nil {
		return err
	}
	for _, a := range append(append([]string(nil), busyboxApplets...), im.Applets...) {
		if cw.Has("/bin/" + a) {
			continue
		}
		if err := cw.Symlink("/bin/"+a, "busybox"); err != nil {
			return err
		}
	}
	var links []string
	for gp := range im.Symlinks {
		links = append(links, gp)
	}
	sort.Strings(links)
	for _, gp := range links {
		if lp, ok := place(gp); ok {
			if err := cw.Symlink(lp, im.Symlinks[gp]); err != nil {
				return err
			}
		}
	}
	var data []string
	for gp := range im.Data {
		data = append(data, gp)
	}
	sort.Strings(data)
	for _, gp := range data {
		if lp, ok := place(gp); ok {
			if err := cw.File(lp, im.Data[gp].Mode, im.Data[gp].Bytes); err != nil {
				return err
			}
		}
	}
	var names []string
	for gp := range files {
		names = append(names, gp)
	}
	sort.Strings(names)
	for _, gp := range names {
		lp, ok := place(gp)
		if !ok {
			continue
		}
		b, err := os.ReadFile(files[gp]) // follows symlinks: the image holds real files
		if err != nil {
			return err
		}
		st, err := os.Stat(files[gp])
		if err != nil {
			return err
		}
		if err := cw.File(lp, uint32(st.Mode().Perm()), b); err != nil {
			return err
		}
	}
	if layer != nil {
		return cw.Close()
	}
	for role, j := range im.Jobs {
		b, err := j.JobJSON(guestMods)
		if err != nil {
			return err
		}
		if err := cw.File("/lab/job-"+role+".json", 0o644, b); err != nil {
			return err
		}
	}
	return cw.Close()
}

// guestLibPath is where a library found at host path hp goes in the image:
// its own folder when that is one of PrivateLibDirs, else the
// architecture's library folder (Arch.LibDir).
func (im *Image) guestLibPath(so, hp string) string {
	for _, d := range im.PrivateLibDirs {
		if filepath.Dir(hp) == filepath.Join(im.Parts.Root, d) {
			return "/" + d + "/" + so
		}
	}
	return im.Parts.Arch.LibDir() + "/" + so
}
