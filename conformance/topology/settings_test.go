package topology

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/pcipath"
)

// settingsPath is the GPU, the bridges to its nearest PCI NIC and the NIC;
// on a host without a PCI NIC, the GPU and the ports above it (its host
// traffic crosses them, and the MaxPayload rule is the same).
func (h *host) settingsPath(t *testing.T, g *pci.Device, nics map[string]string) (pcipath.Path, string) {
	t.Helper()
	p := pcipath.Path{{Dev: g, Role: pcipath.GPU}}
	if len(nics) == 0 {
		for i := len(g.Chain) - 2; i >= 0; i-- {
			if d := h.ix.Device(g.Chain[i]); d != nil {
				p = append(p, pcipath.Member{Dev: d, Role: pcipath.Bridge})
			}
		}
		return p, ""
	}
	c := h.nearest(t, g, nics)
	for _, b := range c.Path.Bridges {
		d := h.ix.Device(b)
		if d == nil {
			testenv.Failf(t, "check "+pci.DevicesDir, "bridge %s on the path %s <-> %s is not in %s", b, g.BDF, c.NIC, pci.DevicesDir)
		}
		p = append(p, pcipath.Member{Dev: d, Role: pcipath.Bridge})
	}
	n := h.ix.Device(c.PCI)
	if n == nil {
		testenv.Failf(t, "check the driver of "+c.NIC, "NIC %s's PCI function %s is not in %s", c.NIC, c.PCI, pci.DevicesDir)
	}
	return append(p, pcipath.Member{Dev: n, Role: pcipath.NIC}), c.NIC
}

// TOPO-08: PCIe settings along each GPU<->NIC path (internal/pcipath has
// the rules and their sources).
func TestTOPO08PCIeSettings(t *testing.T) {
	testenv.Req(t, "TOPO-08")
	h := loadHost(t)
	gpus := h.needGPUs(t)
	var nics map[string]string
	if len(h.pciNICs) > 0 {
		nics = h.needPCINICs(t)
	}
	for _, g := range gpus {
		t.Run(g.BDF, func(t *testing.T) {
			testenv.Req(t, "TOPO-08")
			testenv.Attr(t, "gpu", g.BDF)
			p, nic := h.settingsPath(t, g, nics)
			if nic == "" {
				t.Logf("no PCI RDMA NIC: checking the GPU and the ports above it")
			} else {
				testenv.Attr(t, "nic", nic)
			}
			res := pcipath.Check(p)
			var members []string
			for _, m := range p {
				members = append(members, m.Dev.BDF)
				if s, ok := res.Settings[m.Dev.BDF]; ok {
					testenv.Attr(t, "pcie_"+m.Dev.BDF, s.String())
					t.Logf("%s %s: %s", m.Role, m.Dev.BDF, s)
				}
			}
			testenv.Attr(t, "pcie_path", strings.Join(members, " "))
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
				testenv.Absent(t, "%s (%s)", strings.Join(msgs, "; "), fmt.Sprintf("%s/<address>/config", pci.DevicesDir))
			}
		})
	}
}
