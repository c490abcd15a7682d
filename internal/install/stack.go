package install

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// StackKind is which RDMA stack INST-09 found (gdr.rdma_stack).
type StackKind string

const (
	StackOFED   StackKind = "ofed"             // MLNX_OFED / DOCA-OFED
	StackInbox  StackKind = "inbox"            // the distribution's rdma-core
	StackNoNode StackKind = "none on the node" // a pod's node keeps its RDMA user space in images
)

// Lib is an rdma-core library a GPUDirect RDMA program links, and the
// packages that carry it.
type Lib struct{ Soname, Pkg string }

// Libs are the rdma-core libraries INST-07 loads.
var Libs = []Lib{
	{"libibverbs.so.1", "libibverbs1 (Debian/Ubuntu), libibverbs (RHEL/SUSE), or MLNX_OFED"},
	{"librdmacm.so.1", "librdmacm1 (Debian/Ubuntu), librdmacm (RHEL/SUSE), or MLNX_OFED"},
}

// Probe loads a shared library by soname with this process's loader
// (harness/dl.Probe): nil when it loads.
type Probe func(soname string) error

const (
	remedyRDMACore   = "install rdma-core (Debian/Ubuntu: rdma-core ibverbs-providers libibverbs1 librdmacm1; RHEL: rdma-core libibverbs librdmacm) or MLNX_OFED"
	remedyProviders  = "install the libibverbs providers (Debian/Ubuntu: ibverbs-providers; RHEL/SUSE: rdma-core (libibverbs); or MLNX_OFED)"
	remedyImageLibs  = "rebuild the suite's image from deploy/Dockerfile (it installs libibverbs1 and librdmacm1): the suite's verbs tests cannot run without them"
	remedyImageProvs = "rebuild the suite's image from deploy/Dockerfile (ibverbs-providers carries every upstream provider)"
)

// noNodeUserSpace is the fact (not a failure) a pod reports when its node
// has RDMA devices but no rdma-core user space of its own.
func noNodeUserSpace(root *hostfs.Root, looked []string) string {
	return fmt.Sprintf("the node has no rdma-core user space under %s (looked in %s): its RDMA user space lives in its containers' images (as on a node whose NIC driver the network operator's driver container loads); not a failure in a container",
		root.Dir(), strings.Join(looked, ", "))
}

// noEtcUsr is the absence of a recorded /sys, /proc, /dev tree, which
// says nothing about user space in /etc and /usr; nil when either exists.
func noEtcUsr(root *hostfs.Root, what string, devs []*rdmadev.Device) *verdict.Finding {
	if root.Exists("/etc") || root.Exists("/usr") {
		return nil
	}
	return verdict.Absentf(reqs.RemedyLiveHost, "GDR_HOST_ROOT=%s has no /etc or /usr (a recorded /sys, /proc, /dev tree), so %s; RDMA devices: [%s]", root.Dir(), what, DevNames(devs))
}

// NodeStack reads the rdma-core under the host root as files
// (kmod.ReadStack): the node's in a pod, a recorded tree's. A tree
// without /usr and /etc is absent; an unreadable one is not judged.
func NodeStack(root *hostfs.Root, devs []*rdmadev.Device) (kmod.Stack, *verdict.Finding) {
	if f := noEtcUsr(root, "its rdma-core cannot be seen", devs); f != nil {
		return kmod.Stack{}, f
	}
	s, err := kmod.ReadStack(root)
	if err != nil {
		return s, verdict.NotJudgedf("check the file named, or run ofed_info -s on the host", "rdma-core under %s: %v", root.Dir(), err)
	}
	return s, nil
}

// ImageStack is this process's own rdma-core when the host root is the
// node's mounted elsewhere (a pod): the image's, whose libibverbs the
// suite's verbs calls load. It records the versions side by side and
// warns when they disagree in kind (kmod.Compare). ok is false elsewhere.
func ImageStack(root *hostfs.Root, node kmod.Stack) (j Judged, ok bool) {
	if !root.NodeMounted() {
		return j, false
	}
	img, err := kmod.ReadStack(root.Own())
	if err != nil {
		j.info("this image's rdma-core: %v", err)
	}
	if img.Version != "" {
		j.attr("image_rdma_core_version", img.Version)
	}
	fact, warn := kmod.Compare(node, img)
	if fact != "" {
		j.attr("rdma_core_versions", fact)
		j.info("%s", fact)
	}
	if warn != "" {
		j.attr("rdma_core_warning", warn)
		j.info("warning: %s", warn)
	}
	return j, true
}

// judgeLibs loads each rdma-core library with probe; whose prefixes the
// messages ("this image's "). It returns the failures (with remedy) and
// what each failure said.
func judgeLibs(probe Probe, whose, remedy string) (j Judged, errs []string) {
	for _, lib := range Libs {
		if err := probe(lib.Soname); err != nil {
			e := fmt.Sprintf("%s%v; install %s", whose, err, lib.Pkg)
			errs = append(errs, e)
			j.add(verdict.Failf(remedy, "%s", e))
			continue
		}
		j.info("%s%s loads", whose, lib.Soname)
	}
	return j, errs
}

// Libraries is INST-07: the rdma-core libraries load. On the running host
// the loader says so (probe). With the node's root mounted elsewhere (a
// pod's GDR_HOST_ROOT=/host) the node's libraries are found as files
// (loading them would load the image's), and the image's, which the
// suite's verbs calls use, are loaded; a recorded tree is read as files.
func Libraries(root *hostfs.Root, p virt.Process, devs []*rdmadev.Device, probe Probe) Judged {
	var j Judged
	j.attr("rdma_core_source", Source(root, p))
	if root.Dir() == "/" {
		libs, errs := judgeLibs(probe, "", "install the package named above (rdma-core user space)")
		if len(errs) == len(Libs) && len(devs) == 0 {
			j.add(verdict.Absentf(reqs.RemedyNoRDMAStack, "rdma-core is not installed and there is no RDMA device (%s empty or missing): %s", root.Host("/sys/class/infiniband"), strings.Join(errs, "; ")))
			return j
		}
		j.merge(libs)
		j.merge(NodeNotVisible(root, p, "rdma-core"))
		return j
	}
	node, f := NodeStack(root, devs)
	if f != nil {
		j.add(f)
		return j
	}
	src := Source(root, p)
	var missing []Lib
	for _, l := range []struct {
		lib Lib
		at  string
	}{{Libs[0], node.Verbs}, {Libs[1], node.RDMACM}} {
		if l.at == "" {
			missing = append(missing, l.lib)
			continue
		}
		j.info("%s: %s at %s", src, l.lib.Soname, root.Host(l.at))
	}
	if node.Version != "" {
		j.attr("rdma_core_version", node.Version)
		j.info("%s: rdma-core %s (from %s)", src, node.Version, node.VersionFrom)
	}
	switch {
	case len(missing) == len(Libs) && len(devs) == 0:
		j.add(verdict.Absentf(reqs.RemedyNoRDMAStack, "rdma-core is not installed under %s (looked in %s) and there is no RDMA device (%s empty or missing)",
			root.Dir(), strings.Join(node.Looked, ", "), root.Host("/sys/class/infiniband")))
		return j
	case len(missing) == len(Libs) && p.Container.In:
		j.attr("node_rdma_core", "none")
		j.info("%s", noNodeUserSpace(root, node.Looked))
	default:
		for _, m := range missing {
			j.add(verdict.Failf("install the package named (rdma-core user space)", "%s: %s not found (looked in %s); install %s", src, m.Soname, strings.Join(node.Looked, ", "), m.Pkg))
		}
	}
	if !root.IsLive() {
		j.info("this process's own rdma-core not probed: GDR_HOST_ROOT=%s is a recorded tree", root.Dir())
		return j
	}
	// The image's: what the suite's verbs calls load.
	libs, _ := judgeLibs(probe, "this image's ", remedyImageLibs)
	j.merge(libs)
	img, _ := ImageStack(root, node)
	j.merge(img)
	return j
}

// Providers is INST-08: a libibverbs provider is installed, and one for
// every RDMA device's driver: the host's (the node's under GDR_HOST_ROOT
// in a pod) and, in a pod, this image's too: libibverbs loads only
// providers of its own build (rdma-core Documentation/versioning.md,
// private symbols), so the node's cannot serve the image's libibverbs.
func Providers(root *hostfs.Root, p virt.Process, devs []*rdmadev.Device) Judged {
	var j Judged
	// Recorded trees hold /sys, /proc and /dev only; providers live in
	// /etc and /usr, so such a tree says nothing about them.
	if f := noEtcUsr(root, "installed libibverbs providers cannot be seen", devs); f != nil {
		j.add(f)
		return j
	}
	src := Source(root, p)
	j.attr("rdma_core_source", src)
	provs, looked, err := kmod.Providers(root)
	if err != nil {
		j.add(verdict.NotJudgedf("", "libibverbs provider config: %v", err))
		return j
	}
	userSpace := len(provs) > 0
	if !userSpace {
		for _, g := range []string{"/usr/lib/*/libibverbs.so.1", "/usr/lib64/libibverbs.so.1", "/usr/lib/libibverbs.so.1"} {
			if m, _ := root.Glob(g); len(m) > 0 {
				userSpace = true
			}
		}
	}
	switch {
	case len(provs) == 0 && len(devs) == 0 && !userSpace:
		j.add(verdict.Absentf(reqs.RemedyNoRDMAStack, "no libibverbs provider and no RDMA device: nothing in %s; %s empty or missing", strings.Join(looked, ", "), root.Host("/sys/class/infiniband")))
		return j
	case !userSpace && p.Container.In && root.Dir() != "/":
		// The node's RDMA user space lives in its images: the image's
		// providers below are what serves this pod.
		j.info("%s", noNodeUserSpace(root, looked))
	case len(provs) == 0:
		j.add(verdict.Failf(remedyProviders, "%s: no libibverbs provider installed (looked in %s); RDMA devices: [%s]; ibv_get_device_list will return no device", src, strings.Join(looked, ", "), DevNames(devs)))
		return j
	default:
		j.attr("verbs_providers", strings.Join(slices.Sorted(maps.Keys(provs)), ","))
		j.merge(ProviderPerDevice(src, remedyProviders, provs, devs))
	}
	if !root.NodeMounted() {
		j.merge(NodeNotVisible(root, p, "the libibverbs providers"))
		return j
	}
	own, ownLooked, err := kmod.Providers(root.Own())
	if err != nil {
		j.add(verdict.NotJudgedf("", "this image's libibverbs provider config: %v", err))
		return j
	}
	j.attr("image_verbs_providers", strings.Join(slices.Sorted(maps.Keys(own)), ","))
	if len(own) == 0 {
		j.add(verdict.Failf("rebuild the suite's image from deploy/Dockerfile (it installs ibverbs-providers)", "this image has no libibverbs provider (looked in %s): the suite's verbs calls will find no device", strings.Join(ownLooked, ", ")))
		return j
	}
	j.merge(ProviderPerDevice("this image's", remedyImageProvs, own, devs))
	return j
}

// ProviderPerDevice judges that provs (whose says whose they are) hold a
// provider for every RDMA device's driver (kmod.ProviderFor).
func ProviderPerDevice(whose, remedy string, provs map[string]string, devs []*rdmadev.Device) Judged {
	var j Judged
	have := strings.Join(slices.Sorted(maps.Keys(provs)), ",")
	for _, d := range devs {
		drv := d.Driver // software devices: inferred from the name (rdmadev)
		want, known := kmod.ProviderFor[drv]
		switch {
		case !known:
			j.info("RDMA device %s: driver %q has no known provider mapping; %s providers: %s", d.Name, drv, whose, have)
		case provs[want] == "":
			f := verdict.Failf(remedy, "RDMA device %s (driver %s) needs the libibverbs provider %q, which %s providers lack (have: %s)", d.Name, drv, want, whose, have)
			f.Device = d.Name
			j.add(f)
		default:
			j.info("RDMA device %s (driver %s): %s provider %s at %s", d.Name, drv, whose, want, provs[want])
		}
	}
	return j
}

// StackFromFiles is INST-09 on the node's files (a pod's GDR_HOST_ROOT)
// or a recorded tree's: the stack the node's ofed_info and rdma-core name
// (ofed_info read, not run: kmod.ReadStack), and in a pod the image's
// beside it (kmod.Compare); systemd's state is not reachable from there.
func StackFromFiles(root *hostfs.Root, p virt.Process, devs []*rdmadev.Device) Judged {
	var j Judged
	node, f := NodeStack(root, devs)
	if f != nil {
		j.add(f)
		return j
	}
	src := Source(root, p)
	j.attr("rdma_stack_source", src)
	switch {
	case node.OFED != nil:
		j.attr("ofed_version", node.OFED.String())
		j.attr("rdma_stack", string(StackOFED))
		j.info("%s: %s (%s, read, not run)", src, node.Kind(), node.OFEDFrom)
	case node.Verbs != "":
		j.attr("rdma_stack", string(StackInbox))
		j.info("%s: %s (no ofed_info in %s)", src, node.Kind(), strings.Join(kmod.OFEDInfoPaths, ", "))
	case len(devs) == 0:
		j.add(verdict.Absentf(reqs.RemedyNoRDMAStack, "no RDMA stack under %s: no ofed_info (%s), no libibverbs.so.1 (looked in %s); no RDMA device",
			root.Dir(), strings.Join(kmod.OFEDInfoPaths, ", "), strings.Join(node.Looked, ", ")))
		return j
	case p.Container.In:
		j.attr("rdma_stack", string(StackNoNode))
		j.info("%s", noNodeUserSpace(root, node.Looked))
	default:
		j.add(verdict.Failf(remedyRDMACore,
			"RDMA device(s) %s present but no RDMA user space under %s: no ofed_info (%s), no libibverbs.so.1 (looked in %s)",
			DevNames(devs), root.Dir(), strings.Join(kmod.OFEDInfoPaths, ", "), strings.Join(node.Looked, ", ")))
		return j
	}
	if node.Version != "" {
		j.attr("rdma_core_version", node.Version)
		j.info("%s: rdma-core %s (from %s)", src, node.Version, node.VersionFrom)
	}
	img, ok := ImageStack(root, node)
	j.merge(img)
	if ok || p.Container.In {
		j.info("service state (openibd, rdma) not checked: systemd's state is reached over its socket on the node, not from a container")
		return j
	}
	j.info("service state (openibd, rdma) not checked: GDR_HOST_ROOT=%s is a recorded tree", root.Dir())
	return j
}

// Tools runs a read-only host tool and returns its combined output
// (hostfs.Run with GDR_TIMEOUT); the error says whether it timed out.
type Tools struct{ Timeout time.Duration }

func (r Tools) run(name string, args ...string) (string, error) {
	return hostfs.Run(r.Timeout, "", nil, name, args...)
}

// PackageVersion asks dpkg or rpm for the first of pkgs that is installed.
func (r Tools) PackageVersion(pkgs ...string) string {
	for _, q := range []struct {
		tool string
		args []string
	}{{"dpkg-query", []string{"-W", "-f=${Version}"}}, {"rpm", []string{"-q", "--qf", "%{VERSION}-%{RELEASE}"}}} {
		tool, _ := hostfs.LookTool(q.tool)
		if tool == "" {
			continue
		}
		for _, p := range pkgs {
			if out, err := r.run(tool, append(q.args, p)...); err == nil && out != "" {
				return out
			}
		}
	}
	return ""
}

// UnitState is what systemctl is-active says of a unit.
type UnitState string

// UnitFailed is the one state INST-09 fails on.
const UnitFailed UnitState = "failed"

// StackLive is INST-09 on the running host: ofed_info, dpkg/rpm and
// systemctl are run; probe loads libibverbs when there is no ofed_info.
func StackLive(root *hostfs.Root, p virt.Process, devs []*rdmadev.Device, probe Probe, r Tools) Judged {
	var j Judged
	ofedInfo, looked := hostfs.LookTool("ofed_info", "/usr/bin", "/usr/sbin")
	j.attr("rdma_stack_source", Source(root, p))
	if ofedInfo != "" {
		out, err := r.run(ofedInfo, "-s")
		if err != nil {
			j.add(verdict.Failf("reinstall MLNX_OFED/DOCA-OFED (mlnxofedinstall) or remove its leftovers", "%v:\n%s", err, FirstLines(out, 10)))
			return j
		}
		v, err := kmod.ParseOFEDInfo(out)
		if err != nil {
			j.add(verdict.Failf("reinstall MLNX_OFED/DOCA-OFED", "%s: %v", ofedInfo, err))
			return j
		}
		j.attr("ofed_version", v.String())
		j.attr("rdma_stack", string(StackOFED))
		j.info("MLNX_OFED: %s", v)
	} else {
		if err := probe("libibverbs.so.1"); err != nil {
			if len(devs) == 0 {
				j.add(verdict.Absentf(reqs.RemedyNoRDMAStack, "no RDMA stack: ofed_info not found (looked in %s) and %v; no RDMA device", strings.Join(looked, ", "), err))
				return j
			}
			j.add(verdict.Failf(remedyRDMACore, "RDMA device(s) %s present but no RDMA user space: ofed_info not found and %v", DevNames(devs), err))
			return j
		}
		j.attr("rdma_stack", string(StackInbox))
		ver := r.PackageVersion("rdma-core", "libibverbs1", "libibverbs")
		if ver != "" {
			j.attr("rdma_core_version", ver)
		}
		j.info("inbox rdma-core (no MLNX_OFED: ofed_info not in %s); package version %q", strings.Join(looked, ", "), ver)
	}
	j.merge(NodeNotVisible(root, p, "the RDMA stack"))
	systemctl, _ := hostfs.LookTool("systemctl", "/usr/bin", "/bin")
	if systemctl == "" {
		j.info("no systemctl: service state not checked")
		return j
	}
	// sd_booted(3): systemd is PID 1 exactly when /run/systemd/system exists.
	if !root.Exists("/run/systemd/system") {
		j.info("systemd is not running (no /run/systemd/system; a container?): service state not checked")
		return j
	}
	units := []string{"rdma-load-modules@rdma.service", "rdma.service"}
	if ofedInfo != "" {
		units = append([]string{"openibd.service"}, units...)
	}
	for _, u := range units {
		// is-active exits non-zero for inactive units; only the word matters.
		out, _ := r.run(systemctl, "is-active", u)
		state := UnitState(strings.TrimSpace(FirstLines(out, 1)))
		j.info("%s: %s", u, state)
		j.merge(JudgeUnit(u, state))
	}
	return j
}

// JudgeUnit fails a unit systemd reports failed; openibd's state is also
// a fact (gdr.openibd).
func JudgeUnit(unit string, state UnitState) Judged {
	var j Judged
	if state == UnitFailed {
		j.add(verdict.Failf(fmt.Sprintf("see journalctl -u %s, fix the cause, then systemctl restart %s", unit, unit), "%s is in the failed state", unit))
	}
	if unit == "openibd.service" {
		j.attr("openibd", string(state))
	}
	return j
}
