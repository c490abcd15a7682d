// Verdicts of a host and of the run, and the exit code that carries them.

package report

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/soak"
)

func hostVerdict(h *HostResult) Verdict {
	var v Verdict
	c := h.Counts().Must
	must := c.Passed + c.Failed + c.Skipped + c.NotRun // host-only requirements are not counted
	v.Failed, v.NotRun = c.Failed, c.Skipped+c.NotRun
	errs := len(h.Errors)
	switch {
	case v.Failed > 0 || errs > 0:
		v.Verdict = NotQualified
		var why []string
		if v.Failed > 0 || errs == 0 {
			why = append(why, plural(v.Failed, "must requirement", "must requirements")+" failed")
		}
		if errs > 0 {
			why = append(why, plural(errs, "failure", "failures")+" outside any test")
		}
		if sig := h.Identity.Stopped; sig != "" {
			why = append(why, "then stopped by "+sig)
		}
		v.Line = fmt.Sprintf("%s (%s)", NotQualified, strings.Join(why, ", "))
		v.Advice = fmt.Sprintf("%d of %d must requirements failed", v.Failed, must)
		if errs > 0 {
			v.Advice += fmt.Sprintf(", and %s outside any test", plural(errs, "failure", "failures"))
		}
		v.Advice += ": fix the causes below, then run again"
		if sig := h.Identity.Stopped; sig != "" {
			v.Advice += fmt.Sprintf(" (the run was stopped by %s before it ended: what it had not reached was not judged)", sig)
		}
	case len(h.cases) == 0:
		v.Verdict, v.NoTests = Incomplete, true
		v.Line = Incomplete + " (no test ran)"
		v.Advice = "no test ran at all, so nothing about this host is known: look at what the run printed (test.json, the packages' output) for a suite that was not built with its tags (make conformance TAGS=gpu,rdma), a -run pattern that matches nothing (RUN=), or test binaries that never started"
	case v.NotRun > 0:
		v.Verdict = Incomplete
		var why []string
		if sig := h.Identity.Stopped; sig != "" {
			why = append(why, "stopped by "+sig)
		}
		if c.Skipped > 0 {
			why = append(why, plural(c.Skipped, "must requirement", "must requirements")+" skipped")
		}
		if c.NotRun > 0 {
			n := fmt.Sprint(c.NotRun)
			if c.Skipped == 0 {
				n = plural(c.NotRun, "must requirement", "must requirements")
			}
			why = append(why, n+" not run")
		}
		v.Line = fmt.Sprintf("%s (%s)", Incomplete, strings.Join(why, ", "))
		v.Advice = fmt.Sprintf("nothing failed, but %d of %d must requirements did not pass: %d skipped (absent hardware or software), %d not run (no test of them ran): this run does not qualify the host", v.NotRun, must, c.Skipped, c.NotRun)
		if sig := h.Identity.Stopped; sig != "" {
			v.Advice = fmt.Sprintf("the run was stopped by %s (%s) before it ended: nothing failed in what it measured, but %d of %d must requirements were not judged (%d skipped, %d not run or cut short): this run does not qualify the host; %s", sig, soak.StopSource(sig), v.NotRun, must, c.Skipped, c.NotRun, stoppedRemedy)
			break
		}
		if h.Identity.Strict {
			v.Advice += "; GDR_STRICT=1 was set, so these did not run for reasons other than absent hardware (build tags, -run filter)"
		} else {
			v.Advice += "; run with GDR_STRICT=1 (as qualification pipelines do) so that absent hardware fails"
		}
	default:
		v.Verdict = Qualified
		v.Line = Qualified
		v.Advice = fmt.Sprintf("all %d must requirements passed", must)
		if c.HostOnly > 0 {
			v.Advice += fmt.Sprintf("; %s not judgeable from a container (host only: the host's developer environment), judged by a run on the host", plural(c.HostOnly, "requirement is", "requirements are"))
		}
	}
	return v
}

// plural is "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func overall(hs []*HostResult) Verdict {
	if len(hs) == 1 {
		return hs[0].Verdict
	}
	var v Verdict
	var failed, notRun []string
	for _, h := range hs {
		switch h.Verdict.Verdict {
		case NotQualified:
			failed = append(failed, h.Identity.Host)
		case Incomplete:
			notRun = append(notRun, h.Identity.Host)
		}
	}
	v.Failed, v.NotRun = len(failed), len(notRun)
	for _, h := range hs {
		v.NoTests = v.NoTests || h.Verdict.NoTests && !h.Earlier
	}
	switch {
	case len(hs) == 0:
		v.Verdict, v.Line, v.Advice = Incomplete, Incomplete+" (nothing ran)", "no host's results were found"
		v.NotRun, v.NoTests = 1, true
	case v.Failed > 0:
		v.Verdict, v.Line = NotQualified, fmt.Sprintf("%s (%d of %d hosts: %s)", NotQualified, v.Failed, len(hs), nameHosts(failed))
		v.Advice = fmt.Sprintf("%d of %d hosts are not qualified (failed must requirements, or failures outside any test)", v.Failed, len(hs))
		if v.NotRun > 0 {
			v.Advice += fmt.Sprintf("; %d more did not run all must requirements", v.NotRun)
		}
	case v.NotRun > 0:
		v.Verdict, v.Line = Incomplete, fmt.Sprintf("%s (%d of %d hosts not fully run: %s)", Incomplete, v.NotRun, len(hs), nameHosts(notRun))
		v.Advice = fmt.Sprintf("%d of %d hosts have must requirements that did not run; run with GDR_STRICT=1 so that absent hardware fails", v.NotRun, len(hs))
	default:
		v.Verdict, v.Line, v.Advice = Qualified, Qualified, fmt.Sprintf("all %d hosts qualified", len(hs))
	}
	return v
}

// headlineHosts is how many hosts a merged headline names before it counts
// the rest.
const headlineHosts = 10

// nameHosts names the first headlineHosts hosts, then "and N more".
func nameHosts(hosts []string) string { return nameList(hosts, headlineHosts) }

// nameList is the first n names, then "and N more".
func nameList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// ExitCode is what a command reporting r exits with: 0 for QUALIFIED, and
// for INCOMPLETE unless strict; 1 for NOT QUALIFIED; 3 for INCOMPLETE when
// a host ran with GDR_STRICT=1 (a pipeline that asked for proof did not get it).
func (r *Report) ExitCode() int {
	switch r.Verdict.Verdict {
	case NotQualified:
		return 1
	case Incomplete:
		if r.Verdict.NoTests {
			return 3 // a run where nothing ran proves nothing, strict or not
		}
		for _, h := range r.Hosts {
			// Strict, or stopped by a signal: a run someone stopped
			// never reads as a success.
			if (h.Identity.Strict || h.Identity.Stopped != "") && !h.Earlier {
				return 3
			}
		}
	}
	return 0
}
