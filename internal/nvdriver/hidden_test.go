package nvdriver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

const cuInitNoDevice = "cuInit(0): CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"

func gpu(bdf, driver string) *pci.Device {
	return &pci.Device{BDF: bdf, Vendor: 0x10de, Device: 0x2335, Class: 0x030200, Driver: driver}
}

// hostWith is a host whose driver holds GPUs 0000:3b:00.0 (minor 0) and
// 0000:4b:00.0 (minor 1), with the device files named in nodes planted
// under /dev (regular files: they open as a node a driver serves does).
func hostWith(t *testing.T, nodes ...string) *hostfs.Root {
	files := map[string]string{
		GPUsDir + "/0000:3b:00.0/information": "Model: \t\t NVIDIA H200\nBus Location: \t 0000:3b:00.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n",
		GPUsDir + "/0000:4b:00.0/information": "Model: \t\t NVIDIA H200\nBus Location: \t 0000:4b:00.0\nDevice Minor: \t 1\nGPU Excluded:\t No\n",
		"/dev/":                               "",
	}
	for _, n := range nodes {
		files[n] = ""
	}
	return hostfstest.Tree(t, files)
}

var allNodes = []string{CtlNode, "/dev/nvidia0", "/dev/nvidia1"}

func twoGPUs() []*pci.Device {
	return []*pci.Device{gpu("0000:3b:00.0", "nvidia"), gpu("0000:4b:00.0", "nvidia")}
}

// The GPUs CUDA is to see are there, or none is on the bus: nothing to say.
func TestJudgeNothingHidden(t *testing.T) {
	root := hostWith(t, allNodes...)
	assert.Nil(t, Judge(Visibility{Root: root, CUDA: cuInitNoDevice}), "no GPU on the PCI bus: absent, the caller's skip")
	assert.Nil(t, Judge(Visibility{Root: root, GPUs: twoGPUs(), Seen: []string{"0000:3b:00.0", "0000:4b:00.0"}}))
	assert.Nil(t, Judge(Visibility{Root: root, GPUs: twoGPUs(), Want: []string{"0000:3b:00.0"}, Seen: []string{"0000:3b:00.0"}}),
		"only the wanted GPUs are judged")
	var h *Hidden
	assert.NoError(t, h.Err())
}

// Two GPUs on the bus, CUDA sees none, and nothing in this process hides
// them: the host fell short, and the message names both counts and the
// addresses.
func TestJudgeNoneSeen(t *testing.T) {
	h := Judge(Visibility{Root: hostWith(t, allNodes...), GPUs: twoGPUs(), CUDA: cuInitNoDevice})
	require.NotNil(t, h)
	assert.Equal(t, "the PCI bus lists 2 NVIDIA GPU(s) (0000:3b:00.0, 0000:4b:00.0) but CUDA sees none; "+cuInitNoDevice+"; "+
		"the nvidia driver holds them and their device files open, yet CUDA does not list them", h.Finding.Cause)
	assert.Contains(t, h.Finding.Remedy, "dmesg for NVRM errors")
	assert.Equal(t, verdict.FellShort, h.Finding.Outcome)
	assert.Len(t, h.Missing, 2)
	f, ok := verdict.As(h.Err())
	require.True(t, ok)
	assert.Equal(t, h.Finding, *f)
}

// Each cause the process's settings or the host's files show, with its
// remedy and outcome.
func TestJudgeCauses(t *testing.T) {
	slurmStep := config.Slurm{JobID: "4242", StepID: "0", JobGPUs: "0,1"}
	pod := virt.Container{In: true, Runtime: "kubernetes", Signs: []string{"environment: KUBERNETES_SERVICE_HOST=10.0.0.1"}}
	for _, c := range []struct {
		name      string
		gpus      []*pci.Device
		nodes     []string
		seen      []string
		lib       bool
		slurm     config.Slurm
		container virt.Container
		cause     []string
		remedy    string
		notJudged bool
	}{
		{name: "Slurm step without a GPU request", gpus: twoGPUs(), slurm: slurmStep,
			cause:  []string{"but CUDA sees none", "the Slurm step was given no GPUs (job 4242 step 0: SLURM_STEP_GPUS unset, SLURM_JOB_GPUS=0,1, CUDA_VISIBLE_DEVICES unset)"},
			remedy: config.SlurmNoGPUsRemedy, notJudged: true},
		{name: "CUDA_VISIBLE_DEVICES empty", gpus: twoGPUs(), nodes: allNodes, slurm: config.Slurm{CUDAVisibleSet: true},
			cause: []string{"CUDA_VISIBLE_DEVICES= names no GPU"}, remedy: "unset CUDA_VISIBLE_DEVICES", notJudged: true},
		{name: "CUDA_VISIBLE_DEVICES=-1", gpus: twoGPUs(), nodes: allNodes, slurm: config.Slurm{CUDAVisible: "-1", CUDAVisibleSet: true},
			cause: []string{"CUDA_VISIBLE_DEVICES=-1 names no GPU"}, remedy: "unset CUDA_VISIBLE_DEVICES", notJudged: true},
		{name: "CUDA_VISIBLE_DEVICES names none CUDA finds", gpus: twoGPUs(), nodes: allNodes, slurm: config.Slurm{CUDAVisible: "GPU-0000", CUDAVisibleSet: true},
			cause: []string{"CUDA_VISIBLE_DEVICES=GPU-0000 names no GPU CUDA finds"}, remedy: "unset CUDA_VISIBLE_DEVICES", notJudged: true},
		{name: "container not given the GPUs", gpus: twoGPUs(), container: pod, lib: true,
			cause: []string{"this container (kubernetes; signs: environment: KUBERNETES_SERVICE_HOST=10.0.0.1) was not given them: ",
				"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1 missing"},
			remedy: containerRemedy, notJudged: true},
		{name: "container with the files but no library", gpus: twoGPUs(), nodes: allNodes, container: pod, lib: true,
			cause: []string{"has the device files but no libcuda.so.1"}, remedy: containerRemedy, notJudged: true},
		{name: "device files missing on the host", gpus: twoGPUs(), nodes: []string{CtlNode},
			cause: []string{"the driver's device files are missing: ", "/dev/nvidia0", "/dev/nvidia1 missing"}, remedy: "nvidia-modprobe"},
		{name: "no library on the host", gpus: twoGPUs(), nodes: allNodes, lib: true,
			cause: []string{"libcuda.so.1, the driver's CUDA library, is not installed"}, remedy: "install the NVIDIA driver's CUDA library"},
		{name: "nouveau and vfio-pci", gpus: []*pci.Device{gpu("0000:3b:00.0", "nouveau"), gpu("0000:4b:00.0", "vfio-pci")}, nodes: allNodes,
			cause:  []string{"0000:3b:00.0 bound to nouveau, not to the nvidia driver", "0000:4b:00.0 bound to vfio-pci (held for passthrough to a VM)"},
			remedy: NouveauRemedy},
		{name: "bound to no driver", gpus: []*pci.Device{gpu("0000:3b:00.0", ""), gpu("0000:4b:00.0", "nvidia")}, nodes: allNodes,
			seen: nil, cause: []string{"0000:3b:00.0 bound to no driver", "the nvidia driver holds them and their device files open"}, remedy: "modprobe nvidia"},
		{name: "a host fault beside the run's", gpus: []*pci.Device{gpu("0000:3b:00.0", "nouveau"), gpu("0000:4b:00.0", "nvidia")}, slurm: slurmStep,
			cause: []string{"bound to nouveau", "the Slurm step was given no GPUs"}, remedy: config.SlurmNoGPUsRemedy, notJudged: false},
		{name: "one GPU left out, nothing handed over", gpus: twoGPUs(), nodes: []string{CtlNode, "/dev/nvidia0"}, seen: []string{"0000:3b:00.0"},
			cause: []string{"the PCI bus lists 2 NVIDIA GPU(s) (0000:3b:00.0, 0000:4b:00.0) but CUDA sees 1 (0000:3b:00.0), not 0000:4b:00.0",
				"device files are missing: ", "/dev/nvidia1 missing"}, remedy: "nvidia-modprobe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := Judge(Visibility{Root: hostWith(t, c.nodes...), GPUs: c.gpus, Seen: c.seen, CUDA: cuInitNoDevice, LibMissing: c.lib,
				Slurm: c.slurm, Container: c.container})
			require.NotNil(t, h)
			assert.Empty(t, h.Subset)
			for _, want := range c.cause {
				assert.Contains(t, h.Finding.Cause, want)
			}
			assert.Contains(t, h.Finding.Remedy, c.remedy)
			want := verdict.FellShort
			if c.notJudged {
				want = verdict.NotJudged
			}
			assert.Equal(t, want, h.Finding.Outcome)
			f, ok := verdict.As(h.Err())
			require.True(t, ok)
			assert.Equal(t, want, f.Kind())
		})
	}
}

// CUDA_VISIBLE_DEVICES as CUDA reads it: entries up to the first that is
// neither an index nor a UUID.
func TestCVDNamed(t *testing.T) {
	for v, want := range map[string]int{"": 0, " ": 0, "-1": 0, "NoDevFiles": 0, "none": 0, "0": 1, "0,1": 2, "0,2,-1,1": 2,
		"GPU-8932f937,1": 2, "MIG-GPU-8932f937/1/0": 1, "1,x,2": 1} {
		assert.Equal(t, want, cvdNamed(v), "%q", v)
	}
}

// A GPU the driver excluded (GPU Excluded: Yes) is named as such.
func TestJudgeExcluded(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{
		GPUsDir + "/0000:3b:00.0/information": "Model: \t\t NVIDIA H200\nBus Location: \t 0000:3b:00.0\nDevice Minor: \t 0\nGPU Excluded:\t Yes\n",
		CtlNode:                               "",
	})
	h := Judge(Visibility{Root: root, GPUs: []*pci.Device{gpu("0000:3b:00.0", "nvidia")}, CUDA: cuInitNoDevice})
	require.NotNil(t, h)
	assert.Contains(t, h.Finding.Cause, "0000:3b:00.0 excluded by the nvidia driver (GPU Excluded: Yes")
	assert.Contains(t, h.Finding.Remedy, "NVreg_ExcludedGpus")
	assert.Equal(t, verdict.FellShort, h.Finding.Outcome)
}

// Some GPUs seen, the rest handed to others on purpose: a subset, no fault.
func TestJudgeSubset(t *testing.T) {
	root := hostWith(t, CtlNode, "/dev/nvidia0")
	seen := []string{"0000:3b:00.0"}
	for _, c := range []struct {
		name      string
		slurm     config.Slurm
		container virt.Container
		want      string
	}{
		{"CUDA_VISIBLE_DEVICES", config.Slurm{CUDAVisible: "0", CUDAVisibleSet: true}, virt.Container{}, "CUDA_VISIBLE_DEVICES=0"},
		{"Slurm step with GPUs", config.Slurm{JobID: "7", StepGPUs: "0"}, virt.Container{}, "the Slurm step's GPUs (SLURM_STEP_GPUS=0)"},
		{"container", config.Slurm{}, virt.Container{In: true, Runtime: "docker", Signs: []string{"/.dockerenv exists"}}, "the GPUs given to this container (docker"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := Judge(Visibility{Root: root, GPUs: twoGPUs(), Seen: seen, Slurm: c.slurm, Container: c.container})
			require.NotNil(t, h)
			assert.Contains(t, h.Subset, c.want)
			assert.Empty(t, h.Finding.Cause)
			assert.NoError(t, h.Err(), "a subset handed over on purpose is no fault")
			require.Len(t, h.Missing, 1)
			assert.Equal(t, "0000:4b:00.0", h.Missing[0].BDF)
		})
	}
	// Fewer than CUDA_VISIBLE_DEVICES names: no subset, and which one is
	// missing cannot be told from its indexes.
	h := Judge(Visibility{Root: root, GPUs: twoGPUs(), Seen: seen, Slurm: config.Slurm{CUDAVisible: "0,1", CUDAVisibleSet: true}})
	require.NotNil(t, h)
	assert.Empty(t, h.Subset)
	assert.Contains(t, h.Finding.Cause, "but CUDA sees 1 (0000:3b:00.0), not 0000:4b:00.0; CUDA_VISIBLE_DEVICES=0,1 names 2 device(s) but CUDA sees 1")
	assert.Equal(t, verdict.FellShort, h.Finding.Outcome)
	assert.Contains(t, h.Finding.Remedy, "nvidia-smi")
	// A container (or a Slurm step) whose GPU's device file opens was
	// given that GPU: CUDA leaving it out is no subset.
	for _, c := range []struct {
		slurm     config.Slurm
		container virt.Container
	}{
		{config.Slurm{}, virt.Container{In: true, Runtime: "kubernetes", Signs: []string{"kubepods"}}},
		{config.Slurm{JobID: "7", StepGPUs: "0,1"}, virt.Container{}},
	} {
		h = Judge(Visibility{Root: hostWith(t, allNodes...), GPUs: twoGPUs(), Seen: seen, Slurm: c.slurm, Container: c.container})
		require.NotNil(t, h)
		assert.Empty(t, h.Subset)
		require.Len(t, h.Missing, 1)
		assert.Equal(t, "0000:4b:00.0", h.Missing[0].BDF)
		assert.Contains(t, h.Finding.Cause, "not 0000:4b:00.0; the nvidia driver holds them and their device files open, yet CUDA does not list them")
		assert.Equal(t, verdict.FellShort, h.Finding.Outcome)
	}

	// None seen is never a subset, whatever was handed over.
	h = Judge(Visibility{Root: hostWith(t, allNodes...), GPUs: twoGPUs(), CUDA: cuInitNoDevice, Slurm: config.Slurm{CUDAVisible: "0", CUDAVisibleSet: true}})
	require.NotNil(t, h)
	assert.Empty(t, h.Subset)
	assert.Contains(t, h.Finding.Cause, "CUDA_VISIBLE_DEVICES=0 names no GPU CUDA finds")
}

// The recorded trees of hosts whose GPU the nvidia driver does not hold
// (fixtures/hosts/nouveau, iommu-vfio) read as such, through the PCI
// reader the selection uses.
func TestJudgeFixtureTrees(t *testing.T) {
	for tree, want := range map[string]string{
		"nouveau":    "0000:03:00.0 bound to nouveau, not to the nvidia driver",
		"iommu-vfio": "0000:03:00.0 bound to vfio-pci",
		"pix":        "the driver's device files are missing",
	} {
		t.Run(tree, func(t *testing.T) {
			root, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", tree))
			require.NoError(t, err)
			devs, _ := pci.Scan(root)
			var gpus []*pci.Device
			for _, d := range devs {
				if d.IsGPU() {
					gpus = append(gpus, d)
				}
			}
			require.NotEmpty(t, gpus)
			h := Judge(Visibility{Root: root, GPUs: gpus, CUDA: cuInitNoDevice})
			require.NotNil(t, h)
			assert.Contains(t, h.Finding.Cause, want)
			assert.Equal(t, verdict.FellShort, h.Finding.Outcome)
		})
	}
}

// A node this process may not open by its mode is named as refused.
func TestJudgeNodeRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root opens a mode 000 file; the refused open needs another user")
	}
	root := hostWith(t, allNodes...)
	require.NoError(t, os.Chmod(root.Host(CtlNode), 0))
	h := Judge(Visibility{Root: root, GPUs: twoGPUs(), CUDA: cuInitNoDevice})
	require.NotNil(t, h)
	assert.Contains(t, h.Finding.Cause, "this process may not open them: ")
	assert.Contains(t, h.Finding.Cause, "nvidiactl refused (open: permission denied)")
	assert.Equal(t, verdict.NotJudged, h.Finding.Outcome)
}
