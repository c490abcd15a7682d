package lab

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The VMs' GPU device files carry the NVIDIA driver's numbers and modes,
// and a second setup (a node whose files exist) is no error.
func TestMakeGPUNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod of character devices needs root (the lab's agent is init in its VM)")
	}
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, makeGPUNodes(&out, dir, 2))
	require.NoError(t, makeGPUNodes(&out, dir, 2), "the files are there already")
	for name, minor := range map[string]uint32{"nvidiactl": 255, "nvidia0": 0, "nvidia1": 1} {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(filepath.Join(dir, name), &st), name)
		assert.Equal(t, uint32(unix.S_IFCHR), st.Mode&unix.S_IFMT, name)
		assert.Equal(t, uint32(0o666), st.Mode&0o777, name)
		assert.Equal(t, uint32(195), unix.Major(st.Rdev), name)
		assert.Equal(t, minor, unix.Minor(st.Rdev), name)
	}
	_, err := os.Stat(filepath.Join(dir, "nvidia2"))
	assert.True(t, os.IsNotExist(err), "two GPUs, two nodes")
	assert.Contains(t, out.String(), "char 195:0..1, 255")

	require.NoError(t, makeGPUNodes(&out, filepath.Join(dir, "none"), 0), "no emulated GPU: nothing to make")
}

func TestEmulatedGPUCount(t *testing.T) {
	assert.Equal(t, 1, emulatedGPUCount(nil), "the emulated driver's default")
	assert.Equal(t, 2, emulatedGPUCount([]string{"FAKE_CUDA_DEVICES=3", "GDR_X=1", "FAKE_CUDA_DEVICES=2"}), "the last wins")
	assert.Equal(t, 8, emulatedGPUCount([]string{"FAKE_CUDA_DEVICES=12"}))
	assert.Equal(t, 1, emulatedGPUCount([]string{"FAKE_CUDA_DEVICES=two"}), "atoi's 0, raised to 1 as the driver does")

	r := &runner{o: Options{Mode: ModeLab, EmulatedGPU: true, Env: []string{"FAKE_CUDA_DEVICES=3"}}}
	jobs, err := r.plan(nil)
	require.NoError(t, err)
	for _, j := range jobs {
		assert.Equal(t, 3, j.GPUs, "%s: LAB_ENV's count", j.Role)
	}
	r.o.EmulatedGPU = false
	jobs, err = r.plan(nil)
	require.NoError(t, err)
	assert.Zero(t, jobs[0].GPUs, "LAB_EMULATED_GPU=0: no device files")
}
