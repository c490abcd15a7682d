// The summary as text (summary.txt, the terminal).

package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
)

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
	if l := soakLine(h); l != "" {
		fmt.Fprintf(b, "%-8s %s\n", "soak", l)
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
