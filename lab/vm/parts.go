package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
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

// KernelMeta is the Debian meta package whose dependency names the kernel.
const KernelMeta = "linux-image-amd64"

// Parts is an unpacked set of Debian packages under Root.
type Parts struct {
	Root      string // dpkg -x of every package
	Kernel    string // what qemu boots: vmlinux (PVH) when it could be unpacked, else vmlinuz
	KernelVer string // e.g. 6.1.0-57-amd64
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

// EnsureQEMU installs qemu-system-x86 when qemu-system-x86_64 is missing.
func EnsureQEMU(ctx context.Context, apt *Apt, logf Logf) (string, error) {
	if p, err := exec.LookPath("qemu-system-x86_64"); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("qemu-system-x86_64 not found in PATH: apt-get install qemu-system-x86 (as root)")
	}
	if err := apt.update(ctx, logf); err != nil {
		return "", err
	}
	logf("apt-get install qemu-system-x86")
	if _, err := RunCommand(ctx, 10*time.Minute, "", "apt-get", "install", "-y", "-qq", "--no-install-recommends", "qemu-system-x86"); err != nil {
		return "", err
	}
	return exec.LookPath("qemu-system-x86_64")
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
// every package of pkgs.
func resolve(ctx context.Context, pkgs []string, apt *Apt, logf Logf) (map[string]string, string, error) {
	for attempt := 0; ; attempt++ {
		out, _ := RunCommand(ctx, time.Minute, "", "apt-cache", "depends", KernelMeta)
		kpkg := ParseKernelDepends(out)
		var vers map[string]string
		if kpkg != "" {
			pout, _ := RunCommand(ctx, time.Minute, "", "apt-cache", "policy", kpkg)
			p2, _ := RunCommand(ctx, time.Minute, "", "apt-cache", append([]string{"policy"}, pkgs...)...)
			vers = ParsePolicy(pout + "\n" + p2)
		}
		var missing []string
		if kpkg == "" {
			missing = append(missing, KernelMeta)
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
			return nil, "", fmt.Errorf("apt-cache knows no candidate for %s: check the Debian sources in /etc/apt", strings.Join(missing, ", "))
		}
		if err := apt.update(ctx, logf); err != nil {
			return nil, "", fmt.Errorf("apt-cache has no candidate for %s and %w", strings.Join(missing, ", "), err)
		}
	}
}

// FetchParts downloads and unpacks the kernel and the Debian packages pkgs
// under cacheDir/parts-<key>, or reuses that folder when a previous run
// completed it. The key is PartsKey of every package's version, so the
// caller passes every mode's packages (Packages and each backend's) for
// one cached folder to serve them all.
func FetchParts(ctx context.Context, cacheDir string, pkgs []string, apt *Apt, logf Logf) (*Parts, error) {
	vers, kpkg, err := resolve(ctx, pkgs, apt, logf)
	if err != nil {
		return nil, err
	}
	key := PartsKey(vers)
	dir := filepath.Join(cacheDir, "parts-"+key)
	root := filepath.Join(dir, "root")
	p := &Parts{Root: root, Key: key, Versions: vers, KernelVer: strings.TrimPrefix(kpkg, "linux-image-")}
	p.Kernel = filepath.Join(root, "boot", "vmlinuz-"+p.KernelVer)
	vmlinux := filepath.Join(dir, "vmlinux")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		logf("parts: cached %s (%s)", dir, kpkg)
		if _, err := os.Stat(vmlinux); err == nil {
			p.Kernel = vmlinux
		}
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
	var names []string
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
	if err := ExtractVmlinux(ctx, p.Kernel, vmlinux); err != nil {
		logf("parts: booting the compressed kernel (%v)", err)
	} else {
		p.Kernel = vmlinux
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
	// Older parts folders are stale once versions move on.
	old, _ := filepath.Glob(filepath.Join(cacheDir, "parts-*"))
	for _, o := range old {
		if o != dir {
			_ = os.RemoveAll(o)
		}
	}
	return p, nil
}

// LibDirs are the folders searched for shared libraries: the unpacked
// packages first (then their private folders, Image.PrivateLibDirs), then
// this host (glibc and anything the packages lack).
func (p *Parts) LibDirs(private ...string) []string {
	var d []string
	for _, r := range []string{p.Root, "/"} {
		for _, s := range []string{"lib/" + Multiarch, "usr/lib/" + Multiarch, "lib64", "usr/lib64"} {
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
