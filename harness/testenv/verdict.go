package testenv

import (
	"errors"
	"testing"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Stop ends the test on an engine's verdict (internal/verdict): a
// *verdict.Absent as Absent, a *verdict.Failure as a failure of the host
// (with what it judged), a *verdict.NotJudged as not judged. Any other
// error is one the engine did not classify: the suite could not judge, and
// it fails the test as is. nil does nothing.
func Stop(t testing.TB, err error) {
	t.Helper()
	var a *verdict.Absent
	var f *verdict.Failure
	var n *verdict.NotJudged
	switch {
	case errors.As(err, &a):
		Absent(t, "%s", a.Msg)
	case errors.As(err, &f):
		Fail(t, Failure{Cause: f.Msg, Remedy: f.Remedy, Measured: f.Measured, Threshold: f.Threshold, Source: f.Source})
	case errors.As(err, &n):
		Fail(t, Failure{Cause: n.Msg, Remedy: n.Remedy, NotJudged: true})
	case err != nil:
		Fail(t, Failure{Cause: err.Error(), NotJudged: true})
	}
}
