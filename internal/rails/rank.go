// Ranking: nearest-NIC order per GPU and the rail rule that builds the rails.

package rails

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gdrconf/gdrconf/internal/topo"
)

// Choice is a NIC with its path from one GPU.
type Choice struct {
	NIC     *NIC
	Path    topo.Path
	HasPath bool
}

// nearer orders choices: with a path before without; class; bridges.
func nearer(a, b Choice) int {
	if a.HasPath != b.HasPath {
		if a.HasPath {
			return -1
		}
		return 1
	}
	if a.Path.Class != b.Path.Class {
		return int(a.Path.Class) - int(b.Path.Class)
	}
	return len(a.Path.Bridges) - len(b.Path.Bridges)
}

// tieBreak is rules 2 and 4: hardware before software, port rate, link
// layer, lower PCI address, name.
func tieBreak(a, b Choice) int {
	if a.NIC.Software != b.NIC.Software {
		if !a.NIC.Software {
			return -1
		}
		return 1
	}
	if c := prefer(a, b); c != 0 {
		return c
	}
	if a.NIC.PCI != b.NIC.PCI {
		if pciLess(a.NIC.PCI, b.NIC.PCI) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.NIC.Name, b.NIC.Name)
}

// Ranked lists every NIC by nearness to g: hardware NICs with a PCIe path by
// class, bridges, PCI address and name; then the rest (no path: software
// NICs, or g is driver-only) hardware first, by PCI address, then by name.
// Candidates and non-candidates alike: NIC.Candidate tells them apart.
func (s *Selection) Ranked(g *GPU) []Choice {
	var out []Choice
	for _, n := range s.NICs {
		out = append(out, s.choice(g, n))
	}
	slices.SortStableFunc(out, func(a, b Choice) int {
		if c := nearer(a, b); c != 0 {
			return c
		}
		return tieBreak(a, b)
	})
	return out
}

func (s *Selection) choice(g *GPU, n *NIC) Choice {
	c := Choice{NIC: n}
	if g == nil || g.Dev == nil || n.Software || s.Index.Device(n.PCI) == nil {
		return c
	}
	if p, err := s.Index.Classify(g.PCI, n.PCI); err == nil {
		c.Path, c.HasPath = s.ncclPath(g, n, p), true
	}
	return c
}

// Nearer lists the NICs nearer r's GPU than r's NIC (all of them with a
// PCIe path when the rail has none) that are not candidates, nearest first:
// what a check names when a rail is farther than the hardware allows.
func (s *Selection) Nearer(r *Rail) []Choice {
	if r.GPU == nil {
		return nil
	}
	var out []Choice
	cur := Choice{NIC: r.NIC, Path: r.Path, HasPath: r.HasPath}
	for _, c := range s.Ranked(r.GPU) {
		if c.NIC.Candidate || !c.HasPath {
			continue
		}
		if r.NIC == nil || !r.HasPath || nearer(c, cur) < 0 {
			out = append(out, c)
		}
	}
	return out
}

// Describe is "mlx5_3 (PIX, 3 bridges): its port 1 is DOWN" for each choice.
func Describe(cs []Choice) string {
	var s []string
	for _, c := range cs {
		d := c.NIC.Name
		if c.HasPath {
			d += fmt.Sprintf(" (%s, %d bridges)", c.Path.Class, len(c.Path.Bridges))
		}
		if !c.NIC.Candidate {
			d += ": " + c.NIC.Why
		}
		s = append(s, d)
	}
	return strings.Join(s, "; ")
}

func (s *Selection) buildRails() {
	taken := map[string]int{} // portKey -> lowest GPU index that took it
	for _, g := range s.GPUs {
		r := &Rail{Index: g.Index, GPU: g}
		s.All = append(s.All, r)
		if s.Forced != nil {
			c := s.choice(g, s.Forced)
			r.NIC, r.Path, r.HasPath, r.Forced = s.Forced, c.Path, c.HasPath, true
			r.Reason = fmt.Sprintf("GDR_RDMA_DEVICE=%s%s", s.Forced.Name, pathNote(c))
			if !s.Forced.Candidate {
				r.Reason += "; not a rail candidate: " + s.Forced.Why
			}
			continue
		}
		var cands []Choice
		for _, c := range s.Ranked(g) {
			if c.NIC.Candidate {
				cands = append(cands, c)
			}
		}
		if len(cands) == 0 {
			r.Reason = s.NoCandidate()
			continue
		}
		// Only hardware NICs with a path compete on nearness; without one
		// (software NICs, driver-only GPUs) rules 2 and 3 decide alone.
		hw := cands[:0:0]
		for _, c := range cands {
			if c.HasPath {
				hw = append(hw, c)
			}
		}
		pool := cands
		if len(hw) > 0 {
			pool = hw
		}
		_, isTaken := taken[portKey(pool[0].NIC)]
		best := pool[0]
		for _, c := range pool[1:] {
			if nearer(c, pool[0]) != 0 || prefer(c, pool[0]) != 0 {
				break // rule 3 chooses among equally near and equally preferred NICs only
			}
			if _, t := taken[portKey(c.NIC)]; isTaken && !t {
				best, isTaken = c, false
				break
			}
		}
		if _, ok := taken[portKey(best.NIC)]; !ok {
			taken[portKey(best.NIC)] = g.Index
		}
		r.NIC, r.Path, r.HasPath = best.NIC, best.Path, best.HasPath
		r.Reason = s.reason(r, pool, taken)
	}
}

func pathNote(c Choice) string {
	if !c.HasPath {
		return " (no PCIe path)"
	}
	return fmt.Sprintf(" (%s, %d bridges)", c.Path.Class, len(c.Path.Bridges))
}

func (s *Selection) reason(r *Rail, pool []Choice, taken map[string]int) string {
	var why string
	switch {
	case r.HasPath:
		why = fmt.Sprintf("nearest ACTIVE RDMA NIC to GPU %d (%s, %d bridges)", r.GPU.Index, r.Path.Class, r.Bridges())
		if r.Path.NUMAUnknown {
			why += ", NUMA unknown"
		}
		why += ncclNote(r.Path)
	case r.GPU.DriverOnly:
		why = fmt.Sprintf("GPU %d is seen by the driver only (%s is not in sysfs): no PCIe path, so the first candidate RDMA NIC", r.GPU.Index, r.GPU.PCI)
	case r.NIC.Software:
		why = fmt.Sprintf("software RDMA device on %s (no PCIe path): no hardware RDMA NIC is a candidate", r.NIC.Parent)
	default:
		why = "first candidate RDMA NIC (no PCIe path)"
	}
	var skipped []string
	for _, c := range pool {
		if c.NIC == r.NIC || nearer(c, Choice{Path: r.Path, HasPath: r.HasPath}) != 0 {
			continue
		}
		if i, t := taken[portKey(c.NIC)]; t && i < r.GPU.Index && tieBreak(c, Choice{NIC: r.NIC}) < 0 {
			if o := s.All[i].NIC; o != nil && o != c.NIC {
				skipped = append(skipped, fmt.Sprintf("%s as near, shares the PF of %s, taken by GPU %d", c.NIC.Name, o.Name, i))
				continue
			}
			skipped = append(skipped, fmt.Sprintf("%s as near, taken by GPU %d", c.NIC.Name, i))
		}
	}
	skipped = append(skipped, s.shapeNotes(r, pool)...)
	if n := s.Nearer(r); len(n) > 0 {
		skipped = append(skipped, "nearer but not candidates: "+Describe(n))
	}
	if len(skipped) > 0 {
		why += "; " + strings.Join(skipped, "; ")
	}
	return why
}
