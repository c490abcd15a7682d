package report

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"math"
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
	"hosts":  nameHosts,
	"add":    func(a, b int) int { return a + b },
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
type pairLine struct {
	Client, Server, Text, Tip string
	Style                     template.CSS
}
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
	Reqs     []*ReqResult // rows shown, failures first
	Passed   []string     // passed requirements left out of Reqs (a fleet's host)
	Compact  bool         // a fleet's host that is not NOT QUALIFIED, or past fleetDetailBytes: short rows, no tree, no output
	InCauses int          // rows of a compact host left to its shared causes
	Note     string       // where a compact host's tree and output are
	Open     bool         // its section starts open
	Anchor   string
	Prefix   string
	Ident    [][2]string
	Tree     template.HTML
	Soft     []string
	PairNICs []string
	PairRows []pairRow
	Details  []detail
	Soak     *soakView // its soak run's charts and tables; nil: none, or a fleet's short section
}

// causeView is one of the report's causes (HostsCause) as the top of the
// page shows it.
type causeView struct {
	Status                     Status
	Hosts, Reqs, Key, HostList string
	Example, Remedy            string
	Tip                        string // the whole host list or example where the line clips it
}

// causesShown are the causes listed open at the top of the page; the rest
// are folded under them.
const causesShown = 8

type htmlData struct {
	R         *Report
	Many      bool
	Causes    []causeView // why hosts are not QUALIFIED, failures first (Report.Causes)
	More      []causeView // causes past causesShown
	Fleet     bool        // more than fleetHosts hosts: charts aggregate, host sections fold
	Counts    []ReqCount
	IDs       []string
	Matrix    []matrixRow
	HeatHosts []string
	Heat      []heatRow
	PairList  []pairLine // pairs too many for a grid: one line each, failures and slowest first
	BW, Copy  template.HTML
	Hosts     []hostView
	// A cluster run: the pair x rail heatmap and the suspects.
	RailCols []string
	RailHeat []heatRow
	Cluster  *isolate.Summary
	Domains  string        // which NVLink domain each host published (domainsLine), "" without any
	Findings []findingView // isolation's verdict: each part found bad or not isolated, with its evidence
	Cleared  []string      // hosts isolation cleared, one line each
	// Unfinished: hosts whose run did not finish; Flaky: links that failed
	// once and passed on re-test. One line each.
	Unfinished, Flaky []string
	// SoakHosts are the hosts that ran a soak, one row each (merges).
	SoakHosts []soakFleetRow
}

// findingView is one cluster finding as the page shows it.
type findingView struct {
	Part, Verdict, Reason, AtFault string
	Evidence                       []string
}

// A name with any other character is mapped and given 8 hex digits of its
// SHA-256, so that two host names the mapping would join ("gpu.01" and
// "gpu_01") keep apart: the anchors and the per-host file names (the DCGM
// files, written side by side) never collide.
func anchor(s string) string {
	mapped := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
	if mapped == s {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return mapped + "-" + hex.EncodeToString(sum[:4])
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
	d := htmlData{R: r, Many: len(r.Hosts) > 1, Fleet: r.Fleet()}
	if d.Many {
		d.Counts = r.ReqCounts()
	}
	for i, c := range r.Causes {
		v := causeViewOf(c)
		if i < causesShown {
			d.Causes = append(d.Causes, v)
		} else {
			d.More = append(d.More, v)
		}
	}
	shown := map[string]bool{} // opt-in requirements: a column only where some host was asked
	for _, h := range r.Hosts {
		for _, rq := range h.Reqs {
			shown[rq.ID] = true
		}
	}
	for _, rq := range reqs.All() {
		if rq.OptIn == "" || shown[rq.ID] {
			d.IDs = append(d.IDs, rq.ID)
		}
	}
	detail := 0 // bytes of trees and output so far (fleetDetailBytes)
	for _, h := range r.hostsFailuresFirst() {
		row := matrixRow{Host: h.Named(), Anchor: anchor(h.Identity.Host), Verdict: h.Verdict.Verdict, Line: h.Verdict.Line}
		by := map[string]*ReqResult{}
		for _, rq := range h.Reqs {
			by[rq.ID] = rq
		}
		for _, id := range d.IDs {
			rq := by[id]
			c := matrixCell{Class: "notrun", Mark: "–", Tip: id + ": not run"}
			if rq != nil {
				c.Class = strings.ReplaceAll(string(rq.Status), " ", "")
				c.Mark = map[Status]string{Pass: "P", Fail: "F", Skip: "S", NotRun: "–", HostOnly: "H"}[rq.Status]
				if rq.Level == string(reqs.ReportOnly) {
					c.Mark = strings.ToLower(c.Mark)
				}
				c.Tip = ""
				switch {
				case !d.Fleet:
					c.Tip = fmt.Sprintf("%s %s on %s: %s", id, rq.Status, h.Identity.Host, clip(rq.Reason, 200))
				case rq.Status == Fail:
					// A fleet's failed cells name the cause, the host's section
					// the rest; its other cells go without a tip (a megabyte at
					// 1024 hosts): the column and the host's section say it.
					c.Tip = fmt.Sprintf("%s %s on %s: %s", id, rq.Status, h.Identity.Host, clip(causeKey(rq.Reason), 80))
				}
			}
			row.Cells = append(row.Cells, c)
		}
		d.Matrix = append(d.Matrix, row)
		full := !d.Fleet || h.Verdict.Verdict == NotQualified && detail < fleetDetailBytes
		v := hostViewOf(h, d.Many, d.Fleet, full)
		if d.Fleet && full {
			detail += v.detailBytes()
		}
		d.Hosts = append(d.Hosts, v)
		if d.Many && h.Soak != nil {
			d.SoakHosts = append(d.SoakHosts, soakFleetRowOf(h))
		}
	}
	if pairs := Pairs(r.Hosts); len(pairs) > 0 {
		d.HeatHosts, d.Heat, d.PairList = heatmap(pairs)
	}
	d.RailCols, d.RailHeat = r.railHeat()
	d.Cluster = r.Cluster
	if r.Cluster != nil {
		d.Domains = domainsLine(r.Cluster.Hosts)
	}
	if f := r.Findings; f != nil {
		for _, s := range f.Suspects {
			v := findingView{Part: s.Name(), Verdict: string(s.Verdict), Reason: s.Reason}
			if s.AtFault != nil {
				v.AtFault = s.AtFault.String()
			}
			for _, e := range s.Evidence {
				v.Evidence = append(v.Evidence, evidenceLine(e))
			}
			d.Findings = append(d.Findings, v)
		}
		for _, c := range f.Cleared {
			d.Cleared = append(d.Cleared, c.Line)
		}
		for _, u := range f.Unfinished {
			d.Unfinished = append(d.Unfinished, u.Reason)
		}
		for _, fl := range f.Flaky {
			d.Flaky = append(d.Flaky, fl.Reason)
		}
	}
	d.BW = template.HTML(BandwidthSVG(r.Hosts))
	d.Copy = template.HTML(CopySVG(r.Hosts))
	return page.Execute(w, d)
}

func causeViewOf(c *HostsCause) causeView {
	v := causeView{Status: c.Status, Hosts: plural(len(c.Hosts), "host", "hosts"), Key: c.Key, Remedy: c.Remedy,
		HostList: clip(c.HostList, 240), Reqs: c.reqList()}
	v.Reqs = c.reqList()
	if c.Example != c.Key {
		v.Example = c.example()
	}
	var tip []string
	if v.HostList != c.HostList {
		tip = append(tip, c.HostList)
	}
	if clipped := clip(v.Example, 300); clipped != v.Example {
		tip, v.Example = append(tip, v.Example), clipped
	}
	v.Tip = strings.Join(tip, "\n")
	return v
}

// fleetHosts is the most hosts drawn one by one: above it charts show
// distributions, and host sections fold.
const fleetHosts = 10

// fleetOutputLines bounds a fleet host's test output in the page.
const fleetOutputLines = 40

// fleetDetailBytes bounds what a fleet's page spends on the PCIe trees and
// test output of its hosts that are not qualified: past it their sections
// are short too (the causes at the top say what they share; junit.xml and
// test.json keep every line). 1024 failed 8-rail hosts drew 280 MB.
const fleetDetailBytes = 6 << 20

// hostViewOf is a host's section; full: with its PCIe tree and test
// output (a fleet's short sections have neither).
func hostViewOf(h *HostResult, many, fleet, full bool) hostView {
	v := hostView{H: h, Anchor: anchor(h.Identity.Host), Ident: identityLines(h.Identity)}
	if many {
		v.Prefix = anchor(h.Identity.Host) + "-"
	}
	v.Compact = fleet && !full
	v.Open = !fleet || h.Verdict.Verdict == NotQualified
	v.Note = "PCIe tree and test output: shown for hosts that are not qualified; this host's are in its junit.xml and test.json."
	if h.Verdict.Verdict == NotQualified {
		v.Note = fmt.Sprintf("PCIe tree and test output: shown for the first hosts that are not qualified, up to %d MB of the page; this host's are in its junit.xml and test.json.", fleetDetailBytes>>20)
	}
	for _, rq := range failuresFirst(h.Reqs) {
		switch {
		case fleet && rq.Status == Pass:
			v.Passed = append(v.Passed, rq.ID)
		case v.Compact && rq.Cause != "":
			v.InCauses++ // the cause above names it
		default:
			v.Reqs = append(v.Reqs, rq)
		}
	}
	if v.Compact {
		return v
	}
	v.Soak = soakViewOf(h)
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
	limit := maxOutputLines
	if fleet {
		limit = fleetOutputLines
	}
	for _, c := range h.Cases() {
		if c.Status() == Pass && many || fleet && c.Status() != Fail {
			continue
		}
		out := c.Output
		if len(out) > limit {
			out = append(append([]string{}, out[:limit]...), fmt.Sprintf("... %d more lines in junit.xml", len(c.Output)-limit))
		}
		name := c.Name
		if rd := roundOf(c.Package); rd != "" {
			name += " (" + rd + ")"
		}
		v.Details = append(v.Details, detail{Name: name, Req: c.Req, Message: c.Message, Output: strings.Join(out, "\n"), Status: c.Status()})
	}
	return v
}

// detailBytes is what the section's tree and test output weigh.
func (v hostView) detailBytes() int {
	n := len(v.Tree)
	if v.Soak != nil {
		for _, c := range append(append([]template.HTML(nil), v.Soak.Rails...), v.Soak.GPUs...) {
			n += len(c)
		}
	}
	for _, d := range v.Details {
		n += len(d.Output) + len(d.Message)
	}
	return n
}

// heatGrid is the most clients or servers laid out as a grid; more pairs
// are listed one per line.
const heatGrid = 32

// heatStyle colours a pair against its floor, not against the other pairs:
// green at or above the floor (a passing pair is never red), orange to red
// below it, outlined red when the case failed; grey-blue with no floor.
func heatStyle(p PairBW) template.CSS {
	var bg string
	switch {
	case p.Floor <= 0 && p.Status != Fail:
		bg = "hsl(210,40%,88%)"
	case p.Status != Fail && p.Gbits >= p.Floor:
		bg = "hsl(120,45%,78%)"
	default:
		f := 0.0
		if p.Floor > 0 {
			f = math.Min(1, math.Max(0, p.Gbits/p.Floor))
		}
		bg = fmt.Sprintf("hsl(%d,75%%,80%%)", int(35*f)) // red (0) far below the floor, orange (35) just below
	}
	css := "background:" + bg
	if p.Status == Fail {
		css += ";outline:3px solid #cf222e"
	}
	return template.CSS(css)
}

func heatTip(p PairBW) string {
	tip := fmt.Sprintf("%s -> %s: %s Gbit/s (%s)", p.Client, p.Server, fmtNum(p.Gbits), p.Status)
	if p.Floor > 0 {
		tip += fmt.Sprintf("; floor %s Gbit/s", fmtNum(p.Floor))
	}
	return tip
}

// heatmap lays pairs out as a client x server grid (rows the hosts that ran
// as client, columns those that ran as server), failed clients and servers
// first; above heatGrid of either it lists the pairs instead, failed and
// slowest against their floor first.
func heatmap(pairs []PairBW) ([]string, []heatRow, []pairLine) {
	bad := func(p PairBW) bool { return p.Status == Fail || p.Floor > 0 && p.Gbits < p.Floor }
	cset, sset := map[string]bool{}, map[string]bool{}
	for _, p := range pairs {
		cset[p.Client] = cset[p.Client] || bad(p)
		sset[p.Server] = sset[p.Server] || bad(p)
	}
	if len(cset) > heatGrid || len(sset) > heatGrid {
		ps := append([]PairBW(nil), pairs...)
		rel := func(p PairBW) float64 {
			if p.Floor > 0 {
				return p.Gbits / p.Floor
			}
			return math.Inf(1)
		}
		sort.SliceStable(ps, func(i, j int) bool {
			if bad(ps[i]) != bad(ps[j]) {
				return bad(ps[i])
			}
			if ri, rj := rel(ps[i]), rel(ps[j]); ri != rj {
				return ri < rj
			}
			return ps[i].Gbits < ps[j].Gbits
		})
		var out []pairLine
		for _, p := range ps {
			t := fmtNum(p.Gbits)
			if p.Status == Fail {
				t += " ✗"
			}
			out = append(out, pairLine{Client: p.Client, Server: p.Server, Text: t, Tip: heatTip(p), Style: heatStyle(p)})
		}
		return nil, nil, out
	}
	sorted := func(m map[string]bool) []string {
		var out []string
		for h := range m {
			out = append(out, h)
		}
		sort.Slice(out, func(i, j int) bool {
			if m[out[i]] != m[out[j]] {
				return m[out[i]]
			}
			return out[i] < out[j]
		})
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
			cell := heatCell{Text: fmtNum(p.Gbits), Tip: heatTip(p), Style: heatStyle(p)}
			if p.Status == Fail {
				cell.Text += " ✗"
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return servers, rows, nil
}
