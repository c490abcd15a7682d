package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Packages the lab unpacks (never installs) from Debian, besides the
// kernel: what every image holds (Tools, the rxe provider and their
// libraries). The cluster backends add theirs to FetchParts' list.
var Packages = []string{
	"busybox-static",
	"libibverbs1", "ibverbs-providers", "librdmacm1", "libnl-3-200", "libnl-route-3-200",
	"iproute2", "libbpf1", "libelf1", "libmnl0", "libcap2", "libbsd0", "libmd0", "zlib1g",
	"ibverbs-utils", "perftest", "libpci3", "libudev1", "libibumad3",
	"libxtables12", // iproute2's tc links it (lab-faults plants loss and delay with tc netem)
}

// Parts is an unpacked set of Debian packages under Root.
type Parts struct {
	Arch      Arch   // the guest architecture of every package
	Root      string // dpkg -x of every package
	Kernel    string // what qemu boots: vmlinux (PVH) when it could be unpacked, else vmlinuz
	KernelVer string // e.g. 6.1.0-57-amd64
	PageKiB   int    // the kernel's page size where its image says (arm64's Image header), else 0
	Key       string // hash of package=version list, names the cache folder
	Versions  map[string]string
}

// Logf reports progress.
type Logf func(format string, args ...any)

// RunCommand runs a command with a deadline and returns its combined output; a
// failure names the command and the end of its output.
func RunCommand(ctx context.Context, timeout time.Duration, dir string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() == context.DeadlineExceeded {
		return string(out), fmt.Errorf("%s %s: no result within %v", name, strings.Join(args, " "), timeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, clip.LastLines(string(out), 5))
	}
	return string(out), nil
}

// Apt makes sure apt-get update ran once in this process when needed.
type Apt struct{ updated bool }

func (a *Apt) update(ctx context.Context, logf Logf) error {
	if a.updated {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("apt-get update needs root; run as root or fill .cache/lab by hand")
	}
	logf("apt-get update")
	if _, err := RunCommand(ctx, 5*time.Minute, "", "apt-get", "update", "-qq"); err != nil {
		return err
	}
	a.updated = true
	return nil
}

// EnsureQEMU installs the architecture's qemu (qemu-system-x86,
// qemu-system-arm) when its system emulator is missing.
func EnsureQEMU(ctx context.Context, arch Arch, apt *Apt, logf Logf) (string, error) {
	arch = arch.or()
	if p, err := exec.LookPath(arch.QEMU); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%s not found in PATH: apt-get install %s (as root)", arch.QEMU, arch.QEMUPackage)
	}
	if err := apt.update(ctx, logf); err != nil {
		return "", err
	}
	logf("apt-get install %s", arch.QEMUPackage)
	if _, err := RunCommand(ctx, 10*time.Minute, "", "apt-get", "install", "-y", "-qq", "--no-install-recommends", arch.QEMUPackage); err != nil {
		return "", err
	}
	return exec.LookPath(arch.QEMU)
}

// ParseDepends returns the first "Depends: linux-image-..." of apt-cache depends output.
func ParseKernelDepends(out string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.HasSuffix(f[0], "Depends:") && strings.HasPrefix(f[1], "linux-image-") {
			return f[1]
		}
	}
	return ""
}

// ParsePolicy maps package -> candidate version from apt-cache policy output.
func ParsePolicy(out string) map[string]string {
	m := map[string]string{}
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, " ") && strings.HasSuffix(l, ":") {
			cur = strings.TrimSuffix(l, ":")
			continue
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Candidate:"); ok && cur != "" {
			v = strings.TrimSpace(v)
			if v != "" && v != "(none)" {
				m[cur] = v
			}
		}
	}
	return m
}

// PartsKey is a short hash of the package=version list.
func PartsKey(versions map[string]string) string {
	var l []string
	for p, v := range versions {
		l = append(l, p+"="+v)
	}
	sort.Strings(l)
	h := sha256.Sum256([]byte(strings.Join(l, "\n")))
	return hex.EncodeToString(h[:6])
}

// resolve finds the kernel package and the candidate version of it and of
// every package of pkgs (names as Arch.Pkg gives them).
func resolve(ctx context.Context, arch Arch, pkgs []string, apt *Apt, logf Logf) (map[string]string, string, error) {
	meta := arch.Pkg(arch.KernelMeta)
	for attempt := 0; ; attempt++ {
		out, _ := RunCommand(ctx, time.Minute, "", "apt-cache", "depends", meta)
		kpkg := ParseKernelDepends(out)
		var vers map[string]string
		if kpkg != "" {
			pout, _ := RunCommand(ctx, time.Minute, "", "apt-cache", "policy", kpkg)
			p2, _ := RunCommand(ctx, time.Minute, "", "apt-cache", append([]string{"policy"}, pkgs...)...)
			vers = ParsePolicy(pout + "\n" + p2)
		}
		var missing []string
		if kpkg == "" {
			missing = append(missing, meta)
		}
		for _, p := range append([]string{kpkg}, pkgs...) {
			if p != "" && vers[p] == "" {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			return vers, kpkg, nil
		}
		if attempt > 0 {
			if !arch.Native() {
				return nil, "", fmt.Errorf("apt-cache knows no candidate for %s: is %s a dpkg architecture here? (as root: build/deps.sh --lab %s)", strings.Join(missing, ", "), arch.GOARCH, arch.GOARCH)
			}
			return nil, "", fmt.Errorf("apt-cache knows no candidate for %s: check the Debian sources in /etc/apt", strings.Join(missing, ", "))
		}
		if err := apt.update(ctx, logf); err != nil {
			return nil, "", fmt.Errorf("apt-cache has no candidate for %s and %w", strings.Join(missing, ", "), err)
		}
	}
}

// FetchParts downloads and unpacks the kernel and the Debian packages pkgs
// (and the architecture's own, Arch.Packages) of the guest architecture
// arch under cacheDir/parts-<key>, or reuses that folder when a previous
// run completed it. The key is PartsKey of every package's version (a
// foreign architecture's names carry it: libc6:arm64), so the caller passes
// every mode's packages (Packages and each backend's) for one cached folder
// to serve them all. Older folders of the same architecture are removed.
func FetchParts(ctx context.Context, cacheDir string, arch Arch, pkgs []string, apt *Apt, logf Logf) (*Parts, error) {
	arch = arch.or()
	var names []string
	for _, p := range append(append([]string(nil), pkgs...), arch.Packages...) {
		names = append(names, arch.Pkg(p))
	}
	vers, kpkg, err := resolve(ctx, arch, names, apt, logf)
	if err != nil {
		return nil, err
	}
	key := PartsKey(vers)
	dir := filepath.Join(cacheDir, "parts-"+key)
	root := filepath.Join(dir, "root")
	kver := strings.TrimSuffix(strings.TrimPrefix(kpkg, "linux-image-"), ":"+arch.GOARCH)
	p := &Parts{Arch: arch, Root: root, Key: key, Versions: vers, KernelVer: kver}
	p.Kernel = filepath.Join(root, "boot", "vmlinuz-"+p.KernelVer)
	vmlinux := filepath.Join(dir, "vmlinux")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		logf("parts: cached %s (%s)", dir, kpkg)
		if _, err := os.Stat(vmlinux); err == nil {
			p.Kernel = vmlinux
		}
		p.PageKiB = ImagePageKiB(p.Kernel)
		return p, nil
	}
	logf("parts: downloading %d packages (%s) into %s", len(vers), kpkg, dir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	debs := filepath.Join(dir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	names = nil
	for pkg, v := range vers {
		names = append(names, pkg+"="+v)
	}
	sort.Strings(names)
	if _, err := RunCommand(ctx, 10*time.Minute, debs, "apt-get", append([]string{"download", "-q"}, names...)...); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil || len(files) != len(names) {
		return nil, fmt.Errorf("apt-get download left %d .deb files in %s, want %d", len(files), debs, len(names))
	}
	for _, f := range files {
		if _, err := RunCommand(ctx, 5*time.Minute, "", "dpkg", "-x", f, root); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(p.Kernel); err != nil {
		return nil, fmt.Errorf("kernel image missing after unpacking %s: %w", kpkg, err)
	}
	if err := unpackModules(ctx, filepath.Join(root, "lib", "modules", p.KernelVer), logf); err != nil {
		return nil, err
	}
	p.PageKiB = ImagePageKiB(p.Kernel)
	// arm64's vmlinuz is already the uncompressed Image qemu boots.
	if arch.GOARCH == AMD64.GOARCH {
		if err := ExtractVmlinux(ctx, p.Kernel, vmlinux); err != nil {
			logf("parts: booting the compressed kernel (%v)", err)
		} else {
			p.Kernel = vmlinux
		}
	}
	// The .debs are unpacked; keep the cache to what later runs use.
	_ = os.RemoveAll(debs)
	var manifest strings.Builder
	for _, n := range names {
		manifest.WriteString(n + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), []byte(manifest.String()), 0o644); err != nil {
		return nil, err
	}
	// Older parts folders of this architecture and kernel line are stale
	// once versions move on; the other lines' stay (one without a kind
	// file is amd64's, from before).
	kind := arch.GOARCH + " " + arch.KernelMeta
	if err := os.WriteFile(filepath.Join(dir, "kind"), []byte(kind+"\n"), 0o644); err != nil {
		return nil, err
	}
	old, _ := filepath.Glob(filepath.Join(cacheDir, "parts-*"))
	for _, o := range old {
		b, _ := os.ReadFile(filepath.Join(o, "kind"))
		ok := strings.TrimSpace(string(b))
		if ok == "" {
			ok = AMD64.GOARCH + " " + AMD64.KernelMeta
		}
		if o != dir && ok == kind {
			_ = os.RemoveAll(o)
		}
	}
	return p, nil
}

// unpackModules decompresses the kernel's xz-compressed modules (Debian's
// 6.12 kernels ship .ko.xz; 6.1's plain .ko) in place with the host's xz,
// once per parts folder: the image reads each module's .modinfo and the
// agent loads it with finit_module, both of a plain ELF file.
func unpackModules(ctx context.Context, dir string, logf Logf) error {
	var xzs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ko.xz") {
			xzs = append(xzs, p)
		}
		return nil
	})
	if len(xzs) == 0 {
		return nil
	}
	logf("parts: decompressing %d kernel modules (.ko.xz)", len(xzs))
	for len(xzs) > 0 {
		n := min(len(xzs), 500)
		if _, err := RunCommand(ctx, 5*time.Minute, "", "xz", append([]string{"-d", "-f"}, xzs[:n]...)...); err != nil {
			return err
		}
		xzs = xzs[n:]
	}
	return nil
}

// ImagePageKiB reads the page size from an arm64 kernel Image's header
// (flags at offset 24, bits 1-2: 1 = 4 KiB, 2 = 16 KiB, 3 = 64 KiB; the
// "ARM\x64" magic at 56); 0 for anything else.
func ImagePageKiB(kernel string) int {
	f, err := os.Open(kernel)
	if err != nil {
		return 0
	}
	defer f.Close()
	h := make([]byte, 64)
	if _, err := io.ReadFull(f, h); err != nil || string(h[56:60]) != "ARM\x64" {
		return 0
	}
	switch (binary.LittleEndian.Uint64(h[24:]) >> 1) & 3 {
	case 1:
		return 4
	case 2:
		return 16
	case 3:
		return 64
	}
	return 0
}

// LibDirs are the folders searched for shared libraries: the unpacked
// packages first (then their private folders, Image.PrivateLibDirs), then
// this host (glibc and anything the packages lack) when the guest has this
// host's architecture; a foreign guest's C library is in the parts
// (Arch.Packages).
func (p *Parts) LibDirs(private ...string) []string {
	var d []string
	roots := []string{p.Root}
	if p.Arch.Native() {
		roots = append(roots, "/")
	}
	ma := p.Arch.or().Multiarch
	for _, r := range roots {
		for _, s := range []string{"lib/" + ma, "usr/lib/" + ma, "lib64", "usr/lib64"} {
			d = append(d, filepath.Join(r, s))
		}
		if r == p.Root {
			for _, s := range private {
				d = append(d, filepath.Join(r, s))
			}
		}
	}
	return d
}

// ExtractVmlinux unpacks the ELF kernel from an xz-compressed bzImage with
// the host's xz, so qemu can boot it through its PVH entry point: that skips
// the in-guest decompression, several seconds of TCG time per boot. It
// returns an error when the image is not xz-compressed or has no PVH note.
func ExtractVmlinux(ctx context.Context, vmlinuz, dst string) error {
	b, err := os.ReadFile(vmlinuz)
	if err != nil {
		return err
	}
	i := bytes.Index(b, []byte("\xfd7zXZ\x00"))
	if i < 0 {
		return fmt.Errorf("%s: no xz stream inside", vmlinuz)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "xz", "-dc", "--single-stream")
	cmd.Stdin = bytes.NewReader(b[i:])
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return fmt.Errorf("xz -dc of %s: %v", vmlinuz, err)
	}
	if !HasPVHNote(out) {
		return fmt.Errorf("%s: the unpacked kernel has no PVH entry note", vmlinuz)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, out, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// HasPVHNote reports whether an ELF kernel has the Xen PVH entry note
// (XEN_ELFNOTE_PHYS32_ENTRY) that qemu's -kernel needs for an ELF image.
func HasPVHNote(img []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return false
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		d := make([]byte, p.Filesz)
		if _, err := p.ReadAt(d, 0); err != nil {
			continue
		}
		for len(d) >= 12 {
			nsz, dsz, typ := f.ByteOrder.Uint32(d), f.ByteOrder.Uint32(d[4:]), f.ByteOrder.Uint32(d[8:])
			name := d[12:min(len(d), 12+int(nsz))]
			if typ == 18 && bytes.HasPrefix(name, []byte("Xen")) {
				return true
			}
			adv := 12 + align4(int(nsz)) + align4(int(dsz))
			if adv > len(d) {
				break
			}
			d = d[adv:]
		}
	}
	return false
}

func align4(n int) int { return (n + 3) &^ 3 }
