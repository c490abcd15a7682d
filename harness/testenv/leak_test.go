package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTB records what the leak check does to a test.
type fakeTB struct {
	*testing.T
	cleanups []func()
	errs     []string
	attrs    map[string]string
}

func (f *fakeTB) Cleanup(fn func())              { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, a ...any) { f.errs = append(f.errs, fmt.Sprintf(format, a...)) }
func (f *fakeTB) Attr(k, v string)               { f.attrs[k] = v }
func (f *fakeTB) Name() string                   { return "TestFake" }
func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// fakeRDMA puts an `rdma` in PATH that prints the file it returns.
func fakeRDMA(t *testing.T) string {
	dir := t.TempDir()
	state := filepath.Join(dir, "summary.json")
	script := "#!/bin/sh\n[ \"$1 $2 $3\" = \"-j resource show\" ] || exit 2\nexec /bin/cat " + state + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rdma"), []byte(script), 0o755))
	t.Setenv("PATH", dir)
	rdmaOnce = sync.Once{}
	t.Cleanup(func() { rdmaOnce = sync.Once{} })
	return state
}

func TestLeakCheck(t *testing.T) {
	state := fakeRDMA(t)
	set := func(qp, mr int) {
		require.NoError(t, os.WriteFile(state, fmt.Appendf(nil, `[{"ifindex":1,"ifname":"rxe0","pd":1,"cq":1,"qp":%d,"mr":%d,"ctx":0}]`, qp, mr), 0o644))
	}

	// Released in time: no failure, a zero count.
	set(1, 0)
	f := &fakeTB{T: t, attrs: map[string]string{}}
	leakCheck(f)
	set(2, 1) // the test connects
	f.Cleanup(func() { set(1, 0) })
	f.runCleanups()
	assert.Empty(t, f.errs)
	assert.Equal(t, "0", f.attrs["gdr.rdma_leaked_count"])

	// A QP and an MR left behind: named, counted, failed.
	set(1, 0)
	f = &fakeTB{T: t, attrs: map[string]string{}}
	leakCheck(f)
	set(2, 1)
	f.runCleanups()
	require.Len(t, f.errs, 1)
	assert.Contains(t, f.errs[0], "TestFake left RDMA objects behind after its cleanups: rxe0 qp 1 -> 2 (+1), rxe0 mr 0 -> 1 (+1)")
	assert.Contains(t, f.errs[0], "remedy:")
	assert.Equal(t, "2", f.attrs["gdr.rdma_leaked_count"])
}
