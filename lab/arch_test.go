package lab

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/lab/vm"
)

func TestMatchPkg(t *testing.T) {
	pp := Module + "conformance/pingpong"
	assert.True(t, MatchPkg([]string{"./conformance/pingpong"}, pp))
	assert.True(t, MatchPkg([]string{"./conformance/..."}, pp))
	assert.True(t, MatchPkg([]string{"./conformance/install", pp}, pp))
	assert.True(t, MatchPkg(ArchPkgs, pp))
	assert.False(t, MatchPkg(ArchPkgs, Module+"conformance/gpu"))
	assert.False(t, MatchPkg([]string{"./conformance/ping"}, pp))
	assert.False(t, MatchPkg([]string{"./conf/..."}, pp), "a pattern matches whole path elements")
}

// A foreign architecture's lab is one VM running the loopback steps (the
// "lo:" rows), on the emulated GPU as make lab's loopback run.
func TestPlanOneVM(t *testing.T) {
	foreign := vm.ARM64
	if runtime.GOARCH == foreign.GOARCH {
		foreign = vm.AMD64
	}
	pkgs := []testPkg{{Short: PingpongPkg, Guest: "/lab/bin/pingpong.test"}, {Short: "conformance/install", Guest: "/lab/bin/install.test"}}
	r := &runner{o: Options{Mode: ModeLab, EmulatedGPU: true, Loopback: false, StepTimeout: time.Minute, Iters: 5, Timeout: time.Second}, arch: foreign}
	jobs, err := r.plan(pkgs)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	var ids []string
	for _, st := range jobs[0].Steps {
		ids = append(ids, st.ID)
		assert.Equal(t, "loopback", st.Host)
		assert.False(t, st.Barrier, "no peer to meet")
	}
	assert.Equal(t, []string{"lo:ibv_rc_pingpong", "lo:" + PingpongPkg, "lo:conformance/install"}, ids)
	assert.Equal(t, 1, jobs[0].GPUs, "the emulated GPU's device files")

	r.arch = vm.Arch{}
	jobs, err = r.plan(pkgs)
	require.NoError(t, err)
	assert.Len(t, jobs, 2, "this host's architecture: server and client")

	// LAB_VMS overrides the architecture's default either way.
	r.o.VMs = 1
	jobs, err = r.plan(pkgs)
	require.NoError(t, err)
	assert.Len(t, jobs, 1, "LAB_VMS=1 on this host's architecture: loopback only")
	r.o.VMs, r.arch, r.o.Loopback = 2, foreign, true
	jobs, err = r.plan(pkgs)
	require.NoError(t, err)
	require.Len(t, jobs, 2, "LAB_VMS=2 on a foreign architecture: server and client")
	var hosts []string
	for _, st := range jobs[0].Steps {
		hosts = append(hosts, st.Host)
	}
	assert.Contains(t, hosts, "loopback", "the loopback run too")
}

// LAB_VMS out of range, or given to a mode that boots its own VMs, is
// refused naming the value before anything starts.
func TestLabVMsRefused(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Mode: ModeLab, VMs: 3}, "LAB_VMS=3: mode lab boots 1 or 2 VMs"},
		{Options{Mode: ModeLab, VMs: -1}, "LAB_VMS=-1: mode lab boots 1 or 2 VMs"},
		{Options{Mode: ModeCluster, VMs: 2}, "LAB_VMS=2: only mode lab takes it; mode cluster boots its own VMs"},
		{Options{Mode: ModeSoak, VMs: 1}, "LAB_VMS=1: only mode lab takes it; mode soak boots its own VMs"},
	} {
		assert.ErrorContains(t, Run(context.Background(), c.o), c.want)
	}
	assert.NoError(t, Options{Mode: ModeLab, VMs: 2}.checkVMs())
	assert.NoError(t, Options{Mode: ModeCluster}.checkVMs())
}
