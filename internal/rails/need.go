package rails

import (
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// SysfsRails are the selected rails whose GPU is in sysfs: those a PCIe
// topology check can judge. None is an absent *verdict.Finding naming
// where it looked; a PCI function that may be a GPU but could not be read
// fell short, because a corrupt GPU is not "no GPU".
func (s *Selection) SysfsRails() ([]*Rail, error) {
	if !s.PCIDir {
		return nil, verdict.Absentf(reqs.RemedyNoGPU, "no NVIDIA GPU: %s does not exist under %s (no sysfs?)", pci.DevicesDir, s.Root.Dir())
	}
	if bad := pci.UnreadableGPUs(s.PCIErr); len(bad) > 0 {
		return nil, verdict.Failf("check the kernel's sysfs (or the recorded tree)",
			"%d PCI function(s) that may be NVIDIA GPUs could not be read: %v", len(bad), bad[0])
	}
	inSysfs := 0
	for _, g := range s.GPUs {
		if g.Dev != nil {
			inSysfs++
		}
	}
	if inSysfs == 0 {
		return nil, verdict.Absentf(reqs.RemedyNoGPU, "no NVIDIA GPU: %s under %s lists %d PCI functions, none with vendor 0x10de and class 0x03xxxx",
			pci.DevicesDir, s.Root.Dir(), len(s.Index.Devices()))
	}
	var out []*Rail
	for _, r := range s.Rails {
		if r.GPU.Dev != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, verdict.Absentf("run where the GPUs' PCI functions are visible (a container needs the host's /sys: GDR_HOST_ROOT)", "the selected GPUs are seen by the driver only, not in %s: no PCIe topology to check", pci.DevicesDir)
	}
	return out, nil
}
