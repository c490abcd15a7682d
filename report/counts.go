// Counts of requirements and hosts by outcome, in the reports' one vocabulary.

package report

import (
	"fmt"
	"sort"

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
