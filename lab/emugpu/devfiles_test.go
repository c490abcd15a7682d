//go:build gpu

package emugpu_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/cuda"
)

// loadWithDevices loads the emulated driver (FAKE_CUDA_DEVICES=2) looking
// for its device files in dir, and returns the PCI addresses of the GPUs
// CUDA lists, or cuInit's error.
func loadWithDevices(t *testing.T, dir string) ([]string, error) {
	t.Helper()
	t.Setenv("FAKE_CUDA_DEVICES", "2")
	t.Setenv("FAKE_CUDA_DEV_DIR", dir)
	cuda.UseDriver(cuda.Library) // a test loading twice: useFake looks for the real driver first
	useFake(t)
	d, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	devs, err := d.Devices()
	require.NoError(t, err)
	var pcis []string
	for _, dev := range devs {
		pcis = append(pcis, dev.PCI+" "+dev.Name)
	}
	return pcis, nil
}

// A GPU whose device file this process cannot open is not there for CUDA,
// as with the NVIDIA driver; without the control device, or with no GPU
// left, cuInit says CUDA_ERROR_NO_DEVICE (what driver 580.159.04 answered
// on an H200 with the nodes denied by a device cgroup).
func TestDeviceFilesHideGPUs(t *testing.T) {
	gpu0, gpu1 := "0000:3b:00.0 GDR emulated GPU 0", "0000:4b:00.0 GDR emulated GPU 1"
	for _, c := range []struct {
		name    string
		remove  []string
		want    []string
		noDev   bool
		nonRoot bool // the case needs file modes to refuse this process
	}{
		{name: "all there", want: []string{gpu0, gpu1}},
		{name: "nvidia0 missing", remove: []string{"nvidia0"}, want: []string{gpu1}},
		{name: "nvidia1 missing", remove: []string{"nvidia1"}, want: []string{gpu0}},
		{name: "nvidiactl missing", remove: []string{"nvidiactl"}, noDev: true},
		{name: "every GPU missing", remove: []string{"nvidia0", "nvidia1"}, noDev: true},
		{name: "nvidia0 mode 000", nonRoot: true, want: []string{gpu1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.nonRoot && os.Geteuid() == 0 {
				t.Skip("root opens a mode 000 file: the refused open is TestDeviceFilesUnderADeviceCgroup's (EPERM), and the missing nodes' (ENOENT) above")
			}
			dir := t.TempDir()
			require.NoError(t, plantDevices(dir, 2))
			for _, r := range c.remove {
				require.NoError(t, os.Remove(filepath.Join(dir, r)))
			}
			if c.nonRoot {
				require.NoError(t, os.Chmod(filepath.Join(dir, "nvidia0"), 0))
			}
			got, err := loadWithDevices(t, dir)
			if c.noDev {
				require.Error(t, err)
				assert.Equal(t, cuda.ErrNoDevice, cuda.Code(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got, "the visible GPUs keep their own PCI addresses and names")
		})
	}
}

// devChild is what a child process in a device cgroup saw: its own open(2)
// of each node and CUDA's answer.
type devChild struct {
	Errno map[string]string `json:"errno"` // node -> "ok" or the errno's name
	Code  int               `json:"code"`  // cuInit's CUresult (0: loaded)
	GPUs  []string          `json:"gpus"`
}

const devChildMark = "GDR-DEVCHILD "

// A device cgroup decides, as under Slurm's ConstrainDevices: a child in a
// cgroup v1 devices group that denies char 195:<minor> gets EPERM from the
// kernel for that node, ENXIO for the nodes it may open (no driver serves
// major 195 here, as in the lab's VMs), and CUDA lists exactly the GPUs
// it may open. The nodes are real character devices (mknod), so it needs
// root and a writable devices hierarchy.
func TestDeviceFilesUnderADeviceCgroup(t *testing.T) {
	if cg := os.Getenv("GDR_EMU_DEVCG"); cg != "" {
		devCgroupChild(t, cg)
		return
	}
	const hier = "/sys/fs/cgroup/devices"
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod of the 195:N nodes and a devices cgroup")
	}
	if _, err := os.Stat(filepath.Join(hier, "devices.deny")); err != nil {
		t.Skipf("no cgroup v1 devices hierarchy at %s (%v): the device cgroup case runs where it is mounted", hier, err)
	}
	useFake(t) // builds the library the children load
	dir := t.TempDir()
	for name, minor := range map[string]uint32{"nvidiactl": 255, "nvidia0": 0, "nvidia1": 1} {
		require.NoError(t, unix.Mknod(filepath.Join(dir, name), unix.S_IFCHR|0o666, int(unix.Mkdev(195, minor))))
	}
	for _, c := range []struct {
		deny  string // devices.deny, "" for none
		errno map[string]string
		code  int
		gpus  []string
	}{
		{"", map[string]string{"nvidiactl": "ENXIO", "nvidia0": "ENXIO", "nvidia1": "ENXIO"}, 0, []string{"0000:3b:00.0", "0000:4b:00.0"}},
		{"c 195:0 rwm", map[string]string{"nvidiactl": "ENXIO", "nvidia0": "EPERM", "nvidia1": "ENXIO"}, 0, []string{"0000:4b:00.0"}},
		{"c 195:255 rwm", map[string]string{"nvidiactl": "EPERM", "nvidia0": "ENXIO", "nvidia1": "ENXIO"}, cuda.ErrNoDevice, nil},
		{"c 195:* rwm", map[string]string{"nvidiactl": "EPERM", "nvidia0": "EPERM", "nvidia1": "EPERM"}, cuda.ErrNoDevice, nil},
	} {
		t.Run("deny "+c.deny, func(t *testing.T) {
			cg, err := os.MkdirTemp(hier, "gdr-emugpu-")
			if err != nil {
				t.Skipf("cannot make a devices cgroup under %s: %v", hier, err)
			}
			t.Cleanup(func() { _ = os.Remove(cg) })
			if c.deny != "" {
				require.NoError(t, os.WriteFile(filepath.Join(cg, "devices.deny"), []byte(c.deny), 0o644))
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestDeviceFilesUnderADeviceCgroup$", "-test.v")
			cmd.Env = append(os.Environ(), "GDR_EMU_DEVCG="+cg, "GDR_EMU_LIB="+libraryPath, "FAKE_CUDA_DEV_DIR="+dir, "FAKE_CUDA_DEVICES=2")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			_, js, ok := strings.Cut(string(out), devChildMark)
			require.True(t, ok, "%s", out)
			js, _, _ = strings.Cut(js, "\n")
			var got devChild
			require.NoError(t, json.Unmarshal([]byte(js), &got), js)
			assert.Equal(t, c.errno, got.Errno, "the kernel's answers to open(2)")
			assert.Equal(t, c.code, got.Code, "%s", out)
			assert.Equal(t, c.gpus, got.GPUs)
			if c.code != 0 {
				assert.Contains(t, string(out), "hidden from this process", "the emulated driver says why")
			}
		})
	}
}

// devCgroupChild joins cgroup cg, opens each node itself, then loads the
// emulated driver, and prints what it saw.
func devCgroupChild(t *testing.T, cg string) {
	require.NoError(t, os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(fmt.Sprint(os.Getpid())), 0o644))
	res := devChild{Errno: map[string]string{}}
	dir := os.Getenv("FAKE_CUDA_DEV_DIR")
	for _, name := range []string{"nvidiactl", "nvidia0", "nvidia1"} {
		fd, err := unix.Open(filepath.Join(dir, name), unix.O_RDWR|unix.O_CLOEXEC, 0)
		var errno unix.Errno
		switch {
		case err == nil:
			unix.Close(fd)
			res.Errno[name] = "ok"
		case errors.As(err, &errno):
			res.Errno[name] = unix.ErrnoName(errno)
		default:
			res.Errno[name] = err.Error()
		}
	}
	cuda.UseDriver(os.Getenv("GDR_EMU_LIB"))
	d, err := cuda.Load()
	if err != nil {
		res.Code = cuda.Code(err)
	} else {
		devs, err := d.Devices()
		require.NoError(t, err)
		for _, dev := range devs {
			res.GPUs = append(res.GPUs, dev.PCI)
		}
	}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	fmt.Printf("%s%s\n", devChildMark, b)
}

// slurmStep makes this process a Slurm job step without GPUs of an
// exclusive job that holds two: what srun gives a step that did not ask
// (SLURM_JOB_GPUS inherited from the batch script, no SLURM_STEP_GPUS, no
// CUDA_VISIBLE_DEVICES).
func slurmStep(t *testing.T) {
	t.Helper()
	for _, k := range []string{"SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES"} {
		t.Setenv(k, "") // restores the caller's value after the test
		require.NoError(t, os.Unsetenv(k))
	}
	t.Setenv("SLURM_JOB_ID", "4242")
	t.Setenv("SLURM_STEP_ID", "0")
	t.Setenv("SLURM_JOB_GPUS", "0,1")
}

// When a Slurm step's devices are hidden (ConstrainDevices, no GPU
// requested), cuInit's CUDA_ERROR_NO_DEVICE names the missing request.
func TestSlurmStepWithoutGPUs(t *testing.T) {
	slurmStep(t)
	dir := t.TempDir()
	require.NoError(t, plantDevices(dir, 2))
	for _, n := range []string{"nvidia0", "nvidia1"} {
		require.NoError(t, os.Remove(filepath.Join(dir, n)))
	}
	_, err := loadWithDevices(t, dir)
	require.Error(t, err)
	assert.Equal(t, cuda.ErrNoDevice, cuda.Code(err))
	assert.Contains(t, err.Error(), "the Slurm step was given no GPUs (job 4242 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES unset)")
	assert.Equal(t, "an --exclusive job's step must ask for them (srun --gres=gpu:N or --gpus-per-node); deploy/slurm/gdrconf.sbatch does", cuda.InitRemedy(err))

	// The step asked: its GPUs are hidden by something else, which
	// Slurm's variables cannot name.
	t.Setenv("SLURM_STEP_GPUS", "0,1")
	_, err = loadWithDevices(t, dir)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "Slurm")
}
