// Package verdict is how a check engine in internal/ tells a conformance
// test to stop: what it needs is absent (the test skips, or fails under
// GDR_STRICT), something present is wrong (the test fails, with a
// remedy), or the engine could not judge (a host tool that errored). The
// test reports them through harness/testenv.
package verdict

// Absent is a missing prerequisite: Msg says what and where it looked.
type Absent struct{ Msg string }

func (a *Absent) Error() string { return a.Msg }

// Failure is something present but wrong, and what to do about it. When a
// value was judged, Measured and Threshold name the attributes that hold it
// and its bound (gdr.bw_gbit_s, gdr.min_bw_gbit_s) and Source says where the
// bound comes from.
type Failure struct {
	Remedy, Msg                 string
	Measured, Threshold, Source string
}

func (f *Failure) Error() string { return f.Msg + "; remedy: " + f.Remedy }

// NotJudged is a check the engine could not make (a tool it runs failed,
// what it reads could not be parsed): not the host's shortcoming.
type NotJudged struct{ Remedy, Msg string }

func (n *NotJudged) Error() string {
	if n.Remedy == "" {
		return n.Msg
	}
	return n.Msg + "; remedy: " + n.Remedy
}
