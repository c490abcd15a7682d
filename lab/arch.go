package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/lab/vm"
)

// The lab on another architecture than this host's (make lab-arm64): the
// same parts, image, agent and report, with vm.Arch naming what differs.
// Its guests run under full emulation (TCG of another instruction set),
// so by default it boots one VM and runs the suite there in loopback, as
// make lab's loopback run does (LAB_VMS=2: the two VMs of make lab); its
// test binaries are the prebuilt suite of that architecture (make dist
// ARCH=arm64), what a Grace host would run.

// ArchPkgs are the packages the lab runs on a foreign architecture unless
// LAB_PKGS says otherwise: the host checks and the RDMA data path.
var ArchPkgs = []string{"./conformance/install", "./conformance/topology", "./conformance/memreg", "./conformance/pingpong"}

// oneVM reports whether the run boots one VM (loopback only): LAB_VMS=1,
// or by default on a foreign architecture (the zero Arch of a runner that
// was never told one is this host's).
func (r *runner) oneVM() bool {
	if r.o.VMs != 0 {
		return r.o.VMs == 1
	}
	return r.arch.GOARCH != "" && !r.arch.Native()
}

// checkVMs refuses a LAB_VMS that mode lab cannot boot, and any for the
// other modes, which boot their own VMs.
func (o Options) checkVMs() error {
	switch {
	case o.VMs < 0 || o.VMs > 2:
		return fmt.Errorf("LAB_VMS=%d: mode lab boots 1 or 2 VMs (0: 2 on this host's architecture, 1 on another)", o.VMs)
	case o.VMs != 0 && o.Mode != ModeLab:
		return fmt.Errorf("LAB_VMS=%d: only mode lab takes it; mode %s boots its own VMs", o.VMs, o.Mode)
	}
	return nil
}

// partsPackages is what the run's parts hold: every mode's on this host's
// architecture (one cached folder for all), the image's own elsewhere
// (the cluster labs run on this host's architecture only).
func (r *runner) partsPackages() []string {
	if r.arch.Native() {
		return partsPackages()
	}
	return append([]string(nil), vm.Packages...)
}

// agent is the binary that becomes the VMs' /init: this one, or, for a
// foreign architecture, this command built for it (static, no cgo).
func (r *runner) agent(ctx context.Context) (string, error) {
	if r.arch.Native() {
		return os.Executable()
	}
	out := filepath.Join(r.dir, "gdrlab-"+r.arch.GOARCH)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	args := []string{"build", "-buildvcs=auto", "-o", out, "./cmd/gdrlab"}
	cmd := exec.CommandContext(ctx, r.o.Go, args...)
	cmd.Dir = r.o.RepoDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+r.arch.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the %s agent: GOARCH=%s %s %s: %v: %s", r.arch.GOARCH, r.arch.GOARCH, r.o.Go, strings.Join(args, " "), err, clip.LastLines(string(b), 5))
	}
	return out, nil
}

// distTests lists the test binaries of the dist folder Options.Dist that
// LAB_PKGS selects: bin/<name>.test beside bin/<name>.pkg, which names its
// import path (build/dist/build.sh). The dist must be of the guests'
// architecture (its ARCH file).
func (r *runner) distTests() ([]testPkg, error) {
	d := r.o.Dist
	b, err := os.ReadFile(filepath.Join(d, "ARCH"))
	if err != nil {
		return nil, fmt.Errorf("dist %s: %w (make dist ARCH=%s builds it)", d, err, r.arch.GOARCH)
	}
	if a := strings.TrimSpace(string(b)); a != r.arch.GOARCH {
		return nil, fmt.Errorf("dist %s is built for %s, the lab's guests are %s (make dist ARCH=%s)", d, a, r.arch.GOARCH, r.arch.GOARCH)
	}
	files, _ := filepath.Glob(filepath.Join(d, "bin", "*.pkg"))
	sort.Strings(files)
	var pkgs []testPkg
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		imp := strings.TrimSpace(string(b))
		if !MatchPkg(r.o.Pkgs, imp) {
			continue
		}
		bin := strings.TrimSuffix(f, ".pkg") + ".test"
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("dist %s: %s names %s, but %w", d, filepath.Base(f), imp, err)
		}
		pkgs = append(pkgs, testPkg{Import: imp, Short: strings.TrimPrefix(imp, Module), Bin: bin, Guest: "/lab/bin/" + filepath.Base(bin)})
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("dist %s has no test binary of %v", d, r.o.Pkgs)
	}
	var names []string
	for _, p := range pkgs {
		names = append(names, p.Short)
	}
	r.logf("test binaries from %s (%s): %s", d, r.arch.GOARCH, strings.Join(names, " "))
	return pkgs, nil
}

// MatchPkg reports whether import path imp is one of the package patterns
// (./conformance/pingpong, ./conformance/..., or full import paths), as go
// list would select it in this module.
func MatchPkg(patterns []string, imp string) bool {
	for _, p := range patterns {
		if rel, ok := strings.CutPrefix(p, "./"); ok {
			p = Module + rel
		}
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if imp == base || strings.HasPrefix(imp, base+"/") {
				return true
			}
			continue
		}
		if imp == p {
			return true
		}
	}
	return false
}
