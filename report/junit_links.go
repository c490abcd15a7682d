package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/junit"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// A cluster run's JUnit suites: cluster/links holds one case per pair
// result (both endpoints and the rail in its name: a link's result is never
// one host's), cluster/isolation one per finding and per cleared host. They
// are built as clusterCase first and made JUnit last (appendClusterSuites),
// so the JUnit writer's types are touched in one place.

// Cluster suite names (contract: CI filters on them).
const (
	LinkSuite      = "cluster/links"
	IsolationSuite = "cluster/isolation"
)

// clusterCase is one case of a cluster suite: Status Pass, Fail (the
// hardware fell short), Skip, or errored (isolation or the pair could not
// be judged).
type clusterCase struct {
	Name    string
	Status  Status
	Errored bool
	Type    string // an errored case's type; "" is not_judged
	Message string
	Body    string
}

type clusterSuite struct {
	Name  string
	Cases []clusterCase
}

// linkCaseName names a pair's case: "vm1 rail0 <-> vm3 rail0 [round 1]"
// (server first). A pair's two ends are on the same rail index.
func linkCaseName(p isolate.Pair) string {
	if p.Run != "" { // one of several runs merged: their rounds share numbers
		return fmt.Sprintf("%s rail%d <-> %s rail%d [run %s round %d]", p.A, p.Rail, p.B, p.Rail, p.Run, p.Round)
	}
	return fmt.Sprintf("%s rail%d <-> %s rail%d [round %d]", p.A, p.Rail, p.B, p.Rail, p.Round)
}

// supersededBy names the later run that judges an end of pair p ("" when
// none): a pair that failed before its host was re-tested is not the
// merge's verdict on it any more.
func (r *Report) supersededBy(p isolate.Pair) string {
	if p.Run == "" {
		return ""
	}
	for _, h := range []string{p.A, p.B} {
		if run, ok := r.judgedBy[h]; ok && run != p.Run {
			return fmt.Sprintf("%s was re-tested in run %s, which judges it", h, run)
		}
	}
	return ""
}

// versus is a pair's value against its floor and the floor's source.
func versus(p isolate.Pair) string {
	if p.BWGbitS <= 0 {
		return "no bandwidth measured"
	}
	switch {
	case p.FloorGbitS <= 0:
		return fmt.Sprintf("%s Gbit/s (no floor: fewer than three pairs on rail %d measured one, and no absolute floor)", fmtNum(p.BWGbitS), p.Rail)
	case p.BWGbitS < p.FloorGbitS:
		return fmt.Sprintf("%s Gbit/s < floor %s Gbit/s (%s)", fmtNum(p.BWGbitS), fmtNum(p.FloorGbitS), p.FloorSource)
	}
	return fmt.Sprintf("%s Gbit/s >= floor %s Gbit/s (%s)", fmtNum(p.BWGbitS), fmtNum(p.FloorGbitS), p.FloorSource)
}

// clusterSuites builds the two suites from the analysis SetCluster stored.
func (r *Report) clusterSuites() []clusterSuite {
	c, f := r.Cluster, r.Findings
	if c == nil || f == nil {
		return nil
	}
	blame := map[string][]string{} // "<host> <rail>" and "<a> <b> <rail>" -> the finding
	for _, s := range f.Suspects {
		k := fmt.Sprintf("%s %d", s.Host, s.Rail)
		if s.Part == PartLink {
			k = fmt.Sprintf("%s %s %d", s.Host, s.Peer, s.Rail)
		}
		blame[k] = append(blame[k], s.Name()+" "+string(s.Verdict))
	}
	links := clusterSuite{Name: LinkSuite}
	for _, p := range c.Pairs {
		cc := clusterCase{Name: linkCaseName(p), Status: Pass}
		head := fmt.Sprintf("link %s: %s", cc.Name, p.Status)
		switch why := r.supersededBy(p); {
		case p.Status == isolate.Pass:
			cc.Body = head + ": " + versus(p)
		case why != "":
			cc.Status, cc.Message = Skip, head+": superseded: "+why
		case p.Status == isolate.Skip:
			cc.Status, cc.Message = Skip, head+": neither end judged the pair (absent hardware)"
		case p.Status == isolate.Stopped:
			cc.Status, cc.Message = Skip, head+": not judged: "+p.Detail
		default:
			cc.Status, cc.Errored = Fail, p.Status == isolate.Missing
			cc.Message = head + ": " + versus(p)
			if p.Status != isolate.Slow && p.Detail != "" {
				cc.Message = head + ": " + firstOf(p.Detail)
			}
			var who []string
			for _, k := range []string{fmt.Sprintf("%s %d", p.A, p.Rail), fmt.Sprintf("%s %d", p.B, p.Rail),
				fmt.Sprintf("%s %s %d", p.A, p.B, p.Rail), fmt.Sprintf("%s %s %d", p.B, p.A, p.Rail)} {
				who = append(who, blame[k]...)
			}
			if len(who) == 0 {
				who = []string{"nothing found bad: the ends are clear"}
			}
			cc.Body = cc.Message + "\nisolation: " + strings.Join(who, "; ")
			if p.Status != isolate.Slow {
				cc.Body += "\nvalue: " + versus(p) + "\ndetail: " + p.Detail
			}
		}
		links.Cases = append(links.Cases, cc)
	}
	iso := clusterSuite{Name: IsolationSuite}
	for _, s := range f.Suspects {
		cc := clusterCase{Name: s.Name() + " " + string(s.Verdict), Status: Fail, Errored: s.Verdict != isolate.Bad, Message: firstOf(s.Reason)}
		var ev []string
		for _, e := range s.Evidence {
			ev = append(ev, evidenceLine(e))
		}
		cc.Body = cc.Message + "\nevidence:\n  " + strings.Join(ev, "\n  ")
		if s.AtFault != nil {
			cc.Body = cc.Message + "\nat fault: " + s.AtFault.String() + "\nevidence:\n  " + strings.Join(ev, "\n  ")
		}
		iso.Cases = append(iso.Cases, cc)
	}
	for _, h := range f.Cleared {
		iso.Cases = append(iso.Cases, clusterCase{Name: h.Line, Status: Pass, Body: h.Line})
	}
	// A run that did not finish is an error naming no part, as a test that
	// did not finish is; a flaky link passed its re-test: a passed case
	// that says what happened (the merged verdict flags it).
	for _, u := range f.Unfinished {
		iso.Cases = append(iso.Cases, clusterCase{Name: "host " + u.Host + " " + u.Liveness, Status: Fail, Errored: true, Type: typeDidNotFinish,
			Message: u.Host + " " + u.Liveness + ": its run did not finish", Body: u.Reason})
	}
	for _, fl := range f.Flaky {
		var ev []string
		for _, e := range fl.Evidence {
			ev = append(ev, evidenceLine(e))
		}
		iso.Cases = append(iso.Cases, clusterCase{Name: fl.Name() + " flaky", Status: Pass,
			Body: firstOf(fl.Reason) + "\nevidence:\n  " + strings.Join(ev, "\n  ")})
	}
	return []clusterSuite{links, iso}
}

// evidenceLine is one failed pair behind a finding: "round 1, rail 1, with
// vm2 (cleared): slow 0.004 Gbit/s < floor 0.0275 Gbit/s (...)".
func evidenceLine(e isolate.Evidence) string {
	s := fmt.Sprintf("round %d, rail %d, with %s (%s): %s", e.Round, e.Rail, e.Partner, e.PartnerState, e.Status)
	switch {
	case e.Status == isolate.Slow:
		s += fmt.Sprintf(" %s Gbit/s < floor %s Gbit/s (%s)", fmtNum(e.BWGbitS), fmtNum(e.FloorGbitS), e.FloorSource)
	case e.Detail != "":
		s += ": " + firstOf(e.Detail)
	}
	return s
}

// appendClusterSuites adds the cluster suites to the document (JUnit's
// hook), in the same schema-valid shape as the hosts' suites: a suite per
// case, a passed link's "value >= floor" in its block.
func (r *Report) appendClusterSuites(w *junitWriter) {
	stamp := time.Now().UTC().Format(junitTime)
	if t, err := time.Parse(time.RFC3339, r.Time); err == nil {
		stamp = t.UTC().Format(junitTime)
	}
	for _, cs := range r.clusterSuites() {
		class := strings.ReplaceAll(cs.Name, "/", ".")
		first := -1
		for _, c := range cs.Cases {
			tc := junit.Testcase{Name: clean(c.Name), Classname: class, Time: "0.000"}
			res := &junit.Result{Message: clean(c.Message), Data: body(c.Message, "", "", nil, splitLines(c.Body))}
			block := caseBlock(tc.Name, string(c.Status), nil, nil)
			switch {
			case c.Status == Pass:
				block = append(block, splitLines(c.Body)...)
			case c.Status == Skip:
				tc.Skipped = res
			case c.Errored:
				res.Type = typeNotJudged
				if c.Type != "" {
					res.Type = c.Type
				}
				tc.Error = res
			default:
				res.Type = typeFellShort
				tc.Failure = res
			}
			i := w.add(cs.Name, "cluster", class, stamp, &tc, block)
			if first < 0 {
				first = i
				*w.doc.Suites[i].Properties = []junit.Property{{Name: "gdr.timestamp_source", Value: "report build time"}}
			}
		}
	}
}
