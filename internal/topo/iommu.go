package topo

import (
	"strings"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// IOMMUParams are the IOMMU-related kernel parameters of a command line
// (/proc/cmdline).
func IOMMUParams(cmdline string) []string {
	var out []string
	for _, f := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(f, "=")
		switch k {
		case "iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict":
			out = append(out, f)
		}
	}
	return out
}

// iommuModes says what each IOMMU group type (the group's type file, Linux
// Documentation/ABI/testing/sysfs-kernel-iommu_groups) means for GPUDirect
// RDMA.
var iommuModes = map[string]struct {
	ok           bool   // passes
	translated   bool   // DMA goes through translation: GDR_ALLOW_IOMMU may allow it
	what, remedy string // for failures
}{
	"identity": {ok: true},
	"DMA": {translated: true, what: "translated DMA (the IOMMU maps every DMA address; peer-to-peer between the GPU and the NIC goes through IOMMU translation or is blocked)",
		remedy: "boot with iommu=pt (keeping intel_iommu=on or amd_iommu=on if other devices need the IOMMU), or disable the IOMMU in the BIOS; set GDR_ALLOW_IOMMU=1 if translated DMA is intended"},
	"DMA-FQ": {translated: true, what: "translated DMA with a flush queue (lazy IOTLB invalidation; peer-to-peer between the GPU and the NIC goes through IOMMU translation or is blocked)",
		remedy: "boot with iommu=pt (keeping intel_iommu=on or amd_iommu=on if other devices need the IOMMU), or disable the IOMMU in the BIOS; set GDR_ALLOW_IOMMU=1 if translated DMA is intended"},
	"blocked": {what: "the IOMMU lets no DMA from this device through at all (its group is attached to the blocking domain, e.g. while a driver is being unbound or a group owner detached it)",
		remedy: "bind the device to its host driver again (nvidia or mlx5_core; echo <bdf> > /sys/bus/pci/drivers/<driver>/bind) and check dmesg for IOMMU/DMAR errors; GDR_ALLOW_IOMMU does not apply: nothing can move data"},
	"unmanaged": {what: "the group's DMA mappings are owned by user space through VFIO (a VM passthrough or a userspace driver), not by this host's driver",
		remedy: "give the device back to the host: stop the VM or program using it, unbind vfio-pci and bind its driver (nvidia or mlx5_core); GDR_ALLOW_IOMMU does not apply"},
}

// IOMMUJudged is TOPO-05's judgement of one device.
type IOMMUJudged struct {
	// Mode is the device's IOMMU mode as recorded (gdr.iommu_mode): its
	// group's type, inferred from the kernel parameters where the group
	// has no type file, or "none (no IOMMU group)".
	Mode string
	// Finding is nil when the device's DMA is not translated (or it is in
	// no group); an Info finding when GDR_ALLOW_IOMMU allows translated
	// DMA; else the failure, with its remedy.
	Finding *verdict.Finding
}

// JudgeIOMMU is TOPO-05's rule for device d under the kernel's IOMMU
// parameters params (IOMMUParams); allow is GDR_ALLOW_IOMMU.
func JudgeIOMMU(d *pci.Device, params []string, allow bool) IOMMUJudged {
	passthrough := false
	for _, p := range params {
		if p == "iommu=pt" || p == "iommu.passthrough=1" {
			passthrough = true
		}
	}
	typ := d.IOMMUType
	j := IOMMUJudged{Mode: typ}
	switch {
	case d.IOMMUGroup == "":
		j.Mode = "none (no IOMMU group)"
		return j
	case typ == "" && passthrough:
		typ, j.Mode = "identity", "identity (inferred: no group type file, "+strings.Join(params, " ")+")"
	case typ == "":
		typ, j.Mode = "DMA", "DMA (inferred: IOMMU group "+d.IOMMUGroup+" without a type file and no iommu=pt)"
	}
	m, known := iommuModes[typ]
	var f *verdict.Finding
	switch {
	case !known:
		f = verdict.Failf("check the kernel's IOMMU documentation for this group type and dmesg; report it so the suite learns it",
			"%s is in IOMMU group %s of type %q, which this suite does not know (identity, DMA, DMA-FQ, blocked, unmanaged); kernel parameters: %s", d.String(), d.IOMMUGroup, typ, orNone(strings.Join(params, ", ")))
	case m.ok:
		return j
	default:
		f = verdict.Failf(m.remedy, "%s is in IOMMU group %s of type %s: %s (kernel parameters: %s)", d.String(), d.IOMMUGroup, j.Mode, m.what, orNone(strings.Join(params, ", ")))
		if m.translated && allow {
			f = &verdict.Finding{Level: verdict.Info, Cause: f.Cause + "; allowed by GDR_ALLOW_IOMMU=1"}
		}
	}
	f.Device, f.Evidence = d.BDF, []string{"iommu_group " + d.IOMMUGroup + " type " + orNone(d.IOMMUType)}
	if f.Level == verdict.Fail {
		f.Part = "host configuration"
	}
	j.Finding = f
	return j
}
