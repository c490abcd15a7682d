// The summary as markdown (summary.md, a CI job's page).

package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

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
	if many {
		// Every soaked host's line: the host sections below are the failed
		// hosts' only.
		var lines []string
		for _, h := range hosts {
			if l := soakLine(h); l != "" {
				lines = append(lines, fmt.Sprintf("- %s: %s\n", mdEscape(h.Named()), mdEscape(l)))
			}
		}
		if len(lines) > 0 {
			m.add("\n## Soak\n\n")
			for _, l := range lines {
				m.add(l)
			}
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
	if l := soakLine(h); l != "" {
		fmt.Fprintf(&b, "| soak | %s |\n", mdEscape(l))
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
		} else {
			why = verdict.Line(why, rq.Remedy)
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
