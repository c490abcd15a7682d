//go:build gpu

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The iteration the GPU checks (conformance/gpu) share: one subtest per
// selected GPU, or the selected GPUs together, and a device attribute
// judged against the value GPUDirect needs.

// EachGPU runs check once per GPU under test (the selected rails' GPUs:
// GDR_GPU, GDR_RAILS), in a subtest named by its PCI address, with
// requirement id (t has it already: the test names its own), the rail's facts (gdr.gpu, gdr.nic, ...) and its CUDA
// device. No selected GPU is absent without a driver or a GPU, and a
// failure where the driver sees GPUs.
func EachGPU(t *testing.T, id string, check func(t *testing.T, d *Driver, dev Device)) {
	t.Helper()
	sel := testenv.Selection(t)
	rs := rails.GPURails(sel.Rails)
	if len(rs) == 0 {
		d := Open(t) // absent when there is no driver either
		GPUs(t, d)   // absent when the driver sees none
		testenv.Failf(t, "check that sysfs shows the GPUs the driver sees (GDR_HOST_ROOT?)", "the CUDA driver sees GPUs but the selection has none: %s", sel.PrimaryWhy)
	}
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, id)
			testenv.RailAttrs(t, r) // the same GPU and NIC as every package
			d := Open(t)
			dev := DeviceOf(t, d, r.GPU)
			testenv.Attr(t, "gpu_name", dev.Name)
			testenv.Attr(t, "mem", dev.MemLabel())
			check(t, d, dev)
		})
	}
}

// CheckAttr reads attribute a of dev, records it as key and ends t on
// JudgeAttr's finding, with a's remedy (attrRemedies); it returns the value.
func CheckAttr(t testing.TB, dev Device, a Attribute, key string, want int) int {
	t.Helper()
	v, err := dev.Attr(a)
	if err != nil {
		testenv.Fail(t, *AttrUnread(err))
	}
	testenv.Attr(t, key, v)
	if f := JudgeAttr(dev, a, v, want, attrRemedies[a]); f != nil {
		testenv.Fail(t, *f)
	}
	return v
}

// JudgeAttr judges attribute a of dev, read as v, against want (-1: any
// value, reported only): nil when it is met. The lab's emulated GPU reports
// what it does not emulate (dma-buf export, cuMemCreate) as 0: absent, not
// a fault.
func JudgeAttr(dev Device, a Attribute, v, want int, remedy string) *verdict.Finding {
	switch {
	case want < 0 || v == want:
		return nil
	case dev.Emulated:
		return verdict.Absentf("", "GPU %s is the lab's emulated GPU, which does not emulate %s (it reports %d); a real GPU is judged here", dev.PCI, a, v)
	}
	return verdict.Failf(remedy, "GPU %s (%s): %s is %d, want %d", dev.PCI, dev.Name, a, v, want)
}

// Multi starts a multi-GPU check: the selected GPUs the CUDA driver sees,
// at least two; one is absent, saying which GPU and why only one. id is
// t's requirement (the test tags t with it: testenv.Req).
func Multi(t *testing.T, id string) []Device {
	t.Helper()
	d := Open(t)
	devs := GPUs(t, d) // absent without any GPU
	testenv.Attr(t, "gpu_count", len(devs))
	if len(devs) < 2 {
		all, err := d.Devices()
		if err != nil {
			testenv.Failf(t, InitRemedy(err), "listing GPUs: %v", err)
		}
		testenv.Absent(t, "", "%s needs two or more GPUs: the selection has one, %s (%s); %s", id, devs[0].PCI, devs[0].Name, oneGPUWhy(len(all), testenv.Config(t)))
	}
	return devs
}

// oneGPUWhy says why the selection has one GPU: how many the driver sees,
// and the GDR_GPU/GDR_RAILS that narrow them.
func oneGPUWhy(seen int, cfg config.Config) string {
	why := fmt.Sprintf("the CUDA driver sees %d GPU(s)", seen)
	var sel []string
	if cfg.GPU != "" {
		sel = append(sel, "GDR_GPU="+cfg.GPU)
	}
	if cfg.Rails != nil {
		sel = append(sel, "GDR_RAILS="+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cfg.Rails)), ","), "[]"))
	}
	if len(sel) > 0 {
		why += " and " + strings.Join(sel, " ") + " selects one"
	}
	return why
}
