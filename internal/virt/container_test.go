package virt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func noEnv(string) (string, bool) { return "", false }

func TestDetectContainer(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		in      bool
		runtime string
		signs   []string
	}{
		{name: "bare host", files: map[string]string{
			PID1Cgroup: "0::/init.scope\n", SelfCgroup: "0::/user.slice/user-0.slice/session-1.scope\n"}},
		{name: "docker", files: map[string]string{DockerEnv: ""},
			in: true, runtime: "docker", signs: []string{"/.dockerenv exists"}},
		{name: "podman", files: map[string]string{ContainerEnv: "engine=\"podman-4.3.1\"\n", PID1Environ: "PATH=/bin\x00container=podman\x00"},
			in: true, runtime: "podman", signs: []string{"/proc/1/environ: container=podman", "/run/.containerenv exists"}},
		{name: "kubernetes pod, cgroup v1 paths", files: map[string]string{
			PID1Cgroup:                "12:pids:/kubepods/besteffort/pod1c2d/4f0e\n0::/\n",
			ServiceAccount + "/token": "x"},
			in: true, runtime: "kubernetes", signs: []string{ServiceAccount + " exists", "/proc/1/cgroup: /kubepods/besteffort/pod1c2d/4f0e"}},
		{name: "containerd under systemd", files: map[string]string{
			SelfCgroup: "0::/system.slice/containerd.service/kubepods-burstable-pod12.slice:cri-containerd:9a1\n"},
			in: true, runtime: "kubernetes", signs: []string{"/proc/self/cgroup"}},
		{name: "cgroup namespace hides the path: no sign", files: map[string]string{PID1Cgroup: "0::/\n"}},
		{name: "oci names no engine", files: map[string]string{SystemdContainer: "oci\n"},
			in: true, signs: []string{"/run/systemd/container: oci"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DetectContainer(root(t, c.files), noEnv)
			require.NoError(t, err)
			assert.Equal(t, c.in, got.In, got.String())
			assert.Equal(t, c.runtime, got.Runtime)
			assert.Empty(t, got.NodeRoot, "a recorded tree is no mounted node root")
			for _, s := range c.signs {
				assert.Contains(t, joinSigns(got), s)
			}
			if !c.in {
				assert.Empty(t, got.Signs)
				assert.Contains(t, got.String(), "not a container")
			}
		})
	}
}

func joinSigns(c Container) string {
	s := ""
	for _, x := range c.Signs {
		s += x + "\n"
	}
	return s
}

// The environment is the live process's: a recorded tree ignores it, so
// a fixture does not turn into a pod on a CI runner that happens to be one.
func TestDetectContainerEnvOnlyLive(t *testing.T) {
	kube := func(k string) (string, bool) {
		if k == "KUBERNETES_SERVICE_HOST" {
			return "10.96.0.1", true
		}
		return "", false
	}
	got, err := DetectContainer(root(t, map[string]string{"/proc/cpuinfo": ""}), kube)
	require.NoError(t, err)
	assert.False(t, got.In)
}

// The node's root mounted elsewhere (a pod's GDR_HOST_ROOT=/host) is a sign,
// and NodeRoot names it; the process's own files are read from "/".
func TestDetectContainerNodeMounted(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/random/boot_id"); err != nil {
		t.Skipf("no /proc/sys/kernel/random/boot_id on this machine: %v", err)
	}
	dir := t.TempDir()
	require.NoError(t, os.Symlink("/proc", filepath.Join(dir, "proc")))
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	require.True(t, r.NodeMounted())
	got, err := DetectContainer(r, noEnv)
	require.NoError(t, err)
	assert.True(t, got.In)
	assert.Equal(t, dir, got.NodeRoot)
	assert.Contains(t, joinSigns(got), "GDR_HOST_ROOT="+dir+" is this kernel's root mounted at "+dir)
}

func TestParseStatus(t *testing.T) {
	capEff, euid, err := ParseStatus("Name:\tgdr\nUid:\t1000\t0\t0\t0\nCapEff:\t00000000a82425fb\n")
	require.NoError(t, err)
	assert.Equal(t, uint64(0xa82425fb), capEff)
	assert.Equal(t, 0, euid)
	for _, bad := range []string{"Uid:\t0\t0\t0\t0\n", "CapEff:\tzz\nUid:\t0 0 0 0\n", "CapEff:\t0\nUid:\t0\n"} {
		_, _, err := ParseStatus(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// Docker's default set (0xa80425fb) lacks CAP_SYS_ADMIN and CAP_NET_ADMIN;
// deploy/k8s's pod adds SYS_ADMIN and IPC_LOCK to the runtime's default.
func TestNeed(t *testing.T) {
	const dockerDefault = 0xa80425fb
	pod := func(capEff uint64) Process {
		return Process{Container: Container{In: true, Runtime: "kubernetes"}, CapsKnown: true, CapEff: capEff, EUID: 0}
	}
	p := pod(dockerDefault)
	assert.True(t, p.Lacks(CapSysAdmin, true))
	assert.True(t, p.Lacks(CapNetAdmin, false))
	assert.True(t, p.Lacks(CapSysRawIO, false), "bit 17 is clear in docker's default set")
	assert.False(t, p.Lacks(Cap{13, "CAP_NET_RAW"}, false), "bit 13 is set in docker's default set")
	need := p.Need(CapSysAdmin, true, "PCIe config space past 64 bytes")
	assert.Contains(t, need.Cause, "PCIe config space past 64 bytes needs CAP_SYS_ADMIN, which this container lacks")
	assert.Contains(t, need.Remedy, "add SYS_ADMIN to the container's securityContext.capabilities.add")
	assert.Equal(t, verdict.Absent, need.Kind())

	granted := pod(dockerDefault | 1<<CapSysAdmin.Bit | 1<<CapIPCLock.Bit)
	assert.False(t, granted.Lacks(CapSysAdmin, true))
	rootless := granted
	rootless.UserNS = true
	assert.True(t, rootless.Lacks(CapSysAdmin, true), "a user namespace's CAP_SYS_ADMIN does not open config space")
	assert.False(t, rootless.Lacks(CapSysAdmin, false))
	assert.Contains(t, rootless.Need(CapSysAdmin, true, "x").Cause, "only in a user namespace")

	user := Process{CapsKnown: true, EUID: 1000}
	assert.Contains(t, user.Need(CapNetAdmin, false, "ethtool -m").Line(), "which this process lacks (effective UID 1000, CapEff 0x0); remedy: run the suite as root")
	unknown := Process{EUID: -1}
	assert.False(t, unknown.Lacks(CapSysAdmin, true), "unknown is not lacking")
	assert.Contains(t, unknown.Need(CapSysAdmin, true, "x").Remedy, "run the suite as root")
}

func TestInspectReadsOwnStatus(t *testing.T) {
	r := root(t, map[string]string{DockerEnv: "", SelfStatus: "Uid:\t0\t0\t0\t0\nCapEff:\t00000000a80425fb\n", SelfUIDMap: "         0          0 4294967295\n"})
	p, err := Inspect(r, noEnv)
	require.NoError(t, err)
	assert.True(t, p.Container.In)
	assert.True(t, p.CapsKnown)
	assert.False(t, p.UserNS)
	assert.True(t, p.Lacks(CapSysAdmin, true))
	r = root(t, map[string]string{SelfStatus: "garbage"})
	_, err = Inspect(r, noEnv)
	assert.ErrorContains(t, err, "no CapEff or Uid line")
}

// A non-privileged container's /sys is read-only (runc mounts sysfs ro):
// mstflint cannot open the NIC's registers; a privileged one's is not.
func TestRegisterAccess(t *testing.T) {
	const podMounts = "1529 1510 0:372 / / rw,relatime master:620 - overlay overlay rw\n" +
		"1533 1529 0:376 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n" +
		"1540 1529 0:23 / /host ro,relatime - ext4 /dev/sda1 rw\n"
	ro, found := MountReadOnly(podMounts, "/sys")
	assert.True(t, found)
	assert.True(t, ro)
	_, found = MountReadOnly(podMounts, "/proc")
	assert.False(t, found)
	ro, _ = MountReadOnly("22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n", "/sys")
	assert.False(t, ro)

	r := root(t, map[string]string{DockerEnv: "", SelfStatus: "Uid:\t0\t0\t0\t0\nCapEff:\t00000000a82425fb\n", SelfMountInfo: podMounts})
	p, err := Inspect(r, noEnv)
	require.NoError(t, err)
	assert.True(t, p.SysReadOnly)
	require.NotNil(t, p.RegisterAccess())
	assert.Contains(t, p.RegisterAccess().Cause, "/sys is mounted read-only here")
	assert.Contains(t, p.RegisterAccess().Remedy, "privileged: true")
	p.SysReadOnly = false
	assert.Nil(t, p.RegisterAccess())
	p.EUID = 1000
	assert.Contains(t, p.RegisterAccess().Cause, "effective UID is 1000")
	assert.Nil(t, Process{}.RegisterAccess(), "nothing known stops it")
}
