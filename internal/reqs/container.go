package reqs

import (
	"fmt"
	"strings"
)

// The container profile: how each requirement is judged when the suite runs
// in a container (deploy/k8s's Job: GDR_HOST_ROOT=/host, the node's "/"
// mounted read-only; hostNetwork; every GPU through the GPU operator; the
// NICs through the RDMA device plugin; SYS_ADMIN, NET_ADMIN and IPC_LOCK).
// docs/checks.md's "In a container" is generated from it.
//
// The rule for HostOnly: a requirement is not judged from a container only
// when it is about the host's interactive environment, the tools a person
// building programs on the host uses, which (1) the GPUDirect RDMA data
// path does not use at run time and (2) a containerised workload brings in
// its own image (NGC images carry nvcc, gcc and the headers; the suite's
// image carries none, on purpose). Judging them from the pod would judge
// the image, and running the node's compiler from a read-only /host is not
// safe (it writes temporary files, and loads the node's libraries into the
// pod's process). Such a requirement's skip names why and what to run
// instead; it does not fail GDR_STRICT=1 and does not hold back QUALIFIED
// (the report shows it as "host only"). Everything else is judged from the
// node; where the container lacks a grant, the skip names the grant and
// GDR_STRICT=1 fails it like any absence.

// Where a requirement's evidence comes from in a container.
const (
	FromNode = "node" // the node's files through GDR_HOST_ROOT
	FromPod  = "pod"  // what the pod was given: GPUs, NICs, the driver's libraries
	FromBoth = "node and pod"
)

// ContainerRule is one requirement's behaviour in a container.
type ContainerRule struct {
	From string // FromNode, FromPod or FromBoth
	How  string // what is read, and how
	// Needs are the grants the container must have (a capability, a
	// device resource, the node's root); without one the check says
	// which, and GDR_STRICT=1 fails it.
	Needs []string
	// HostOnly says why the requirement is not judgeable from a container
	// at all (the rule above); "" for every other.
	HostOnly string
}

// Grants the profile names.
const (
	NeedHostRoot    = "the node's /sys, /proc, /etc, /usr, /lib and /opt under GDR_HOST_ROOT (hostPath, recursively read-only)"
	NeedGPUs        = "every GPU of the node (nvidia.com/gpu through the GPU operator's device plugin and container toolkit)"
	NeedNICs        = "the rail NICs' /dev/infiniband nodes (the RDMA device plugin's resource)"
	NeedSysAdmin    = "CAP_SYS_ADMIN (PCIe config space past 64 bytes: drivers/pci/pci-sysfs.c pci_read_config checks it in the initial user namespace)"
	NeedNetAdmin    = "CAP_NET_ADMIN (module EEPROM: net/ethtool/netlink.c ETHTOOL_MSG_MODULE_EEPROM_GET is GENL_UNS_ADMIN_PERM; net/ethtool/ioctl.c lets anyone run only the listed read commands, and ETHTOOL_GMODULEEEPROM is not one)"
	NeedHostNetwork = "hostNetwork (the node's netdevs, RoCE GIDs and addresses)"
	NeedIPCLock     = "CAP_IPC_LOCK (memory registration pins pages beyond RLIMIT_MEMLOCK)"
	NeedPrivileged  = "privileged: true and UID 0 (mstflint's register access: mtcr_ul_com.c mopen_ul_int refuses a non-zero euid, and opens the NIC's sysfs config or resource0 read-write, which a non-privileged container's read-only /sys refuses; the /proc/bus/pci path needs CAP_SYS_RAWIO, drivers/pci/proc.c proc_bus_pci_mmap, and runtimes mount /proc/bus read-only)"
)

// NodePaths are the node's directories a pod reads under GDR_HOST_ROOT, and
// the only ones deploy/k8s mounts (deploy/k8s_test.go holds it to this
// list): /sys and /proc (devices, drivers, modules, the kernel's command
// line), /etc (NCCL's and libibverbs' configuration, ld.so.conf.d), /usr and
// /lib (the node's rdma-core, ofed_info, modules, a CUDA toolkit), /opt (a
// topology file /etc/nccl.conf names, as Azure's images install). Each
// exists on every Linux node: containerd creates a missing hostPath source
// on the node, so an optional one (/var/lib/dpkg, absent on RHEL) is not
// mounted, and the node's rdma-core version then comes from its library's
// file name. Nothing under /run, /var or /dev of the node is read: the
// RDMA device nodes are the pod's own.
var NodePaths = []string{"/sys", "/proc", "/etc", "/usr", "/lib", "/opt"}

var (
	gpuPod  = ContainerRule{From: FromPod, How: "through the CUDA driver and NVML the GPU operator's container toolkit mounts into the pod: the node's driver, so the node's GPUs", Needs: []string{NeedGPUs}}
	verbs   = ContainerRule{From: FromPod, How: "verbs through this image's rdma-core on the NICs the device plugin gave the pod (the rails); the node's kernel driver serves them", Needs: []string{NeedNICs, NeedHostNetwork, NeedIPCLock}}
	gpuMR   = ContainerRule{From: FromPod, How: "GPU memory from the CUDA driver registered through this image's rdma-core on the pod's NICs", Needs: []string{NeedGPUs, NeedNICs, NeedIPCLock}}
	sysfs   = ContainerRule{From: FromNode, How: "the node's sysfs through GDR_HOST_ROOT", Needs: []string{NeedHostRoot}}
	cfgRead = ContainerRule{From: FromNode, How: "PCIe config space of the path's functions from the node's sysfs", Needs: []string{NeedHostRoot, NeedSysAdmin}}
)

var containerRules = map[string]ContainerRule{
	"INST-01": {From: FromNode, How: "/proc/driver/nvidia/version and /sys/module/nvidia through GDR_HOST_ROOT", Needs: []string{NeedHostRoot}},
	"INST-02": {From: FromBoth, How: "NVML in the pod (the container toolkit mounts the node's libnvidia-ml) against the node's /proc/driver/nvidia/version and PCI bus", Needs: []string{NeedHostRoot, NeedGPUs}},
	"INST-03": sysfs,
	"INST-04": {From: FromPod, How: "nvidia-smi as the container toolkit mounts it (NVIDIA_DRIVER_CAPABILITIES with utility) against the node's driver version", Needs: []string{NeedGPUs}},
	"INST-05": {From: FromNode, How: "the node's CUDA toolkit read under GDR_HOST_ROOT (/usr/local/cuda*/version.json; nvcc is not run) against the driver's CUDA version; host only where the node has none",
		HostOnly: "nvcc is a developer's tool on the host; GPUDirect RDMA traffic does not use it and containerised workloads bring their own CUDA toolkit"},
	"INST-06": gpuPod,
	"INST-07": {From: FromBoth, How: "this image's libibverbs.so.1 and librdmacm.so.1 loaded with dlopen (the suite's verbs calls use them); the node's found as files under GDR_HOST_ROOT (its library directories and ld.so.conf.d) with their version, and the two compared; a node with no RDMA user space of its own, or one not mounted (GDR_HOST_ROOT=/), is reported, not failed"},
	"INST-08": {From: FromBoth, How: "providers of this image and of the node (/etc/libibverbs.d, lib*-rdmav*.so under GDR_HOST_ROOT), for each NIC's driver: libibverbs loads only the providers of its own build (rdma-core Documentation/versioning.md, private symbols), so the image needs its own; the node's are judged where the node has a user space and is mounted"},
	"INST-09": {From: FromBoth, How: "the node's stack: ofed_info under GDR_HOST_ROOT read as a file (not run), rdma-core's version from the node's package database or library name; this image's beside it, a DOCA-OFED/MLNX_OFED node under an inbox image warned; systemd's service state is not reachable from a container (reported); without the node mounted, the image's stack, labelled so"},
	"INST-10": {From: FromNode, How: "/proc/modules and /sys/module through GDR_HOST_ROOT", Needs: []string{NeedHostRoot}},
	"INST-11": {From: FromPod, How: "the pod's own /dev/infiniband for the NICs it was given (the rails); the node's other NICs are reported as not given to this container", Needs: []string{NeedNICs}},
	"INST-12": sysfs,
	"INST-13": {From: FromBoth, How: "the node's modules and /sys/kernel/mm/memory_peers; for dma-buf, this image's libibverbs (ibv_reg_dmabuf_mr)", Needs: []string{NeedHostRoot}},
	"INST-14": {From: FromNode, How: "not run in a container",
		HostOnly: "compiling the GDR probe needs the host's compiler, headers and CUDA toolkit: the host's interactive environment, which containerised workloads replace with their own images; running the node's compiler from a read-only /host is not safe"},
	"TOPO-01": sysfs,
	"TOPO-02": {From: FromNode, How: "the node's sysfs and the NCCL topology file NCCL's configuration names, under GDR_HOST_ROOT", Needs: []string{NeedHostRoot}},
	"TOPO-03": cfgRead,
	"TOPO-04": {From: FromNode, How: "link speed and width attributes of the node's sysfs (world-readable)", Needs: []string{NeedHostRoot}},
	"TOPO-05": {From: FromNode, How: "the node's IOMMU groups and kernel command line through GDR_HOST_ROOT", Needs: []string{NeedHostRoot}},
	"TOPO-06": gpuPod,
	"TOPO-07": {From: FromPod, How: "nvidia-smi topo -m as the container toolkit mounts it, against the node's sysfs", Needs: []string{NeedGPUs, NeedHostRoot}},
	"TOPO-08": cfgRead,
	"TOPO-09": {From: FromPod, How: "mstconfig (mstflint, in the image) -e query on each rail NIC", Needs: []string{NeedPrivileged}},
	"TOPO-10": {From: FromPod, How: "ethtool -m (in the image) on each rail NIC's netdev in the node's network namespace; mlxlink's link figures where the container may use mstflint's register access", Needs: []string{NeedHostNetwork, NeedNetAdmin}},
	"GPU-01":  gpuPod, "GPU-02": gpuPod, "GPU-03": gpuPod, "GPU-04": gpuPod, "GPU-05": gpuPod, "GPU-06": gpuPod,
	"GPU-07": gpuPod, "GPU-08": gpuPod,
	"GPU-09": {From: FromBoth, How: "copies through the CUDA driver, judged against the GPU's PCIe link in the node's sysfs", Needs: []string{NeedGPUs, NeedHostRoot}},
	"GPU-10": {From: FromBoth, How: "copies through the CUDA driver, judged against the GPU's PCIe link in the node's sysfs", Needs: []string{NeedGPUs, NeedHostRoot}},
	"GPU-11": {From: FromBoth, How: "the node's sysfs link attributes read while the CUDA driver copies", Needs: []string{NeedGPUs, NeedHostRoot}},
	"GPU-12": gpuPod, "GPU-13": gpuPod, "GPU-14": gpuPod, "GPU-15": gpuPod, "GPU-16": gpuPod,
	"HLTH-02": {From: FromNode, How: "AER and port counters in the node's sysfs around the copies; kernel log lines where /dev/kmsg is readable (reported, not judged)", Needs: []string{NeedHostRoot}},
	"MREG-01": verbs, "MREG-02": gpuPod, "MREG-03": gpuMR, "MREG-04": gpuMR, "MREG-05": gpuMR,
	"HLTH-01": {From: FromNode, How: "the rail NICs' port and hw counters and the path's AER counters in the node's sysfs around the traffic", Needs: []string{NeedHostRoot}},
	"PP-01":   verbs, "PP-02": verbs, "PP-03": verbs, "PP-04": verbs, "PP-05": verbs, "PP-06": verbs,
	"PP-07": verbs, "PP-08": verbs, "PP-09": verbs, "PP-10": verbs,
}

// Container returns id's container rule; ok is false for an unknown ID.
func Container(id string) (ContainerRule, bool) {
	r, ok := containerRules[id]
	return r, ok
}

// ContainerMarkdown renders the profile as docs/checks.md's table.
func ContainerMarkdown() string {
	var b strings.Builder
	b.WriteString("| ID | judged from | how | the container needs | not judgeable from a container |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range All() {
		c := containerRules[r.ID]
		needs := "-"
		if len(c.Needs) > 0 {
			needs = strings.Join(c.Needs, "; ")
		}
		host := "-"
		if c.HostOnly != "" {
			host = "host only: " + c.HostOnly
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.ID, c.From, c.How, needs, host)
	}
	return b.String()
}
