// What every summary renderer shows: identity and inventory lines, headlines, order.

package report

import (
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/internal/inventory"
)

func orNone(s []string) string {
	if len(s) == 0 {
		return "none found"
	}
	return strings.Join(s, ", ")
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// identityLines are the host's identity as label/value pairs.
func identityLines(id Identity) [][2]string {
	host := id.Host
	if id.Kind != "" {
		host += " (" + id.Kind + ")"
	}
	kern := id.Kernel
	if id.OS != "" {
		kern = strings.TrimSpace(kern + ", " + id.OS)
	}
	drv := "NVIDIA " + id.NvidiaDriver
	switch {
	case id.NvidiaDriver == "" && id.CUDADriver != "":
		drv = "NVIDIA driver version not recorded"
	case id.NvidiaDriver == "":
		drv = "no NVIDIA driver seen"
	}
	if id.CUDADriver != "" {
		drv += ", CUDA " + id.CUDADriver
	}
	strict := "no (absent hardware skips)"
	if id.Strict {
		strict = "yes (GDR_STRICT=1: absent hardware fails)"
	}
	lines := [][2]string{{"host", host}, {"kernel", orDash(kern)}, {"driver", drv}, {"GPUs", orNone(id.GPUs)}, {"NICs", orNone(id.NICs)},
		{"suite", orDash(id.Suite)}, {"strict", strict}}
	if id.Node != "" && id.Node != id.Host {
		// The machine behind a pod's (or a task's) name: the one to pull.
		lines = append(lines[:1], append([][2]string{{"node", id.Node}}, lines[1:]...)...)
	}
	if id.Role != "" {
		lines = append(lines, [2]string{"role", strings.TrimSpace(id.Role + " " + id.Peer)})
	}
	return append(lines, inventoryLines(id.Inventory)...)
}

// inventoryLines are the parts and versions of the host, one line per part
// with its identity (what an RMA or a ticket names), absent values left out.
func inventoryLines(inv *inventory.Host) [][2]string {
	if inv == nil {
		return nil
	}
	var lines [][2]string
	join := func(parts ...string) string {
		var out []string
		for i := 0; i+1 < len(parts); i += 2 {
			if parts[i+1] != "" {
				out = append(out, strings.TrimSpace(parts[i]+" "+parts[i+1]))
			}
		}
		return strings.Join(out, ", ")
	}
	if d := inv.DMI; d != nil {
		v := join("", strings.TrimSpace(d.SysVendor+" "+d.Product), "SKU", d.ProductSKU, "serial", d.ProductSerial,
			"board", strings.TrimSpace(d.BoardVendor+" "+d.BoardName), "board serial", d.BoardSerial,
			"BIOS", strings.TrimSpace(d.BIOSVersion+" "+d.BIOSDate))
		if len(d.Unreadable) > 0 {
			v = strings.TrimPrefix(v+"; not readable without root: "+strings.Join(d.Unreadable, ", "), "; ")
		}
		if v != "" {
			lines = append(lines, [2]string{"system", v})
		}
	}
	for _, g := range inv.GPUs {
		mod := ""
		if g.ModuleID != "" {
			mod = "module " + g.ModuleID
		}
		lines = append(lines, [2]string{"GPU " + g.BDF, join("", g.Model, "", mod, "serial", g.Serial, "part", g.PartNumber,
			"VBIOS", g.VBIOS, "InfoROM", g.InfoROM, "UUID", g.UUID, "NVLink domain", g.NVLinkDomain)})
	}
	for _, n := range inv.NICs {
		if n.Software {
			lines = append(lines, [2]string{"NIC " + n.Name, join("software device, driver", n.Driver)})
			continue
		}
		lines = append(lines, [2]string{"NIC " + n.Name, join("", n.PCI, "", n.HCAType, "PSID", n.BoardID, "firmware", n.Firmware,
			"part", n.PartNumber, "rev", n.EC, "serial", n.Serial, "GUID", n.NodeGUID)})
	}
	sw := inv.Software
	var mods []string
	for _, m := range inventory.Modules {
		if v, ok := sw.Modules[m]; ok {
			mods = append(mods, m+" "+v)
		}
	}
	if v := join("rdma-core", firstNonEmpty(sw.RDMACorePackage, sw.RDMACore), "MLNX_OFED", sw.OFED, "libibverbs", sw.Libibverbs,
		"modules:", strings.Join(mods, "; ")); v != "" {
		lines = append(lines, [2]string{"versions", v})
	}
	for _, n := range inv.Notes {
		lines = append(lines, [2]string{"inventory", "not recorded: " + n})
	}
	return lines
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// RunNote says which of a host's several runs in a merge judges.
func (h *HostResult) RunNote() string {
	switch {
	case h.Earlier:
		return " (superseded by a later run: not in the verdict)"
	case h.Latest:
		return " (latest run: this one judges)"
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// headline picks the numbers a summary line shows: not the min/max/mean
// qualifiers, at most n.
func headline(nums []Number, n int) (shown []string, more int) {
	for _, x := range nums {
		k := x.Key
		if strings.HasSuffix(k, "_min") || strings.HasSuffix(k, "_max") || strings.HasSuffix(k, "_mean") || strings.HasSuffix(k, "_p999") {
			continue
		}
		if len(shown) < n {
			shown = append(shown, x.String())
		} else {
			more++
		}
	}
	return shown, more
}

// statusRank orders rows failures first: failed, skipped, not run, passed.
var statusRank = map[Status]int{Fail: 0, Skip: 1, NotRun: 2, HostOnly: 3, Pass: 4}

// verdictRank orders hosts failures first.
var verdictRank = map[string]int{NotQualified: 0, Incomplete: 1, Qualified: 2}

// failuresFirst is rs ordered failures first, the catalogue's order kept
// within a status.
func failuresFirst(rs []*ReqResult) []*ReqResult {
	out := append([]*ReqResult(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool { return statusRank[out[i].Status] < statusRank[out[j].Status] })
	return out
}

// hostsFailuresFirst is the report's hosts, not qualified first, then
// incomplete, then qualified; the merge's order within a verdict.
func (r *Report) hostsFailuresFirst() []*HostResult {
	out := append([]*HostResult(nil), r.Hosts...)
	// Earlier runs last: they do not judge.
	rank := func(h *HostResult) int {
		if h.Earlier {
			return len(verdictRank) + 1
		}
		return verdictRank[h.Verdict.Verdict]
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// Fleet: more than fleetHosts hosts. Charts aggregate, host sections fold,
// and the files for programs (summary.json, junit.xml) leave out what
// would make them tens of MB: indentation, and the log of passed cases
// (test.json keeps every line).
func (r *Report) Fleet() bool { return len(r.Hosts) > fleetHosts }
