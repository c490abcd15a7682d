package report

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/inventory"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// HostFile is the name of a host's identity file beside its test.json.
const HostFile = "host.json"

// Identity is who a host is. It is written as host.json beside test.json on
// the host at report time, so it survives copying and merging many hosts'
// folders; what it lacks is filled from the tests' attributes (FillFrom).
type Identity struct {
	Host string `json:"host"` // hostname, or a label (lab: server, client, loopback)
	// Node is the machine's own host name where the report names the host
	// otherwise (GDR_REPORT_HOST: a Kubernetes pod's gdrconf-<i> on the
	// host network, whose kernel host name is the node's).
	Node         string   `json:"node,omitempty"`
	Kind         string   `json:"kind,omitempty"`          // e.g. "lab: qemu VM with Soft-RoCE, emulated GPU"
	Kernel       string   `json:"kernel,omitempty"`        // uname -r
	OS           string   `json:"os,omitempty"`            // PRETTY_NAME of /etc/os-release
	NvidiaDriver string   `json:"nvidia_driver,omitempty"` // kernel module version
	CUDADriver   string   `json:"cuda_driver,omitempty"`   // CUDA version the driver supports
	GPUs         []string `json:"gpus,omitempty"`          // "0000:3b:00.0 NVIDIA H200"
	NICs         []string `json:"nics,omitempty"`          // "mlx5_0 0000:3c:00.0" or "rxe0 (software, eth0)"
	Addrs        []string `json:"addrs,omitempty"`         // IP addresses, to name the peer of a pair
	Suite        string   `json:"suite_version,omitempty"` // from the report binary's build info
	Strict       bool     `json:"strict"`                  // GDR_STRICT=1
	Role         string   `json:"role,omitempty"`          // GDR_ROLE
	Peer         string   `json:"peer,omitempty"`          // GDR_PEER
	Time         string   `json:"time,omitempty"`          // when the report was made, RFC 3339
	// MachineID (/etc/machine-id) and BootID (the kernel's boot_id) tell
	// two runs of one host from two hosts of one name when runs merge
	// (MergeRuns).
	MachineID string `json:"machine_id,omitempty"`
	BootID    string `json:"boot_id,omitempty"`
	// Inventory is what the host is made of (internal/inventory): serials,
	// part numbers, firmware and versions; nil in recordings made before it.
	Inventory *inventory.Host `json:"inventory,omitempty"`
	// GoTestExit is the exit status of go test (or the test binaries) when
	// known: non-zero with no failed test is reported as a failure.
	GoTestExit *int `json:"go_test_exit,omitempty"`
	// Stopped is the signal that stopped the run before it ended
	// ("SIGTERM", "SIGINT": dist/run.sh saw it, gdrreport -collect
	// -stopped): a test it cut short was not judged, and the run's verdict
	// says it was stopped, not that something failed. "" for a run that
	// ended.
	Stopped string `json:"stopped,omitempty"`
}

// version is set at link time (-X) by builds whose build info lacks the VCS
// revision (Go records none for a git worktree): `git describe` output.
var version string

// SuiteVersion is the suite's version from the running binary's build info:
// the module version and VCS revision when the build recorded them, else the
// version the Makefile linked in.
func SuiteVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return orUnknown(version)
	}
	if version != "" && !hasRevision(bi) {
		return version
	}
	v := bi.Main.Version
	var rev, modified, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		case "vcs.time":
			when = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev != "" && (v == "" || v == "(devel)"):
		v = rev + modified
	case rev != "" && !strings.Contains(v, rev):
		v += " " + rev + modified
	case v == "":
		v = "(devel)"
	}
	if when != "" {
		v += " (" + when + ")"
	}
	return v
}

// ReportHostEnv names the host in its report instead of its hostname (VMs and
// containers often share one, and merged reports need distinct names).
const ReportHostEnv = "GDR_REPORT_HOST"

// Collect reads this host's identity: hostname (GDR_REPORT_HOST overrides
// it), machine and boot id, kernel, driver, GPUs and NICs through the host
// root (GDR_HOST_ROOT), strict mode, role and peer, all as internal/config
// reads the GDR_* variables. What cannot be read is left empty, never guessed.
func Collect() Identity {
	id := collect()
	if n := strings.TrimSpace(os.Getenv(ReportHostEnv)); n != "" {
		id.Rename(n)
	}
	return id
}

// Rename names the host name in its report, keeping the machine's own
// host name as Node where they differ.
func (id *Identity) Rename(name string) {
	if id.Host != "" && id.Host != name && id.Node == "" {
		id.Node = id.Host
	}
	id.Host = name
}

func collect() Identity {
	id := Identity{Suite: SuiteVersion(), Time: time.Now().UTC().Format(time.RFC3339)}
	id.Host, _ = os.Hostname()
	// A bad GDR_* value failed the tests already; the values that parsed
	// (config keeps them, with defaults in place of the bad ones) still say
	// what the tests ran with.
	cfg, _ := config.Load()
	id.Strict, id.Role, id.Peer = cfg.Strict, string(cfg.Role), cfg.Peer
	root, err := hostfs.New(cfg.HostRoot)
	if err != nil {
		return id
	}
	// Through the root, so a container with the host mounted names the host.
	if s, err := root.ReadString("/proc/sys/kernel/hostname"); err == nil && strings.TrimSpace(s) != "" {
		id.Host = strings.TrimSpace(s)
	}
	if s, err := root.ReadString("/etc/machine-id"); err == nil {
		id.MachineID = strings.TrimSpace(s)
	}
	if s, err := root.ReadString("/proc/sys/kernel/random/boot_id"); err == nil {
		id.BootID = strings.TrimSpace(s)
	}
	if s, err := root.ReadString("/proc/sys/kernel/osrelease"); err == nil {
		id.Kernel = strings.TrimSpace(s)
	}
	if b, err := root.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				id.OS = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := root.ReadFile("/proc/driver/nvidia/version"); err == nil {
		if info, err := nvdriver.ParseVersionFile(b); err == nil {
			id.NvidiaDriver = info.Version
		}
	}
	if devs, _ := pci.Scan(root); len(devs) > 0 {
		for _, d := range devs {
			if d.IsGPU() {
				id.GPUs = append(id.GPUs, d.BDF)
			}
		}
		sort.Strings(id.GPUs)
	}
	if nics, _ := rdmadev.Scan(root); len(nics) > 0 {
		for _, n := range nics {
			if n.Software {
				id.NICs = append(id.NICs, fmt.Sprintf("%s (software, %s)", n.Name, n.Parent))
			} else {
				id.NICs = append(id.NICs, n.Name+" "+n.PCI)
			}
		}
	}
	if inv := inventory.Collect(root); !inv.Empty() {
		id.Inventory = &inv
	}
	if root.IsLive() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
					id.Addrs = append(id.Addrs, ipn.IP.String())
				}
			}
		}
	}
	return id
}

// fillFrom completes id from the attributes of the host's tests: the CUDA
// driver version (GPU-01), the kernel driver (INST-01), GPU names, NICs.
func (id *Identity) fillFrom(cases []*Case) {
	names := map[string]string{}
	var nics []string
	for _, c := range cases {
		a := c.Own
		if v := a["gdr.cuda_driver"]; v != "" && id.CUDADriver == "" {
			id.CUDADriver = v
		}
		if v := a["gdr.driver_version"]; v != "" && id.NvidiaDriver == "" {
			id.NvidiaDriver = v
		}
		if g := a["gdr.gpu"]; pci.IsBDF(g) {
			if n := a["gdr.gpu_name"]; n != "" || names[g] == "" {
				names[g] = n
			}
		}
		if v := a["gdr.gpus"]; v != "" && len(id.GPUs) == 0 && c.Area == "topology" {
			for _, g := range strings.Split(v, ",") {
				id.GPUs = append(id.GPUs, strings.TrimSpace(g))
			}
		}
		if v := a["gdr.nics"]; v != "" && c.Area == "topology" {
			for _, n := range strings.Split(v, ",") {
				nics = append(nics, strings.TrimSpace(n))
			}
		}
		if v := a["gdr.nic"]; v != "" && c.Area == "pingpong" {
			nics = append(nics, v)
		}
		id.fillInventory(c)
	}
	if len(id.NICs) == 0 {
		seen := map[string]bool{}
		for _, n := range nics {
			if n != "" && !seen[n] {
				seen[n] = true
				id.NICs = append(id.NICs, n)
			}
		}
	}
	if len(id.GPUs) == 0 {
		for g := range names {
			id.GPUs = append(id.GPUs, g)
		}
		sort.Strings(id.GPUs)
	}
	for i, g := range id.GPUs {
		bdf, _, _ := strings.Cut(g, " ")
		if n := names[bdf]; n != "" && !strings.Contains(g, n) {
			id.GPUs[i] = bdf + " " + n
		}
	}
}

// fillInventory adds what a test knew and the report binary could not read:
// NVML's GPU identity (GPU-16) and the RDMA stack's package versions
// (INST-09).
func (id *Identity) fillInventory(c *Case) {
	a := c.Own
	inv := func() *inventory.Host {
		if id.Inventory == nil {
			id.Inventory = &inventory.Host{}
		}
		return id.Inventory
	}
	switch c.Req {
	case "GPU-16":
		if g := a["gdr.gpu"]; pci.IsBDF(g) && c.Parent != nil {
			inv().MergeGPU(inventory.GPU{BDF: g, Model: a["gdr.gpu_name"], UUID: a["gdr.gpu_uuid"], Serial: a["gdr.gpu_serial"],
				PartNumber: a["gdr.gpu_part_number"], VBIOS: a["gdr.vbios"], InfoROM: a["gdr.inforom_image"],
				InfoROMOEM: a["gdr.inforom_oem"], ModuleID: a["gdr.gpu_module_id"], NVLinkDomain: a[AttrNVLinkDomain]})
		}
	case "INST-09":
		if v := a["gdr.ofed_version"]; v != "" {
			inv().Software.OFED = v
		}
		if v := a["gdr.rdma_core_version"]; v != "" {
			inv().Software.RDMACorePackage = v
		}
	}
}

// AttrNVLinkDomain is the attribute GPU-16 records a GPU's multi-node
// NVLink domain in (NVML's fabric info, nvml.Fabric.Domain).
const AttrNVLinkDomain = "gdr.nvlink_domain"

// NVLinkDomains are the NVLink domains GPU-16 recorded in events (one per
// GPU in one, in event order): what gdrcluster start publishes, read from
// a run of GPU-16 alone before the start barrier.
func NVLinkDomains(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Action == "attr" && e.Key == AttrNVLinkDomain {
			out = append(out, e.Value)
		}
	}
	return out
}

// ReadIdentity reads a host.json.
func ReadIdentity(path string) (Identity, error) {
	var id Identity
	b, err := sharedfile.ReadFile(path, sharedfile.MaxFile)
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("%s: %v", path, err)
	}
	visibleAll(&id) // a host's own words reach every format as text
	if id.Host == "" {
		return id, fmt.Errorf("%s: no \"host\"", path)
	}
	return id, nil
}

// WriteIdentity writes id as host.json in dir.
func WriteIdentity(dir string, id Identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(dir+"/"+HostFile, append(b, '\n'), 0o644)
}

func hasRevision(bi *debug.BuildInfo) bool {
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return true
		}
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
