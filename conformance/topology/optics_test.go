package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/optics"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// TOPO-10: each rail NIC's transceiver (ethtool -m: the module's readings
// against its own alarm thresholds) and link (mlxlink: error rates) are
// within limits; a failure names the cable or optic to replace.
func TestTOPO10LinkHealth(t *testing.T) {
	testenv.Req(t, "TOPO-10")
	sel, rs := testenv.SysfsRails(t)
	nics, other := rails.RailNICs(rs)
	if len(nics) == 0 {
		testenv.Fail(t, *rails.NoNIC("transceiver or link", other))
	}
	timeout := min(testenv.Config(t).Timeout, 60*time.Second)
	p := sel.Process
	// What stops the tools where the suite runs (internal/virt): ethtool -m
	// needs CAP_NET_ADMIN, mlxlink root and a writable /sys. Both are
	// decided from the process's status before any tool runs or any
	// recording is read, on the live host and on a tree alike (a tree's
	// /proc/self/status and cmd/ are one process's), as TOPO-09 does: a
	// tree whose process lacks the grant says so, not only that nothing
	// was recorded.
	var ethtoolDenied, mlxlinkDenied *verdict.Finding
	if p.Lacks(virt.CapNetAdmin, false) {
		need := p.Need(virt.CapNetAdmin, false, "ethtool -m (the module EEPROM)")
		ethtoolDenied = &need
	}
	if p.Container.In {
		mlxlinkDenied = p.RegisterAccess()
	}
	for _, n := range nics {
		t.Run(n.Name, func(t *testing.T) {
			testenv.Req(t, "TOPO-10")
			testenv.Attr(t, "nic", n.Name)
			var looked, remedies []string
			notRead := func(what string, f verdict.Finding) {
				looked = append(looked, what+": "+f.Cause)
				if f.Remedy != "" && !slices.Contains(remedies, f.Remedy) {
					remedies = append(remedies, f.Remedy)
				}
			}
			var findings []verdict.Finding
			part := "the cable or optic"
			read := 0
			switch {
			case n.Dev != nil && len(n.Dev.Netdevs) > 0 && ethtoolDenied != nil:
				notRead("ethtool -m "+n.Dev.Netdevs[0], *ethtoolDenied)
			case n.Dev != nil && len(n.Dev.Netdevs) > 0:
				nd := n.Dev.Netdevs[0]
				out, src, err := optics.Ethtool(sel.Root, nd, timeout)
				a, _ := verdict.As(err)
				switch {
				case verdict.IsAbsent(err):
					notRead("ethtool -m "+nd, *a)
				case err != nil:
					testenv.Stop(t, err)
				default:
					m, perr := optics.ParseEthtool(out)
					var u *optics.ErrUnsupported
					switch {
					case errors.As(perr, &u) && u.Denied:
						notRead(src+": "+u.Msg, p.Need(virt.CapNetAdmin, false, "ethtool -m (the module EEPROM)"))
					case errors.As(perr, &u):
						looked = append(looked, fmt.Sprintf("%s: the driver cannot read the module (%s)", src, u.Msg))
					case perr != nil:
						testenv.Fail(t, optics.Unparsed(src, perr))
					default:
						read++
						if p := n.Dev.Port(n.Port); p != nil {
							m.PortLanes = optics.PortWidth(p.Rate)
						}
						part = "cable/optic " + m.Part()
						testenv.Attr(t, "optic", m.Part())
						testenv.Attr(t, "optic_identifier", m.Identifier)
						if !m.HasDOM() {
							t.Logf("%s: %s reports no diagnostics (%s): nothing to judge on the module", src, m.Part(), m.Transmitter)
						} else {
							testenv.Attr(t, "optic_temp_c", *m.TempC)
							var rx []string
							for _, l := range m.ActiveLanes() {
								rx = append(rx, fmt.Sprintf("%.4f", m.RxMW[l]))
							}
							testenv.Attr(t, "optic_rx_mw", strings.Join(rx, ","))
							findings = append(findings, optics.JudgeModule(m)...)
						}
					}
				}
			default:
				looked = append(looked, "no netdev for ethtool -m")
			}
			switch {
			case n.Dev != nil && n.Dev.Driver == "mlx5_core" && !n.VF && mlxlinkDenied != nil:
				notRead("mlxlink/mstlink -d "+n.PCI+": not judgeable from this container", *mlxlinkDenied)
			case n.Dev != nil && n.Dev.Driver == "mlx5_core" && !n.VF:
				out, src, err := optics.Mlxlink(sel.Root, n.PCI, timeout)
				a, _ := verdict.As(err)
				switch {
				case verdict.IsAbsent(err):
					notRead("mlxlink/mstlink -d "+n.PCI, *a)
				case err != nil:
					testenv.Stop(t, err)
				default:
					l := optics.ParseMlxlink(out)
					if l.EffectiveBER == nil && l.RawBER == nil && l.State == "" {
						looked = append(looked, fmt.Sprintf("%s: no link records in its output (%d bytes; not root?)", src, len(out)))
						break
					}
					read++
					if part == "the cable or optic" && l.PartNumber != "" {
						part = strings.TrimSpace(fmt.Sprintf("cable/optic %s %s serial %s", l.Vendor, l.PartNumber, l.Serial))
					}
					berAttr(t, "effective_ber", l.EffectiveBER)
					berAttr(t, "raw_ber", l.RawBER)
					berAttr(t, "symbol_ber", l.SymbolBER)
					berAttr(t, "link_down_count", l.LinkDown)
					if l.FEC != "" {
						testenv.Attr(t, "fec", l.FEC)
					}
					findings = append(findings, optics.JudgeLink(l)...)
				}
			}
			if read == 0 {
				testenv.Absent(t, strings.Join(remedies, "; "), "%s: neither the transceiver nor the link could be read: %s", n.Name, strings.Join(looked, "; "))
			}
			for _, l := range looked {
				t.Logf("not read: %s", l)
			}
			// One failure per NIC, naming the part: the alarms are its
			// evidence; warnings are logged.
			fail, warnings := optics.JudgeNIC(n.Name, n.PCI, part, findings)
			for _, f := range warnings {
				t.Logf("warning: %s (%s)", f.Cause, f.Source)
			}
			if fail != nil {
				testenv.Fail(t, *fail)
			}
		})
	}
}

// berAttr records a link figure mlxlink printed; one it did not is absent.
func berAttr(t *testing.T, key string, v *float64) {
	t.Helper()
	if v != nil {
		testenv.Attr(t, key, fmt.Sprintf("%.3g", *v))
	}
}
