package topo

import (
	"fmt"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// LinkCheck is the link-training judgement of one function on a GPU's
// path (TOPO-04): what to record and log, and which shortfalls fail.
type LinkCheck struct {
	// VF is set for an SR-IOV virtual function, whose Link Status is
	// reserved: the vf_link attribute, and VFLog what to log about it.
	VF, VFLog string
	// NotChecked says why nothing was judged (no expected link), "" otherwise.
	NotChecked string
	// Failures are the shortfalls, width first: each names the function
	// (Device), its link as read (Evidence) and the part, a PCIe link.
	Failures []verdict.Finding
	// IdleGPU is set when a GPU's link runs below its speed, which idle GPUs
	// do: the gpu_link_speed_below_max attribute, and IdleLog the log line.
	IdleGPU, IdleLog string
	// Summary is "<BDF> <role> <link>" for the test's list, "" when nothing
	// was judged.
	Summary string
}

// CheckLink judges d's trained link against ExpectedLink; gpu is the GPU
// whose path d is on (its own link, or the one below it, may run slower
// when idle: reported, not failed). A VF is judged on its PF where that is
// visible.
func (ix *Index) CheckLink(d, gpu *pci.Device) LinkCheck {
	var c LinkCheck
	role := "bridge"
	switch {
	case d == gpu:
		role = "GPU"
	case !d.IsBridge():
		role = "NIC"
	}
	if d.IsVF() {
		// SR-IOV: a VF's Link Status is reserved (reads x0, speed
		// unknown); its data crosses its PF's link, which is judged
		// where it is visible.
		vf := fmt.Sprintf("%s %s is an SR-IOV virtual function%s: link speed and width not reported by a virtual function", role, d.BDF, vfOf(d))
		pf := ix.Device(d.PhysFn)
		if pf == nil {
			c.VF, c.VFLog = vf+"; no PF to judge: report only", fmt.Sprintf("%s; its PF is not in %s: report only", vf, pci.DevicesDir)
			c.Summary = d.BDF + " " + role + " (virtual function) link not reported"
			return c
		}
		c.VF, c.VFLog = vf+"; judged on the PF "+pf.BDF, fmt.Sprintf("%s; judging its PF %s instead", vf, pf.BDF)
		d, role = pf, role+" PF"
	}
	want, err := ix.ExpectedLink(d.BDF)
	if err != nil {
		c.NotChecked = fmt.Sprintf("%s: %v: not checked", d.BDF, err)
		return c
	}
	limited := ""
	if want.Limited {
		limited = fmt.Sprintf(" (link partner %s supports %g GT/s x%d)", want.Partner, want.PartnerSpeed, want.PartnerWidth)
	}
	if d.CurWidth < want.Width {
		c.Failures = append(c.Failures, linkShort(d, "reseat the card or check the slot/riser and its lane configuration in the BIOS; compare LnkCap and LnkSta in lspci -vv -s "+d.BDF,
			"%s %s link trained to x%d, below its max x%d%s (speed %s)", role, d.BDF, d.CurWidth, want.Width, limited, d.LinkString()))
	}
	if d.CurGTs < want.Speed {
		if d == gpu || want.Partner == gpu.BDF {
			// Idle GPUs drop link speed to save power; the gpu package
			// re-reads it under load. Report only.
			c.IdleGPU = fmt.Sprintf("%s at %g GT/s of %g GT/s (normal when idle)", d.BDF, d.CurGTs, want.Speed)
			c.IdleLog = fmt.Sprintf("%s %s runs at %g GT/s of %g GT/s: GPUs lower link speed when idle; not a failure here (the gpu tests re-check under load)", role, d.BDF, d.CurGTs, want.Speed)
		} else {
			c.Failures = append(c.Failures, linkShort(d, "check the slot's PCIe generation setting in the BIOS, the riser/retimer and the card's firmware; compare LnkCap and LnkSta in lspci -vv -s "+d.BDF,
				"%s %s link trained to %g GT/s, below its max %g GT/s%s (%s)", role, d.BDF, d.CurGTs, want.Speed, limited, d.LinkString()))
		}
	}
	c.Summary = d.BDF + " " + role + " " + d.LinkString()
	return c
}

// linkShort is a link of d that trained below its maximum: the PCIe link
// (the device, its slot, riser or retimer) is the part.
func linkShort(d *pci.Device, remedy, format string, args ...any) verdict.Finding {
	f := verdict.Failf(remedy, format, args...)
	f.Device, f.Part, f.Evidence = d.BDF, PartPCIeLink, []string{"LnkSta " + d.LinkString()}
	return *f
}

// PartPCIeLink is the part a link shortfall points at (verdict.Finding.Part).
const PartPCIeLink = "pcie link"

// vfOf is " of <PF>" for a VF whose PF sysfs links, "" otherwise.
func vfOf(d *pci.Device) string {
	if d.PhysFn == "" {
		return " (no PF visible: known by its device ID)"
	}
	return " of " + d.PhysFn
}
