package install

import (
	"maps"
	"slices"
	"strings"

	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// NVMLVersion is INST-02's first rule: NVML (the driver's user space)
// reports the loaded kernel module's version (driver); nil when it does.
func NVMLVersion(nvml, driver string) *verdict.Finding {
	if nvdriver.SameVersion(nvml, driver) {
		return nil
	}
	f := verdict.Failf("user-space driver libraries and kernel module differ: reboot, or install one driver version for both",
		"NVML reports driver %s but the loaded kernel module is %s", nvml, driver)
	f.Evidence = []string{"NVML " + nvml, nvdriver.VersionFile + " " + driver}
	return f
}

// NVMLSeesGPUs is INST-02's second rule: NVML sees every NVIDIA GPU on the
// PCI bus (gpus) and none that is not there. seen are NVML's GPUs by
// normalised bus id; devicesDir is where the bus was read, for the message.
func NVMLSeesGPUs(seen []string, gpus []*pci.Device, devicesDir string) Judged {
	var j Judged
	extra := map[string]bool{}
	for _, id := range seen {
		extra[id] = true
	}
	var missing []string
	for _, g := range gpus {
		if !extra[g.BDF] {
			missing = append(missing, DevString(g))
		}
		delete(extra, g.BDF)
	}
	if len(missing) > 0 {
		j.add(verdict.Failf("bind each to the nvidia driver (or leave it out on purpose, e.g. passed through with vfio-pci); check dmesg for NVRM/Xid errors and nvidia-smi -q",
			"NVML sees %d GPU(s) but the PCI bus has %d NVIDIA GPU(s); not seen by NVML: %s", len(seen), len(gpus), strings.Join(missing, ", ")))
	}
	if len(extra) > 0 {
		j.add(verdict.Failf("check GDR_HOST_ROOT and that /sys is the host's", "NVML reports GPU(s) %s that are not in %s",
			strings.Join(slices.Sorted(maps.Keys(extra)), ", "), devicesDir))
	}
	return j
}

// MinCC is the oldest compute capability GPUDirect RDMA with current
// drivers supports: Pascal, 6.0.
const MinCC = 6

// JudgeCC is INST-06's rule for one GPU (bus id, name, compute capability
// major and as written, "9.0"); nil when it is MinCC or newer.
func JudgeCC(busID, name string, major int, cc string) *verdict.Finding {
	if major >= MinCC {
		return nil
	}
	f := verdict.Failf("use a Pascal (6.0) or newer data-center or workstation GPU",
		"GPU %s (%s) has compute capability %s, below 6.0", busID, name, cc)
	f.Device, f.Measured = busID, "compute_capability"
	return f
}

// NVMLMissing is INST-02's failure when driver (a version) is loaded but
// NVML's library lib does not load (err): a broken install, not absent
// software; pkg is the package that ships lib.
func NVMLMissing(driver, lib, pkg string, err error) *verdict.Finding {
	return verdict.Failf("install "+pkg, "NVIDIA driver %s is loaded but %s does not load: %v", driver, lib, err)
}

// NoSelectedGPU is INST-06's failure when the GPUs GDR_GPU (gpuEnv) or
// GDR_RAILS select match none of the n GPUs NVML lists.
func NoSelectedGPU(gpuEnv string, n int) *verdict.Finding {
	return verdict.Failf("check that NVML sees the GPUs sysfs lists (INST-02)",
		"the selected GPU(s) (GDR_GPU=%q, GDR_RAILS) match none of NVML's %d GPU(s)", gpuEnv, n)
}
