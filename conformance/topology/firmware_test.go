package topology

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/mlxconfig"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// TOPO-09: the rail NICs' firmware settings that decide GPUDirect
// performance, queried (never set) with mstconfig or mlxconfig and judged
// against NVIDIA's documented values (internal/mlxconfig names each source).
// Report-only: the documents disagree at the margins and the bandwidth
// tests judge the effect; this names the setting to look at.
func TestTOPO09NICFirmwareSettings(t *testing.T) {
	testenv.Req(t, "TOPO-09")
	sel, rs := testenv.SysfsRails(t)
	// The NICs mstconfig can read: hardware NVIDIA/Mellanox PFs of the
	// rails. The others are named, so a host with none skips saying why
	// instead of passing on nothing.
	hw, other := rails.RailNICs(rs)
	var nics []*rails.NIC
	for _, n := range hw {
		switch {
		case n.Dev == nil || n.Dev.Driver != "mlx5_core":
			drv := "unknown driver"
			if n.Dev != nil && n.Dev.Driver != "" {
				drv = n.Dev.Driver
			}
			other = append(other, fmt.Sprintf("%s (%s) is not an NVIDIA ConnectX/BlueField NIC, which mstconfig alone reads", n.Name, drv))
		case n.VF:
			pf := n.PhysFn
			if pf == "" {
				pf = "not visible here"
			}
			other = append(other, fmt.Sprintf("%s (%s) is an SR-IOV virtual function: its settings are its PF's (%s), queried on the host that owns the PF", n.Name, n.PCI, pf))
		default:
			nics = append(nics, n)
		}
	}
	for _, o := range other {
		t.Logf("not checked: %s", o)
	}
	if len(nics) == 0 {
		testenv.Fail(t, *rails.NoNIC("firmware settings", other))
	}
	// mstconfig reaches the registers only as root through a writable
	// /sys: a non-privileged container cannot (internal/virt).
	if p := sel.Process; p.Container.In {
		if why := p.RegisterAccess(); why != nil {
			testenv.Absent(t, why.Remedy, "not judgeable from this container: mstconfig cannot query %s: %s", rails.NICNames(nics), why.Cause)
		}
	}
	for _, n := range nics {
		t.Run(n.Name, func(t *testing.T) {
			testenv.Req(t, "TOPO-09")
			testenv.Attr(t, "nic", n.Name)
			testenv.Attr(t, "nic_pci", n.PCI)
			out, src, err := mlxconfig.Run(sel.Root, n.PCI, min(testenv.Config(t).Timeout, 60*time.Second))
			testenv.Stop(t, err)
			testenv.Attr(t, "source", src)
			q, err := mlxconfig.ParseAt(out, src)
			testenv.Stop(t, err)
			testenv.Attr(t, "nic_device_type", q.DeviceType)
			checks := mlxconfig.Judge(q, sel.Guest.VM)
			var pending []string
			for _, c := range checks {
				fwAttr(t, c.Param, c.Value)
				if c.Pending != "" {
					pending = append(pending, c.Param+" "+c.Pending)
				}
				verdict := "reported"
				switch {
				case c.Judged && c.Met:
					verdict = "met"
				case c.Judged:
					verdict = "not met"
				}
				t.Logf("%s: %s (%s): %s", n.Name, c, verdict, c.Why)
			}
			if len(pending) > 0 {
				testenv.Attr(t, "fw_pending", strings.Join(pending, "; "))
			}
			if len(checks) == 0 {
				testenv.Absent(t, "", "%s: the query lists none of the settings TOPO-09 checks (ADVANCED_PCI_SETTINGS, MAX_ACC_OUT_READ, PCI_WR_ORDERING, ATS_ENABLED)", src)
			}
			if f := mlxconfig.Unmet(n.Name, n.PCI, q, checks); f != nil {
				testenv.Fail(t, *f)
			}
		})
	}
}

// fwAttr records a checked setting's value under its own literal key (keys
// must be checkable: internal/attrkey).
func fwAttr(t *testing.T, param, v string) {
	t.Helper()
	if v == "" {
		return
	}
	switch param {
	case "ADVANCED_PCI_SETTINGS":
		testenv.Attr(t, "fw_advanced_pci_settings", v)
	case "MAX_ACC_OUT_READ":
		testenv.Attr(t, "fw_max_acc_out_read", v)
	case "PCI_WR_ORDERING":
		testenv.Attr(t, "fw_pci_wr_ordering", v)
	case "ATS_ENABLED":
		testenv.Attr(t, "fw_ats_enabled", v)
	}
}
