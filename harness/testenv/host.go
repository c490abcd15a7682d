package testenv

import (
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// The per-host and per-rail recording the topology checks share: what the
// selection (internal/rails) picked or could not, as attributes and log
// lines, with one call each.

// SysfsRails is the run's selection and its rails whose GPU is in sysfs
// (rails.Selection.SysfsRails); none ends t as absent naming where it
// looked.
func SysfsRails(t testing.TB) (*rails.Selection, []*rails.Rail) {
	t.Helper()
	sel := Selection(t)
	rs, err := sel.SysfsRails()
	Stop(t, err)
	return sel, rs
}

// PathNIC is sel.PathNIC(r): a nearest NIC standing in for the rail's is
// said in the log and as gdr.path_nic. ok is false when there is none.
func PathNIC(t testing.TB, sel *rails.Selection, r *rails.Rail) (rails.PathChoice, bool) {
	t.Helper()
	c, ok := sel.PathNIC(r)
	if ok && c.Nearest {
		Attr(t, "path_nic", c.NIC.Name)
		t.Logf("%s", c.Why)
	}
	return c, ok
}

// VirtAttrs records whether the host is a VM (gdr.virt: the hypervisor, or
// "none") and the signs that said so (gdr.virt_signs).
func VirtAttrs(t testing.TB, sel *rails.Selection) {
	t.Helper()
	if sel.GuestErr != nil {
		t.Logf("VM detection: %v", sel.GuestErr)
	}
	if !sel.Guest.VM {
		Attr(t, "virt", "none")
		return
	}
	hyp := sel.Guest.Hypervisor
	if hyp == "" {
		hyp = "unknown hypervisor"
	}
	Attr(t, "virt", hyp)
	Attr(t, "virt_signs", strings.Join(sel.Guest.Signs, "; "))
}

// ContainerAttrs records whether the suite runs in a container and which
// signs said so (internal/virt: DetectContainer), with the node's root.
func ContainerAttrs(t testing.TB, sel *rails.Selection) {
	t.Helper()
	p := sel.Process
	if sel.ProcessErr != nil {
		t.Logf("container detection: %v", sel.ProcessErr)
	}
	if !p.Container.In {
		Attr(t, "container", "none")
		return
	}
	eng := p.Container.Runtime
	if eng == "" {
		eng = "unknown engine"
	}
	Attr(t, "container", eng)
	Attr(t, "container_signs", strings.Join(p.Container.Signs, "; "))
	if p.Container.NodeRoot != "" {
		Attr(t, "container_node_root", p.Container.NodeRoot)
	}
	t.Logf("running in a %s", p.Container)
}

// GPURailAttrs records the facts of the selected rail of the GPU at pci
// (RailAttrs); a GPU no selected rail has records only gdr.gpu.
func GPURailAttrs(t testing.TB, pci string) {
	t.Helper()
	if r := rails.RailOf(Selection(t).Rails, pci); r != nil {
		RailAttrs(t, r)
		return
	}
	Attr(t, "gpu", pci)
}

// AttrIf records key only when v was read: a value not read stays absent.
func AttrIf(t testing.TB, key, v string) {
	t.Helper()
	if v != "" {
		Attr(t, key, v)
	}
}

// RecordLink records a link check (topo.Index.CheckLink) on t: its
// failures (Record), the VF and idle-GPU notes as gdr.vf_link and
// gdr.gpu_link_speed_below_max with their log lines. It returns the
// check's "<BDF> <role> <link state>" for the test's gdr.links ("" when
// nothing was judged).
func RecordLink(t testing.TB, c topo.LinkCheck) string {
	t.Helper()
	if c.VF != "" {
		Attr(t, "vf_link", c.VF)
		t.Logf("%s", c.VFLog)
	}
	if c.NotChecked != "" {
		t.Logf("%s", c.NotChecked)
	}
	Record(t, c.Failures...)
	if c.IdleGPU != "" {
		Attr(t, "gpu_link_speed_below_max", c.IdleGPU)
		t.Logf("%s", c.IdleLog)
	}
	return c.Summary
}
