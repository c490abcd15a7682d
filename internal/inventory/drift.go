package inventory

import (
	"fmt"
	"sort"
	"strings"
)

// Versions are the firmware and software versions of h that should be the
// same on every host of one kind, by what they are for: "NIC firmware
// (MT_0000000838)" (per board id, since two card models run different
// firmware), "VBIOS (NVIDIA H200)" (per GPU model), "BIOS (DGXH200)", the
// NVIDIA driver, kernel, rdma-core, MLNX_OFED and each recorded module. A
// host whose parts of one kind disagree among themselves gets the values
// joined ("28.39.1002, 28.43.1014").
func Versions(h *Host) map[string]string {
	if h == nil {
		return nil
	}
	sets := map[string]map[string]bool{}
	add := func(k, v string) {
		if v == "" {
			return
		}
		if sets[k] == nil {
			sets[k] = map[string]bool{}
		}
		sets[k][v] = true
	}
	for _, g := range h.GPUs {
		add("VBIOS ("+orModel(g.Model)+")", g.VBIOS)
		add("InfoROM ("+orModel(g.Model)+")", g.InfoROM)
	}
	for _, n := range h.NICs {
		if n.Software {
			continue
		}
		kind := n.BoardID
		if kind == "" {
			kind = n.HCAType
		}
		if kind == "" {
			kind = n.Driver
		}
		add("NIC firmware ("+kind+")", n.Firmware)
	}
	if h.DMI != nil && h.DMI.BIOSVersion != "" {
		add("BIOS ("+strings.TrimSpace(h.DMI.SysVendor+" "+h.DMI.Product)+")", h.DMI.BIOSVersion)
	}
	s := h.Software
	add("NVIDIA driver", s.NvidiaDriver)
	add("kernel", s.Kernel)
	add("rdma-core", firstOf(s.RDMACorePackage, s.RDMACore))
	add("MLNX_OFED", s.OFED)
	for m, v := range s.Modules {
		if v != "loaded" {
			add("module "+m, v)
		}
	}
	out := map[string]string{}
	for k, vs := range sets {
		l := make([]string, 0, len(vs))
		for v := range vs {
			l = append(l, v)
		}
		sort.Strings(l)
		out[k] = strings.Join(l, ", ")
	}
	return out
}

func orModel(m string) string {
	if m == "" {
		return "GPU"
	}
	return m
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Difference is one version on which some hosts part from the majority.
type Difference struct {
	What     string            `json:"what"`
	Majority string            `json:"majority"`
	Of       int               `json:"majority_hosts"` // hosts with the majority value
	Hosts    int               `json:"hosts"`          // hosts that report this version at all
	Odd      map[string]string `json:"odd"`            // host -> its value
	// Tie is true when no value has more hosts than every other: the
	// "majority" is then only the most common (first in order) and every
	// other value is listed.
	Tie bool `json:"tie,omitempty"`
}

// String is "NIC firmware (MT_0000000838): vm3 has 28.39.1002 where 3 of 4 hosts have 28.43.1014".
func (d Difference) String() string {
	hosts := make([]string, 0, len(d.Odd))
	for h := range d.Odd {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var parts []string
	for i, h := range hosts {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(hosts)-8))
			break
		}
		parts = append(parts, h+" has "+d.Odd[h])
	}
	most := "most"
	if d.Tie {
		most = "as many"
	}
	return fmt.Sprintf("%s: %s where %d of %d hosts (%s) have %s", d.What, strings.Join(parts, ", "), d.Of, d.Hosts, most, d.Majority)
}

// Drift compares the versions of many hosts (host name -> Versions) and
// returns, per version kind, the hosts whose value differs from the
// majority's, in order of the kind's name. Fewer than two hosts reporting a
// kind is no comparison.
func Drift(hosts map[string]map[string]string) []Difference {
	byKind := map[string]map[string]string{} // kind -> host -> value
	for h, vs := range hosts {
		for k, v := range vs {
			if byKind[k] == nil {
				byKind[k] = map[string]string{}
			}
			byKind[k][h] = v
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var out []Difference
	for _, k := range kinds {
		hv := byKind[k]
		if len(hv) < 2 {
			continue
		}
		count := map[string]int{}
		for _, v := range hv {
			count[v]++
		}
		if len(count) < 2 {
			continue
		}
		vals := make([]string, 0, len(count))
		for v := range count {
			vals = append(vals, v)
		}
		sort.Slice(vals, func(i, j int) bool {
			if count[vals[i]] != count[vals[j]] {
				return count[vals[i]] > count[vals[j]]
			}
			return vals[i] < vals[j]
		})
		d := Difference{What: k, Majority: vals[0], Of: count[vals[0]], Hosts: len(hv), Odd: map[string]string{},
			Tie: count[vals[0]] == count[vals[1]]}
		for h, v := range hv {
			if v != d.Majority {
				d.Odd[h] = v
			}
		}
		out = append(out, d)
	}
	return out
}
