//go:build rdma

// Package traffic is the pingpong area's check engines: data verification,
// latency, bandwidth (multi-QP and bidirectional), the all-rails
// measurement and the host-vs-GPU memory comparison. Each runs over ends
// harness/rc connected and returns errors and a result value; judging a
// result against its floor or ceiling is a pure function returning a
// Judgement, which the test records (conformance/pingpong). It is its own
// package, not part of rc, because rc is the connection (and memreg uses
// it without any of these engines), while traffic is what the suite
// moves over it and how it reads the numbers.
package traffic

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// CQMod is perftest's bandwidth moderation: one signaled WR in 100
// (GDR_TX_DEPTH keeps 128 in flight, as they do).
const CQMod = 100

// Judgement is what a judged result comes to, in the order the test
// records it: attributes and findings.
type Judgement []Entry

// Entry is one attribute (Finding nil) or one finding (verdict.Finding:
// cause, remedy, and the attributes of the value it judged and of its
// bound, gdr.measured and gdr.threshold). Fatal findings stop the test
// (testenv.Fail), the others do not (testenv.Error). The words for where
// the bound comes from are the judgement's threshold_source attribute,
// recorded whether it passes or not.
type Entry struct {
	Key     string
	Value   any
	Finding *verdict.Finding
	Fatal   bool
}

func (v *Judgement) attr(k string, val any) { *v = append(*v, Entry{Key: k, Value: val}) }

// fail adds a finding: the value in attribute measured fell short of the
// bound in attribute threshold.
func (v *Judgement) fail(fatal bool, remedy, measured, threshold, format string, args ...any) {
	f := verdict.Failf(remedy, format, args...)
	f.Measured, f.Threshold = "gdr."+measured, "gdr."+threshold
	*v = append(*v, Entry{Finding: f, Fatal: fatal})
}

// Failed reports whether v holds a finding.
func (v Judgement) Failed() bool {
	for _, e := range v {
		if e.Finding != nil {
			return true
		}
	}
	return false
}

// ratio is a/b, or 0 when b is not positive (nothing to compare against).
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// Record writes v on t in its order: attributes, and findings (fatal ones
// end t: testenv.Fail; the others testenv.Record).
func (v Judgement) Record(t testing.TB) {
	t.Helper()
	for _, e := range v {
		switch {
		case e.Finding == nil:
			testenv.Attr(t, e.Key, e.Value)
		case e.Fatal:
			testenv.Fail(t, *e.Finding)
		default:
			testenv.Record(t, *e.Finding)
		}
	}
}
