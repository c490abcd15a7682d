// Package verdict is how a check engine in internal/ tells a conformance
// test to stop: what it needs is absent (the test skips, or fails under
// GDR_STRICT), or something present is wrong (the test fails, with a
// remedy). The test reports them through harness/testenv.
package verdict

// Absent is a missing prerequisite: Msg says what and where it looked.
type Absent struct{ Msg string }

func (a *Absent) Error() string { return a.Msg }

// Failure is something present but wrong, and what to do about it.
type Failure struct{ Remedy, Msg string }

func (f *Failure) Error() string { return f.Msg + "; remedy: " + f.Remedy }
