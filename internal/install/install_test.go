package install

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

var (
	host = virt.Process{}
	pod  = virt.Process{Container: virt.Container{In: true, Runtime: "kubernetes"}}
	mlx  = []*rdmadev.Device{{Name: "mlx5_0", Driver: "mlx5_core", PCI: "0000:3b:00.0"}}
)

// attrs is j's facts as a map, and fails collects its Fail findings by outcome.
func attrs(j Judged) map[string]string {
	m := map[string]string{}
	for _, a := range j.Attrs {
		m[a.Key] = a.Value
	}
	return m
}

func fails(j Judged) []verdict.Finding {
	var out []verdict.Finding
	for _, f := range j.Findings {
		if f.Level == verdict.Fail {
			out = append(out, f)
		}
	}
	return out
}

func one(t *testing.T, j Judged, kind verdict.Outcome) verdict.Finding {
	t.Helper()
	fs := fails(j)
	require.Len(t, fs, 1, "%+v", j.Findings)
	assert.Equal(t, kind, fs[0].Kind())
	return fs[0]
}

const inboxLibs = "/usr/lib/x86_64-linux-gnu/"

// INST-09 from files: each stack the node's files can show, and the
// failure of RDMA devices without user space.
func TestStackFromFiles(t *testing.T) {
	ofed := hostfstest.Tree(t, map[string]string{
		inboxLibs + "libibverbs.so.1": "", inboxLibs + "librdmacm.so.1": "",
		"/usr/bin/ofed_info": `if [ "X$1" == "X-s" ]; then echo MLNX_OFED_LINUX-5.8-1.0.1.1:; exit; fi`,
	})
	j := StackFromFiles(ofed, host, mlx)
	assert.Empty(t, fails(j))
	assert.Equal(t, string(StackOFED), attrs(j)["rdma_stack"])
	assert.Equal(t, "MLNX_OFED_LINUX-5.8-1.0.1.1", attrs(j)["ofed_version"])

	inbox := hostfstest.Tree(t, map[string]string{inboxLibs + "libibverbs.so.1": "", "/etc/": ""})
	j = StackFromFiles(inbox, host, mlx)
	assert.Empty(t, fails(j))
	assert.Equal(t, string(StackInbox), attrs(j)["rdma_stack"])

	bare := hostfstest.Tree(t, map[string]string{"/etc/hostname": "n1\n", "/usr/": ""})
	f := one(t, StackFromFiles(bare, host, mlx), verdict.FellShort)
	assert.Contains(t, f.Cause, "RDMA device(s) mlx5_0 present but no RDMA user space")
	assert.Equal(t, remedyRDMACore, f.Remedy)
	f = one(t, StackFromFiles(bare, host, nil), verdict.Absent)
	assert.Contains(t, f.Cause, "no RDMA stack under")
	// A pod's node keeps its user space in images: a fact, not a failure.
	j = StackFromFiles(bare, pod, mlx)
	assert.Empty(t, fails(j))
	assert.Equal(t, string(StackNoNode), attrs(j)["rdma_stack"])

	sysOnly := hostfstest.Tree(t, map[string]string{"/sys/class/infiniband/": ""})
	f = one(t, StackFromFiles(sysOnly, host, mlx), verdict.Absent)
	assert.Contains(t, f.Cause, "has no /etc or /usr")
}

// INST-07 from files: a missing library fails naming its package; none
// and no device is absent.
func TestLibrariesFromFiles(t *testing.T) {
	noProbe := func(string) error { t.Fatal("a recorded tree's libraries are read, not loaded"); return nil }
	half := hostfstest.Tree(t, map[string]string{inboxLibs + "libibverbs.so.1": "", "/etc/": ""})
	f := one(t, Libraries(half, host, mlx, noProbe), verdict.FellShort)
	assert.Contains(t, f.Cause, "librdmacm.so.1 not found")
	assert.Contains(t, f.Cause, Libs[1].Pkg)

	both := hostfstest.Tree(t, map[string]string{inboxLibs + "libibverbs.so.1": "", inboxLibs + "librdmacm.so.1": ""})
	assert.Empty(t, fails(Libraries(both, host, mlx, noProbe)))

	none := hostfstest.Tree(t, map[string]string{"/etc/hostname": "n1\n"})
	one(t, Libraries(none, host, nil, noProbe), verdict.Absent)
	j := Libraries(none, pod, mlx, noProbe)
	assert.Empty(t, fails(j))
	assert.Equal(t, "none", attrs(j)["node_rdma_core"])
}

// The loader's answer per library: each failure with its package.
func TestJudgeLibs(t *testing.T) {
	probe := func(so string) error {
		if so == "librdmacm.so.1" {
			return errors.New("librdmacm.so.1: cannot open shared object file")
		}
		return nil
	}
	j, errs := judgeLibs(probe, "this image's ", remedyImageLibs)
	require.Len(t, errs, 1)
	f := one(t, j, verdict.FellShort)
	assert.Equal(t, "this image's librdmacm.so.1: cannot open shared object file; install "+Libs[1].Pkg, f.Cause)
	assert.Equal(t, remedyImageLibs, f.Remedy)
}

// INST-08: a device whose driver's provider is missing fails, naming the
// device; an unknown driver is only reported.
func TestProviderPerDevice(t *testing.T) {
	devs := []*rdmadev.Device{
		{Name: "mlx5_0", Driver: "mlx5_core"},
		{Name: "irdma0", Driver: "irdma"},
		{Name: "odd0", Driver: "odd_core"},
	}
	j := ProviderPerDevice("this host's", remedyProviders, map[string]string{"mlx5": "/etc/libibverbs.d/mlx5.driver"}, devs)
	f := one(t, j, verdict.FellShort)
	assert.Equal(t, "irdma0", f.Device)
	assert.Contains(t, f.Cause, `needs the libibverbs provider "irdma"`)
	assert.Len(t, j.Findings, 3)

	tree := hostfstest.Tree(t, map[string]string{"/etc/libibverbs.d/mlx5.driver": "driver mlx5\n"})
	j = Providers(tree, host, mlx)
	assert.Empty(t, fails(j))
	assert.Equal(t, "mlx5", attrs(j)["verbs_providers"])
	empty := hostfstest.Tree(t, map[string]string{"/etc/hostname": "n1\n"})
	f = one(t, Providers(empty, host, mlx), verdict.FellShort)
	assert.Contains(t, f.Cause, "no libibverbs provider installed")
	assert.Equal(t, remedyProviders, f.Remedy)
	f = one(t, Providers(empty, host, nil), verdict.Absent) // no user space, no device: nothing installed
	assert.Contains(t, f.Cause, "no libibverbs provider and no RDMA device")
	// A pod's node without user space: the image's providers serve it.
	assert.Empty(t, fails(Providers(empty, pod, mlx)))
}

// INST-10: a NIC without its RDMA device fails with the module to load;
// passthrough is not a failure.
func TestJudgeUncovered(t *testing.T) {
	state := func(m string) string { return m + " not loaded" }
	f := judgeUncovered(&pci.Device{BDF: "0000:3b:00.0", Vendor: 0x15b3, Class: 0x020000, Driver: "mlx5_core"}, state)
	require.NotNil(t, f)
	assert.Equal(t, "modprobe mlx5_ib (MLNX_OFED: /etc/init.d/openibd restart)", f.Remedy)
	assert.Equal(t, "0000:3b:00.0", f.Device)
	assert.Contains(t, f.Cause, "its RDMA driver mlx5_ib is not loaded (mlx5_ib not loaded)")

	f = judgeUncovered(&pci.Device{BDF: "0000:3b:00.1", Vendor: 0x15b3, Class: 0x020000}, state)
	require.NotNil(t, f)
	assert.Contains(t, f.Cause, "has no driver bound")
	f = judgeUncovered(&pci.Device{BDF: "0000:3b:00.2", Driver: "other_en"}, state)
	require.NotNil(t, f)
	assert.Equal(t, "load the RDMA driver for other_en and check dmesg", f.Remedy)
	assert.Nil(t, judgeUncovered(&pci.Device{BDF: "0000:3b:00.3", Driver: "vfio-pci"}, state))

	assert.Equal(t, "0000:3b:00", slot("0000:3b:00.1"))
}

// INST-10: a missing core module fails, each on its own; a built-in one
// shows by its sysfs class; nothing RDMA at all is absent.
func TestModules(t *testing.T) {
	tree := hostfstest.Tree(t, map[string]string{
		"/proc/modules": "ib_core 16384 0 - Live 0x0000000000000000\n",
		"/sys/class/infiniband_verbs/abi_version": "6\n",
	})
	km, err := kmod.New(tree)
	require.NoError(t, err)
	j := Modules(tree, km, mlx, true)
	f := one(t, j, verdict.FellShort)
	assert.Contains(t, f.Cause, "kernel module rdma_ucm is not loaded")
	assert.True(t, strings.HasPrefix(f.Remedy, "modprobe rdma_ucm"))

	ok, state, err := ModuleState(tree, km, "ib_uverbs")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Contains(t, state, "built in or loaded")

	none := hostfstest.Tree(t, map[string]string{"/proc/modules": "nvidia 16384 0 - Live 0x0000000000000000\n"})
	km, err = kmod.New(none)
	require.NoError(t, err)
	one(t, Modules(none, km, nil, false), verdict.Absent)
}

// INST-05: a newer major toolkit than the driver fails with both versions
// as measured and threshold; a newer minor is a noted fact.
func TestJudgeToolkit(t *testing.T) {
	tk := nvdriver.CUDAVersion{Major: 12, Minor: 4}
	j := JudgeToolkit(tk, 11080, "/usr/local/cuda/bin/nvcc")
	f := one(t, j, verdict.FellShort)
	assert.Contains(t, f.Cause, "newer major version than the driver supports (CUDA 11.8)")
	assert.Equal(t, "cuda_toolkit", f.Measured)
	assert.Equal(t, "cuda_driver", f.Threshold)
	assert.Equal(t, "11.8", attrs(j)["cuda_driver"])

	j = JudgeToolkit(tk, 12020, "nvcc")
	assert.Empty(t, fails(j))
	assert.Contains(t, attrs(j)["cuda_minor_compat"], "allowed by CUDA minor-version compatibility")

	j = JudgeToolkit(tk, 12040, "nvcc")
	assert.Empty(t, fails(j))
	assert.NotContains(t, attrs(j), "cuda_minor_compat")

	one(t, JudgeToolkit(tk, -1, "nvcc"), verdict.FellShort)
}

// INST-05 in a pod: no node root is the host's check; a recorded node's
// toolkit is read but needs NVML to be judged.
func TestNodeToolkit(t *testing.T) {
	live, err := hostfs.New("/")
	require.NoError(t, err)
	_, hostOnly, j := NodeToolkit(live, pod)
	assert.Contains(t, hostOnly, "the node's toolkit cannot be seen")
	assert.Empty(t, j.Findings)

	empty := hostfstest.Tree(t, map[string]string{"/etc/hostname": "n1\n"})
	_, hostOnly, _ = NodeToolkit(empty, pod)
	assert.Contains(t, hostOnly, "the node has none under")

	rec := hostfstest.Tree(t, map[string]string{"/usr/local/cuda/version.json": `{"cuda":{"name":"CUDA SDK","version":"12.4.1"},"cuda_nvcc":{"name":"CUDA NVCC","version":"12.4.131"}}`, "/usr/local/cuda/bin/nvcc": ""})
	tk, hostOnly, j := NodeToolkit(rec, pod)
	assert.Empty(t, hostOnly)
	assert.Equal(t, 12, tk.Version.Major)
	f := one(t, j, verdict.Absent)
	assert.Contains(t, f.Cause, "needs the running host")
}

func TestDriver(t *testing.T) {
	_, ok, err := Driver(hostfstest.Tree(t, map[string]string{"/proc/": ""}))
	assert.False(t, ok)
	assert.NoError(t, err)
	_, ok, err = Driver(hostfstest.Tree(t, map[string]string{nvdriver.VersionFile: "garbage\n"}))
	assert.False(t, ok)
	f, isF := verdict.As(err)
	require.True(t, isF)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Contains(t, f.Remedy, "reinstall the NVIDIA driver")
}

// INST-09 live: only a failed unit fails; openibd's state is a fact.
func TestJudgeUnit(t *testing.T) {
	assert.Empty(t, JudgeUnit("rdma.service", "active").Findings)
	assert.Empty(t, JudgeUnit("rdma.service", "inactive").Findings)
	f := one(t, JudgeUnit("rdma.service", UnitFailed), verdict.FellShort)
	assert.Contains(t, f.Remedy, "journalctl -u rdma.service")
	assert.Equal(t, "activating", attrs(JudgeUnit("openibd.service", "activating"))["openibd"])
}

// INST-12: each sign gives its remedy, most specific first.
func TestPortSignsRemedy(t *testing.T) {
	assert.Equal(t, "check dmesg for the NIC driver's port messages and the switch port", PortSigns{Port: 1}.Remedy())
	r := PortSigns{Port: 1, OtherPort: "mlx5_0 port 2", Init: true, PhysDown: true}.Remedy()
	i, j, k := strings.Index(r, "set GDR_IB_PORT"), strings.Index(r, "opensm"), strings.Index(r, "check cable")
	assert.True(t, i >= 0 && j > i && k > j, r)
	assert.Contains(t, r, "cable port 1")
}

// INST-14: the probe program's output says which install step failed.
func TestProbeRemedy(t *testing.T) {
	exit := errors.New("exit status 3")
	for out, want := range map[string]string{
		"./gdr_probe: error while loading shared libraries: libcuda.so.1": "ldconfig",
		"ibv_get_device_list failed: errno 2 (No such file or directory)": "modprobe ib_uverbs",
		"ibv_devices=1\ncuInit=803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH\n":   "nvidia-modprobe -u",
		"ibv_devices=1\ncuInit=35 CUDA_ERROR_INSUFFICIENT_DRIVER\n":       "install one NVIDIA driver version",
		"ibv_devices=1\ncuInit=100 CUDA_ERROR_NO_DEVICE\n":                "CUDA_VISIBLE_DEVICES",
		"": "see the program's output",
	} {
		assert.Contains(t, ProbeRemedy(exit, out), want, out)
	}
	assert.Contains(t, ProbeRemedy(errors.New("fork/exec gdr_probe: permission denied"), ""), "noexec")
}

func TestNodeNotVisible(t *testing.T) {
	live, err := hostfs.New("/")
	require.NoError(t, err)
	j := NodeNotVisible(live, pod, "rdma-core")
	assert.Equal(t, "not visible from this container (GDR_HOST_ROOT=/)", attrs(j)["node_files"])
	require.Len(t, j.Findings, 1)
	assert.Equal(t, verdict.Info, j.Findings[0].Level)
	assert.Empty(t, NodeNotVisible(live, host, "rdma-core").Attrs)
}

// INST-13: each registration path, in the order the engine prefers them,
// and the failures: both peer-memory modules, or no path at all.
func TestPeerMemory(t *testing.T) {
	const openDriver = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@x)  Thu Jun 26 22:03:48 UTC 2025\n"
	const propDriver = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n"
	const live = " 16384 0 - Live 0x0000000000000000\n"
	tree := func(mods, driver, release string) (*hostfs.Root, *kmod.Host) {
		files := map[string]string{"/proc/modules": mods, kmod.ReleaseFile: release}
		if driver != "" {
			files[nvdriver.VersionFile] = driver
		}
		r := hostfstest.Tree(t, files)
		km, err := kmod.New(r)
		require.NoError(t, err)
		return r, km
	}
	soft := []*rdmadev.Device{{Name: "rxe0", Driver: "rdma_rxe", DriverInferred: true}}
	verbs := &nvdriver.VerbsDmabuf{Has: true}

	r, km := tree("nvidia_peermem"+live+"nv_peer_mem"+live, openDriver, "6.8.0\n")
	f := one(t, PeerMemory(r, km, mlx, verbs), verdict.FellShort)
	assert.Contains(t, f.Remedy, "rmmod nv_peer_mem")

	r, km = tree("nvidia_peermem"+live, openDriver, "6.8.0\n")
	j := PeerMemory(r, km, mlx, verbs)
	assert.Empty(t, fails(j))
	assert.Equal(t, string(PeerNvidiaPeermem), attrs(j)["peer_memory"])
	one(t, PeerMemory(r, km, soft, verbs), verdict.Absent)
	one(t, PeerMemory(r, km, nil, verbs), verdict.Absent)

	r, km = tree("nv_peer_mem"+live, propDriver, "5.15.0\n")
	assert.Equal(t, string(PeerLegacy), attrs(PeerMemory(r, km, mlx, nil))["peer_memory"])

	// No module: the open driver on a new kernel registers through dma-buf.
	r, km = tree("mlx5_ib"+live, openDriver, "6.8.0\n")
	j = PeerMemory(r, km, mlx, verbs)
	assert.Empty(t, fails(j))
	assert.Equal(t, string(PeerDmabuf), attrs(j)["peer_memory"])
	// ... but not without ibv_reg_dmabuf_mr, nor on the proprietary module.
	f = one(t, PeerMemory(r, km, mlx, &nvdriver.VerbsDmabuf{}), verdict.FellShort)
	assert.True(t, strings.HasPrefix(f.Remedy, "modprobe nvidia-peermem"))
	assert.Contains(t, f.Cause, "rdma-core < 34")
	r, km = tree("mlx5_ib"+live, propDriver, "6.8.0\n")
	f = one(t, PeerMemory(r, km, mlx, verbs), verdict.FellShort)
	assert.Contains(t, f.Cause, "proprietary kernel module")

	r, km = tree("mlx5_ib"+live, "", "6.8.0\n")
	one(t, PeerMemory(r, km, mlx, verbs), verdict.Absent)
}

// INST-12: the primary rail's port ACTIVE passes; otherwise the failure
// lists every port and the remedy follows what the ports show.
func TestPort(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{"/sys/class/infiniband/": ""})
	port := func(num int, state, phys, ll string) rdmadev.Port {
		return rdmadev.Port{Num: num, State: state, PhysState: phys, LinkLayer: ll, RawState: state, RawPhysState: phys}
	}
	dev := &rdmadev.Device{Name: "mlx5_0", Ports: []rdmadev.Port{port(1, "INIT", "LinkUp", "InfiniBand"), port(2, "ACTIVE", "LinkUp", "InfiniBand")}}
	nic := &rails.NIC{Name: "mlx5_0", Port: 1, PortState: "INIT"}
	sel := &rails.Selection{Host: &rails.Host{Devices: []*rdmadev.Device{dev}, NICDir: true}, Port: 1, Primary: &rails.Rail{NIC: nic}}

	j := Port(root, sel, "")
	f := one(t, j, verdict.FellShort)
	assert.Contains(t, f.Cause, "no RDMA port is ACTIVE at port 1 (GDR_IB_PORT)")
	assert.Contains(t, f.Cause, `mlx5_0 port 2: state "ACTIVE"`)
	assert.Contains(t, f.Remedy, "mlx5_0 port 2 is ACTIVE: set GDR_IB_PORT")
	assert.Contains(t, f.Remedy, "opensm")
	assert.NotContains(t, f.Remedy, "check cable")
	f = one(t, Port(root, sel, "mlx5_0"), verdict.FellShort)
	assert.Contains(t, f.Cause, "GDR_RDMA_DEVICE=mlx5_0 port 1 (GDR_IB_PORT) is not ACTIVE")

	nic.PortState = "ACTIVE"
	j = Port(root, sel, "")
	assert.Empty(t, fails(j))
	assert.Equal(t, "mlx5_0/1", attrs(j)["active_port"])

	// No candidate NIC: any ACTIVE port at GDR_IB_PORT is still one.
	sel.Primary = nil
	sel.NICs = []*rails.NIC{{Name: "mlx5_0", Port: 1, PortState: "ACTIVE", Why: "no /dev/infiniband/uverbs0"}}
	assert.Equal(t, "mlx5_0/1", attrs(Port(root, sel, ""))["active_port"])

	sel.Devices = nil
	f = one(t, Port(root, sel, ""), verdict.Absent)
	assert.Contains(t, f.Cause, "/sys/class/infiniband is empty")
}

// INST-01: GPUs without a driver fail; a driver that disagrees with its
// module fails; no GPU and no driver is absent.
func TestDriverLoaded(t *testing.T) {
	const driver = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@x)  Thu Jun 26 22:03:48 UTC 2025\n"
	gpu := []*pci.Device{{BDF: "0000:3b:00.0", Vendor: 0x10de, Class: 0x030200, Driver: "nvidia"}}
	tree := func(files map[string]string) (*hostfs.Root, *kmod.Host) {
		r := hostfstest.Tree(t, files)
		km, err := kmod.New(r)
		require.NoError(t, err)
		return r, km
	}
	r, km := tree(map[string]string{"/proc/modules": "nvidia 16384 0 - Live 0x0000000000000000\n",
		"/sys/module/nvidia/version": "580.159.04\n", nvdriver.VersionFile: driver})
	j := DriverLoaded(r, km, gpu)
	assert.Empty(t, fails(j))
	assert.Equal(t, "580.159.04", attrs(j)["driver_version"])

	r, km = tree(map[string]string{"/proc/modules": "nvidia 16384 0 - Live 0x0000000000000000\n",
		"/sys/module/nvidia/version": "570.86.15\n", nvdriver.VersionFile: driver})
	f := one(t, DriverLoaded(r, km, gpu), verdict.FellShort)
	assert.Contains(t, f.Cause, "/sys/module/nvidia/version says 570.86.15")
	assert.Contains(t, f.Remedy, "reload the driver")

	r, km = tree(map[string]string{"/proc/modules": "mlx5_ib 16384 0 - Live 0x0000000000000000\n"})
	f = one(t, DriverLoaded(r, km, gpu), verdict.FellShort)
	assert.Contains(t, f.Cause, "0000:3b:00.0 (nvidia) on the PCI bus but no NVIDIA driver loaded")
	assert.Equal(t, installDriver, f.Remedy)
	f = one(t, DriverLoaded(r, km, nil), verdict.Absent)
	assert.Contains(t, f.Cause, "no NVIDIA driver and no NVIDIA GPU")

	r, km = tree(map[string]string{"/proc/modules": "nvidia 16384 0 - Live 0x0000000000000000\n"})
	f = one(t, DriverLoaded(r, km, nil), verdict.FellShort)
	assert.Contains(t, f.Cause, "module nvidia is loaded")
}

// INST-03: each GPU nouveau holds fails, naming it.
func TestNouveau(t *testing.T) {
	r := hostfstest.Tree(t, map[string]string{"/proc/modules": "nouveau 16384 0 - Live 0x0000000000000000\n"})
	km, err := kmod.New(r)
	require.NoError(t, err)
	gpus := []*pci.Device{{BDF: "0000:3b:00.0", Driver: "nouveau"}, {BDF: "0000:5e:00.0", Driver: "nvidia"}}
	f := one(t, Nouveau(r, km, gpus), verdict.FellShort)
	assert.Equal(t, "0000:3b:00.0", f.Device)
	assert.Equal(t, nvdriver.NouveauRemedy, f.Remedy)
	assert.Empty(t, fails(Nouveau(r, km, gpus[1:])))
	one(t, Nouveau(r, km, nil), verdict.Absent)
}

// INST-11 on recorded trees: a device's missing verbs node fails naming
// it; in a pod the NICs not given are a fact, none given fails; no
// uverbs class at all is ib_uverbs missing.
func TestDeviceNodes(t *testing.T) {
	two := []*rdmadev.Device{{Name: "mlx5_0", PCI: "0000:3b:00.0"}, {Name: "mlx5_1", PCI: "0000:5e:00.0"}}
	files := map[string]string{
		"/sys/class/infiniband_verbs/uverbs0/ibdev": "mlx5_0\n",
		"/sys/class/infiniband_verbs/uverbs1/ibdev": "mlx5_1\n",
		"/dev/infiniband/uverbs1":                   "",
		"/dev/infiniband/rdma_cm":                   "",
	}
	r := hostfstest.Tree(t, files)
	f := one(t, DeviceNodes(r, two, true, false), verdict.FellShort)
	assert.Contains(t, f.Cause, "/dev/infiniband/uverbs0 (verbs of mlx5_0) is missing")
	assert.Contains(t, f.Remedy, "--device /dev/infiniband/uverbs0")

	j := DeviceNodes(r, two, true, true)
	assert.Empty(t, fails(j))
	assert.Equal(t, "mlx5_0 (/dev/infiniband/uverbs0)", attrs(j)["nics_not_given"])
	assert.Equal(t, "mlx5_1", attrs(j)["nics_given"])

	delete(files, "/dev/infiniband/uverbs1")
	f = one(t, DeviceNodes(hostfstest.Tree(t, files), two, true, true), verdict.FellShort)
	assert.Contains(t, f.Cause, "no RDMA device was given to this container")
	assert.Equal(t, remedyNotGiven, f.Remedy)

	noVerbs := hostfstest.Tree(t, map[string]string{"/proc/modules": "mlx5_ib 16384 0 - Live 0x0000000000000000\n", "/dev/infiniband/rdma_cm": ""})
	f = one(t, DeviceNodes(noVerbs, two, true, false), verdict.FellShort)
	assert.Contains(t, f.Cause, "user space cannot reach them")

	one(t, DeviceNodes(hostfstest.Tree(t, map[string]string{"/dev/infiniband/.gitkeep": ""}), nil, false, false), verdict.Absent)
}

// On the running host a node is opened: a regular file is not a device.
func TestNodeLive(t *testing.T) {
	live, err := hostfs.New("/")
	require.NoError(t, err)
	p := t.TempDir() + "/uverbs9"
	require.NoError(t, os.WriteFile(p, nil, 0o666))
	f := one(t, node(live, p, "verbs of mlx5_9"), verdict.FellShort)
	assert.Contains(t, f.Cause, "is not a character device")
	j := node(live, "/dev/null", "a character device")
	assert.Empty(t, fails(j))
}

// INST-04: a GPU reporting another driver version fails naming it, as does
// a count that differs from the bus's; an unreadable line fails at once.
func TestJudgeSMI(t *testing.T) {
	gpus := []*pci.Device{{BDF: "0000:3b:00.0", Driver: "nvidia"}, {BDF: "0000:5e:00.0", Driver: "nvidia"}}
	out := "00000000:3B:00.0, NVIDIA H200, 580.159.04\n00000000:5E:00.0, NVIDIA H200, 580.159.04\n"
	j := JudgeSMI(out, "580.159.04", gpus)
	assert.Empty(t, fails(j))
	assert.Equal(t, "2", attrs(j)["gpu_count"])

	f := one(t, JudgeSMI(strings.Replace(out, "580.159.04\n0", "570.86.15\n0", 1), "580.159.04", gpus), verdict.FellShort)
	assert.Equal(t, "0000:3b:00.0", f.Device)
	assert.Contains(t, f.Cause, "nvidia-smi reports driver 570.86.15 for GPU 0000:3b:00.0")

	f = one(t, JudgeSMI(out, "580.159.04", gpus[:1]), verdict.FellShort)
	assert.Contains(t, f.Cause, "nvidia-smi lists 2 GPU(s) but 1 PCI GPU(s)")

	f = one(t, JudgeSMI("No devices were found\n", "580.159.04", gpus), verdict.FellShort)
	assert.Contains(t, f.Cause, `nvidia-smi printed "No devices were found"`)
	f = one(t, JudgeSMI("zz:00.0, x, 580.159.04\n", "580.159.04", gpus), verdict.FellShort)
	assert.Contains(t, f.Cause, "zz:00.0")

	assert.True(t, strings.HasPrefix(NoSMI("580.159.04", []string{"PATH=/usr/bin"}, true).Remedy, "in a container the NVIDIA container toolkit"))
	assert.True(t, strings.HasPrefix(NoSMI("580.159.04", nil, false).Remedy, "install the driver's utilities"))
}

// INST-02: NVML's version must be the module's; NVML and the bus must
// list the same GPUs, each difference named.
func TestNVML(t *testing.T) {
	assert.Nil(t, NVMLVersion("580.159.04", "580.159.04"))
	f := NVMLVersion("570.86.15", "580.159.04")
	require.NotNil(t, f)
	assert.Contains(t, f.Remedy, "reboot")

	gpus := []*pci.Device{{BDF: "0000:3b:00.0", Driver: "nvidia"}, {BDF: "0000:5e:00.0", Driver: "vfio-pci"}}
	assert.Empty(t, fails(NVMLSeesGPUs([]string{"0000:5e:00.0", "0000:3b:00.0"}, gpus, "/sys/bus/pci/devices")))
	j := NVMLSeesGPUs([]string{"0000:3b:00.0", "0000:9a:00.0"}, gpus, "/sys/bus/pci/devices")
	fs := fails(j)
	require.Len(t, fs, 2)
	assert.Contains(t, fs[0].Cause, "not seen by NVML: 0000:5e:00.0 (vfio-pci)")
	assert.Contains(t, fs[1].Cause, "NVML reports GPU(s) 0000:9a:00.0 that are not in /sys/bus/pci/devices")
}

// INST-06: below Pascal fails, Pascal and newer pass.
func TestJudgeCC(t *testing.T) {
	assert.Nil(t, JudgeCC("0000:3b:00.0", "Tesla P100", 6, "6.0"))
	assert.Nil(t, JudgeCC("0000:3b:00.0", "NVIDIA H200", 9, "9.0"))
	f := JudgeCC("0000:3b:00.0", "Tesla K80", 3, "3.7")
	require.NotNil(t, f)
	assert.Equal(t, "0000:3b:00.0", f.Device)
	assert.Contains(t, f.Cause, "compute capability 3.7, below 6.0")
}

// INST-02/04/05/06's tool failures carry their remedies from here, so the
// tests record a finding and write no remedy of their own.
func TestToolFailureFindings(t *testing.T) {
	exit := errors.New("exit status 9")
	for _, c := range []struct {
		f       *verdict.Finding
		outcome verdict.Outcome
		cause   string
		remedy  string
	}{
		{NVMLMissing("580.1", "libnvidia-ml.so.1", "libnvidia-compute", errors.New("not found")), verdict.FellShort,
			"NVIDIA driver 580.1 is loaded but libnvidia-ml.so.1 does not load: not found", "install libnvidia-compute"},
		{SMIFailed(exit, "Failed to initialize NVML: Driver/library version mismatch\n"), verdict.FellShort,
			"exit status 9:\nFailed to initialize NVML: Driver/library version mismatch\n", "follow nvidia-smi's message"},
		{NoNvcc([]string{"PATH", "/usr/local/cuda/bin"}), verdict.Absent,
			"CUDA toolkit not installed: no nvcc (looked in PATH, /usr/local/cuda/bin)", "install the CUDA toolkit"},
		{NvccFailed(exit, "boom"), verdict.FellShort, "exit status 9:\nboom", "reinstall the CUDA toolkit"},
		{NvccUnparsed("/opt/cuda/bin/nvcc", exit), verdict.FellShort, "exit status 9", "reinstall the CUDA toolkit (nvcc at /opt/cuda/bin/nvcc)"},
		{NoSelectedGPU("7", 2), verdict.FellShort,
			`the selected GPU(s) (GDR_GPU="7", GDR_RAILS) match none of NVML's 2 GPU(s)`, "check that NVML sees the GPUs sysfs lists (INST-02)"},
	} {
		require.NotNil(t, c.f)
		assert.Equal(t, c.outcome, c.f.Kind(), c.cause)
		assert.Equal(t, c.cause, c.f.Cause)
		assert.True(t, strings.HasPrefix(c.f.Remedy, c.remedy), c.f.Remedy)
	}
	long := strings.Repeat("line\n", 40)
	assert.Contains(t, SMIFailed(exit, long).Cause, "... (21 more lines)", "tool output is kept short")
}
