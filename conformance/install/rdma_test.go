package install

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// rdmaLibs are the rdma-core libraries a GPUDirect RDMA program links.
var rdmaLibs = []struct{ soname, pkg string }{
	{"libibverbs.so.1", "libibverbs1 (Debian/Ubuntu), libibverbs (RHEL/SUSE), or MLNX_OFED"},
	{"librdmacm.so.1", "librdmacm1 (Debian/Ubuntu), librdmacm (RHEL/SUSE), or MLNX_OFED"},
}

// INST-07: the rdma-core libraries load. On the running host the loader
// says so (dlopen). With the node's root mounted elsewhere (a pod's
// GDR_HOST_ROOT=/host) the node's libraries are found as files (loading
// them would load the image's), and the image's, which the suite's verbs
// calls use, are loaded; a recorded tree is read as files.
func TestINST07RDMACoreLibraries(t *testing.T) {
	testenv.Req(t, "INST-07")
	root := testenv.Root(t)
	devs, _ := rdmaDevices(t)
	p := proc(t)
	testenv.Attr(t, "rdma_core_source", stackSource(root, p))
	if root.Dir() == "/" {
		errs, missing := probeLibs(t, "")
		if missing == len(rdmaLibs) && len(devs) == 0 {
			testenv.Absent(t, reqs.RemedyNoRDMAStack, "rdma-core is not installed and there is no RDMA device (%s empty or missing): %s", root.Host("/sys/class/infiniband"), strings.Join(errs, "; "))
		}
		for _, e := range errs {
			testenv.Errorf(t, "install the package named above (rdma-core user space)", "%s", e)
		}
		nodeNotVisible(t, root, "rdma-core")
		return
	}
	node := nodeStack(t, root, devs)
	src := stackSource(root, p)
	var missing []string
	for _, l := range []struct{ soname, at string }{{"libibverbs.so.1", node.Verbs}, {"librdmacm.so.1", node.RDMACM}} {
		if l.at == "" {
			missing = append(missing, l.soname)
			continue
		}
		t.Logf("%s: %s at %s", src, l.soname, root.Host(l.at))
	}
	if node.Version != "" {
		testenv.Attr(t, "rdma_core_version", node.Version)
		t.Logf("%s: rdma-core %s (from %s)", src, node.Version, node.VersionFrom)
	}
	switch {
	case len(missing) == len(rdmaLibs) && len(devs) == 0:
		testenv.Absent(t, reqs.RemedyNoRDMAStack, "rdma-core is not installed under %s (looked in %s) and there is no RDMA device (%s empty or missing)",
			root.Dir(), strings.Join(node.Looked, ", "), root.Host("/sys/class/infiniband"))
	case len(missing) == len(rdmaLibs) && p.Container.In:
		testenv.Attr(t, "node_rdma_core", "none")
		t.Logf("%s", noNodeUserSpace(root, node))
	default:
		for _, m := range missing {
			for _, l := range rdmaLibs {
				if l.soname == m {
					testenv.Errorf(t, "install the package named (rdma-core user space)", "%s: %s not found (looked in %s); install %s", src, m, strings.Join(node.Looked, ", "), l.pkg)
				}
			}
		}
	}
	if !root.IsLive() {
		t.Logf("this process's own rdma-core not probed: GDR_HOST_ROOT=%s is a recorded tree", root.Dir())
		return
	}
	// The image's: what the suite's verbs calls load.
	errs, _ := probeLibs(t, "this image's ")
	for _, e := range errs {
		testenv.Errorf(t, "rebuild the suite's image from deploy/Dockerfile (it installs libibverbs1 and librdmacm1): the suite's verbs tests cannot run without them", "%s", e)
	}
	imageStack(t, root, node)
}

// probeLibs loads each rdma-core library with this process's loader and
// returns the failures with the package to install, and how many failed.
func probeLibs(t *testing.T, whose string) (errs []string, missing int) {
	t.Helper()
	for _, lib := range rdmaLibs {
		err := dl.Probe(lib.soname)
		if err == nil {
			t.Logf("%s%s loads", whose, lib.soname)
			continue
		}
		missing++
		errs = append(errs, fmt.Sprintf("%s%v; install %s", whose, err, lib.pkg))
	}
	return errs, missing
}

// installedProviders returns the installed libibverbs providers
// (kmod.Providers) and where it looked.
func installedProviders(t *testing.T, root *hostfs.Root) (names map[string]string, looked []string) {
	t.Helper()
	names, looked, err := kmod.Providers(root)
	if err != nil {
		testenv.NotJudgedf(t, "", "libibverbs provider config: %v", err)
	}
	return names, looked
}

// INST-08: a libibverbs provider is installed, and one for every RDMA
// device's driver: the host's (the node's under GDR_HOST_ROOT in a pod)
// and, in a pod, this image's too: libibverbs loads only providers of its
// own build (rdma-core Documentation/versioning.md, private symbols), so
// the node's cannot serve the image's libibverbs.
func TestINST08VerbsProviders(t *testing.T) {
	testenv.Req(t, "INST-08")
	root := testenv.Root(t)
	devs, _ := rdmaDevices(t)
	p := proc(t)
	// Recorded trees hold /sys, /proc and /dev only; providers live in /etc
	// and /usr, so such a tree says nothing about them.
	if !root.Exists("/etc") && !root.Exists("/usr") {
		testenv.Absent(t, reqs.RemedyLiveHost, "GDR_HOST_ROOT=%s has no /etc or /usr (a recorded /sys, /proc, /dev tree), so installed libibverbs providers cannot be seen; RDMA devices: [%s]", root.Dir(), devNames(devs))
	}
	src := stackSource(root, p)
	testenv.Attr(t, "rdma_core_source", src)
	provs, looked := installedProviders(t, root)
	const remedy = "install the libibverbs providers (Debian/Ubuntu: ibverbs-providers; RHEL/SUSE: rdma-core (libibverbs); or MLNX_OFED)"
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
		testenv.Absent(t, reqs.RemedyNoRDMAStack, "no libibverbs provider and no RDMA device: nothing in %s; %s empty or missing", strings.Join(looked, ", "), root.Host("/sys/class/infiniband"))
	case !userSpace && p.Container.In && root.Dir() != "/":
		// The node's RDMA user space lives in its images: the image's
		// providers below are what serves this pod.
		t.Logf("%s", noNodeUserSpace(root, kmod.Stack{Looked: looked}))
	case len(provs) == 0:
		testenv.Failf(t, remedy, "%s: no libibverbs provider installed (looked in %s); RDMA devices: [%s]; ibv_get_device_list will return no device", src, strings.Join(looked, ", "), devNames(devs))
	default:
		testenv.Attr(t, "verbs_providers", strings.Join(sortedKeys(provs), ","))
		providerPerDevice(t, src, remedy, provs, devs)
	}
	if root.NodeMounted() {
		own, ownLooked, err := kmod.Providers(root.Own())
		if err != nil {
			testenv.NotJudgedf(t, "", "this image's libibverbs provider config: %v", err)
		}
		testenv.Attr(t, "image_verbs_providers", strings.Join(sortedKeys(own), ","))
		if len(own) == 0 {
			testenv.Errorf(t, "rebuild the suite's image from deploy/Dockerfile (it installs ibverbs-providers)", "this image has no libibverbs provider (looked in %s): the suite's verbs calls will find no device", strings.Join(ownLooked, ", "))
			return
		}
		providerPerDevice(t, "this image's", "rebuild the suite's image from deploy/Dockerfile (ibverbs-providers carries every upstream provider)", own, devs)
		return
	}
	nodeNotVisible(t, root, "the libibverbs providers")
}

// providerPerDevice checks that provs (whose says whose they are) hold a
// provider for every RDMA device's driver.
func providerPerDevice(t *testing.T, whose, remedy string, provs map[string]string, devs []*rdmadev.Device) {
	t.Helper()
	for _, d := range devs {
		drv := d.Driver // software devices: inferred from the name (rdmadev)
		want, known := kmod.ProviderFor[drv]
		switch {
		case !known:
			t.Logf("RDMA device %s: driver %q has no known provider mapping; %s providers: %s", d.Name, drv, whose, strings.Join(sortedKeys(provs), ","))
		case provs[want] == "":
			testenv.Errorf(t, remedy, "RDMA device %s (driver %s) needs the libibverbs provider %q, which %s providers lack (have: %s)", d.Name, drv, want, whose, strings.Join(sortedKeys(provs), ","))
		default:
			t.Logf("RDMA device %s (driver %s): %s provider %s at %s", d.Name, drv, whose, want, provs[want])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// INST-09: which RDMA stack is installed (MLNX_OFED or inbox rdma-core),
// and its service is not in a failed state. On the running host ofed_info,
// dpkg/rpm and systemctl are run. With the node's root mounted elsewhere
// (a pod) or a recorded tree, the node's stack is read as files: ofed_info
// is read, not run (kmod.ReadStack), and in a pod the image's stack is set
// beside it (kmod.Compare); systemd's state is not reachable from there.
func TestINST09RDMAStack(t *testing.T) {
	testenv.Req(t, "INST-09")
	root := testenv.Root(t)
	if root.Dir() != "/" {
		rdmaStackFromFiles(t, root)
		return
	}
	ofedInfo, looked := lookTool("ofed_info", "/usr/bin", "/usr/sbin")
	ofedInstalled := ofedInfo != ""
	testenv.Attr(t, "rdma_stack_source", stackSource(root, proc(t)))
	if ofedInstalled {
		out, err := runTool(t, "", nil, ofedInfo, "-s")
		if err != nil {
			testenv.Failf(t, "reinstall MLNX_OFED/DOCA-OFED (mlnxofedinstall) or remove its leftovers", "%v:\n%s", err, firstLines(out, 10))
		}
		v, err := kmod.ParseOFEDInfo(out)
		if err != nil {
			testenv.Failf(t, "reinstall MLNX_OFED/DOCA-OFED", "%s: %v", ofedInfo, err)
		}
		testenv.Attr(t, "ofed_version", v.String())
		testenv.Attr(t, "rdma_stack", "ofed")
		t.Logf("MLNX_OFED: %s", v)
	} else {
		verbsErr := dl.Probe("libibverbs.so.1")
		if verbsErr != nil {
			devs, _ := rdmaDevices(t)
			if len(devs) == 0 {
				testenv.Absent(t, reqs.RemedyNoRDMAStack, "no RDMA stack: ofed_info not found (looked in %s) and %v; no RDMA device", strings.Join(looked, ", "), verbsErr)
			}
			testenv.Failf(t, "install rdma-core (Debian/Ubuntu: rdma-core ibverbs-providers libibverbs1 librdmacm1; RHEL: rdma-core libibverbs librdmacm) or MLNX_OFED",
				"RDMA device(s) %s present but no RDMA user space: ofed_info not found and %v", devNames(devs), verbsErr)
		}
		testenv.Attr(t, "rdma_stack", "inbox")
		ver := packageVersion(t, "rdma-core", "libibverbs1", "libibverbs")
		if ver != "" {
			testenv.Attr(t, "rdma_core_version", ver)
		}
		t.Logf("inbox rdma-core (no MLNX_OFED: ofed_info not in %s); package version %q", strings.Join(looked, ", "), ver)
	}
	nodeNotVisible(t, root, "the RDMA stack")
	systemctl, _ := lookTool("systemctl", "/usr/bin", "/bin")
	if systemctl == "" {
		t.Logf("no systemctl: service state not checked")
		return
	}
	// sd_booted(3): systemd is PID 1 exactly when /run/systemd/system exists.
	if !root.Exists("/run/systemd/system") {
		t.Logf("systemd is not running (no /run/systemd/system; a container?): service state not checked")
		return
	}
	units := []string{"rdma-load-modules@rdma.service", "rdma.service"}
	if ofedInstalled {
		units = append([]string{"openibd.service"}, units...)
	}
	for _, u := range units {
		// is-active exits non-zero for inactive units; only the word matters.
		out, _ := runTool(t, "", nil, systemctl, "is-active", u)
		state := strings.TrimSpace(firstLines(out, 1))
		t.Logf("%s: %s", u, state)
		if state == "failed" {
			testenv.Errorf(t, fmt.Sprintf("see journalctl -u %s, fix the cause, then systemctl restart %s", u, u), "%s is in the failed state", u)
		}
		if u == "openibd.service" {
			testenv.Attr(t, "openibd", state)
		}
	}
}

// rdmaStackFromFiles is INST-09 on the node's files (a pod's
// GDR_HOST_ROOT) or a recorded tree's: the stack the node's ofed_info and
// rdma-core name, and in a pod the image's beside it.
func rdmaStackFromFiles(t *testing.T, root *hostfs.Root) {
	t.Helper()
	devs, _ := rdmaDevices(t)
	p := proc(t)
	node := nodeStack(t, root, devs)
	src := stackSource(root, p)
	testenv.Attr(t, "rdma_stack_source", src)
	switch {
	case node.OFED != nil:
		testenv.Attr(t, "ofed_version", node.OFED.String())
		testenv.Attr(t, "rdma_stack", "ofed")
		t.Logf("%s: %s (%s, read, not run)", src, node.Kind(), node.OFEDFrom)
	case node.Verbs != "":
		testenv.Attr(t, "rdma_stack", "inbox")
		t.Logf("%s: %s (no ofed_info in %s)", src, node.Kind(), strings.Join(kmod.OFEDInfoPaths, ", "))
	case len(devs) == 0:
		testenv.Absent(t, reqs.RemedyNoRDMAStack, "no RDMA stack under %s: no ofed_info (%s), no libibverbs.so.1 (looked in %s); no RDMA device",
			root.Dir(), strings.Join(kmod.OFEDInfoPaths, ", "), strings.Join(node.Looked, ", "))
	case p.Container.In:
		testenv.Attr(t, "rdma_stack", "none on the node")
		t.Logf("%s", noNodeUserSpace(root, node))
	default:
		testenv.Failf(t, "install rdma-core (Debian/Ubuntu: rdma-core ibverbs-providers libibverbs1 librdmacm1; RHEL: rdma-core libibverbs librdmacm) or MLNX_OFED",
			"RDMA device(s) %s present but no RDMA user space under %s: no ofed_info (%s), no libibverbs.so.1 (looked in %s)",
			devNames(devs), root.Dir(), strings.Join(kmod.OFEDInfoPaths, ", "), strings.Join(node.Looked, ", "))
	}
	if node.Version != "" {
		testenv.Attr(t, "rdma_core_version", node.Version)
		t.Logf("%s: rdma-core %s (from %s)", src, node.Version, node.VersionFrom)
	}
	if _, ok := imageStack(t, root, node); ok || p.Container.In {
		t.Logf("service state (openibd, rdma) not checked: systemd's state is reached over its socket on the node, not from a container")
		return
	}
	t.Logf("service state (openibd, rdma) not checked: GDR_HOST_ROOT=%s is a recorded tree", root.Dir())
}

// packageVersion asks dpkg or rpm for the first of pkgs that is installed.
func packageVersion(t *testing.T, pkgs ...string) string {
	t.Helper()
	if dpkg, _ := lookTool("dpkg-query"); dpkg != "" {
		for _, p := range pkgs {
			if out, err := runTool(t, "", nil, dpkg, "-W", "-f=${Version}", p); err == nil && out != "" {
				return out
			}
		}
	}
	if rpm, _ := lookTool("rpm"); rpm != "" {
		for _, p := range pkgs {
			if out, err := runTool(t, "", nil, rpm, "-q", "--qf", "%{VERSION}-%{RELEASE}", p); err == nil && out != "" {
				return out
			}
		}
	}
	return ""
}

// moduleEvidence names sysfs/dev paths that exist only while a module's code
// runs; they show built-in modules that have no /sys/module entry (a
// built-in module without parameters has none).
var moduleEvidence = map[string][]string{
	"ib_core":   {"/sys/class/infiniband"},
	"ib_uverbs": {"/sys/class/infiniband_verbs/abi_version"},
	"rdma_ucm":  {"/sys/class/misc/rdma_cm", "/dev/infiniband/rdma_cm"},
}

// ibDriverFor maps a NIC's PCI driver to the module that registers its RDMA device.
var ibDriverFor = map[string]string{
	"mlx5_core": "mlx5_ib", "mlx4_core": "mlx4_ib", "bnxt_en": "bnxt_re", "ice": "irdma",
	"qede": "qedr", "efa": "efa",
}

// moduleState is a module's status plus the sysfs evidence that settles it.
func moduleState(t *testing.T, root *hostfs.Root, km *kmod.Host, name string) (bool, string) {
	t.Helper()
	st := lookupMod(t, km, name)
	if st.Loaded() {
		return true, st.String()
	}
	for _, p := range moduleEvidence[name] {
		if root.Exists(p) {
			return true, fmt.Sprintf("present (%s exists; built in or loaded)", p)
		}
	}
	return false, st.String()
}

// rdmaNICs are PCI functions that should carry an RDMA device: InfiniBand
// controllers (class 0x0207) and NVIDIA/Mellanox (0x15b3) network functions.
func rdmaNICs(t *testing.T, root *hostfs.Root) []pciDev {
	t.Helper()
	var out []pciDev
	for _, d := range pciDevices(t, root) {
		if d.Class>>8 == 0x0207 || d.Vendor == 0x15b3 && d.Class>>16 == 0x02 {
			out = append(out, d)
		}
	}
	return out
}

// INST-10: the RDMA kernel modules are loaded, and every RDMA-capable NIC
// has its RDMA driver.
func TestINST10RDMAKernelModules(t *testing.T) {
	testenv.Req(t, "INST-10")
	root := testenv.Root(t)
	km := modules(t, root)
	devs, classExists := rdmaDevices(t)
	nics := rdmaNICs(t, root)
	coreOK, coreState := moduleState(t, root, km, "ib_core")
	if len(devs) == 0 && len(nics) == 0 && !coreOK {
		testenv.Absent(t, reqs.RemedyNoRDMAStack, "no RDMA device (%s %s), no InfiniBand or NVIDIA/Mellanox NIC in %s, and ib_core %s (looked in %s)",
			root.Host("/sys/class/infiniband"), map[bool]string{true: "empty", false: "missing"}[classExists],
			root.Host(pci.DevicesDir), coreState, km.Sources())
	}
	for _, m := range []string{"ib_core", "ib_uverbs", "rdma_ucm"} {
		ok, state := moduleState(t, root, km, m)
		if !ok {
			testenv.Errorf(t, "modprobe "+m+" (persist it in /etc/modules-load.d/rdma.conf; MLNX_OFED: /etc/init.d/openibd restart)",
				"kernel module %s is not loaded (status %q; looked in %s and %s)", m, state, km.Sources(), strings.Join(moduleEvidence[m], ", "))
			continue
		}
		t.Logf("%s: %s", m, state)
	}
	covered := map[string]bool{}
	for _, d := range devs {
		if d.PCI != "" {
			covered[d.PCI] = true
			covered[slot(d.PCI)] = true
		}
		drv := d.Driver
		if d.DriverInferred {
			t.Logf("RDMA device %s: software device, driver %s (inferred from its name), parent %q", d.Name, drv, d.Parent)
		} else {
			t.Logf("RDMA device %s: driver %q, PCI %s", d.Name, drv, d.PCI)
		}
		if d.PCI == "" {
			// Software devices: their module is what made the device exist,
			// but say so when the module list disagrees.
			if ok, state := moduleState(t, root, km, drv); !ok {
				t.Logf("software RDMA device %s: module %s %s", d.Name, drv, state)
			}
		}
	}
	// A NIC whose PCI driver is bound but that has no RDMA device lacks its
	// RDMA driver (mlx5_core bound, mlx5_ib not loaded). Functions of one
	// card share an RDMA device under bonding/multiport, hence the slot match.
	for _, n := range nics {
		if covered[n.BDF] || covered[slot(n.BDF)] {
			continue
		}
		switch ib, ok := ibDriverFor[n.Driver]; {
		case n.Driver == "":
			testenv.Errorf(t, "modprobe mlx5_core (or the NIC vendor's driver); check dmesg for probe errors",
				"RDMA-capable NIC %s (vendor 0x%04x, class 0x%06x) has no driver bound", n.BDF, n.Vendor, n.Class)
		case n.Driver == "vfio-pci":
			t.Logf("NIC %s is bound to vfio-pci (passed through): no RDMA device expected here", n.BDF)
		case ok:
			testenv.Errorf(t, "modprobe "+ib+" (MLNX_OFED: /etc/init.d/openibd restart)",
				"NIC %s (driver %s) has no RDMA device in /sys/class/infiniband: its RDMA driver %s is not loaded (%s)", n.BDF, n.Driver, ib, lookupMod(t, km, ib))
		default:
			testenv.Errorf(t, "load the RDMA driver for "+n.Driver+" and check dmesg",
				"NIC %s (driver %s) has no RDMA device in /sys/class/infiniband", n.BDF, n.Driver)
		}
	}
}

// slot is the PCI address without its function: 0000:3b:00.
func slot(addr string) string {
	if i := strings.LastIndexByte(addr, '.'); i > 0 {
		return addr[:i]
	}
	return addr
}

// INST-11: one /dev/infiniband/uverbsN per RDMA device and rdma_cm exist,
// and this user can open them read-write. In a container (internal/virt)
// the pod's /dev holds the nodes of the NICs it was given: those are
// judged, and the node's other NICs are reported as not given to this
// container, a fact; none given at all fails.
func TestINST11RDMADeviceNodes(t *testing.T) {
	testenv.Req(t, "INST-11")
	root := testenv.Root(t)
	// Nodes are looked for where this process opens them (its own /dev on
	// the running host, also when GDR_HOST_ROOT mounts the node's "/"
	// elsewhere; the tree's /dev in a recorded tree): that is where
	// libibverbs stats and opens them (rdma-core libibverbs/init.c
	// try_access_device).
	dr := root.Devices()
	devs, exists := rdmaDevices(t)
	var nodes []string
	all, _ := dr.Glob("/dev/infiniband/*")
	for _, n := range all {
		if !strings.HasPrefix(path.Base(n), ".") { // a recorded tree's .gitkeep
			nodes = append(nodes, n)
		}
	}
	if len(devs) == 0 && len(nodes) == 0 {
		testenv.Absent(t, reqs.RemedyNoRDMADevice, "no RDMA device (%s %s) and nothing in %s", root.Host("/sys/class/infiniband"), map[bool]string{true: "is empty", false: "is missing"}[exists], dr.Host("/dev/infiniband"))
	}
	// /sys/class/infiniband_verbs/uverbsN/ibdev names the device each node serves.
	verbs, _ := root.Glob("/sys/class/infiniband_verbs/uverbs*")
	want := map[string]string{}
	for _, v := range verbs {
		ib, _ := root.ReadString(v + "/ibdev")
		want["/dev/infiniband/"+path.Base(v)] = ib
	}
	if len(devs) > 0 && len(verbs) == 0 {
		_, state := moduleState(t, root, modules(t, root), "ib_uverbs")
		testenv.Errorf(t, "modprobe ib_uverbs (reload the NIC's RDMA driver if ib_uverbs is loaded; check dmesg)",
			"RDMA device(s) %s but no %s: user space cannot reach them (ib_uverbs %s)", devNames(devs), root.Host("/sys/class/infiniband_verbs")+"/uverbs*", state)
	}
	// In a container the device plugin gives the pod the nodes of the NICs
	// it may use; the node's other NICs have none here by design.
	inPod := proc(t).Container.In
	check := func(node, what string) {
		if !dr.Exists(node) {
			testenv.Errorf(t, "on a host: check udev (rdma-core installs 90-rdma-umad/rdma-ucm rules; udevadm trigger) or create it with mknod; in a container: request the NIC (the pod's resource request for its RDMA device plugin, or --device "+node+"); a container given only some NICs lacks the others' nodes by design, and the rails leave those NICs out",
				"%s (%s) is missing", dr.Host(node), what)
			return
		}
		if !root.IsLive() {
			t.Logf("%s present (recorded tree: not opened)", node)
			return
		}
		fi, err := os.Stat(node)
		if err == nil && fi.Mode()&os.ModeCharDevice == 0 {
			testenv.Errorf(t, "remove it and let udev recreate the device node (udevadm trigger)", "%s is not a character device (mode %v)", node, fi.Mode())
			return
		}
		f, err := os.OpenFile(node, os.O_RDWR, 0)
		if err != nil {
			remedy := "check dmesg"
			if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
				remedy = "make it 0666 (rdma-core's udev rules do) or add the user to its group, and in containers pass the device (--device " + node + ")"
			}
			testenv.Errorf(t, remedy, "%s (%s) does not open read-write: %v (mode %v)", node, what, err, modeOf(node))
			return
		}
		f.Close()
		t.Logf("%s opens read-write (%s)", node, what)
	}
	var given, notGiven []string
	for _, v := range sortedKeys(want) {
		if inPod && !dr.Exists(v) {
			notGiven = append(notGiven, want[v]+" ("+v+")")
			continue
		}
		given = append(given, want[v])
		check(v, "verbs of "+want[v])
	}
	if inPod {
		if len(notGiven) > 0 {
			testenv.Attr(t, "nics_not_given", strings.Join(notGiven, " "))
			t.Logf("not given to this container (the device plugin gave the pod other NICs; not a failure): %s", strings.Join(notGiven, ", "))
		}
		if len(given) > 0 {
			testenv.Attr(t, "nics_given", strings.Join(given, " "))
		} else if len(want) > 0 {
			testenv.Errorf(t, "request the node's RDMA NICs in the pod's resources (deploy/k8s/job.yaml: rdma/rdma_shared_device_a, the RDMA shared device plugin's resource; with SR-IOV, the VF resource), or --device /dev/infiniband/uverbsN for docker/podman",
				"no RDMA device was given to this container: none of %s exists in %s (the node has %s)", strings.Join(sortedKeys(want), ", "), dr.Host("/dev/infiniband"), devNames(devs))
		}
	}
	if len(devs) > 0 || dr.Exists("/dev/infiniband/rdma_cm") {
		check("/dev/infiniband/rdma_cm", "RDMA connection manager")
	}
}

func modeOf(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "unknown"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%v uid %d gid %d", fi.Mode(), st.Uid, st.Gid)
	}
	return fi.Mode().String()
}

// INST-12: the NIC the other areas use has an ACTIVE port (what ibv_devinfo
// shows as PORT_ACTIVE), read from sysfs so it needs no verbs library. The
// NIC is the selection's primary rail NIC (GDR_RDMA_DEVICE, or the nearest
// candidate NIC of GDR_GPU's or rail 0's GPU), at port GDR_IB_PORT.
func TestINST12RDMAPortActive(t *testing.T) {
	testenv.Req(t, "INST-12")
	root := testenv.Root(t)
	devs, exists := rdmaDevices(t)
	cfg := testenv.Config(t)
	if len(devs) == 0 {
		testenv.Absent(t, reqs.RemedyNoRDMADevice, "no RDMA device: %s is %s", root.Host(rdmadev.ClassDir), map[bool]string{true: "empty", false: "missing (ib_core not loaded)"}[exists])
	}
	sel := testenv.Selection(t)
	var report []string
	initPort, physDown := false, false
	otherPort := ""
	for _, d := range devs {
		if cfg.RDMADevice != "" && d.Name != cfg.RDMADevice {
			continue
		}
		for _, p := range d.Ports {
			desc := fmt.Sprintf("%s port %d: state %q, phys_state %q, link_layer %q, rate %q", d.Name, p.Num, p.RawState, p.RawPhysState, p.LinkLayer, p.Rate)
			t.Log(desc)
			report = append(report, desc)
			if p.Num != sel.Port {
				if p.Active() && otherPort == "" {
					otherPort = fmt.Sprintf("%s port %d", d.Name, p.Num)
				}
				continue // only GDR_IB_PORT is the port the other areas use
			}
			if p.State == "INIT" && p.LinkLayer == "InfiniBand" {
				initPort = true
			}
			if p.PhysState != "LinkUp" {
				physDown = true
			}
		}
	}
	if r := sel.Primary; r != nil && r.NIC != nil {
		testenv.RailAttrs(t, r)
		if r.NIC.PortState == "ACTIVE" {
			testenv.Attr(t, "active_port", fmt.Sprintf("%s/%d", r.NIC.Name, r.NIC.Port))
			t.Logf("%s port %d is ACTIVE: %s (%s)", r.NIC.Name, r.NIC.Port, r.Reason, sel.PrimaryWhy)
			return
		}
	} else {
		// No candidate NIC: an ACTIVE port on a NIC user space cannot open
		// is still an ACTIVE port (INST-11 judges the device nodes).
		for _, n := range sel.NICs {
			if n.PortState == "ACTIVE" {
				testenv.Attr(t, "active_port", fmt.Sprintf("%s/%d", n.Name, n.Port))
				t.Logf("%s port %d is ACTIVE, but %s is not a rail candidate: %s", n.Name, n.Port, n.Name, n.Why)
				return
			}
		}
	}
	var remedies []string
	if otherPort != "" {
		remedies = append(remedies, fmt.Sprintf("%s is ACTIVE: set GDR_IB_PORT to that port, or cable port %d", otherPort, sel.Port))
	}
	if initPort {
		remedies = append(remedies, "a port in INIT has link but no subnet manager: start opensm on one host of the fabric (systemctl start opensm) or enable the switch's SM")
	}
	if physDown {
		remedies = append(remedies, "a port without phys_state LinkUp has no link: check cable/transceiver and the switch port; for RoCE bring the netdev up (ip link set <netdev> up)")
	}
	if len(remedies) == 0 {
		remedies = append(remedies, "check dmesg for the NIC driver's port messages and the switch port")
	}
	remedy := strings.Join(remedies, "; ")
	if len(report) == 0 {
		testenv.Failf(t, "check dmesg for the NIC driver's errors", "RDMA device(s) %s have no ports in sysfs", devNames(devs))
	}
	what := fmt.Sprintf("no RDMA port is ACTIVE at port %d (GDR_IB_PORT)", sel.Port)
	if cfg.RDMADevice != "" {
		what = fmt.Sprintf("GDR_RDMA_DEVICE=%s port %d (GDR_IB_PORT) is not ACTIVE", cfg.RDMADevice, sel.Port)
	}
	testenv.Failf(t, remedy, "%s:\n%s", what, strings.Join(report, "\n"))
}
