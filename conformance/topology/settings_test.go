package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/pcipath"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// settingsPath is the rail's GPU, the bridges to its NIC (pathNIC: the rail's,
// else the nearest hardware NIC) and the NIC; without a hardware NIC, the GPU
// and the ports above it (pcipath.AboveGPU).
func settingsPath(t *testing.T, sel *rails.Selection, r *rails.Rail) pcipath.Path {
	t.Helper()
	c, ok := testenv.PathNIC(t, sel, r)
	if !ok {
		t.Logf("no PCI RDMA NIC for %s: checking the GPU and the ports above it", r.GPU)
		return pcipath.AboveGPU(sel.Index, r.GPU.Dev)
	}
	nic := c.NIC
	p, pf, err := pcipath.ToNIC(sel.Index, r.GPU.Dev, c.Path.Bridges, nic.Name, nic.PCI)
	testenv.Stop(t, err)
	if pf != nil {
		testenv.Attr(t, "nic_settings_from", pf.BDF)
		t.Logf("NIC %s %s is an SR-IOV virtual function: its PCIe settings are not reported by a virtual function; judging its PF %s", nic.Name, nic.PCI, pf.BDF)
	}
	return p
}

// TOPO-08: PCIe settings along each rail's GPU<->NIC path (internal/pcipath
// has the rules and their sources).
func TestTOPO08PCIeSettings(t *testing.T) {
	testenv.Req(t, "TOPO-08")
	sel, rs := testenv.SysfsRails(t)
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-08")
			testenv.RailAttrs(t, r)
			p := settingsPath(t, sel, r)
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
				if f.Kind() == verdict.Absent {
					continue // unread: below
				}
				switch f.Level {
				case pcipath.Report:
					t.Logf("%s", f.Cause)
				case pcipath.Warn:
					warns = append(warns, f.Rule+" "+f.Device)
					f.Cause = fmt.Sprintf("%s (rule %s: %s)", f.Cause, f.Rule, f.Source)
					testenv.Record(t, f)
				case pcipath.Fail:
					// The rule and its source stay in the line people read.
					f.Cause = fmt.Sprintf("%s (rule %s; source: %s)", f.Cause, f.Rule, f.Source)
					testenv.Error(t, f)
				}
			}
			if len(warns) > 0 {
				testenv.Attr(t, "warnings", strings.Join(warns, ", "))
			}
			if unk := res.Unread(); len(unk) > 0 {
				var msgs []string
				for _, f := range unk {
					msgs = append(msgs, f.Cause)
				}
				why, remedy := "", ""
				if len(res.HeaderOnly) > 0 {
					need := sel.Process.NeedConfigSpace()
					why, remedy = ": "+need.Cause, need.Remedy
				}
				testenv.Absent(t, remedy, "%s (%s/<address>/config)%s", strings.Join(msgs, "; "), pci.DevicesDir, why)
			}
		})
	}
}
