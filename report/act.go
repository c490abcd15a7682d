package report

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// ActionsFile holds the commands that take a merge's bad nodes out of
// service: printed for the operator, never run by the suite.
const ActionsFile = "actions.txt"

// BadNode is a host the report found not qualified, named by its node (a
// Kubernetes pod's node, else the host itself), with what to tell the
// scheduler why.
type BadNode struct {
	Node, Host string
	// Part is the part at fault of its first failure ("nic", "gpu", ...;
	// "host" when none is named; did_not_finish for a cluster host whose
	// run did not finish and that failed nothing before).
	Part  string
	Cause string // its first failed must requirement and why, one line; first its liveness where its run did not finish
}

// BadNodes are the latest runs' hosts that are NOT QUALIFIED, in report
// order.
func (r *Report) BadNodes() []BadNode {
	var out []BadNode
	for _, h := range r.Hosts {
		if h.Earlier || h.Verdict.Verdict != NotQualified {
			continue
		}
		b := BadNode{Node: h.Identity.Node, Host: h.Identity.Host, Part: "host"}
		if b.Node == "" {
			b.Node = h.Identity.Host
		}
		for _, c := range h.Cases() {
			if c.Status() == Fail && c.Part != nil {
				b.Part = c.Part.Kind
				break
			}
		}
		for _, rq := range h.Reqs {
			if rq.Status == Fail && rq.Level != "report-only" {
				b.Cause = rq.ID + ": " + rq.Reason
				break
			}
		}
		if b.Cause == "" && len(h.Errors) > 0 {
			b.Cause = firstOf(h.Errors[0])
		}
		if b.Cause == "" && r.Findings != nil {
			// Failed by cluster isolation alone: its pair tests are the
			// links', the finding names the part.
			for _, s := range r.Findings.Suspects {
				if s.Host == b.Host && s.Part != PartLink && s.Verdict == isolate.Bad {
					b.Cause = s.Name() + " bad: " + firstOf(s.Reason)
					if s.Part == PartRail {
						b.Part = "nic"
					}
					break
				}
			}
		}
		if l := r.Findings.Liveness(h.Identity.Host); l != "" {
			// A node that did not start or stopped mid-run is not
			// qualified and names no part: drained, the reason says why
			// first (a node whose task died keeps taking jobs otherwise),
			// then what it failed before, if anything.
			cause := l + ": its run did not finish"
			if b.Cause != "" {
				cause += "; " + b.Cause
			}
			b.Cause = cause
			if b.Part == "host" {
				b.Part = OutcomeDidNotFinish
			}
		}
		out = append(out, b)
	}
	return out
}

// labelValue is s as a Kubernetes label value: at most 63 characters of
// letters, digits, '-', '_' and '.', starting and ending alphanumeric.
func labelValue(s string) string {
	v := strings.Trim(regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(s, "-"), "-_.")
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-_.")
	}
	if v == "" {
		v = "unknown"
	}
	return v
}

// shellQuote makes s one word for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// WriteActions writes the bad nodes as a Slurm hostlist, the scontrol
// lines that drain them with a reason, and the kubectl lines that taint
// and label them; for a cluster run, the commands that rerun only its
// failed nodes with known-good partners (Rerun). It writes nothing when
// there is nothing to act on.
func (r *Report) WriteActions(w io.Writer) error {
	bad := r.BadNodes()
	rerun := r.Rerun()
	if len(bad) == 0 && rerun == nil {
		return nil
	}
	var s strings.Builder
	if len(bad) > 0 {
		writeDrain(&s, bad)
	}
	if rerun != nil {
		if len(bad) > 0 {
			s.WriteString("\n")
		}
		rerun.write(&s)
	}
	_, err := io.WriteString(w, s.String())
	return err
}

func writeDrain(s *strings.Builder, bad []BadNode) {
	var nodes []string
	for _, b := range bad {
		nodes = append(nodes, b.Node)
	}
	fmt.Fprintf(s, "# gdrconf: %d node(s) not qualified: %s\n", len(bad), hostlist.Compress(nodes))
	s.WriteString("# Printed for the operator; nothing here was run. Node names are the machines', not pods'.\n\n# Slurm:\n")
	for _, b := range bad {
		reason := "gdrconf: " + b.Part + ": " + b.Cause
		if len(reason) > 120 { // slurmctld keeps reasons short; the report has the rest
			reason = reason[:117] + "..."
		}
		fmt.Fprintf(s, "scontrol update nodename=%s state=drain reason=%s\n", b.Node, shellQuote(reason))
	}
	s.WriteString("\n# Kubernetes:\n")
	for _, b := range bad {
		fmt.Fprintf(s, "kubectl taint nodes %s gdrconf.io/not-qualified=%s:NoSchedule --overwrite\n", b.Node, labelValue(b.Part))
		fmt.Fprintf(s, "kubectl label nodes %s gdrconf.io/verdict=not-qualified --overwrite\n", b.Node)
	}
}
