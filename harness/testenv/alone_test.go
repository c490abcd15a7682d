package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/suitelock"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestNotAloneIsNotJudged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "suite.lock")
	l, err := suitelock.Acquire(p)
	require.NoError(t, err)
	defer l.Release()
	_, err = suitelock.Acquire(p) // what a second binary gets
	require.Error(t, err)

	r := newRec(t)
	r.run(func(tb testing.TB) { judgeAlone(tb, err) })
	assert.True(t, r.fatal, "the test ends")
	assert.Equal(t, string(verdict.NotJudged), r.attrs["gdr.outcome"], "an error of the run, not the hardware's")
	assert.Contains(t, r.attrs["gdr.cause"], "another conformance binary runs on this host at the same time")
	assert.Contains(t, r.attrs["gdr.cause"], filepath.Base(os.Args[0]), "the holder is named")
	assert.Contains(t, r.attrs["gdr.cause"], p)
	assert.Contains(t, r.attrs["gdr.remedy"], "-p 1")

	r = newRec(t)
	r.run(func(tb testing.TB) { judgeAlone(tb, nil) })
	assert.False(t, r.fatal)
	assert.Empty(t, r.attrs, "alone: nothing to say")

	r = newRec(t)
	r.run(func(tb testing.TB) { judgeAlone(tb, errors.New("lock file /tmp/x: permission denied")) })
	assert.False(t, r.fatal, "an unusable lock does not stop the run")
	assert.Contains(t, r.attrs["gdr.suite_lock"], "not taken (lock file /tmp/x: permission denied)")
}
