package testenv

import (
	"errors"
	"testing"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Stop ends the test on an engine's verdict (internal/verdict): a
// *verdict.Absent as Absent, a *verdict.Failure as Failf; any other error
// fails it as is. nil does nothing.
func Stop(t testing.TB, err error) {
	t.Helper()
	var a *verdict.Absent
	var f *verdict.Failure
	switch {
	case errors.As(err, &a):
		Absent(t, "%s", a.Msg)
	case errors.As(err, &f):
		Failf(t, f.Remedy, "%s", f.Msg)
	case err != nil:
		t.Fatal(err)
	}
}
