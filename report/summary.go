package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// Counts of a host's requirements by status.
type Counts struct {
	Pass, Fail, Skip, NotRun, Cases int
}

// Counts counts the host's requirements and counted cases.
func (h *HostResult) Counts() Counts {
	var c Counts
	for _, r := range h.Reqs {
		switch r.Status {
		case Pass:
			c.Pass++
		case Fail:
			c.Fail++
		case Skip:
			c.Skip++
		default:
			c.NotRun++
		}
	}
	c.Cases = len(h.Cases())
	return c
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
	if id.Role != "" {
		lines = append(lines, [2]string{"role", strings.TrimSpace(id.Role + " " + id.Peer)})
	}
	return lines
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

// WriteText writes summary.txt: the verdict, the host, shared causes first,
// then one line per requirement (and its numbers or reason below it).
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "GPUDirect RDMA qualification: %s\n  %s\n", r.Verdict.Line, r.Verdict.Advice)
	for _, f := range r.Verdict.Flags {
		fmt.Fprintf(&b, "  FLAG: %s\n", f)
	}
	if len(r.Hosts) > 1 {
		fmt.Fprintf(&b, "\n%-24s %-28s %5s %5s %5s %7s\n", "host", "verdict", "pass", "fail", "skip", "not run")
		for _, h := range r.Hosts {
			c := h.Counts()
			fmt.Fprintf(&b, "%-24s %-28s %5d %5d %5d %7d\n", h.Identity.Host, h.Verdict.Line, c.Pass, c.Fail, c.Skip, c.NotRun)
		}
	}
	r.clusterText(&b)
	for _, h := range r.Hosts {
		writeHostText(&b, h, len(r.Hosts) > 1)
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
	for _, rq := range h.Reqs {
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
	}
	for _, o := range h.Other {
		if o.Status != Pass || !many {
			fmt.Fprintf(b, "  %-8s %-7s %s (%s, no requirement) %s\n", "-", strings.ToUpper(string(o.Status)), o.Name, o.Area, o.Message)
		}
	}
	c := h.Counts()
	fmt.Fprintf(b, "\nrequirements: %d passed, %d failed, %d skipped, %d not run (%d test cases)\n", c.Pass, c.Fail, c.Skip, c.NotRun, c.Cases)
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "<", "&lt;")
	return strings.ReplaceAll(s, "\n", " ")
}

var statusMark = map[Status]string{Pass: "✅ pass", Fail: "❌ FAIL", Skip: "⏭️ skip", NotRun: "⬜ not run"}

// WriteMarkdown writes summary.md, for CI systems that show Markdown (a
// GitLab or Jenkins job summary, a merge request comment).
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# GPUDirect RDMA qualification: %s\n\n%s\n", r.Verdict.Line, r.Verdict.Advice)
	for _, f := range r.Verdict.Flags {
		fmt.Fprintf(&b, "\n**Flag:** %s\n", mdEscape(f))
	}
	if len(r.Hosts) > 1 {
		fmt.Fprintf(&b, "\n| host | verdict | pass | fail | skip | not run |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, h := range r.Hosts {
			c := h.Counts()
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d |\n", mdEscape(h.Identity.Host), h.Verdict.Line, c.Pass, c.Fail, c.Skip, c.NotRun)
		}
	}
	r.clusterMarkdown(&b)
	for _, h := range r.Hosts {
		fmt.Fprintf(&b, "\n## %s: %s%s\n\n%s\n\n| | |\n| --- | --- |\n", mdEscape(h.Identity.Host), h.Verdict.Line, h.RunNote(), h.Verdict.Advice)
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
		for _, rq := range h.Reqs {
			var nums []string
			for _, n := range rq.Nums {
				nums = append(nums, mdEscape(n.String()))
			}
			why := rq.Reason
			if rq.Cause != "" {
				why = "shared cause: " + rq.Cause
			} else if rq.Remedy != "" {
				why += "; remedy: " + rq.Remedy
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", rq.ID, mdEscape(rq.Title), rq.Level, statusMark[rq.Status], strings.Join(nums, "<br>"), mdEscape(why))
		}
		if len(h.Other) > 0 {
			fmt.Fprintf(&b, "\nOther tests (no requirement): ")
			var s []string
			for _, o := range h.Other {
				s = append(s, fmt.Sprintf("%s/%s %s", o.Area, o.Name, o.Status))
			}
			fmt.Fprintf(&b, "%s\n", mdEscape(strings.Join(s, ", ")))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
	// A cluster run's: the host's fabric state (cluster/isolate) and the
	// rails found bad on it.
	Fabric   isolate.State `json:"fabric,omitempty"`
	BadRails []int         `json:"bad_rails,omitempty"`
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
	var hosts []hostJSON
	for _, h := range r.Hosts {
		hj := hostJSON{Host: h.Identity.Host, Verdict: h.Verdict.Verdict, Line: h.Verdict.Line, Advice: h.Verdict.Advice,
			Failed: h.Verdict.Failed, NotRun: h.Verdict.NotRun, Identity: h.Identity, Reqs: h.Reqs, Causes: h.Causes, Errors: h.Errors, Other: h.Other, Earlier: h.Earlier}
		if f := r.fabric(h.Identity.Host); f != nil {
			hj.Fabric, hj.BadRails = f.Fabric, f.BadRails
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
	if len(r.Hosts) == 1 {
		h := r.Hosts[0]
		out["host"] = h.Identity
		out["requirements"] = h.Reqs
		out["shared_causes"] = h.Causes
		out["errors"] = h.Errors
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
