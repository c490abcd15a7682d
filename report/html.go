package report

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

//go:embed report.html.tmpl
var tmplFS embed.FS

var page = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"vclass": func(v string) string { return strings.ReplaceAll(v, " ", "_") },
	"sclass": func(s Status) string { return strings.ReplaceAll(string(s), " ", "") },
	"upper":  func(s Status) string { return strings.ToUpper(string(s)) },
	"join":   strings.Join,
	"clip":   clip,
}).ParseFS(tmplFS, "report.html.tmpl"))

type matrixCell struct{ Class, Mark, Tip string }
type matrixRow struct {
	Host, Anchor, Verdict, Line string
	Cells                       []matrixCell
}
type heatCell struct {
	Text, Tip string
	Style     template.CSS // built here from numbers, not from input
}
type heatRow struct {
	Host  string
	Cells []heatCell
}
type pairCell struct{ Class, Color string }
type pairRow struct {
	GPU   string
	Cells []pairCell
}
type detail struct {
	Name, Req, Message, Output string
	Status                     Status
}
type hostView struct {
	H        *HostResult
	Anchor   string
	Prefix   string
	Ident    [][2]string
	Tree     template.HTML
	Soft     []string
	PairNICs []string
	PairRows []pairRow
	Details  []detail
}

type htmlData struct {
	R         *Report
	Many      bool
	IDs       []string
	Matrix    []matrixRow
	HeatHosts []string
	Heat      []heatRow
	BW, Copy  template.HTML
	Hosts     []hostView
	// A cluster run: the pair x rail heatmap and the suspects.
	RailCols []string
	RailHeat []heatRow
	Cluster  *isolate.Summary
}

func anchor(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// maxOutputLines bounds each test's output in the page (the full output is
// in junit.xml and test.json).
const maxOutputLines = 200

// WriteHTML writes report.html: one file with its CSS, script and SVG inline,
// nothing fetched from a network.
func (r *Report) WriteHTML(w io.Writer) error {
	if r.Time == "" {
		r.Time = time.Now().UTC().Format(time.RFC3339)
	}
	d := htmlData{R: r, Many: len(r.Hosts) > 1}
	for _, rq := range reqs.All() {
		d.IDs = append(d.IDs, rq.ID)
	}
	for _, h := range r.Hosts {
		row := matrixRow{Host: h.Identity.Host, Anchor: anchor(h.Identity.Host), Verdict: h.Verdict.Verdict, Line: h.Verdict.Line}
		by := map[string]*ReqResult{}
		for _, rq := range h.Reqs {
			by[rq.ID] = rq
		}
		for _, id := range d.IDs {
			rq := by[id]
			c := matrixCell{Class: "notrun", Mark: "–", Tip: id + ": not run"}
			if rq != nil {
				c.Class = strings.ReplaceAll(string(rq.Status), " ", "")
				c.Mark = map[Status]string{Pass: "P", Fail: "F", Skip: "S", NotRun: "–"}[rq.Status]
				if rq.Level == string(reqs.ReportOnly) {
					c.Mark = strings.ToLower(c.Mark)
				}
				c.Tip = fmt.Sprintf("%s %s on %s: %s", id, rq.Status, h.Identity.Host, clip(rq.Reason, 200))
			}
			row.Cells = append(row.Cells, c)
		}
		d.Matrix = append(d.Matrix, row)
		d.Hosts = append(d.Hosts, hostViewOf(h, len(r.Hosts) > 1))
	}
	if pairs := Pairs(r.Hosts); len(pairs) > 0 {
		d.HeatHosts, d.Heat = heatmap(pairs)
	}
	d.RailCols, d.RailHeat = r.railHeat()
	d.Cluster = r.Cluster
	d.BW = template.HTML(BandwidthSVG(r.Hosts))
	d.Copy = template.HTML(CopySVG(r.Hosts))
	return page.Execute(w, d)
}

func hostViewOf(h *HostResult, many bool) hostView {
	v := hostView{H: h, Anchor: anchor(h.Identity.Host), Ident: identityLines(h.Identity)}
	if many {
		v.Prefix = anchor(h.Identity.Host) + "-"
	}
	t := topology(h)
	if !t.Empty() {
		v.Tree = template.HTML(t.TreeSVG())
		v.Soft = t.Soft
		nics := map[string]bool{}
		gpus := map[string]map[string]string{}
		for _, p := range t.Pairs {
			nics[p.NIC] = true
			if gpus[p.GPU] == nil {
				gpus[p.GPU] = map[string]string{}
			}
			gpus[p.GPU][p.NIC] = p.Class
		}
		for n := range nics {
			v.PairNICs = append(v.PairNICs, n)
		}
		sort.Strings(v.PairNICs)
		var gs []string
		for g := range gpus {
			gs = append(gs, g)
		}
		sort.Strings(gs)
		for _, g := range gs {
			row := pairRow{GPU: g}
			for _, n := range v.PairNICs {
				c := gpus[g][n]
				row.Cells = append(row.Cells, pairCell{Class: c, Color: colorOf(c)})
			}
			v.PairRows = append(v.PairRows, row)
		}
	}
	for _, c := range h.Cases() {
		if c.Status() == Pass && many {
			continue
		}
		out := c.Output
		if len(out) > maxOutputLines {
			out = append(append([]string{}, out[:maxOutputLines]...), fmt.Sprintf("... %d more lines in junit.xml", len(c.Output)-maxOutputLines))
		}
		name := c.Name
		if rd := roundOf(c.Package); rd != "" {
			name += " (" + rd + ")"
		}
		v.Details = append(v.Details, detail{Name: name, Req: c.Req, Message: c.Message, Output: strings.Join(out, "\n"), Status: c.Status()})
	}
	return v
}

// heatmap lays pairs out as a client x server grid (rows the hosts that ran
// as client, columns those that ran as server), coloured from the slowest
// pair (red) to the fastest (green).
func heatmap(pairs []PairBW) ([]string, []heatRow) {
	cset, sset := map[string]bool{}, map[string]bool{}
	lo, hi := -1.0, 0.0
	for _, p := range pairs {
		cset[p.Client], sset[p.Server] = true, true
		if lo < 0 || p.Gbits < lo {
			lo = p.Gbits
		}
		hi = max(hi, p.Gbits)
	}
	sorted := func(m map[string]bool) []string {
		var out []string
		for h := range m {
			out = append(out, h)
		}
		sort.Strings(out)
		return out
	}
	clients, servers := sorted(cset), sorted(sset)
	by := map[[2]string]PairBW{}
	for _, p := range pairs {
		by[[2]string{p.Client, p.Server}] = p
	}
	var rows []heatRow
	for _, c := range clients {
		row := heatRow{Host: c}
		for _, s := range servers {
			p, ok := by[[2]string{c, s}]
			if !ok {
				row.Cells = append(row.Cells, heatCell{Text: "", Style: "background:#f6f8fa"})
				continue
			}
			f := 1.0
			if hi > lo {
				f = (p.Gbits - lo) / (hi - lo)
			}
			hue := int(120 * f) // red (0) to green (120)
			cell := heatCell{Text: fmtNum(p.Gbits), Tip: fmt.Sprintf("%s -> %s: %s Gbit/s (%s)", c, s, fmtNum(p.Gbits), p.Status),
				Style: template.CSS(fmt.Sprintf("background:hsl(%d,65%%,78%%)", hue))}
			if p.Status == Fail {
				cell.Style += ";outline:3px solid #cf222e"
				cell.Text += " ✗"
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return servers, rows
}
