//go:build rdma

// Package traffic is the pingpong area's check engines: data verification,
// latency, bandwidth (multi-QP and bidirectional), the all-rails
// measurement and the host-vs-GPU memory comparison. Each runs over ends
// harness/rc connected and returns errors and a result value; judging a
// result against its floor or ceiling is a pure function returning a
// Verdict, which the test records (conformance/pingpong). It is its own
// package, not part of rc, because rc is the connection (and memreg uses
// it without any of these engines), while traffic is what the suite
// moves over it and how it reads the numbers.
package traffic

import "fmt"

// CQMod is perftest's bandwidth moderation: one signaled WR in 100
// (GDR_TX_DEPTH keeps 128 in flight, as they do).
const CQMod = 100

// Verdict is what a judged result comes to, in the order the test records
// it: attributes and failures.
type Verdict []Entry

// Entry is one attribute (Fail empty) or one failure with its remedy;
// Fatal failures stop the test (testenv.Fail), the others do not
// (testenv.Error). A failure names the attributes of the value it judged
// and of its bound (Measured, Threshold: gdr.measured, gdr.threshold); the
// words for where the bound comes from are the verdict's threshold_source
// attribute, recorded whether it passes or not.
type Entry struct {
	Key                 string
	Value               any
	Fail                string
	Remedy              string
	Fatal               bool
	Measured, Threshold string
}

func (v *Verdict) attr(k string, val any) { *v = append(*v, Entry{Key: k, Value: val}) }

// fail adds a failure of the value in attribute measured against the bound
// in attribute threshold.
func (v *Verdict) fail(fatal bool, remedy, measured, threshold, format string, args ...any) {
	*v = append(*v, Entry{Fail: fmt.Sprintf(format, args...), Remedy: remedy, Fatal: fatal,
		Measured: "gdr." + measured, Threshold: "gdr." + threshold})
}

// Failed reports whether v holds a failure.
func (v Verdict) Failed() bool {
	for _, e := range v {
		if e.Fail != "" {
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
