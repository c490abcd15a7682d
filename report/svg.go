package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/pci"
)

// esc escapes text for SVG/HTML.
func esc(s string) string { return html.EscapeString(s) }

// classColor is a path class's colour, best (PIX) to worst (SYS); each is
// also a label's text colour on white, so at least 4.5:1 against it (WCAG
// AA; TestPageContrast).
var classColor = map[string]string{"PIX": "#1a7f37", "PXB": "#2c6e1f", "PHB": "#7d4e00", "NODE": "#a3480f", "SYS": "#cf222e"}

func colorOf(class string) string {
	if c, ok := classColor[class]; ok {
		return c
	}
	return "#6e7781"
}

// pcieNode is a PCI function (or root complex) in the drawn tree.
type pcieNode struct {
	id       string // BDF, or pciDDDD:BB for a root complex
	kind     string // root, bridge, gpu, nic
	label    string
	info     string // tooltip
	children []*pcieNode
	x, y     float64
}

// Topology is what the topology tests recorded about a host's PCIe tree.
type Topology struct {
	Chains   map[string][]string // device BDF -> its chain, root port first
	GPUs     map[string]string   // BDF -> name ("" unknown)
	NICs     map[string]string   // BDF -> RDMA device name
	Soft     []string            // software RDMA devices ("rxe0 on eth0")
	Pairs    []Pair              // every (GPU, NIC) pair with its class (TOPO-01)
	Nearest  map[string]Pair     // GPU BDF -> its nearest NIC (TOPO-02)
	Links    map[string]string   // BDF -> link state text
	NICNames map[string]string   // RDMA device -> BDF
}

// Pair is one GPU<->NIC path.
type Pair struct {
	GPU, NIC, NICPCI, Class string
	Switches                string
}

// topology gathers the PCIe facts from a host's cases.
func topology(h *HostResult) Topology {
	t := Topology{Chains: map[string][]string{}, GPUs: map[string]string{}, NICs: map[string]string{}, Nearest: map[string]Pair{},
		Links: map[string]string{}, NICNames: map[string]string{}}
	softSeen := map[string]bool{}
	for _, c := range h.cases {
		a := c.Attrs
		if g := a["gdr.gpu"]; pci.IsBDF(g) {
			if _, ok := t.GPUs[g]; !ok || t.GPUs[g] == "" {
				t.GPUs[g] = a["gdr.gpu_name"]
			}
		}
		if n, p := a["gdr.nic"], a["gdr.nic_pci"]; n != "" && pci.IsBDF(p) {
			t.NICs[p], t.NICNames[n] = n, p
		}
		if a["gdr.nic_kind"] == "software" && !softSeen[a["gdr.nic"]] {
			softSeen[a["gdr.nic"]] = true
			t.Soft = append(t.Soft, a["gdr.nic"]+" on "+a["gdr.nic_parent"])
		}
		for _, k := range []string{"gdr.gpu_chain", "gdr.nic_chain"} {
			if ch := strings.Fields(a[k]); len(ch) > 0 && pci.IsBDF(ch[len(ch)-1]) {
				t.Chains[ch[len(ch)-1]] = ch
			}
		}
		for _, l := range strings.Split(a["gdr.links"], ";") {
			if f := strings.Fields(l); len(f) > 1 && pci.IsBDF(f[0]) {
				t.Links[f[0]] = strings.Join(f[1:], " ")
			}
		}
		if c.Area == "topology" && c.Counted && a["gdr.path"] != "" && a["gdr.gpu"] != "" && a["gdr.nic"] != "" {
			p := Pair{GPU: a["gdr.gpu"], NIC: a["gdr.nic"], NICPCI: a["gdr.nic_pci"], Class: a["gdr.path"], Switches: a["gdr.switches"]}
			switch c.Req {
			case "TOPO-01":
				t.Pairs = append(t.Pairs, p)
			case "TOPO-02":
				t.Nearest[p.GPU] = p
			}
		}
	}
	for _, id := range h.Identity.GPUs {
		bdf, name, _ := strings.Cut(id, " ")
		if pci.IsBDF(bdf) {
			if _, ok := t.GPUs[bdf]; !ok || t.GPUs[bdf] == "" {
				t.GPUs[bdf] = name
			}
		}
	}
	return t
}

// Empty says the tests recorded no PCIe device.
func (t Topology) Empty() bool { return len(t.GPUs) == 0 && len(t.NICs) == 0 && len(t.Soft) == 0 }

// tree builds the drawn tree: root complexes, the bridges of every chain,
// GPUs and NICs. A device without a recorded chain hangs off its bus's root.
func (t Topology) tree() []*pcieNode {
	nodes := map[string]*pcieNode{}
	var roots []*pcieNode
	get := func(id, kind string) *pcieNode {
		n := nodes[id]
		if n == nil {
			n = &pcieNode{id: id, kind: kind}
			nodes[id] = n
		}
		return n
	}
	rootOf := func(bdf string) *pcieNode {
		id := "pci" + bdf[:7]
		n, ok := nodes[id]
		if !ok {
			n = get(id, "root")
			n.label = "root " + bdf[:7]
			n.info = "PCI root complex (host bridge) " + id
			roots = append(roots, n)
		}
		return n
	}
	devs := map[string]string{}
	for g := range t.GPUs {
		devs[g] = "gpu"
	}
	for p := range t.NICs {
		devs[p] = "nic"
	}
	bdfs := make([]string, 0, len(devs))
	for b := range devs {
		bdfs = append(bdfs, b)
	}
	sort.Strings(bdfs)
	// Each node hangs under the first parent a chain gives it, so chains
	// that disagree (a recording's attributes are input) never make a loop
	// that drawing would follow forever.
	parentOf := map[*pcieNode]*pcieNode{}
	for _, b := range bdfs {
		ch := t.Chains[b]
		if !chainOf(ch, b) {
			ch = []string{b}
		}
		parent := rootOf(ch[0])
		for i, id := range ch {
			kind := "bridge"
			if i == len(ch)-1 {
				kind = devs[b]
			}
			n := get(id, kind)
			if i == len(ch)-1 {
				n.kind = kind
			}
			if _, ok := parentOf[n]; !ok {
				parentOf[n] = parent
				parent.children = append(parent.children, n)
			}
			parent = n
		}
	}
	role := func(n *pcieNode) string {
		p := parentOf[n]
		switch {
		case p != nil && p.kind == "root":
			return "root port"
		case len(n.children) > 0 && n.children[0].kind == "bridge":
			return "switch"
		case p != nil && p.kind == "bridge":
			return "switch port"
		}
		return "bridge"
	}
	for id, n := range nodes {
		switch n.kind {
		case "gpu":
			n.label = "GPU " + short(id)
			n.info = strings.TrimSpace("GPU " + id + " " + t.GPUs[id])
		case "nic":
			n.label = t.NICs[id] + " " + short(id)
			n.info = "RDMA NIC " + t.NICs[id] + " at " + id
		case "bridge":
			r := role(n)
			n.label = r + " " + short(id)
			n.info = "PCIe " + r + " " + id
		}
		if l := t.Links[id]; l != "" {
			n.info += "; link " + l
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].id < roots[j].id })
	return roots
}

// chainOf says whether ch is a chain the tree can draw for device b:
// distinct PCI addresses, root port first, b last.
func chainOf(ch []string, b string) bool {
	if len(ch) == 0 || ch[len(ch)-1] != b {
		return false
	}
	seen := map[string]bool{}
	for _, id := range ch {
		if !pci.IsBDF(id) || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}

// short drops the PCI domain when it is 0000.
func short(bdf string) string { return strings.TrimPrefix(bdf, "0000:") }

// TreeSVG draws the host's PCIe tree: root complexes at the top, bridges,
// then GPUs (green) and NICs (blue); each GPU's nearest NIC is joined by a
// dashed arc coloured and labelled with the path class.
func (t Topology) TreeSVG() string {
	roots := t.tree()
	const bw, bh, gapX, gapY = 118.0, 30.0, 14.0, 58.0
	leaves := 0
	depth := 0
	var place func(n *pcieNode, d int)
	place = func(n *pcieNode, d int) {
		n.y = 20 + float64(d)*gapY
		depth = max(depth, d)
		if len(n.children) == 0 {
			n.x = 10 + float64(leaves)*(bw+gapX)
			leaves++
			return
		}
		sort.Slice(n.children, func(i, j int) bool { return n.children[i].id < n.children[j].id })
		for _, c := range n.children {
			place(c, d+1)
		}
		n.x = (n.children[0].x + n.children[len(n.children)-1].x) / 2
	}
	for _, r := range roots {
		place(r, 0)
	}
	width := 20 + float64(max(leaves, 1))*(bw+gapX)
	height := 20 + float64(depth+1)*gapY + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="tree" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" role="img" aria-label="PCIe tree">`, width, height, math.Min(width, 1400))
	var draw func(n *pcieNode)
	pos := map[string]*pcieNode{}
	draw = func(n *pcieNode) {
		pos[n.id] = n
		for _, c := range n.children {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#8c959f" stroke-width="1.5"/>`, n.x+bw/2, n.y+bh, c.x+bw/2, c.y)
			draw(c)
		}
		fill := map[string]string{"root": "#eaeef2", "bridge": "#f6f8fa", "gpu": "#dafbe1", "nic": "#ddf4ff"}[n.kind]
		stroke := map[string]string{"root": "#57606a", "bridge": "#8c959f", "gpu": "#1a7f37", "nic": "#0969da"}[n.kind]
		fmt.Fprintf(&b, `<g class="node %s"><title>%s</title><rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" rx="5" fill="%s" stroke="%s"/>`+
			`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text></g>`,
			n.kind, esc(n.info), n.x, n.y, bw, bh, fill, stroke, n.x+bw/2, n.y+bh/2+4, esc(clip(n.label, 20)))
	}
	for _, r := range roots {
		draw(r)
	}
	gpus := make([]string, 0, len(t.Nearest))
	for g := range t.Nearest {
		gpus = append(gpus, g)
	}
	sort.Strings(gpus)
	base := 20 + float64(depth)*gapY + bh
	for i, g := range gpus {
		p := t.Nearest[g]
		a, z := pos[g], pos[p.NICPCI]
		if z == nil {
			z = pos[t.NICNames[p.NIC]]
		}
		if a == nil || z == nil {
			continue
		}
		x1, x2 := a.x+bw/2, z.x+bw/2
		dip := base + 18 + float64(i%3)*14
		col := colorOf(p.Class)
		fmt.Fprintf(&b, `<g class="pair"><title>%s &lt;-&gt; %s: %s</title><path d="M%.1f %.1f C %.1f %.1f, %.1f %.1f, %.1f %.1f" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/>`+
			`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" font-weight="bold" fill="%s">%s</text></g>`,
			esc(g), esc(p.NIC), esc(p.Class), x1, base, x1, dip+12, x2, dip+12, x2, base, col, (x1+x2)/2, dip+16, col, esc(p.Class))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// point is one (x, y) of a chart series.
type point struct{ x, y float64 }

type series struct {
	name  string
	color string
	pts   []point
}

// palette holds colours told apart at a glance; more series than it holds
// are drawn as a distribution (fleetHosts), never with repeated colours.
var palette = []string{"#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#d4631c", "#57606a", "#e85aad", "#1b7c83", "#6e3a00"}

// bwPoint is one host's PP-08 measurement.
type bwPoint struct {
	host, op   string
	size, gbit float64
	floor      float64
	fail       bool
}

// bwPoints are the hosts' PP-08 bandwidths and the highest floor seen.
func bwPoints(hs []*HostResult) ([]bwPoint, float64) {
	var out []bwPoint
	floor := 0.0
	for _, h := range hs {
		for _, c := range h.Cases() {
			if c.Req != "PP-08" || c.Status() == Skip {
				continue
			}
			size, err1 := strconv.ParseFloat(c.Attrs["gdr.size_bytes"], 64)
			bw, err2 := strconv.ParseFloat(c.Attrs["gdr.bw_gbit_s"], 64)
			if err1 != nil || err2 != nil || size <= 0 {
				continue
			}
			p := bwPoint{host: h.Identity.Host, op: c.Attrs["gdr.op"], size: size, gbit: bw, fail: c.Status() == Fail}
			if p.op == "" {
				p.op = "bw"
			}
			if f, err := strconv.ParseFloat(c.Attrs["gdr.min_bw_gbit_s"], 64); err == nil {
				p.floor = f
				floor = math.Max(floor, f)
			}
			out = append(out, p)
		}
	}
	return out, floor
}

// BandwidthSVG charts PP-08: bandwidth against message size, one line per
// host and operation, the floor as a dashed line where one applies. Above
// fleetHosts hosts, or more series than colours, it draws per operation and
// size the distribution over hosts instead (distSVG).
func BandwidthSVG(hs []*HostResult) string {
	pts, floor := bwPoints(hs)
	if len(pts) == 0 {
		return ""
	}
	var ss []series
	idx := map[string]int{}
	for _, p := range pts {
		name := p.op
		if len(hs) > 1 {
			name = p.host + " " + p.op
		}
		i, ok := idx[name]
		if !ok {
			i = len(ss)
			idx[name] = i
			ss = append(ss, series{name: name})
		}
		ss[i].pts = append(ss[i].pts, point{p.size, p.gbit})
	}
	if len(hs) > fleetHosts || len(ss) > len(palette) {
		return distSVG(distBW(pts), "bandwidth (Gbit/s)")
	}
	for i := range ss {
		sort.Slice(ss[i].pts, func(a, b int) bool { return ss[i].pts[a].x < ss[i].pts[b].x })
		ss[i].color = palette[i]
	}
	return lineChart(ss, "message size (bytes, log scale)", "bandwidth (Gbit/s)", true, floor, "floor")
}

// distGroup is one row of a distribution chart: one operation at one size
// (or one copy direction at one link rate) over many hosts.
type distGroup struct {
	label         string
	min, med, max float64
	n             int
	floor, ref    float64  // the row's floor and reference (link rate), 0: none
	outliers      []string // "host value": failed or below the floor, slowest first
}

// distribution sorts vals and returns min, median and max.
func distribution(vals []float64) (lo, med, hi float64) {
	sort.Float64s(vals)
	n := len(vals)
	med = vals[n/2]
	if n%2 == 0 {
		med = (vals[n/2-1] + vals[n/2]) / 2
	}
	return vals[0], med, vals[n-1]
}

// distOutliers is how many outliers a distribution row names.
const distOutliers = 3

// distRow makes a row from measurements: vals[i] of host names[i], bad[i]
// when it failed or fell below its floor.
func distRow(label string, vals []float64, names []string, bad []bool) distGroup {
	g := distGroup{label: label, n: len(vals)}
	idx := make([]int, len(vals))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
	nbad := 0
	for _, i := range idx {
		if bad[i] {
			nbad++
			if len(g.outliers) < distOutliers {
				g.outliers = append(g.outliers, names[i]+" "+fmtNum(vals[i]))
			}
		}
	}
	if nbad > distOutliers {
		g.outliers = append(g.outliers, fmt.Sprintf("+%d more", nbad-distOutliers))
	}
	g.min, g.med, g.max = distribution(append([]float64(nil), vals...))
	return g
}

// sample is one host's measurement in a distribution chart, grouped by
// kind (an operation, a copy direction) and x (a size, a link rate).
type sample struct {
	kind, host       string
	x, v, floor, ref float64
	bad              bool // failed or below its floor
}

// distGroups makes one row per kind and x (kinds in descending order, WRITE
// before READ and H2D before D2H; x rising), labelled by label.
func distGroups(ss []sample, label func(kind string, x float64) string) []distGroup {
	type key struct {
		kind string
		x    float64
	}
	by := map[key][]sample{}
	var keys []key
	for _, p := range ss {
		k := key{p.kind, p.x}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], p)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind > keys[j].kind
		}
		return keys[i].x < keys[j].x
	})
	var gs []distGroup
	for _, k := range keys {
		ps := by[k]
		vals, names, bad := make([]float64, len(ps)), make([]string, len(ps)), make([]bool, len(ps))
		var floor, ref float64
		for i, p := range ps {
			vals[i], names[i], bad[i] = p.v, p.host, p.bad
			floor, ref = math.Max(floor, p.floor), math.Max(ref, p.ref)
		}
		g := distRow(label(k.kind, k.x), vals, names, bad)
		g.floor, g.ref = floor, ref
		gs = append(gs, g)
	}
	return gs
}

// distBW groups PP-08 points per operation and size.
func distBW(pts []bwPoint) []distGroup {
	ss := make([]sample, len(pts))
	for i, p := range pts {
		ss[i] = sample{kind: p.op, host: p.host, x: p.size, v: p.gbit, floor: p.floor, bad: p.fail || p.floor > 0 && p.gbit < p.floor}
	}
	return distGroups(ss, func(op string, size float64) string { return op + " " + sizeLabel(size) })
}

// distSVG draws rows of distributions over hosts: a bar from min to max, a
// tick at the median, the row's floor (red dashes) and reference (blue),
// and the hosts that failed or fell below the floor named beside it.
func distSVG(gs []distGroup, unit string) string {
	maxV := 0.0
	for _, g := range gs {
		maxV = math.Max(maxV, math.Max(g.max, math.Max(g.floor, g.ref)))
	}
	if maxV <= 0 {
		maxV = 1
	}
	maxV *= 1.05
	const w, l, r, rowH, top = 900.0, 130.0, 300.0, 24.0, 24.0
	h := top + float64(len(gs))*rowH + 44
	px := func(v float64) float64 { return l + v/maxV*(w-l-r) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart dist" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" role="img" aria-label="%s over hosts">`, w, h, w, esc(unit))
	fmt.Fprintf(&b, `<text x="%.0f" y="14" font-size="11">%s over hosts: bar min to max, black tick median, red dashes floor</text><text x="%.0f" y="14" font-size="11">failed or below the floor (slowest first)</text>`, l, esc(unit), w-r+8)
	for i := 0; i <= 4; i++ {
		v := maxV / 1.05 * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eaeef2"/><text x="%.1f" y="%.0f" font-size="10" text-anchor="middle">%s</text>`,
			px(v), px(v), top, h-34, px(v), h-22, fmtNum(v))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="middle">%s</text>`, l+(w-l-r)/2, h-6, esc(unit))
	for i, g := range gs {
		y := top + float64(i)*rowH
		col := "#0969da"
		if len(g.outliers) > 0 {
			col = "#cf222e"
		}
		fmt.Fprintf(&b, `<g class="dist-row"><title>%s over %d hosts: min %s, median %s, max %s</title>`, esc(g.label), g.n, fmtNum(g.min), fmtNum(g.med), fmtNum(g.max))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, l-6, y+15, esc(clip(g.label, 22)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="12" fill="%s" fill-opacity="0.35" stroke="%s"/>`, px(g.min), y+5, math.Max(px(g.max)-px(g.min), 1), col, col)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#1f2328" stroke-width="2"/>`, px(g.med), px(g.med), y+3, y+19)
		if g.ref > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#0969da" stroke-width="3"/>`, px(g.ref), px(g.ref), y+1, y+21)
		}
		if g.floor > 0 {
			fmt.Fprintf(&b, `<line class="floor" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#cf222e" stroke-dasharray="3 2" stroke-width="2"/>`, px(g.floor), px(g.floor), y+1, y+21)
		}
		b.WriteString(`</g>`)
		if len(g.outliers) > 0 {
			fmt.Fprintf(&b, `<text class="outliers" x="%.0f" y="%.1f" font-size="11" fill="#cf222e"><title>%s</title>%s</text>`, w-r+8, y+15, esc(strings.Join(g.outliers, ", ")), esc(clip(strings.Join(g.outliers, ", "), 46)))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// lineChart draws series on a log2 x axis when logX.
func lineChart(ss []series, xlabel, ylabel string, logX bool, hline float64, hlabel string) string {
	const w, h, l, r, top, bot = 640.0, 320.0, 64.0, 150.0, 16.0, 46.0
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), hline
	for _, s := range ss {
		for _, p := range s.pts {
			x := p.x
			if logX {
				x = math.Log2(x)
			}
			minX, maxX, maxY = math.Min(minX, x), math.Max(maxX, x), math.Max(maxY, p.y)
		}
	}
	if maxX == minX {
		minX, maxX = minX-1, maxX+1
	}
	if maxY <= 0 {
		maxY = 1
	}
	maxY *= 1.1
	px := func(x float64) float64 {
		if logX {
			x = math.Log2(x)
		}
		return l + (x-minX)/(maxX-minX)*(w-l-r)
	}
	py := func(y float64) float64 { return h - bot - y/maxY*(h-top-bot) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" role="img" aria-label="%s">`, w, h, w, esc(ylabel))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#d0d7de"/>`, l, top, w-l-r, h-top-bot)
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eaeef2"/><text x="%.0f" y="%.1f" font-size="10" text-anchor="end">%s</text>`,
			l, w-r, py(y), py(y), l-4, py(y)+3, fmtNum(y))
	}
	ticks := map[float64]bool{}
	for _, s := range ss {
		for _, p := range s.pts {
			ticks[p.x] = true
		}
	}
	for x := range ticks {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" font-size="10" text-anchor="middle">%s</text>`, px(x), h-bot+14, esc(sizeLabel(x)))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="middle">%s</text>`, l+(w-l-r)/2, h-8, esc(xlabel))
	fmt.Fprintf(&b, `<text x="12" y="%.0f" font-size="11" text-anchor="middle" transform="rotate(-90 12 %.0f)">%s</text>`, top+(h-top-bot)/2, top+(h-top-bot)/2, esc(ylabel))
	if hline > 0 {
		fmt.Fprintf(&b, `<line class="floor" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#cf222e" stroke-dasharray="6 4"/><text x="%.0f" y="%.1f" font-size="10" fill="#cf222e">%s %s</text>`,
			l, w-r, py(hline), py(hline), l+6, py(hline)-4, esc(hlabel), fmtNum(hline))
	}
	for i, s := range ss {
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		fmt.Fprintf(&b, `<g class="series"><title>%s</title><polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, esc(s.name), s.color, strings.Join(pts, " "))
		for _, p := range s.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s B, %s</title></circle>`, px(p.x), py(p.y), s.color, esc(s.name), fmtNum(p.x), fmtNum(p.y))
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f" font-size="11">%s</text></g>`,
			w-r+8, top+4+float64(i)*16, s.color, w-r+22, top+13+float64(i)*16, esc(clip(s.name, 20)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func sizeLabel(x float64) string {
	switch {
	case x >= 1<<20 && math.Mod(x, 1<<20) == 0:
		return fmt.Sprintf("%.0fM", x/(1<<20))
	case x >= 1<<10 && math.Mod(x, 1<<10) == 0:
		return fmt.Sprintf("%.0fK", x/(1<<10))
	}
	return fmtNum(x)
}

func fmtNum(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) < 0.1:
		return strconv.FormatFloat(v, 'g', 2, 64) // a software device's 0.004 Gbit/s is not 0.00
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// copyBar is one GPU's copy measurement against its link.
type copyBar struct {
	label, host, dir string
	gbs, link, min   float64
	fail             bool
}

// distCopy groups copy bars per direction and link rate.
func distCopy(bars []copyBar) []distGroup {
	ss := make([]sample, len(bars))
	for i, c := range bars {
		ss[i] = sample{kind: c.dir, host: c.host, x: c.link, v: c.gbs, floor: c.min, ref: c.link, bad: c.fail || c.gbs < c.min}
	}
	return distGroups(ss, func(dir string, link float64) string { return fmt.Sprintf("%s, %s GB/s link", dir, fmtNum(link)) })
}

// CopySVG charts GPU-09/GPU-10: each GPU's pinned copy bandwidth (H2D and
// D2H) as a bar beside its PCIe link's theoretical rate, with the floor.
func CopySVG(hs []*HostResult) string {
	var bars []copyBar
	for _, h := range hs {
		for _, c := range h.Cases() {
			if c.Req != "GPU-09" && c.Req != "GPU-10" || c.Status() == Skip {
				continue
			}
			gbs, err1 := strconv.ParseFloat(c.Attrs["gdr.copy_gbyte_s"], 64)
			link, err2 := strconv.ParseFloat(c.Attrs["gdr.link_gbyte_s"], 64)
			if err1 != nil || err2 != nil {
				continue
			}
			frac, _ := strconv.ParseFloat(c.Attrs["gdr.min_copy_fraction"], 64)
			dir := map[string]string{"GPU-09": "H2D", "GPU-10": "D2H"}[c.Req]
			label := dir + " " + short(c.Attrs["gdr.gpu"])
			if len(hs) > 1 {
				label = h.Identity.Host + " " + label
			}
			bars = append(bars, copyBar{label: label, host: h.Identity.Host, dir: dir, gbs: gbs, link: link, min: frac * link, fail: c.Status() == Fail})
		}
	}
	if len(bars) == 0 {
		return ""
	}
	if len(hs) > fleetHosts {
		return distSVG(distCopy(bars), "pinned copy (GB/s)")
	}
	const w, l, r, rowH, top = 760.0, 190.0, 110.0, 26.0, 10.0
	h := top + float64(len(bars))*rowH + 34
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, math.Max(b.gbs, b.link))
	}
	maxV *= 1.05
	px := func(v float64) float64 { return l + v/maxV*(w-l-r) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" role="img" aria-label="copy bandwidth">`, w, h, w)
	for i, x := range bars {
		y := top + float64(i)*rowH
		col := "#1a7f37"
		if x.gbs < x.min {
			col = "#cf222e"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, l-6, y+15, esc(clip(x.label, 30)))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="16" fill="%s"><title>%s: %s GB/s of %s GB/s (%.0f%%)</title></rect>`,
			l, y+3, px(x.gbs)-l, col, esc(x.label), fmtNum(x.gbs), fmtNum(x.link), 100*x.gbs/x.link)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#0969da" stroke-width="3"><title>link rate %s GB/s</title></line>`, px(x.link), px(x.link), y, y+22, fmtNum(x.link))
		if x.min > 0 {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#cf222e" stroke-dasharray="3 2" stroke-width="2"><title>floor %s GB/s</title></line>`, px(x.min), px(x.min), y, y+22, fmtNum(x.min))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s GB/s (%.0f%%)</text>`, math.Max(px(x.gbs), px(x.link))+6, y+15, fmtNum(x.gbs), 100*x.gbs/x.link)
	}
	fy := top + float64(len(bars))*rowH + 14
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="#1a7f37"/><text x="%.0f" y="%.0f" font-size="11">pinned copy, GB/s</text>`, l, fy, l+14, fy+9)
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#0969da" stroke-width="3"/><text x="%.0f" y="%.0f" font-size="11">PCIe link rate</text>`, l+140, l+140, fy-2, fy+12, l+146, fy+9)
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#cf222e" stroke-dasharray="3 2" stroke-width="2"/><text x="%.0f" y="%.0f" font-size="11">floor (GDR_MIN_COPY_FRACTION)</text>`, l+250, l+250, fy-2, fy+12, l+256, fy+9)
	b.WriteString(`</svg>`)
	return b.String()
}
