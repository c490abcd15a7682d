//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// The CUDA driver is a GPU source of the suite's one selection
// (internal/rails): GPUs it sees that sysfs does not (the lab's emulated
// GPU) join the selection, after the sysfs ones.
func init() { testenv.RegisterGPUSource("the CUDA driver (libcuda.so.1)", driverGPUs) }

// driverGPUs lists the PCI addresses of the GPUs the driver sees; a host
// without the driver or a GPU has none, which is no error here (the tests
// that need one say so).
func driverGPUs() ([]string, error) {
	d, err := Load()
	var le *LoadError
	switch {
	case errors.As(err, &le) && le.Missing, Code(err) == ErrNoDevice:
		return nil, nil
	case err != nil:
		return nil, err
	}
	devs, err := d.Devices()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(devs))
	for i, dev := range devs {
		out[i] = dev.PCI
	}
	return out, nil
}

// GPUs returns the CUDA devices of the GPUs under test: the selected rails'
// GPUs (GDR_GPU, GDR_RAILS), in PCI bus order, that the driver sees. No GPU
// is testenv.Absent. A selected GPU CUDA does not see fails as Open's
// hidden GPUs do, unless this process was handed a subset of the host's
// GPUs on purpose (CUDA_VISIBLE_DEVICES, a Slurm step's GPUs, a container:
// nvdriver.Judge); then a GPU GDR_GPU names fails, and other selected GPUs
// are left out and listed in gdr.gpus_not_visible.
func GPUs(t testing.TB, d *Driver) []Device {
	t.Helper()
	devs, err := d.Devices()
	if err != nil {
		testenv.Failf(t, InitRemedy(err), "listing GPUs: %v", err)
	}
	if len(devs) == 0 {
		if why := testenv.Config(t).Slurm.NoGPUsCause(); why != "" {
			testenv.Absent(t, config.SlurmNoGPUsRemedy, "no GPU: cuDeviceGetCount is 0; %s", why)
		}
		testenv.Absent(t, "check nvidia-smi and CUDA_VISIBLE_DEVICES", "no GPU: cuDeviceGetCount is 0 (libcuda.so.1 loaded)")
	}
	sel := testenv.Selection(t)
	byPCI := map[string]Device{}
	var seen []string
	for _, dev := range devs {
		byPCI[dev.PCI] = dev
		seen = append(seen, dev.PCI)
	}
	var out []Device
	var notSeen, hiddenAddrs []string
	for _, r := range sel.Rails {
		if r.GPU == nil {
			continue
		}
		if dev, ok := byPCI[r.GPU.PCI]; ok {
			out = append(out, dev)
		} else {
			notSeen = append(notSeen, r.GPU.String())
			hiddenAddrs = append(hiddenAddrs, r.GPU.PCI)
		}
	}
	// A selected GPU CUDA does not list is a fault unless this process
	// was handed a subset of the host's GPUs on purpose.
	var subset string
	if len(hiddenAddrs) > 0 {
		h := hidden(t, hiddenAddrs, seen, "", false)
		testenv.Stop(t, h.Err())
		if h != nil {
			subset = " (a subset handed to this process on purpose: " + h.Subset + ")"
		}
	}
	remedy := "unset CUDA_VISIBLE_DEVICES (or make it include the GPU), or pick a GPU CUDA sees with GDR_GPU"
	switch {
	case testenv.Config(t).GPU != "" && len(notSeen) > 0:
		testenv.Failf(t, remedy, "GDR_GPU=%s selects %s, which the CUDA driver does not see (it sees %s)%s",
			testenv.Config(t).GPU, strings.Join(notSeen, ", "), strings.Join(seen, ", "), subset)
	case len(out) == 0:
		testenv.Failf(t, remedy, "none of the selected GPUs (%s) is visible to the CUDA driver (it sees %s)%s",
			strings.Join(notSeen, ", "), strings.Join(seen, ", "), subset)
	case len(notSeen) > 0:
		testenv.Attr(t, "gpus_not_visible", strings.Join(notSeen, ", "))
		t.Logf("left out, not visible to CUDA%s: %s", subset, strings.Join(notSeen, ", "))
	}
	return out
}

// Rail returns the primary rail (testenv.Selection) and its GPU's CUDA
// device, recording the rail's facts on t (gdr.rail, gdr.gpu, gdr.nic,
// gdr.path, ...). A rail without a GPU is testenv.Absent.
func Rail(t testing.TB, d *Driver) (*rails.Rail, Device) {
	t.Helper()
	sel := testenv.Selection(t)
	r := sel.Primary
	if r == nil || r.GPU == nil {
		testenv.Absent(t, "", "no GPU in the selection: %s", sel.PrimaryWhy)
	}
	testenv.RailAttrs(t, r)
	devs, err := d.Devices()
	if err != nil {
		testenv.Failf(t, InitRemedy(err), "listing GPUs: %v", err)
	}
	var seen []string
	for _, dev := range devs {
		if dev.PCI == r.GPU.PCI {
			return r, dev
		}
		seen = append(seen, dev.PCI)
	}
	testenv.Stop(t, hidden(t, []string{r.GPU.PCI}, seen, "", false).Err())
	testenv.Failf(t, "unset CUDA_VISIBLE_DEVICES (or make it include the GPU), or pick a GPU CUDA sees with GDR_GPU",
		"%s (%s) is not visible to the CUDA driver (it sees %s)", r.GPU, sel.PrimaryWhy, strings.Join(seen, ", "))
	return nil, Device{}
}

// DeviceOf returns the CUDA device of selected GPU g. A GPU the driver does
// not see fails as Open's hidden GPUs do, unless this process was handed a
// subset of the host's GPUs on purpose (a container given some of the
// host's GPUs sees all of them in sysfs); then it fails when GDR_GPU names
// it, and is absent otherwise.
func DeviceOf(t testing.TB, d *Driver, g *rails.GPU) Device {
	t.Helper()
	devs, err := d.Devices()
	if err != nil {
		testenv.Failf(t, InitRemedy(err), "listing GPUs: %v", err)
	}
	var seen []string
	for _, dev := range devs {
		if dev.PCI == g.PCI {
			return dev
		}
		seen = append(seen, dev.PCI)
	}
	h := hidden(t, []string{g.PCI}, seen, "", false)
	testenv.Stop(t, h.Err())
	msg := fmt.Sprintf("%s is not visible to the CUDA driver (it sees %s)", g, strings.Join(seen, ", "))
	if testenv.Config(t).GPU != "" {
		testenv.Failf(t, "unset CUDA_VISIBLE_DEVICES (or make it include the GPU), or pick a GPU CUDA sees with GDR_GPU", "GDR_GPU=%s: %s", testenv.Config(t).GPU, msg)
	}
	if h != nil {
		testenv.Absent(t, "", "%s: a subset handed to this process on purpose: %s", msg, h.Subset)
	}
	testenv.Absent(t, "", "%s: CUDA_VISIBLE_DEVICES or the container's GPU runtime hides it", msg)
	return Device{}
}

// GPUOf is the selection's view of dev (NUMA node, local CPUs), or nil
// when the selection does not have it.
func GPUOf(t testing.TB, dev Device) *rails.GPU {
	t.Helper()
	for _, g := range testenv.Selection(t).GPUs {
		if g.PCI == dev.PCI {
			return g
		}
	}
	return nil
}

// GPUName is "GPU 3 (0000:3b:00.0)" when the selection numbers the GPU,
// else its PCI address.
func GPUName(t testing.TB, dev Device) string {
	if g := GPUOf(t, dev); g != nil {
		return g.String()
	}
	return dev.PCI
}

// OnGPUCPUs runs fn (copies timed on this thread) on the GPU's local CPUs
// and records where it ran as gdr.copy_cpus.
func OnGPUCPUs(t testing.TB, dev Device, fn func() error) error {
	t.Helper()
	placed, err := numa.OnCPUs(LocalCPUs(t, dev), fn)
	CopyCPUsAttr(t, placed)
	return err
}

// CopyCPUsAttr records where timed copies ran (numa.OnCPUs' answer) as
// gdr.copy_cpus, for tests that place copies themselves.
func CopyCPUsAttr(t testing.TB, placed string) {
	t.Helper()
	testenv.Attr(t, "copy_cpus", placed)
}

// LocalCPUs is the GPU's local_cpulist, empty when sysfs does not have the
// GPU (numa.OnCPUs then runs unpinned and says so).
func LocalCPUs(t testing.TB, dev Device) cpulist.Set {
	t.Helper()
	if g := GPUOf(t, dev); g != nil && g.Dev != nil {
		return g.Dev.LocalCPUs
	}
	return cpulist.Set{}
}
