package install

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/install"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// record records what an engine of internal/install judged: its facts,
// then its findings (an absence ends the test there).
func record(t *testing.T, j install.Judged) {
	t.Helper()
	for _, a := range j.Attrs {
		testenv.Attr(t, a.Key, a.Value)
	}
	testenv.Record(t, j.Findings...)
}

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

// nvidiaGPUs are the GPUs in sysfs, numbered as the selection numbers them
// (PCI bus order; pci.Device.IsGPU: NVSwitches are not GPUs). A malformed
// PCI attribute anywhere is not judged.
func nvidiaGPUs(t *testing.T) []*pci.Device {
	t.Helper()
	sel := testenv.Selection(t)
	if sel.PCIErr != nil && !errors.Is(sel.PCIErr, fs.ErrNotExist) {
		testenv.NotJudgedf(t, "", "PCI devices: %v", sel.PCIErr)
	}
	var out []*pci.Device
	for _, g := range sel.GPUs {
		if g.Dev != nil {
			out = append(out, g.Dev)
		}
	}
	return out
}

// driverInfo is install.Driver; ok is false when no driver is loaded.
func driverInfo(t *testing.T, root *hostfs.Root) (nvdriver.Info, bool) {
	t.Helper()
	info, ok, err := install.Driver(root)
	testenv.Stop(t, err)
	return info, ok
}

// needDriver ends the test as absent when no NVIDIA driver is loaded.
func needDriver(t *testing.T, root *hostfs.Root, why string) nvdriver.Info {
	t.Helper()
	info, ok := driverInfo(t, root)
	if !ok {
		testenv.Fail(t, *install.NoDriver(root, why))
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

// rdmaDevices are the RDMA devices of the run's selection (internal/rdmadev
// through testenv.Selection). exists is false when the class directory
// itself is missing (ib_core not loaded).
func rdmaDevices(t *testing.T) (devs []*rdmadev.Device, exists bool) {
	t.Helper()
	sel := testenv.Selection(t)
	if sel.NICErr != nil {
		testenv.NotJudgedf(t, "", "RDMA devices: %v", sel.NICErr)
	}
	return sel.Devices, sel.NICDir
}

// proc is where this process runs and the capabilities it holds: the
// selection's (internal/virt through internal/rails), read once per run.
func proc(t *testing.T) virt.Process {
	t.Helper()
	return testenv.Selection(t).Process
}

// runTool runs a host tool with the suite's deadline (GDR_TIMEOUT) and
// returns its combined output (hostfs.Run).
func runTool(t *testing.T, dir string, name string, args ...string) (string, error) {
	t.Helper()
	return hostfs.Run(testenv.Config(t).Timeout, dir, nil, name, args...)
}
