package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/inventory"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// Tally counts requirements by outcome, in the one vocabulary of the
// reports (docs/reports.md, "Counts"): passed, failed, skipped (a test ran
// and skipped: something absent) and not run (no test of it ran).
type Tally struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	NotRun  int `json:"not_run"`
	// HostOnly are requirements not judgeable from a container (Status
	// HostOnly): neither skipped nor failed, and no part of the verdict.
	HostOnly int `json:"host_only,omitempty"`
}

func (t *Tally) add(s Status) {
	switch s {
	case Pass:
		t.Passed++
	case Fail:
		t.Failed++
	case Skip:
		t.Skipped++
	case HostOnly:
		t.HostOnly++
	default:
		t.NotRun++
	}
}

// String is "40 passed, 1 failed, 3 skipped, 2 not run".
func (t Tally) String() string {
	s := fmt.Sprintf("%d passed, %d failed, %d skipped, %d not run", t.Passed, t.Failed, t.Skipped, t.NotRun)
	if t.HostOnly > 0 {
		s += fmt.Sprintf(", %d host only", t.HostOnly)
	}
	return s
}

// Counts of a host's requirements by status: all of them (Pass .. NotRun),
// and must and report-only apart; Cases are the host's JUnit test cases:
// the counted tests (one per requirement and device), a requirement that
// did not run or that its package's failure took down, a package failure
// that took none down, and each failure outside any test (junit.go).
type Counts struct {
	Pass, Fail, Skip, NotRun, Cases int
	Must, ReportOnly                Tally
}

// Counts counts the host's requirements and counted cases.
func (h *HostResult) Counts() Counts {
	var c Counts
	var all Tally
	for _, r := range h.Reqs {
		all.add(r.Status)
		if r.Level == string(reqs.ReportOnly) {
			c.ReportOnly.add(r.Status)
		} else {
			c.Must.add(r.Status)
		}
	}
	c.Pass, c.Fail, c.Skip, c.NotRun = all.Passed, all.Failed, all.Skipped, all.NotRun
	c.Cases = len(h.Cases()) + len(h.runErrs)
	for _, r := range h.Reqs {
		if r.Status == NotRun || r.takenDown() {
			c.Cases++
		}
	}
	for _, p := range h.pkgs {
		if p.Failure != "" && !tookDown(h, p.Area) {
			c.Cases++
		}
	}
	return c
}

// line is a host's tally in words, must and report-only apart.
func (c Counts) line() string {
	return fmt.Sprintf("must requirements: %s; report-only: %s (%d test cases)", c.Must, c.ReportOnly, c.Cases)
}

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
			"VBIOS", g.VBIOS, "InfoROM", g.InfoROM, "UUID", g.UUID)})
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

// ReqCount is one requirement across the hosts of a merge: how many hosts
// it passed, failed, skipped or did not run on, and the hosts it failed on.
type ReqCount struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Level string `json:"level"`
	Hosts int    `json:"hosts"`
	Tally
	FailedOn []string `json:"failed_on,omitempty"`
}

// String is "GPU-09 63/64 passed, 1 failed (gpu17)".
func (c ReqCount) String() string {
	s := fmt.Sprintf("%s %d/%d passed", c.ID, c.Passed, c.Hosts)
	for _, p := range []struct {
		n    int
		what string
	}{{c.Failed, "failed"}, {c.Skipped, "skipped"}, {c.NotRun, "not run"}} {
		if p.n > 0 {
			s += fmt.Sprintf(", %d %s", p.n, p.what)
		}
	}
	if len(c.FailedOn) > 0 {
		s += " (" + nameHosts(c.FailedOn) + ")"
	}
	return s
}

// ReqCounts are the per-requirement counts across the report's hosts, in
// the catalogue's order, failures first.
func (r *Report) ReqCounts() []ReqCount {
	var out []ReqCount
	idx := map[string]int{}
	for _, h := range r.Hosts {
		if h.Earlier {
			continue // superseded by a later run of the host: not counted
		}
		for _, rq := range h.Reqs {
			i, ok := idx[rq.ID]
			if !ok {
				i = len(out)
				idx[rq.ID] = i
				out = append(out, ReqCount{ID: rq.ID, Title: rq.Title, Level: rq.Level})
			}
			c := &out[i]
			c.Hosts++
			c.add(rq.Status)
			if rq.Status == Fail {
				c.FailedOn = append(c.FailedOn, h.Identity.Host)
			}
		}
	}
	rank := func(c ReqCount) int {
		switch {
		case c.Failed > 0:
			return 0
		case c.Skipped > 0:
			return 1
		case c.NotRun > 0:
			return 2
		}
		return 3
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// fleetTally sums the hosts' counts: verdicts, and must and report-only
// requirements over every host.
type fleetTally struct {
	Verdicts         map[string]int
	Must, ReportOnly Tally
	Cases            int
}

func (r *Report) fleetTally() fleetTally {
	t := fleetTally{Verdicts: map[string]int{}}
	for _, h := range r.Hosts {
		if h.Earlier {
			continue // superseded by a later run of the host: not counted
		}
		t.Verdicts[h.Verdict.Verdict]++
		c := h.Counts()
		for _, p := range [][2]*Tally{{&t.Must, &c.Must}, {&t.ReportOnly, &c.ReportOnly}} {
			p[0].Passed += p[1].Passed
			p[0].Failed += p[1].Failed
			p[0].Skipped += p[1].Skipped
			p[0].NotRun += p[1].NotRun
			p[0].HostOnly += p[1].HostOnly
		}
		t.Cases += c.Cases
	}
	return t
}

// line is the merged total: the last line of a merged summary.txt.
func (t fleetTally) line() string {
	hosts := t.hosts()
	return fmt.Sprintf("total over %d hosts: %d %s, %d %s, %d %s; must requirements (summed over hosts): %s; report-only: %s (%d test cases)",
		hosts, t.Verdicts[NotQualified], NotQualified, t.Verdicts[Incomplete], Incomplete, t.Verdicts[Qualified], Qualified, t.Must, t.ReportOnly, t.Cases)
}

// hosts is how many hosts judge (earlier runs of a host do not).
func (t fleetTally) hosts() int {
	n := 0
	for _, v := range t.Verdicts {
		n += v
	}
	return n
}

// WriteText writes summary.txt: the verdict, the host, shared causes first,
// then one line per requirement (and its numbers or reason below it), failed
// ones first. Many hosts: a table of hosts and one of requirements across
// hosts first, and the merged total as the last line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "GPUDirect RDMA qualification: %s\n  %s\n", r.Verdict.Line, r.Verdict.Advice)
	for _, f := range r.Verdict.Flags {
		fmt.Fprintf(&b, "  FLAG: %s\n", f)
	}
	many := len(r.Hosts) > 1
	if bad := r.BadNodes(); many && len(bad) > 0 {
		var nodes []string
		for _, n := range bad {
			nodes = append(nodes, n.Node)
		}
		fmt.Fprintf(&b, "  nodes to drain: %s (the scontrol and kubectl lines are in %s)\n", hostlist.Compress(nodes), ActionsFile)
	}
	if rr := r.Rerun(); rr != nil {
		fmt.Fprintf(&b, "  nodes to rerun: %s, with known-good %s (the commands are in %s)\n",
			hostlist.Compress(append(slices.Clone(rr.Nodes), rr.Pods...)), noneLeft(hostlist.Compress(rr.Good)), ActionsFile)
	}
	hosts := r.hostsFailuresFirst()
	if many && len(r.Causes) > 0 {
		fmt.Fprintf(&b, "\nWhy, each cause once with its hosts (failed first; each host's rows are below):\n")
		for i, c := range r.Causes {
			if i == causesListed {
				fmt.Fprintf(&b, "  ... %d more causes in report.html and summary.json\n", len(r.Causes)-i)
				break
			}
			fmt.Fprintf(&b, "  %-10s %-8s %s: %s\n", plural(len(c.Hosts), "host", "hosts"), strings.ToUpper(string(c.Status)), c.reqList(), c.Key)
			if c.Example != c.Key {
				fmt.Fprintf(&b, "%21s%s\n", "", clip(c.example(), 240))
			}
			if c.Remedy != "" {
				fmt.Fprintf(&b, "%21sremedy: %s\n", "", c.Remedy)
			}
			fmt.Fprintf(&b, "%21son %s\n", "", c.HostList)
		}
	}
	if many {
		fmt.Fprintf(&b, "\n%-24s %-14s %-36s %s\n", "host", "verdict", "must: passed/failed/skipped/not run", "report-only failed")
		for _, h := range hosts {
			c := h.Counts()
			fmt.Fprintf(&b, "%-24s %-14s %-36s %d\n", h.Named(), h.Verdict.Verdict,
				fmt.Sprintf("%d/%d/%d/%d", c.Must.Passed, c.Must.Failed, c.Must.Skipped, c.Must.NotRun), c.ReportOnly.Failed)
		}
		fmt.Fprintf(&b, "\nRequirements across hosts (failed first):\n")
		for _, c := range r.ReqCounts() {
			fmt.Fprintf(&b, "  %-12s %s\n", c.Level, c)
		}
	}
	r.clusterText(&b)
	for _, h := range hosts {
		writeHostText(&b, h, many)
	}
	if many {
		fmt.Fprintf(&b, "\n%s\n", r.fleetTally().line())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHostText(b *strings.Builder, h *HostResult, many bool) {
	fmt.Fprintf(b, "\n")
	if many {
		fmt.Fprintf(b, "== %s: %s%s\n", h.Identity.Host, h.Verdict.Line, h.RunNote())
	}
	for _, l := range identityLines(h.Identity) {
		fmt.Fprintf(b, "%-8s %s\n", l[0], l[1])
	}
	for _, e := range h.Errors {
		fmt.Fprintf(b, "\nFAILED OUTSIDE ANY TEST: %s\n", e)
	}
	if len(h.Causes) > 0 {
		fmt.Fprintf(b, "\nShared causes (one root cause each; the requirements it affects):\n")
		for _, c := range h.Causes {
			fmt.Fprintf(b, "  %s  %s: %d requirements: %s\n", strings.ToUpper(string(c.Status)), c.Key, len(c.Reqs), strings.Join(c.Reqs, " "))
			if c.Example != c.Key {
				fmt.Fprintf(b, "        %s\n", c.Example)
			}
			if c.Remedy != "" {
				fmt.Fprintf(b, "        remedy: %s\n", c.Remedy)
			}
		}
	}
	fmt.Fprintf(b, "\nRequirements:\n")
	for _, rq := range failuresFirst(h.Reqs) {
		if many && (rq.Status == Pass || rq.Cause != "") {
			continue // many hosts: passing rows, and those under a shared cause, are in summary.md and report.html
		}
		lvl := ""
		if rq.Level != "must" {
			lvl = " (" + rq.Level + ")"
		}
		fmt.Fprintf(b, "  %-8s %-7s %s%s\n", rq.ID, strings.ToUpper(string(rq.Status)), clip(rq.Title, 90), lvl)
		shown, more := headline(rq.Nums, 3)
		for _, s := range shown {
			fmt.Fprintf(b, "                   %s\n", s)
		}
		if more > 0 {
			fmt.Fprintf(b, "                   ... %d more numbers in summary.md and report.html\n", more)
		}
		switch {
		case rq.Cause != "":
			fmt.Fprintf(b, "                   [%s: see shared causes]\n", rq.Cause)
		case rq.Reason != "":
			fmt.Fprintf(b, "                   %s\n", rq.Reason)
			if rq.Remedy != "" {
				fmt.Fprintf(b, "                   remedy: %s\n", rq.Remedy)
			}
		}
		if rq.Part != nil && rq.Cause == "" {
			fmt.Fprintf(b, "                   part: %s\n", rq.Part)
		}
	}
	for _, o := range h.Other {
		if o.Status != Pass || !many {
			fmt.Fprintf(b, "  %-8s %-7s %s (%s, no requirement) %s\n", "-", strings.ToUpper(string(o.Status)), o.Name, o.Area, o.Message)
		}
	}
	label := ""
	if many {
		label = h.Identity.Host + ": "
	}
	fmt.Fprintf(b, "\n%s%s\n", label, h.Counts().line())
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "<", "&lt;")
	return strings.ReplaceAll(s, "\n", " ")
}

var statusMark = map[Status]string{Pass: "✅ pass", Fail: "❌ FAIL", Skip: "⏭️ skip", NotRun: "⬜ not run", HostOnly: "🖥️ host only"}

// Budgets of summary.md: a GitHub or GitLab comment takes 65,536
// characters, a GitHub job's step summary 1 MiB. Past its budget summary.md
// stops, says so, and leaves the rest to report.html.
const (
	mdHostLimit   = 60000
	mdMergedLimit = 960 << 10
	mdNumbers     = 3 // numbers shown per requirement row; the rest are in report.html
)

// mdWriter is summary.md under construction with a budget: once a part
// would pass it, nothing more is added but the note where the rest is.
type mdWriter struct {
	b       strings.Builder
	limit   int
	dropped int // rows or sections left out
}

// add adds s when it fits the budget, else counts it as left out.
func (m *mdWriter) add(s string) bool {
	if m.dropped > 0 || m.b.Len()+len(s) > m.limit {
		m.dropped++
		return false
	}
	m.b.WriteString(s)
	return true
}

// WriteMarkdown writes summary.md, for CI systems that show Markdown (a
// GitLab or Jenkins job summary, a merge request comment): compact, failed
// rows first, within mdHostLimit characters for one host and mdMergedLimit
// merged. Many hosts: a table of the hosts that are not qualified, the
// requirements across hosts, then the failed and skipped requirements of
// each host that is not qualified; passed rows are in report.html.
func (r *Report) WriteMarkdown(w io.Writer) error {
	m := &mdWriter{limit: mdHostLimit}
	many := len(r.Hosts) > 1
	if many {
		m.limit = mdMergedLimit
	}
	m.add(fmt.Sprintf("# GPUDirect RDMA qualification: %s\n\n%s\n", mdEscape(r.Verdict.Line), mdEscape(r.Verdict.Advice)))
	for _, f := range r.Verdict.Flags {
		m.add(fmt.Sprintf("\n**Flag:** %s\n", mdEscape(f)))
	}
	hosts := r.hostsFailuresFirst()
	if many {
		t := r.fleetTally()
		m.add(fmt.Sprintf("\n%d hosts: %d %s, %d %s, %d %s. Must requirements summed over hosts: %s; report-only: %s.\n",
			t.hosts(), t.Verdicts[NotQualified], NotQualified, t.Verdicts[Incomplete], Incomplete, t.Verdicts[Qualified], Qualified, t.Must, t.ReportOnly))
		if len(r.Causes) > 0 {
			m.add("\n## Why\n\nEach cause once, with the hosts it holds on; failed first.\n\n| hosts | status | requirements | cause | remedy | on |\n| --- | --- | --- | --- | --- | --- |\n")
			for i, c := range r.Causes {
				if i == causesListed {
					m.add(fmt.Sprintf("\n%d more causes are in report.html and summary.json.\n", len(r.Causes)-i))
					break
				}
				m.add(fmt.Sprintf("| %d | %s | %s | %s | %s | %s |\n", len(c.Hosts), statusMark[c.Status], c.reqList(), mdEscape(c.Key), mdEscape(c.Remedy), mdEscape(clip(c.HostList, 400))))
			}
		}
		m.add("\n## Requirements across hosts\n\n| ID | level | passed | failed | skipped | not run | failed on |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, c := range r.ReqCounts() {
			m.add(fmt.Sprintf("| %s | %s | %d/%d | %d | %d | %d | %s |\n", c.ID, c.Level, c.Passed, c.Hosts, c.Failed, c.Skipped, c.NotRun, mdEscape(nameHosts(c.FailedOn))))
		}
		m.add("\n## Hosts\n\n| host | verdict | must passed | failed | skipped | not run | report-only failed |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		shown := 0
		for _, h := range hosts {
			c := h.Counts()
			if h.Verdict.Verdict == Qualified && shown >= 50 {
				continue // qualified hosts past the first 50 are counted above
			}
			if m.add(fmt.Sprintf("| %s | %s | %d | %d | %d | %d | %d |\n", mdEscape(h.Named()), mdEscape(h.Verdict.Line), c.Must.Passed, c.Must.Failed, c.Must.Skipped, c.Must.NotRun, c.ReportOnly.Failed)) {
				shown++
			}
		}
		if shown < len(hosts) {
			m.dropped = 0
			m.add(fmt.Sprintf("\n%d of %d hosts listed (failed first); every host is in report.html and summary.json.\n", shown, len(hosts)))
		}
	}
	r.clusterMarkdown(&m.b)
	left := 0
	for _, h := range hosts {
		if many && h.Verdict.Verdict != NotQualified {
			continue // their rows are in report.html; the tables above count them
		}
		if !writeHostMarkdown(m, h, many) {
			left++
		}
	}
	if m.dropped > 0 || left > 0 {
		m.dropped = 0
		m.limit += 1 << 10 // the note always fits
		m.add("\n*summary.md stops here to stay within a CI comment's size: the remaining hosts and rows are in report.html (and summary.json).*\n")
	}
	_, err := io.WriteString(w, m.b.String())
	return err
}

// writeHostMarkdown adds one host's section; many hosts: only its rows that
// did not pass. It reports whether all of it fitted.
func writeHostMarkdown(m *mdWriter, h *HostResult, many bool) bool {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## %s: %s%s\n\n%s\n\n| | |\n| --- | --- |\n", mdEscape(h.Identity.Host), mdEscape(h.Verdict.Line), h.RunNote(), mdEscape(h.Verdict.Advice))
	for _, l := range identityLines(h.Identity) {
		fmt.Fprintf(&b, "| %s | %s |\n", l[0], mdEscape(l[1]))
	}
	for _, e := range h.Errors {
		fmt.Fprintf(&b, "\n**Failed outside any test:** %s\n", mdEscape(e))
	}
	if len(h.Causes) > 0 {
		fmt.Fprintf(&b, "\n### Shared causes\n\n")
		for _, c := range h.Causes {
			fmt.Fprintf(&b, "- **%s** (%s, %d requirements: %s)  \n  %s", mdEscape(c.Key), c.Status, len(c.Reqs), strings.Join(c.Reqs, ", "), mdEscape(c.Example))
			if c.Remedy != "" {
				fmt.Fprintf(&b, "  \n  remedy: %s", mdEscape(c.Remedy))
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "\n### Requirements\n\n| ID | requirement | level | status | numbers | reason or remedy |\n| --- | --- | --- | --- | --- | --- |\n")
	if !m.add(b.String()) {
		return false
	}
	passed := 0
	for _, rq := range failuresFirst(h.Reqs) {
		if many && rq.Status == Pass {
			passed++
			continue
		}
		var nums []string
		for i, n := range rq.Nums {
			if i == mdNumbers {
				nums = append(nums, fmt.Sprintf("… %d more in report.html", len(rq.Nums)-mdNumbers))
				break
			}
			nums = append(nums, mdEscape(n.String()))
		}
		why := rq.Reason
		if rq.Cause != "" {
			why = "shared cause: " + rq.Cause
		} else if rq.Remedy != "" {
			why += "; remedy: " + rq.Remedy
		}
		if rq.Part != nil && rq.Cause == "" {
			why += "; part: " + rq.Part.String()
		}
		if !m.add(fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", rq.ID, mdEscape(rq.Title), rq.Level, statusMark[rq.Status], strings.Join(nums, "<br>"), mdEscape(clip(why, 400)))) {
			return false
		}
	}
	if passed > 0 {
		m.add(fmt.Sprintf("\n%d passed requirements are in report.html.\n", passed))
	}
	if len(h.Other) > 0 {
		var s []string
		for _, o := range h.Other {
			s = append(s, fmt.Sprintf("%s/%s %s", o.Area, o.Name, o.Status))
		}
		return m.add(fmt.Sprintf("\nOther tests (no requirement): %s\n", mdEscape(clip(strings.Join(s, ", "), 2000))))
	}
	return true
}

// hostJSON is one host in summary.json.
type hostJSON struct {
	Host     string       `json:"host"`
	Verdict  string       `json:"verdict"`
	Line     string       `json:"line"`
	Advice   string       `json:"advice"`
	Failed   int          `json:"failed"`
	NotRun   int          `json:"not_run"`
	Identity Identity     `json:"identity"`
	Reqs     []*ReqResult `json:"requirements"`
	Causes   []*Cause     `json:"shared_causes,omitempty"`
	Errors   []string     `json:"errors,omitempty"`
	Other    []OtherCase  `json:"other_tests,omitempty"`
	Earlier  bool         `json:"earlier_run,omitempty"` // superseded by a later run of the host: not in the verdict
	// A cluster run's: the host's fabric state (cluster/isolate), the
	// rails found bad on it, and its liveness where its run did not
	// finish ("did not start", "stopped in round <k>"; docs/clusters.md).
	Fabric   isolate.State `json:"fabric,omitempty"`
	BadRails []int         `json:"bad_rails,omitempty"`
	Liveness string        `json:"liveness,omitempty"`
	Counts   countsJSON    `json:"counts"`
}

// countsJSON is summary.json's "counts": requirements by outcome, must and
// report-only apart, and the counted test cases.
type countsJSON struct {
	Must       Tally `json:"must"`
	ReportOnly Tally `json:"report_only"`
	Cases      int   `json:"cases"`
}

// WriteJSON writes summary.json. Always: verdict, line, hosts (each with host,
// verdict and requirements, each requirement with id and status). One host:
// also host (its identity), requirements and shared_causes at the top.
func (r *Report) WriteJSON(w io.Writer) error {
	out := map[string]any{
		"verdict": r.Verdict.Verdict, "line": r.Verdict.Line, "advice": r.Verdict.Advice,
		"failed": r.Verdict.Failed, "not_run": r.Verdict.NotRun, "suite_version": r.Suite,
		"suite_versions": r.Versions, "exit_code": r.ExitCode(),
	}
	if len(r.Verdict.Flags) > 0 {
		out["flags"] = r.Verdict.Flags
	}
	if len(r.Drift) > 0 {
		out["inventory_drift"] = r.Drift
	}
	var hosts []hostJSON
	for _, h := range r.Hosts {
		hj := hostJSON{Host: h.Identity.Host, Verdict: h.Verdict.Verdict, Line: h.Verdict.Line, Advice: h.Verdict.Advice,
			Failed: h.Verdict.Failed, NotRun: h.Verdict.NotRun, Identity: h.Identity, Reqs: h.Reqs, Causes: h.Causes, Errors: h.Errors, Other: h.Other, Earlier: h.Earlier}
		c := h.Counts()
		hj.Counts = countsJSON{Must: c.Must, ReportOnly: c.ReportOnly, Cases: c.Cases}
		if f := r.fabric(h.Identity.Host); f != nil {
			hj.Fabric, hj.BadRails, hj.Liveness = f.Fabric, f.BadRails, f.Liveness
		}
		hosts = append(hosts, hj)
	}
	out["hosts"] = hosts
	if c := r.Cluster; c != nil {
		// Cluster runs (contract): pairs (a, b, rail, status, bw_gbit_s),
		// suspects (host, rail), links.
		out["pairs"], out["suspects"], out["links"] = c.Pairs, c.Suspects, c.Links
		out["cluster"] = r.Findings // isolation's verdict: suspects (host, rail, part, evidence), cleared
	}
	if len(r.Hosts) > 1 {
		// Merged (added keys): the hosts not qualified and incomplete, each
		// requirement across hosts, and the counts summed over hosts.
		var failed, incomplete []string
		for _, h := range r.Hosts {
			switch h.Verdict.Verdict {
			case NotQualified:
				failed = append(failed, h.Identity.Host)
			case Incomplete:
				incomplete = append(incomplete, h.Identity.Host)
			}
		}
		t := r.fleetTally()
		out["failed_hosts"], out["incomplete_hosts"] = failed, incomplete
		out["requirement_counts"] = r.ReqCounts()
		out["fleet_causes"] = r.Causes
		out["counts"] = countsJSON{Must: t.Must, ReportOnly: t.ReportOnly, Cases: t.Cases}
	}
	if len(r.Hosts) == 1 {
		h := r.Hosts[0]
		out["counts"] = hosts[0].Counts
		out["host"] = h.Identity
		out["requirements"] = h.Reqs
		out["shared_causes"] = h.Causes
		out["errors"] = h.Errors
	}
	if r.Fleet() {
		// A fleet's is tens of MB: not indented (that cost a second), and
		// written a host at a time, never held whole.
		return writeJSONObject(w, out, "hosts")
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// writeJSONObject writes obj as encoding/json writes it unindented (keys
// sorted, HTML not escaped, a newline after), the slice under key list one
// element at a time.
func writeJSONObject(w io.Writer, obj map[string]any, list string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	put := func(v any) error {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		return err
	}
	keys := slices.Sorted(maps.Keys(obj))
	for i, k := range keys {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		if err := put(k); err != nil {
			return err
		}
		if _, err := io.WriteString(w, ":"); err != nil {
			return err
		}
		v := reflect.ValueOf(obj[k])
		if k != list || v.Kind() != reflect.Slice || v.IsNil() {
			if err := put(obj[k]); err != nil {
				return err
			}
			continue
		}
		for j := 0; j < v.Len(); j++ {
			sep := ","
			if j == 0 {
				sep = "["
			}
			if _, err := io.WriteString(w, sep); err != nil {
				return err
			}
			if err := put(v.Index(j).Interface()); err != nil {
				return err
			}
		}
		if v.Len() == 0 {
			if _, err := io.WriteString(w, "["); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, "]"); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		_, err := io.WriteString(w, "{}\n")
		return err
	}
	_, err := io.WriteString(w, "}\n")
	return err
}

// Fleet: more than fleetHosts hosts. Charts aggregate, host sections fold,
// and the files for programs (summary.json, junit.xml) leave out what
// would make them tens of MB: indentation, and the log of passed cases
// (test.json keeps every line).
func (r *Report) Fleet() bool { return len(r.Hosts) > fleetHosts }
