package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/pcipath"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// settingsPath is the rail's GPU, the bridges to its NIC (pathNIC: the rail's,
// else the nearest hardware NIC) and the NIC; without a hardware NIC, the GPU
// and the ports above it (its host traffic crosses them, and the MaxPayload
// rule is the same).
func (h *host) settingsPath(t *testing.T, r *rails.Rail) pcipath.Path {
	t.Helper()
	g := r.GPU.Dev
	p := pcipath.Path{{Dev: g, Role: pcipath.GPU}}
	nic, path, ok := h.pathNIC(t, r)
	if !ok {
		t.Logf("no PCI RDMA NIC for %s: checking the GPU and the ports above it", r.GPU)
		for i := len(g.Chain) - 2; i >= 0; i-- {
			if d := h.ix.Device(g.Chain[i]); d != nil {
				p = append(p, pcipath.Member{Dev: d, Role: pcipath.Bridge})
			}
		}
		return p
	}
	for _, b := range path.Bridges {
		d := h.ix.Device(b)
		if d == nil {
			testenv.Failf(t, "check "+pci.DevicesDir, "bridge %s on the path %s <-> %s is not in %s", b, g.BDF, nic.Name, pci.DevicesDir)
		}
		p = append(p, pcipath.Member{Dev: d, Role: pcipath.Bridge})
	}
	n := h.ix.Device(nic.PCI)
	if n == nil {
		testenv.Failf(t, "check the driver of "+nic.Name, "NIC %s's PCI function %s is not in %s", nic.Name, nic.PCI, pci.DevicesDir)
	}
	if pf := h.ix.Device(n.PhysFn); n.IsVF() && pf != nil {
		// A VF's MaxPayload and enables are reserved and its PF's govern
		// (pcipath.RuleVF): judge the PF, which sits beside it.
		testenv.Attr(t, "nic_settings_from", pf.BDF)
		t.Logf("NIC %s %s is an SR-IOV virtual function: its PCIe settings are not reported by a virtual function; judging its PF %s", nic.Name, n.BDF, pf.BDF)
		n = pf
	}
	return append(p, pcipath.Member{Dev: n, Role: pcipath.NIC})
}

// TOPO-08: PCIe settings along each rail's GPU<->NIC path (internal/pcipath
// has the rules and their sources).
func TestTOPO08PCIeSettings(t *testing.T) {
	testenv.Req(t, "TOPO-08")
	h := loadHost(t)
	for _, r := range h.needRails(t) {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-08")
			testenv.RailAttrs(t, r)
			p := h.settingsPath(t, r)
			res := pcipath.Check(p)
			var members, settings []string
			for _, m := range p {
				members = append(members, m.Dev.BDF)
				if s, ok := res.Settings[m.Dev.BDF]; ok {
					settings = append(settings, fmt.Sprintf("%s %s: %s", m.Role, m.Dev.BDF, s))
					t.Logf("%s %s: %s", m.Role, m.Dev.BDF, s)
				}
			}
			testenv.Attr(t, "pcie_path", strings.Join(members, " "))
			testenv.Attr(t, "pcie_settings", strings.Join(settings, "; "))
			var warns []string
			for _, f := range res.Findings {
				switch f.Verdict {
				case pcipath.Report:
					t.Logf("%s", f.Message)
				case pcipath.Warn:
					warns = append(warns, f.Rule.ID+" "+f.Device)
					t.Logf("WARNING: %s; remedy: %s (rule %s: %s)", f.Message, f.Remedy, f.Rule.ID, f.Rule.Source)
				case pcipath.Fail:
					testenv.Errorf(t, f.Remedy, "%s (rule %s; source: %s)", f.Message, f.Rule.ID, f.Rule.Source)
				}
			}
			if len(warns) > 0 {
				testenv.Attr(t, "warnings", strings.Join(warns, ", "))
			}
			if unk := res.Of(pcipath.Unknown); len(unk) > 0 {
				var msgs []string
				for _, f := range unk {
					msgs = append(msgs, f.Message)
				}
				testenv.Absent(t, "%s (%s/<address>/config)", strings.Join(msgs, "; "), pci.DevicesDir)
			}
		})
	}
}
