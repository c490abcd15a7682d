package emugpu_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	model "github.com/gdrconf/gdrconf/internal/soak"
)

// The soak's GPU side (harness/soak with the gpu tag: the copy loops, the
// sampling loop, the series written as it goes) on two emulated GPUs: the
// rails are absent (no rdma tag), the GPUs copy, every sample has their
// copy rate, the series is labelled emulated, and the rail requirements
// skip naming why.
func TestSoakGPUSideOnEmulatedGPU(t *testing.T) {
	bin := extraSuite(t, "soak.test", "gpu", "./conformance/soak")
	reports := t.TempDir()
	res := runBinary(t, bin, "^TestSOAK0[1-7]", "FAKE_CUDA_DEVICES=2", "GDR_SOAK=3s", "GDR_SOAK_INTERVAL=1s", "GDR_REPORTS="+reports)

	first := get(t, res, "TestSOAK01NoDip")
	assert.Equal(t, "skip", first.action, "%s", first.output.String())
	assert.Contains(t, first.output.String(), "no rail carried the soak's traffic: built without the rdma tag")
	assert.Contains(t, first.output.String(), "soak 3s of 3s, 0s left:", "the progress line per sample")
	assert.Equal(t, "gpu-emulated", first.attrs["gdr.mem"])
	gpu := get(t, res, "TestSOAK05Throttle")
	assert.NotEqual(t, "skip", gpu.action, "the GPUs soaked: SOAK-05 is judged (%s)", gpu.output.String())
	assert.Equal(t, filepath.Join(reports, model.SeriesFile), gpu.attrs["gdr.soak_file"])

	s, err := model.Read(reports)
	require.NoError(t, err)
	assert.True(t, s.Emulated)
	assert.Empty(t, s.Rails)
	require.Len(t, s.GPUs, 2)
	assert.Equal(t, "0000:3b:00.0", s.GPUs[0].PCI)
	require.GreaterOrEqual(t, len(s.Samples), 3)
	for i, x := range s.Samples {
		require.Len(t, x.GPUs, 2, "sample %d", i)
		for g := range x.GPUs {
			if assert.NotNil(t, x.GPUs[g].CopyGbps, "sample %d GPU %d", i, g) {
				assert.Greater(t, *x.GPUs[g].CopyGbps, 0.0, "sample %d GPU %d copied", i, g)
			}
			assert.Nil(t, x.GPUs[g].SMClockMHz, "no NVML with the emulated GPU: absent")
		}
	}
	assert.Empty(t, s.Cut)
	assert.GreaterOrEqual(t, s.Duration(), 3*time.Second)
}

// SIGTERM (a job stopped by Slurm or Kubernetes) cuts the soak: the binary
// does not die of it, the series it leaves says why, and the tests say
// the soak was cut.
func TestSoakCutBySIGTERMOnEmulatedGPU(t *testing.T) {
	bin := filepath.Join(buildSuite(t), extraSuite(t, "soak.test", "gpu", "./conformance/soak"))
	reports := t.TempDir()
	cmd := exec.Command(bin, "-test.v", "-test.count=1", "-test.timeout=0", "-test.run", "^TestSOAK0[15]") // a 1h soak: no go test deadline (the harness refuses a shorter one)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GDR_") && !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+filepath.Dir(bin), "FAKE_CUDA_DEVICES=1", "GDR_SOAK=1h", "GDR_SOAK_INTERVAL=1s",
		"GDR_REPORTS="+reports, "GDR_SUITE_LOCK="+filepath.Join(t.TempDir(), "suite.lock"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		s, err := model.Read(reports)
		return err == nil && len(s.Samples) >= 2
	}, time.Minute, 100*time.Millisecond, "two samples written while it runs:\n%s", &out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the soak did not end within 2 min of SIGTERM:\n%s", out.String())
	}
	s, err := model.Read(reports)
	require.NoError(t, err)
	assert.Contains(t, s.Cut, "SIGTERM")
	assert.Less(t, s.Duration(), time.Minute)
	assert.Equal(t, model.Cut, s.Events[len(s.Events)-1].Kind)
	assert.Contains(t, out.String(), "soak CUT after")
	assert.Contains(t, out.String(), "the soak was CUT after")
}
