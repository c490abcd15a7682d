package virt

// Whether this process runs in a container, and what it may do there.
//
// A container shares the host's kernel, so sysfs, /proc/modules and the
// devices are the node's; what differs is the process's own files (its
// image's /usr, /etc and /dev) and its privileges. The suite reads the node
// through GDR_HOST_ROOT (deploy/k8s mounts the node's "/" at /host) and
// must know when its own files are not the node's: the rdma-core it loads
// is the image's, its /dev holds only the device nodes it was given, and
// its capabilities are what the manifest granted.
//
// The signs follow systemd's detect_container (src/basic/virt.c): the
// "container" variable of PID 1's environment, /run/host/container-manager,
// /run/systemd/container, then detect_container_files' /run/.containerenv
// (podman) and /.dockerenv (docker). containerd and CRI-O, which run
// Kubernetes pods, write none of these files, so the Kubernetes signs are
// added: KUBERNETES_SERVICE_HOST (the kubelet sets it in every container),
// the service account mount, and the cgroup of PID 1 and of this process
// naming kubepods, docker, containerd, libpod or crio (absent when the
// container has its own cgroup namespace, where the path reads "/"). The
// node's root mounted at GDR_HOST_ROOT (hostfs.Root.NodeMounted) is a sign
// too. Signs are read from this process's own files (hostfs.Root.Own): on
// a recorded tree the tree's, so a fixture can carry them; the environment
// only counts on the running host.

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Container is what DetectContainer found.
type Container struct {
	// In: at least one sign says this process runs in a container.
	In bool
	// Runtime names the engine when a sign tells it ("kubernetes",
	// "docker", "podman", "containerd", "cri-o"); "" otherwise.
	Runtime string
	// Signs are the evidence, "where: what", in the order read.
	Signs []string
	// NodeRoot is the directory the node's "/" is mounted at (the host
	// root, GDR_HOST_ROOT) when it is; "" when this process sees only its
	// own files as the host's (GDR_HOST_ROOT unset in a container).
	NodeRoot string
}

// String is "container (kubernetes; signs: ...)" or "not a container".
func (c Container) String() string {
	if !c.In {
		return "not a container (no sign of one)"
	}
	r := c.Runtime
	if r == "" {
		r = "unknown engine"
	}
	return "container (" + r + "; signs: " + strings.Join(c.Signs, "; ") + ")"
}

// Where the signs are read, in this process's own files.
const (
	DockerEnv        = "/.dockerenv"
	ContainerEnv     = "/run/.containerenv"
	ContainerManager = "/run/host/container-manager"
	SystemdContainer = "/run/systemd/container"
	ServiceAccount   = "/var/run/secrets/kubernetes.io/serviceaccount"
	PID1Environ      = "/proc/1/environ"
	PID1Cgroup       = "/proc/1/cgroup"
	SelfCgroup       = "/proc/self/cgroup"
	SelfStatus       = "/proc/self/status"
	SelfUIDMap       = "/proc/self/uid_map"
	SelfMountInfo    = "/proc/self/mountinfo"
)

// cgroupEngines are the words a container engine puts in its cgroup paths,
// most specific first.
var cgroupEngines = []struct{ word, engine string }{
	{"kubepods", "kubernetes"}, {"libpod", "podman"}, {"crio", "cri-o"},
	{"cri-containerd", "containerd"}, {"containerd", "containerd"}, {"docker", "docker"},
}

// DetectContainer reads the signs for root r: its own files (r.Own()), the
// environment through lookupEnv when r is the running host, and whether r
// is the node's root mounted elsewhere. Files that are absent are no sign;
// other read errors are returned with what could be read.
func DetectContainer(r *hostfs.Root, lookupEnv func(string) (string, bool)) (Container, error) {
	own := r.Own()
	var c Container
	var errs []error
	read := func(p string) (string, bool) {
		b, err := own.ReadFile(p)
		if err != nil {
			// PID 1's environment is readable only by its user: unknown,
			// not an error.
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
				errs = append(errs, err)
			}
			return "", false
		}
		return strings.TrimSpace(string(b)), true
	}
	sign := func(s, engine string) {
		c.In = true
		c.Signs = append(c.Signs, s)
		if c.Runtime == "" {
			c.Runtime = engine
		}
	}
	// PID 1's environment: NUL-separated; readable by root in the container.
	if env, ok := read(PID1Environ); ok {
		for _, kv := range strings.Split(env, "\x00") {
			if v, ok := strings.CutPrefix(kv, "container="); ok && v != "" {
				sign(PID1Environ+": container="+v, engineName(v))
			}
		}
	}
	for _, f := range []string{ContainerManager, SystemdContainer} {
		if v, ok := read(f); ok && v != "" {
			sign(f+": "+v, engineName(v))
		}
	}
	if own.Exists(ContainerEnv) {
		sign(ContainerEnv+" exists", "podman")
	}
	if own.Exists(DockerEnv) {
		sign(DockerEnv+" exists", "docker")
	}
	if r.IsLive() && lookupEnv != nil {
		if v, ok := lookupEnv("KUBERNETES_SERVICE_HOST"); ok && v != "" {
			sign("environment: KUBERNETES_SERVICE_HOST="+v, "kubernetes")
		}
	}
	if own.Exists(ServiceAccount) {
		sign(ServiceAccount+" exists", "kubernetes")
	}
	for _, f := range []string{PID1Cgroup, SelfCgroup} {
		v, ok := read(f)
		if !ok {
			continue
		}
		if path, engine := cgroupEngine(v); engine != "" {
			sign(f+": "+path, engine)
		}
	}
	if r.NodeMounted() {
		c.NodeRoot = r.Dir()
		sign(fmt.Sprintf("GDR_HOST_ROOT=%s is this kernel's root mounted at %s (its proc is this kernel's procfs)", r.Dir(), r.Dir()), "")
	}
	return c, errors.Join(errs...)
}

// engineName maps the value of a container variable or manager file to an
// engine's name ("oci" says only that it is an OCI runtime).
func engineName(v string) string {
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "oci", "":
		return ""
	case "crio":
		return "cri-o"
	}
	return v
}

// cgroupEngine finds an engine's word in a /proc/<pid>/cgroup file: one
// "id:controllers:path" line per hierarchy (cgroup v2: "0::path").
func cgroupEngine(s string) (path, engine string) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, e := range cgroupEngines {
			if strings.Contains(f[2], e.word) {
				return f[2], e.engine
			}
		}
	}
	return "", ""
}

// Cap is a Linux capability (include/uapi/linux/capability.h).
type Cap struct {
	Bit  uint
	Name string // CAP_SYS_ADMIN
}

// Short is the name without "CAP_", as Kubernetes' securityContext and
// docker's --cap-add spell it.
func (c Cap) Short() string { return strings.TrimPrefix(c.Name, "CAP_") }

// The capabilities the suite's checks need (docs/checks.md, "In a
// container", says which check needs which and why).
var (
	CapNetAdmin = Cap{12, "CAP_NET_ADMIN"}
	CapIPCLock  = Cap{14, "CAP_IPC_LOCK"}
	CapSysRawIO = Cap{17, "CAP_SYS_RAWIO"}
	CapSysAdmin = Cap{21, "CAP_SYS_ADMIN"}
)

// Process is where this process runs and what it may do there.
type Process struct {
	Container Container
	// CapsKnown: CapEff and EUID were read from SelfStatus (of Own).
	CapsKnown bool
	CapEff    uint64
	EUID      int
	// UserNS: the process runs in a user namespace other than the
	// initial one (SelfUIDMap is not the identity map), so its
	// capabilities do not count where the kernel asks for them in the
	// initial namespace (PCI config space: file_ns_capable(...,
	// &init_user_ns, CAP_SYS_ADMIN)).
	UserNS bool
	// SysKnown: SelfMountInfo was read; SysReadOnly: /sys is mounted
	// read-only for this process, as a non-privileged container's is
	// (runc mounts sysfs ro unless privileged).
	SysKnown, SysReadOnly bool
}

// Inspect reads the container signs and this process's capabilities.
func Inspect(r *hostfs.Root, lookupEnv func(string) (string, bool)) (Process, error) {
	c, err := DetectContainer(r, lookupEnv)
	p := Process{Container: c, EUID: -1}
	own := r.Own()
	errs := []error{err}
	if b, rerr := own.ReadFile(SelfStatus); rerr == nil {
		capEff, euid, perr := ParseStatus(string(b))
		if perr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", own.Host(SelfStatus), perr))
		} else {
			p.CapsKnown, p.CapEff, p.EUID = true, capEff, euid
		}
	} else if !errors.Is(rerr, fs.ErrNotExist) {
		errs = append(errs, rerr)
	}
	if b, rerr := own.ReadFile(SelfUIDMap); rerr == nil {
		p.UserNS = !identityMap(string(b))
	}
	// mountinfo grows with the mounts (a node's pod: a few hundred lines).
	if b, rerr := own.ReadFileMax(SelfMountInfo, 4<<20); rerr == nil {
		p.SysReadOnly, p.SysKnown = MountReadOnly(string(b), "/sys")
	}
	return p, errors.Join(errs...)
}

// MountReadOnly reports whether the mount at mountPoint is read-only, from
// /proc/<pid>/mountinfo (proc(5): field 5 the mount point, field 6 its
// per-mount options); found is false when nothing is mounted there. The
// last mount at a point is the one in effect.
func MountReadOnly(mountinfo, mountPoint string) (ro, found bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[4] != mountPoint {
			continue
		}
		found = true
		ro = false
		for _, o := range strings.Split(f[5], ",") {
			if o == "ro" {
				ro = true
			}
		}
	}
	return ro, found
}

// RegisterAccess says why mstflint's tools (mstconfig, mstlink) cannot
// reach the NIC's registers from here, or "" when nothing known stops
// them: they refuse a non-zero effective UID (mstflint
// mtcr_ul/mtcr_ul_com.c mopen_ul_int) and open the NIC's sysfs config or
// resource0 read-write (mtcr_mmap), which a read-only /sys refuses; the
// /proc/bus/pci route maps BARs only with CAP_SYS_RAWIO (drivers/pci/proc.c
// proc_bus_pci_mmap), and container runtimes mount /proc/bus read-only.
func (p Process) RegisterAccess() *verdict.Finding {
	var why []string
	if p.CapsKnown && p.EUID != 0 {
		why = append(why, fmt.Sprintf("this process's effective UID is %d, and mstflint opens devices only as root (mtcr_ul_com.c mopen_ul_int)", p.EUID))
	}
	if p.SysKnown && p.SysReadOnly {
		why = append(why, "/sys is mounted read-only here, and mstflint opens the NIC's sysfs config and resource0 read-write (mtcr_ul_com.c mtcr_mmap)")
	}
	if len(why) == 0 {
		return nil
	}
	grant := "run the suite as root on the host"
	if p.Container.In {
		grant = "run the container privileged (securityContext.privileged: true; the shipped deploy/k8s Job does not), or run the suite on the host as root"
	}
	return verdict.Absentf(grant, "%s", strings.Join(why, "; "))
}

// ParseStatus reads CapEff (hex) and the effective UID (the second field
// of "Uid:") from /proc/<pid>/status.
func ParseStatus(s string) (capEff uint64, euid int, err error) {
	var haveCap, haveUID bool
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "CapEff":
			if capEff, err = strconv.ParseUint(v, 16, 64); err != nil {
				return 0, 0, fmt.Errorf("CapEff %q is not hexadecimal", v)
			}
			haveCap = true
		case "Uid":
			f := strings.Fields(v)
			if len(f) < 2 {
				return 0, 0, fmt.Errorf("the Uid line %q has no effective UID", v)
			}
			if euid, err = strconv.Atoi(f[1]); err != nil {
				return 0, 0, fmt.Errorf("effective UID %q is not a number", f[1])
			}
			haveUID = true
		}
	}
	if !haveCap || !haveUID {
		return 0, 0, errors.New("no CapEff or Uid line")
	}
	return capEff, euid, nil
}

// identityMap: uid_map is "0 0 4294967295", the initial user namespace's.
func identityMap(s string) bool {
	f := strings.Fields(s)
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// Has reports whether the process holds c in its effective set (known
// false when the status could not be read).
func (p Process) Has(c Cap) (has, known bool) {
	if !p.CapsKnown {
		return false, false
	}
	return p.CapEff&(1<<c.Bit) != 0, true
}

// Lacks reports that the process is known not to hold c where the kernel
// looks for it: not in its effective set, or only in a user namespace when
// initNS says the kernel asks in the initial one.
func (p Process) Lacks(c Cap, initNS bool) bool {
	has, known := p.Has(c)
	return known && (!has || initNS && p.UserNS)
}

// Need says what this process lacks for what (a phrase naming the read and
// the kernel or tool source that asks for c), as an absent finding whose
// remedy is how to grant it where it runs: a capability for the
// container's manifest, root on a host.
func (p Process) Need(c Cap, initNS bool, what string) verdict.Finding {
	has, known := p.Has(c)
	switch {
	case known && has && initNS && p.UserNS:
		return *verdict.Absentf("run a rootful container or run on the host as root",
			"%s needs %s in the initial user namespace, and this process holds it only in a user namespace of its own (a rootless container)", what, c.Name)
	case p.Container.In && known && !has:
		return *verdict.Absentf(fmt.Sprintf("add %s to the container's securityContext.capabilities.add (deploy/k8s/job.yaml does), or --cap-add %s for docker/podman; or run on the host as root", c.Short(), c.Short()),
			"%s needs %s, which this container lacks (CapEff %#x)", what, c.Name, p.CapEff)
	case p.Container.In:
		return *verdict.Absentf(fmt.Sprintf("grant %s to the container (securityContext.capabilities.add; deploy/k8s/job.yaml does), or run on the host as root", c.Short()),
			"%s needs %s", what, c.Name)
	case known && !has:
		return *verdict.Absentf("run the suite as root", "%s needs %s, which this process lacks (effective UID %d, CapEff %#x)", what, c.Name, p.EUID, p.CapEff)
	}
	return *verdict.Absentf("run the suite as root", "%s needs %s", what, c.Name)
}

// NeedConfigSpace is why a PCIe config space read stopped at 64 bytes, and
// what would let it through where p runs.
func (p Process) NeedConfigSpace() verdict.Finding {
	return p.Need(CapSysAdmin, true, "PCIe config space past its first 64 bytes (drivers/pci/pci-sysfs.c pci_read_config)")
}
