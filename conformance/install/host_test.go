package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// needLive ends a check that must run host tools or load host libraries
// when the root is a recorded tree: those would describe this machine, not
// the recorded one.
func needLive(t *testing.T, what string) *hostfs.Root {
	t.Helper()
	root := testenv.Root(t)
	if !root.IsLive() {
		testenv.Absent(t, reqs.RemedyLiveHost, "%s needs the running host, but GDR_HOST_ROOT=%s is a recorded tree", what, root.Dir())
	}
	return root
}

// pciDev is a PCI function (internal/pci) as install's messages name it:
// address and bound driver.
type pciDev struct{ *pci.Device }

func (d pciDev) String() string {
	drv := d.Driver
	if drv == "" {
		drv = "no driver"
	}
	return fmt.Sprintf("%s (%s)", d.BDF, drv)
}

// pciDevices lists /sys/bus/pci/devices. A missing directory is no devices;
// unreadable or malformed attributes fail the test naming the file.
func pciDevices(t *testing.T, root *hostfs.Root) []pciDev {
	t.Helper()
	devs, err := pci.Scan(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		testenv.NotJudgedf(t, "", "PCI devices: %v", err)
	}
	out := make([]pciDev, len(devs))
	for i, d := range devs {
		out[i] = pciDev{d}
	}
	return out
}

// nvidiaGPUs are the GPUs in sysfs, numbered as the selection numbers them
// (PCI bus order; pci.Device.IsGPU: NVSwitches, class 0x0680, are not GPUs).
// A malformed PCI attribute anywhere fails the test, as pciDevices does.
func nvidiaGPUs(t *testing.T) []pciDev {
	t.Helper()
	sel := testenv.Selection(t)
	if sel.PCIErr != nil && !errors.Is(sel.PCIErr, fs.ErrNotExist) {
		testenv.NotJudgedf(t, "", "PCI devices: %v", sel.PCIErr)
	}
	var out []pciDev
	for _, g := range sel.GPUs {
		if g.Dev != nil {
			out = append(out, pciDev{g.Dev})
		}
	}
	return out
}

func joinDevs(ds []pciDev) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ", ")
}

// driverInfo reads /proc/driver/nvidia/version; ok is false when the file is
// missing (no driver loaded). A malformed file fails the test.
func driverInfo(t *testing.T, root *hostfs.Root) (nvdriver.Info, bool) {
	t.Helper()
	b, err := root.ReadFile(nvdriver.VersionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nvdriver.Info{}, false
	}
	if err != nil {
		testenv.NotJudgedf(t, "", "NVIDIA driver: %v", err)
	}
	info, err := nvdriver.ParseVersionFile(b)
	if err != nil {
		testenv.Failf(t, "reinstall the NVIDIA driver; the loaded module describes itself in an unknown way", "%v", err)
	}
	return info, true
}

// needDriver ends the test as absent when no NVIDIA driver is loaded.
func needDriver(t *testing.T, root *hostfs.Root, why string) nvdriver.Info {
	t.Helper()
	info, ok := driverInfo(t, root)
	if !ok {
		testenv.Absent(t, reqs.RemedyNoDriver, "no NVIDIA driver loaded (%s missing), so %s cannot be checked; INST-01 says why", root.Host(nvdriver.VersionFile), why)
	}
	return info
}

func modules(t *testing.T, root *hostfs.Root) *kmod.Host {
	t.Helper()
	h, err := kmod.New(root)
	if err != nil {
		testenv.NotJudgedf(t, "", "kernel modules: %v", err)
	}
	return h
}

func lookupMod(t *testing.T, h *kmod.Host, name string) kmod.Status {
	t.Helper()
	st, err := h.Lookup(name)
	if err != nil {
		testenv.NotJudgedf(t, "", "kernel module %s: %v", name, err)
	}
	return st
}

// rdmaDevices are the RDMA devices of the run's selection (internal/rdmadev
// through testenv.Selection: the one reader of /sys/class/infiniband).
// exists is false when the class directory itself is missing (ib_core not
// loaded). A device sysfs describes in a malformed way fails the test.
func rdmaDevices(t *testing.T) (devs []*rdmadev.Device, exists bool) {
	t.Helper()
	sel := testenv.Selection(t)
	if sel.NICErr != nil {
		testenv.NotJudgedf(t, "", "RDMA devices: %v", sel.NICErr)
	}
	return sel.Devices, sel.NICDir
}

func devNames(ds []*rdmadev.Device) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Name
	}
	return strings.Join(s, ", ")
}

// lookTool finds an executable in PATH, then in the extra directories
// (globs allowed, newest-looking match first). looked lists where it searched.
func lookTool(name string, extra ...string) (found string, looked []string) {
	looked = append(looked, "PATH="+os.Getenv("PATH"))
	if p, err := exec.LookPath(name); err == nil {
		return p, looked
	}
	for _, e := range extra {
		dirs, _ := filepath.Glob(e)
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		looked = append(looked, e)
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, looked
			}
		}
	}
	return "", looked
}

// runTool runs a host tool with the suite's deadline (GDR_TIMEOUT) and
// returns its combined output (hostfs.Run). The error says whether it timed out.
func runTool(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	return hostfs.Run(testenv.Config(t).Timeout, dir, env, name, args...)
}

// firstLines keeps tool output short enough for a failure message.
func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// proc is where this process runs (a container or not, its signs, the
// node's root) and the capabilities it holds: the selection's
// (internal/virt through internal/rails), read once per run.
func proc(t *testing.T) virt.Process {
	t.Helper()
	return testenv.Selection(t).Process
}

// nodeNotVisible says, in a container whose host root is its own "/"
// (GDR_HOST_ROOT=/, as deploy/k8s-pod-network sets it for a VF's netdev in
// the pod's namespace), that the node's files of what cannot be seen: the
// image's were judged, and in a container those are what the workloads'
// images stand in for. A fact (gdr.node_files), not an absence: the node's
// user space serves only the node's own processes.
func nodeNotVisible(t *testing.T, root *hostfs.Root, what string) {
	t.Helper()
	p := proc(t)
	if !p.Container.In || root.Dir() != "/" {
		return
	}
	msg := fmt.Sprintf("%s of the node not seen: GDR_HOST_ROOT is / and / is this image's (%s); this image's was judged. To see the node's too, mount the node's / read-only and set GDR_HOST_ROOT to it (deploy/k8s/job.yaml: a hostPath volume at /host and GDR_HOST_ROOT=/host)", what, p.Container)
	testenv.Attr(t, "node_files", "not visible from this container (GDR_HOST_ROOT=/)")
	t.Logf("%s", msg)
}

// stackSource names whose rdma-core a result judged.
func stackSource(root *hostfs.Root, p virt.Process) string {
	switch {
	case root.NodeMounted():
		return "node's rdma-core under " + root.Dir()
	case !root.IsLive() && p.Container.In:
		return "node's rdma-core under " + root.Dir() + " (a recorded pod's tree)"
	case !root.IsLive():
		return "rdma-core under GDR_HOST_ROOT=" + root.Dir() + " (a recorded tree)"
	case p.Container.In:
		return "this image's"
	}
	return "this host's"
}

// nodeStack reads the rdma-core under the host root as files (kmod.ReadStack):
// the node's in a pod, a recorded tree's. A tree without /usr and /etc (a
// recorded /sys, /proc, /dev tree) says nothing about it: absent.
func nodeStack(t *testing.T, root *hostfs.Root, devs []*rdmadev.Device) kmod.Stack {
	t.Helper()
	if !root.Exists("/etc") && !root.Exists("/usr") {
		testenv.Absent(t, reqs.RemedyLiveHost, "GDR_HOST_ROOT=%s has no /etc or /usr (a recorded /sys, /proc, /dev tree), so its rdma-core cannot be seen; RDMA devices: [%s]", root.Dir(), devNames(devs))
	}
	s, err := kmod.ReadStack(root)
	if err != nil {
		testenv.NotJudgedf(t, "check the file named, or run ofed_info -s on the host", "rdma-core under %s: %v", root.Dir(), err)
	}
	return s
}

// imageStack is this process's own rdma-core when the host root is the
// node's mounted elsewhere (a pod): the image's, whose libibverbs the
// suite's verbs calls load. It records the versions side by side and warns
// when they disagree in kind (kmod.Compare). ok is false elsewhere.
func imageStack(t *testing.T, root *hostfs.Root, node kmod.Stack) (img kmod.Stack, ok bool) {
	t.Helper()
	if !root.NodeMounted() {
		return kmod.Stack{}, false
	}
	img, err := kmod.ReadStack(root.Own())
	if err != nil {
		t.Logf("this image's rdma-core: %v", err)
	}
	if img.Version != "" {
		testenv.Attr(t, "image_rdma_core_version", img.Version)
	}
	fact, warn := kmod.Compare(node, img)
	if fact != "" {
		testenv.Attr(t, "rdma_core_versions", fact)
		t.Logf("%s", fact)
	}
	if warn != "" {
		testenv.Attr(t, "rdma_core_warning", warn)
		t.Logf("warning: %s", warn)
	}
	return img, true
}

// noNodeUserSpace is the fact (not a failure) a pod reports when its node
// has RDMA devices but no rdma-core user space of its own.
func noNodeUserSpace(root *hostfs.Root, s kmod.Stack) string {
	return fmt.Sprintf("the node has no rdma-core user space under %s (looked in %s): its RDMA user space lives in its containers' images (as on a node whose NIC driver the network operator's driver container loads); not a failure in a container",
		root.Dir(), strings.Join(s.Looked, ", "))
}
