package nvdriver

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/pathclass"
)

// TopoMatrix is one parsed `nvidia-smi topo -m` output.
type TopoMatrix struct {
	Labels []string          // column order: GPU0, GPU1, ..., NIC0 or mlx5_0, ...
	Cells  map[string]string // "GPU0|NIC0" -> "PIX" (both orders)
	// Affinity columns of GPU rows ("" where not printed).
	CPUAffinity  map[string]string
	NUMAAffinity map[string]string
	GPUNUMAID    map[string]string
	// NICNames maps NIC labels to RDMA device names from the NIC legend;
	// labels that are already device names (older drivers) map to themselves.
	NICNames map[string]string
	// Legend maps a link name (X, SYS, NV#, ...) to its description.
	Legend map[string]string
}

// TopoPair is one unordered pair of devices and the link between them.
type TopoPair struct {
	A, B string // labels, A before B in column order
	Link string // NV18, PIX, ...
}

// TopoLink is a decoded matrix cell.
type TopoLink struct {
	Self    bool
	NVLinks int             // NV# bonded NVLinks; 0 if the pair talks over PCIe
	Class   pathclass.Class // PCIe path class when NVLinks == 0 and !Self
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

var nvRE = regexp.MustCompile(`^NV([0-9]{1,3})$`)

// ParseTopoLink decodes a cell ("X", "NV18", "PIX", ... ; "SOC" is the old name of SYS).
func ParseTopoLink(s string) (TopoLink, error) {
	t := strings.TrimSpace(s)
	switch t {
	case "X":
		return TopoLink{Self: true}, nil
	case "SOC":
		return TopoLink{Class: pathclass.SYS}, nil
	}
	if m := nvRE.FindStringSubmatch(t); m != nil {
		n, _ := strconv.Atoi(m[1])
		if n < 1 {
			return TopoLink{}, fmt.Errorf("topology cell %s: NVLink count must be at least 1", clip.Quote(s))
		}
		return TopoLink{NVLinks: n}, nil
	}
	c, err := pathclass.Parse(t)
	if err != nil || t == "" {
		return TopoLink{}, fmt.Errorf("topology cell %s: want X, NV<n>, PIX, PXB, PHB, NODE or SYS", clip.Quote(s))
	}
	return TopoLink{Class: c}, nil
}

var labelRE = regexp.MustCompile(`^(GPU[0-9]+|NIC[0-9]+|[A-Za-z][A-Za-z0-9_]*_[0-9]+)$`)

// IsGPULabel reports whether a label names a GPU (GPU0, GPU1, ...).
func IsGPULabel(label string) bool { return strings.HasPrefix(label, "GPU") }

// ParseTopo reads `nvidia-smi topo -m` output.
func ParseTopo(out string) (*TopoMatrix, error) {
	text := ansi.ReplaceAllString(strings.ReplaceAll(out, "\r", ""), "")
	lines := strings.Split(text, "\n")
	m := &TopoMatrix{Cells: map[string]string{}, CPUAffinity: map[string]string{}, NUMAAffinity: map[string]string{},
		GPUNUMAID: map[string]string{}, NICNames: map[string]string{}, Legend: map[string]string{}}
	hdr := -1
	var extra []string // affinity column names after the device columns
	for i, ln := range lines {
		fs := fields(ln)
		if len(fs) == 0 || !labelRE.MatchString(fs[0]) || !strings.HasPrefix(ln, "\t") && !strings.HasPrefix(ln, " ") {
			continue
		}
		for _, f := range fs {
			if labelRE.MatchString(f) && len(extra) == 0 {
				m.Labels = append(m.Labels, f)
			} else {
				extra = append(extra, f)
			}
		}
		hdr = i
		break
	}
	if hdr < 0 {
		return nil, fmt.Errorf("nvidia-smi topo -m output has no header line of device labels (GPU0 ...)")
	}
	n := len(m.Labels)
	seen := map[string]bool{}
	for _, l := range m.Labels {
		if seen[l] {
			return nil, fmt.Errorf("nvidia-smi topo -m header names %s twice", l)
		}
		seen[l] = true
	}
	rows := map[string]bool{}
	i := hdr + 1
	for ; i < len(lines); i++ {
		ln := lines[i]
		if strings.TrimSpace(ln) == "" {
			if len(rows) == n {
				break
			}
			continue
		}
		raw := strings.Split(ln, "\t")
		label := strings.TrimSpace(raw[0])
		if !seen[label] {
			if len(rows) > 0 {
				break // the matrix ended (legend or other text follows)
			}
			return nil, fmt.Errorf("nvidia-smi topo -m: line %d starts with %s, not a device from the header", i+1, clip.Quote(label))
		}
		if rows[label] {
			return nil, fmt.Errorf("nvidia-smi topo -m: row %s appears twice", label)
		}
		rows[label] = true
		if len(raw) < n+1 {
			return nil, fmt.Errorf("nvidia-smi topo -m: row %s has %d cells, want %d", label, len(raw)-1, n)
		}
		for j := 0; j < n; j++ {
			cell := strings.TrimSpace(raw[j+1])
			lk, err := ParseTopoLink(cell)
			if err != nil {
				return nil, fmt.Errorf("nvidia-smi topo -m: row %s, column %s: %w", label, m.Labels[j], err)
			}
			if lk.Self != (label == m.Labels[j]) {
				return nil, fmt.Errorf("nvidia-smi topo -m: row %s, column %s: %s on the wrong place for X (self)", label, m.Labels[j], clip.Quote(cell))
			}
			key := label + "|" + m.Labels[j]
			m.Cells[key] = cell
		}
		rest := raw[n+1:]
		get := func(k int) string {
			if k < len(rest) {
				return strings.TrimSpace(rest[k])
			}
			return ""
		}
		if IsGPULabel(label) {
			m.CPUAffinity[label] = get(0)
			m.NUMAAffinity[label] = get(1)
			// GPU NUMA ID follows after an empty cell in current drivers.
			for k := 2; k < len(rest); k++ {
				if v := get(k); v != "" {
					m.GPUNUMAID[label] = v
					break
				}
			}
		}
	}
	if len(rows) != n {
		var missing []string
		for _, l := range m.Labels {
			if !rows[l] {
				missing = append(missing, l)
			}
		}
		return nil, fmt.Errorf("nvidia-smi topo -m: no row for %s (line %d reads %s)", strings.Join(missing, ", "), i+1, clip.Quote(lineAt(lines, i)))
	}
	for _, a := range m.Labels {
		for _, b := range m.Labels {
			if m.Cells[a+"|"+b] != m.Cells[b+"|"+a] {
				return nil, fmt.Errorf("nvidia-smi topo -m: %s->%s is %s but %s->%s is %s", a, b, m.Cells[a+"|"+b], b, a, m.Cells[b+"|"+a])
			}
		}
	}
	// Legends.
	legendRE := regexp.MustCompile(`^\s+(X|SYS|NODE|PHB|PXB|PIX|NV#|SOC|PSB)\s+=\s+(.+)$`)
	nicRE := regexp.MustCompile(`^\s+(NIC[0-9]+):\s+(\S+)\s*$`)
	for ; i < len(lines); i++ {
		if g := legendRE.FindStringSubmatch(lines[i]); g != nil {
			m.Legend[g[1]] = strings.TrimSpace(g[2])
		}
		if g := nicRE.FindStringSubmatch(lines[i]); g != nil {
			if !seen[g[1]] {
				return nil, fmt.Errorf("nvidia-smi topo -m: NIC legend names %s, which is not in the matrix", g[1])
			}
			m.NICNames[g[1]] = g[2]
		}
	}
	for _, l := range m.Labels {
		if !IsGPULabel(l) && m.NICNames[l] == "" {
			if strings.HasPrefix(l, "NIC") {
				return nil, fmt.Errorf("nvidia-smi topo -m: %s has no entry in the NIC legend", l)
			}
			m.NICNames[l] = l
		}
	}
	return m, nil
}

// fields splits a line at tabs and drops empty fields.
func fields(ln string) []string {
	var out []string
	for _, f := range strings.Split(ln, "\t") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Pairs lists every unordered pair of distinct devices in column order.
func (m *TopoMatrix) Pairs() []TopoPair {
	var out []TopoPair
	for i, a := range m.Labels {
		for _, b := range m.Labels[i+1:] {
			out = append(out, TopoPair{A: a, B: b, Link: m.Cells[a+"|"+b]})
		}
	}
	return out
}

// GPUs lists the GPU labels in order.
func (m *TopoMatrix) GPUs() []string {
	var out []string
	for _, l := range m.Labels {
		if IsGPULabel(l) {
			out = append(out, l)
		}
	}
	return out
}

// Cell returns the link between two labels.
func (m *TopoMatrix) Cell(a, b string) (string, bool) {
	v, ok := m.Cells[a+"|"+b]
	return v, ok
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end of output>"
}
