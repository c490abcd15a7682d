// Package config reads the suite's GDR_* environment variables into one struct.
//
// Every variable is optional. A bad value is an error that names the variable,
// the value and what is accepted, so a qualification pipeline fails at once
// with a fixable message instead of running half a suite on a default.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/suitelock"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// DefaultPort is the out-of-band TCP port when GDR_PEER or GDR_LISTEN names none.
const DefaultPort = 18515

// Role of this host in a two-host run.
type Role string

const (
	Loopback Role = ""       // one host, both ends local
	Server   Role = "server" // waits for the peer
	Client   Role = "client" // dials GDR_PEER
)

// Mem selects where pingpong buffers live.
type Mem string

const (
	MemAuto Mem = ""     // gpu when built with the gpu tag and a GPU exists, else host
	MemGPU  Mem = "gpu"  // cuMemAlloc memory
	MemHost Mem = "host" // page-aligned host memory
)

// MRPath selects how GPU memory is registered with the NIC.
type MRPath string

const (
	MRAuto    MRPath = "auto"    // peermem, then dma-buf; both when both work
	MRPeermem MRPath = "peermem" // ibv_reg_mr on device memory (nvidia_peermem)
	MRDmabuf  MRPath = "dmabuf"  // ibv_reg_dmabuf_mr on an exported dma-buf
)

// Config is the whole run configuration. The zero value is not the default;
// use Defaults or Load.
type Config struct {
	HostRoot   string        // GDR_HOST_ROOT: root of every /sys, /proc, /dev read
	Strict     bool          // GDR_STRICT: absent hardware fails instead of skipping
	GPU        string        // GDR_GPU: index or PCI address; "" = all
	RDMADevice string        // GDR_RDMA_DEVICE: e.g. mlx5_0; "" = nearest to the GPU
	Rails      []int         // GDR_RAILS: rail indices to run; nil = all
	IBPort     int           // GDR_IB_PORT: 1-based port number
	GIDIndex   int           // GDR_GID_INDEX, else NCCL_IB_GID_INDEX: -1 = automatic
	Role       Role          // GDR_ROLE
	Peer       string        // GDR_PEER: host:port of the server, for the client
	PeerName   string        // GDR_PEER_NAME: the peer's host name in reports (a cluster round sets it)
	HostName   string        // GDR_HOST_NAME: this host's name as its peer checks it (a cluster round sets it); "" = the kernel's
	Listen     string        // GDR_LISTEN: host:port the server listens on
	Token      string        // GDR_TOKEN: shared secret for the out-of-band session
	Timeout    time.Duration // GDR_TIMEOUT: deadline for any wait on the peer or NIC
	MaxPath    topo.Class    // GDR_MAX_PATH: worst acceptable GPU<->NIC class
	// MaxPathSet: GDR_MAX_PATH was given; without it PathLimit follows
	// NCCL's own level for each path.
	MaxPathSet bool
	AllowIOMMU bool // GDR_ALLOW_IOMMU: translated DMA is reported, not failed
	LeakCheck  bool // GDR_LEAK_CHECK: each test fails if it leaves RDMA objects behind
	// SuiteLock is GDR_SUITE_LOCK: the file whose lock keeps two conformance
	// binaries of this host from running at once (internal/suitelock).
	SuiteLock string
	Mem       Mem    // GDR_MEM: gpu|host
	MR        MRPath // GDR_MR: auto|peermem|dmabuf
	Iters     int    // GDR_ITERS: iterations per latency/bandwidth point
	BWSizes   []int  // GDR_BW_SIZES: message sizes of the bandwidth sweep, bytes

	// Thresholds; zero means "derive from the port rate on real NICs, or none".
	MinBWGbps float64 // GDR_MIN_BW_GBPS: RDMA WRITE bandwidth floor at the largest size
	MaxLatUS  float64 // GDR_MAX_LAT_US: p50 latency ceiling for small WRITEs
	// MaxLatP99US and MaxLatP999US are GDR_MAX_LAT_P99_US and
	// GDR_MAX_LAT_P999_US: tail ceilings (p99.9 judged only from 10000
	// iterations on).
	MaxLatP99US  float64
	MaxLatP999US float64
	// BWIters is GDR_BW_ITERS: WRs per bandwidth point (perftest's -n
	// default is 5000), separate from GDR_ITERS (latency, data checks).
	BWIters int
	// TxDepth is GDR_TX_DEPTH: WRs in flight during bandwidth runs
	// (perftest's -t, default 128).
	TxDepth int
	// QPs is GDR_QPS: queue pairs per bandwidth connection (perftest's
	// -q); each posts GDR_BW_ITERS WRs, all at once.
	QPs int
	// IBTimeout is GDR_IB_TIMEOUT: the queue pairs' local ACK timeout,
	// 4.096 us x 2^n (perftest's -u, NCCL_IB_TIMEOUT), before the NIC
	// retransmits (7 times, then the WR fails).
	IBTimeout int
	// MinCopyFraction is GDR_MIN_COPY_FRACTION: pinned HtoD/DtoH copy bandwidth
	// floor as a fraction of the PCIe link's theoretical rate.
	MinCopyFraction float64
	// MinConcurrentFraction is GDR_MIN_CONCURRENT_FRACTION: a GPU's pinned
	// copy rate while every selected GPU copies at once, as a fraction of its
	// rate alone (GPU-12/13).
	MinConcurrentFraction float64
	// MinP2PNVLinkFraction and MinP2PPCIeFraction are GDR_MIN_P2P_NVLINK_FRACTION
	// and GDR_MIN_P2P_PCIE_FRACTION: GPU<->GPU peer copy bandwidth floors as a
	// fraction of the link's theoretical rate per direction (GPU-15).
	MinP2PNVLinkFraction float64
	MinP2PPCIeFraction   float64

	// Fabric class of the test traffic (the address vector of every QP).
	// IBTC is GDR_IB_TC, the GRH traffic class (on RoCE the IP header's
	// DSCP<<2 | ECN); IBSL is GDR_IB_SL, the service level. Unset, each
	// takes NCCL_IB_TC / NCCL_IB_SL when those are set, so the test rides
	// the class NCCL rides, else 0 (perftest's --tclass and --sl default).
	// IBTCFrom and IBSLFrom name where the value came from.
	IBTC, IBSL         int
	IBTCFrom, IBSLFrom string
	// GIDNetdev is GDR_GID_NETDEV: the RoCE v2 GID of this netdev (a VLAN
	// interface has GIDs of its own); "" = the GID rule's automatic choice.
	GIDNetdev string
	// NCCLTopoFile, NCCLConfFile and Home are NCCL_TOPO_FILE, NCCL_CONF_FILE
	// and HOME: where NCCL looks for its topology file; NCCLNetGDRLevel is
	// NCCL_NET_GDR_LEVEL. They are NCCL's variables, taken as NCCL takes
	// them (no validation here; internal/nccltopo reads them as NCCL does
	// and says what is wrong where the file is judged).
	NCCLTopoFile, NCCLConfFile, Home, NCCLNetGDRLevel string
	// GIDIndexFrom names where GIDIndex came from: "GDR_GID_INDEX",
	// "NCCL_IB_GID_INDEX" (the environment), "NCCL_IB_GID_INDEX in
	// <file>", or FromDefault. An NCCL value applies on RoCE ports only
	// (GIDIndexFor).
	GIDIndexFrom string
	// IBHCA is NCCL_IB_HCA (environment or NCCL configuration file), read
	// only while GDR_RDMA_DEVICE is unset: the rails' candidates are the
	// devices and ports it lets NCCL use (nccl.go).
	IBHCA HCAFilter
	// Slurm is Slurm's word on this process's GPUs (SLURM_JOB_ID,
	// SLURM_STEP_GPUS, ...: slurm.go), taken as Slurm sets them, for the
	// message when CUDA sees no GPU.
	Slurm Slurm
	// Soak is GDR_SOAK: how long conformance/soak keeps every rail and the
	// GPUs' copy engines busy; 0 (unset) runs no soak. SoakInterval is
	// GDR_SOAK_INTERVAL, the sampling interval; SoakLinkEvery is
	// GDR_SOAK_LINK_EVERY, how often mlxlink is asked for the BERs (it
	// takes seconds per port, so not every sample). SoakFlap is
	// GDR_SOAK_FLAP=1: the disruptive link-flap guard (SOAK-08) may run.
	Soak time.Duration
	// Reports is GDR_REPORTS, the report folder (make and dist/run.sh set
	// it; "" under a bare go test): the soak writes its series there as it
	// goes. cluster/config.go reads the same variable for the shared folder.
	Reports       string
	SoakInterval  time.Duration
	SoakLinkEvery time.Duration
	SoakFlap      bool
	// SoakRecoveryFraction is GDR_SOAK_RECOVERY_FRACTION: the share of its
	// rate before a retrain that a rail keeps after it (SOAK-08); 0 when
	// unset (internal/soak's default then).
	SoakRecoveryFraction float64
	// SoakStableFraction is GDR_SOAK_STABLE_FRACTION: the share of its
	// first quarter's rate a rail keeps in the soak's last quarter
	// (SOAK-06); 0 when unset (internal/soak's default then).
	SoakStableFraction float64
	// SoakSkip is GDR_SOAK_SKIP, set by rounds.sh where a cluster run
	// asked for a soak that this round cannot give (a host whose first
	// round is not round 0 meets a partner that soaked already): why, in
	// a sentence the soak's tests report as absent instead of not asked.
	SoakSkip string
}

// Defaults returns the configuration with every variable unset.
func Defaults() Config {
	return Config{
		HostRoot:        "/",
		IBPort:          1,
		GIDIndex:        -1,
		Listen:          fmt.Sprintf(":%d", DefaultPort),
		Timeout:         30 * time.Second,
		MaxPath:         topo.PXB,
		Iters:           1000,
		BWIters:         5000,
		TxDepth:         128,
		QPs:             1,
		IBTimeout:       14, // 67 ms, perftest's default
		BWSizes:         []int{4096, 65536, 1048576},
		MinCopyFraction: 0.6,
		// 0.8 sits between what two GPUs behind one uplink get at most
		// (0.5 each) and what GPUs with uplinks of their own keep (0.9 and
		// more, host memory being shared); see docs/checks.md, Multi-GPU.
		MinConcurrentFraction: 0.8,
		// 0.74 of NVLink 4's 450 GB/s (18 links) is 333 GB/s, just below the
		// 335 GB/s Azure's node health checks require of every H200 pair
		// (azurehpc-health-checks conf/nd96isr_h200_v5.conf: check_gpu_bw 48 335).
		MinP2PNVLinkFraction: 0.74,
		// A peer copy over PCIe crosses both GPUs' links with the same bytes
		// a host copy carries: the same floor as GDR_MIN_COPY_FRACTION.
		MinP2PPCIeFraction: 0.6,
		MR:                 MRAuto,
		SuiteLock:          suitelock.Path,
		IBTCFrom:           FromDefault,
		IBSLFrom:           FromDefault,
		GIDIndexFrom:       FromDefault,
		SoakInterval:       10 * time.Second,
		SoakLinkEvery:      5 * time.Minute,
	}
}

// FromDefault is IBTCFrom, IBSLFrom, GIDIndexFrom when no variable set the value.
const FromDefault = "default"

// Vars lists every variable Load reads, for documentation and tests.
var Vars = []string{
	"GDR_HOST_ROOT", "GDR_STRICT", "GDR_GPU", "GDR_RDMA_DEVICE", "GDR_RAILS", "GDR_IB_PORT",
	"GDR_GID_INDEX", "GDR_ROLE", "GDR_PEER", "GDR_PEER_NAME", "GDR_HOST_NAME", "GDR_LISTEN", "GDR_TOKEN", "GDR_TIMEOUT",
	"GDR_MAX_PATH", "GDR_ALLOW_IOMMU", "GDR_MEM", "GDR_MR", "GDR_ITERS", "GDR_MIN_BW_GBPS",
	"GDR_MAX_LAT_US", "GDR_MAX_LAT_P99_US", "GDR_MAX_LAT_P999_US", "GDR_MIN_COPY_FRACTION", "GDR_BW_SIZES",
	"GDR_BW_ITERS", "GDR_TX_DEPTH", "GDR_QPS", "GDR_IB_TIMEOUT",
	"GDR_MIN_CONCURRENT_FRACTION", "GDR_MIN_P2P_NVLINK_FRACTION", "GDR_MIN_P2P_PCIE_FRACTION", "GDR_LEAK_CHECK",
	"GDR_IB_TC", "GDR_IB_SL", "GDR_GID_NETDEV", "GDR_SUITE_LOCK",
	"GDR_REPORTS", "GDR_SOAK", "GDR_SOAK_INTERVAL", "GDR_SOAK_LINK_EVERY", "GDR_SOAK_FLAP", "GDR_SOAK_RECOVERY_FRACTION", "GDR_SOAK_STABLE_FRACTION", "GDR_SOAK_SKIP",
}

// Load reads the process environment.
func Load() (Config, error) { return Parse(os.LookupEnv) }

// Parse reads variables through lookup (os.LookupEnv in production). All bad
// values are reported together. NCCL's variables are read from lookup only;
// ParseConf reads NCCL's configuration files too.
func Parse(lookup func(string) (string, bool)) (Config, error) {
	return ParseConf(lookup, nil)
}

// ParseConf is Parse with NCCL's configuration files: an NCCL variable the
// suite inherits (nccl.go) that lookup does not set is looked up through
// conf, as NCCL's initEnv does. A nil conf reads none.
func ParseConf(lookup func(string) (string, bool), conf NCCLConf) (Config, error) {
	c := Defaults()
	var errs []error
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		if !ok {
			return "", false
		}
		return strings.TrimSpace(v), true
	}
	// bad reports a value: the variable, at most a short prefix of the
	// value (it may be huge), why when known, and what is accepted.
	bad := func(name, val, accepted string) {
		errs = append(errs, fmt.Errorf("%s=%s is not valid: want %s", name, clip.Quote(val), accepted))
	}
	badWhy := func(name, val string, why error, accepted string) {
		errs = append(errs, fmt.Errorf("%s=%s is not valid: %v; want %s", name, clip.Quote(val), why, accepted))
	}

	c.NCCLTopoFile, _ = get("NCCL_TOPO_FILE")
	c.NCCLConfFile, _ = get("NCCL_CONF_FILE")
	c.Home, _ = get("HOME")
	c.NCCLNetGDRLevel, _ = get("NCCL_NET_GDR_LEVEL")
	c.Slurm = ParseSlurm(lookup)
	if v, ok := get("GDR_HOST_ROOT"); ok && v != "" {
		if err := CheckPath(v); err != nil {
			bad("GDR_HOST_ROOT", v, "a directory path: "+err.Error())
		} else {
			c.HostRoot = v
		}
	}
	if v, ok := get("GDR_REPORTS"); ok && v != "" {
		if err := CheckPath(v); err != nil {
			bad("GDR_REPORTS", v, "a folder path: "+err.Error())
		} else {
			c.Reports = v
		}
	}
	if v, ok := get("GDR_SUITE_LOCK"); ok && v != "" {
		if err := CheckPath(v); err != nil {
			bad("GDR_SUITE_LOCK", v, "a file path: "+err.Error())
		} else {
			c.SuiteLock = v
		}
	}
	if v, ok := get("GDR_STRICT"); ok {
		b, err := parseBool(v)
		if err != nil {
			bad("GDR_STRICT", v, "1 or 0 (also true/false, yes/no)")
		}
		c.Strict = b
	}
	if v, ok := get("GDR_GPU"); ok {
		c.GPU = strings.ToLower(v)
		if v != "" && !validGPUSelector(c.GPU) {
			bad("GDR_GPU", v, "a GPU index (0, 1, ...) or a PCI address like 0000:3b:00.0 (bus <= ff, device <= 1f, function <= 7)")
		}
	}
	if v, ok := get("GDR_RDMA_DEVICE"); ok {
		if !validDevName(v) {
			bad("GDR_RDMA_DEVICE", v, "an RDMA device name as in /sys/class/infiniband (e.g. mlx5_0): up to 64 printable characters, no '/' or spaces")
		} else {
			c.RDMADevice = v
		}
	}
	// c.NCCLConfFile is read above: the conf lookup names long files by it.
	nccl := func(name string) ncclSetting {
		st, err := c.ncclLookup(lookup, conf, name)
		if err != nil {
			errs = append(errs, err)
		}
		return st
	}
	if v, _ := get("GDR_RDMA_DEVICE"); v == "" {
		if st := nccl("NCCL_IB_HCA"); st.ok && st.value != "" {
			from := "the environment"
			if st.file != "" {
				from = st.file
			}
			if f, err := ParseHCA(st.value, from); err != nil {
				errs = append(errs, fmt.Errorf("%w: %v", badNCCL(st, "NCCL_IB_HCA", hcaAccepted, "GDR_RDMA_DEVICE"), err))
			} else {
				c.IBHCA = f
			}
		}
	}
	if v, ok := get("GDR_RAILS"); ok && v != "" && !strings.EqualFold(v, "all") {
		rails, err := parseRails(v)
		if err != nil {
			bad("GDR_RAILS", v, "all, or a comma-separated list of rail indices like 0,2,5 (each at most once)")
		} else {
			c.Rails = rails
		}
	}
	if v, ok := get("GDR_IB_PORT"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 255 {
			bad("GDR_IB_PORT", v, "a port number from 1 to 255")
		} else {
			c.IBPort = n
		}
	}
	if v, ok := get("GDR_GID_INDEX"); ok && v != "" {
		if strings.EqualFold(v, "auto") {
			c.GIDIndex, c.GIDIndexFrom = -1, "GDR_GID_INDEX"
		} else if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 65535 {
			bad("GDR_GID_INDEX", v, "a GID table index from 0 to 65535, or auto")
		} else {
			c.GIDIndex, c.GIDIndexFrom = n, "GDR_GID_INDEX"
		}
	} else if v, _ := get("GDR_GID_NETDEV"); v == "" {
		// NCCL's -1 (its default) is automatic too; NCCL reads the value
		// with strtoll, the suite only whole numbers.
		if st := nccl("NCCL_IB_GID_INDEX"); st.ok && strings.TrimSpace(st.value) != "" && strings.TrimSpace(st.value) != "-1" {
			if n, err := strconv.Atoi(strings.TrimSpace(st.value)); err != nil || n < 0 || n > 65535 {
				errs = append(errs, badNCCL(st, "NCCL_IB_GID_INDEX", "a GID table index from 0 to 65535, or -1 for NCCL's automatic choice", "GDR_GID_INDEX"))
			} else {
				c.GIDIndex, c.GIDIndexFrom = n, st.from
			}
		}
	}
	if v, ok := get("GDR_ROLE"); ok {
		switch Role(strings.ToLower(v)) {
		case Loopback, Server, Client:
			c.Role = Role(strings.ToLower(v))
		default:
			bad("GDR_ROLE", v, "server, client, or unset for loopback on one host")
		}
	}
	if v, ok := get("GDR_PEER"); ok && v != "" {
		hp, err := withPort(v)
		if err == nil && strings.HasPrefix(hp, ":") {
			err = errors.New("no host")
		}
		if err != nil {
			badWhy("GDR_PEER", v, err, "host or host:port of the server (port 1-65535)")
		} else {
			c.Peer = hp
		}
	}
	for _, hv := range []struct {
		name string
		dst  *string
	}{{"GDR_PEER_NAME", &c.PeerName}, {"GDR_HOST_NAME", &c.HostName}} {
		if v, ok := get(hv.name); ok && v != "" {
			if len(v) > 255 || strings.ContainsAny(v, " /\x00\t\n") {
				bad(hv.name, v, "a host name (at most 255 characters, no blanks or slashes)")
			} else {
				*hv.dst = v
			}
		}
	}
	if v, ok := get("GDR_LISTEN"); ok && v != "" {
		hp, err := withPort(v)
		if err != nil {
			badWhy("GDR_LISTEN", v, err, "[host]:port to listen on (port 1-65535)")
		} else {
			c.Listen = hp
		}
	}
	if v, ok := get("GDR_TOKEN"); ok {
		// A secret: never quoted, not even in part.
		if len(v) > maxToken {
			errs = append(errs, fmt.Errorf("GDR_TOKEN is not valid: %d bytes long; want a shared secret of at most %d bytes (the value is not shown)", len(v), maxToken))
		} else {
			c.Token = v
		}
	}
	if v, ok := get("GDR_TIMEOUT"); ok && v != "" {
		d, err := parseDuration(v)
		if err != nil || d <= 0 || d > 24*time.Hour {
			bad("GDR_TIMEOUT", v, "a duration like 30s, 2m or 1h30m (or plain seconds), above 0 and at most 24h")
		} else {
			c.Timeout = d
		}
	}
	if v, ok := get("GDR_MAX_PATH"); ok && v != "" {
		pc, err := topo.ParseClass(v)
		if err != nil {
			bad("GDR_MAX_PATH", v, topo.AcceptedClasses)
		} else {
			c.MaxPath, c.MaxPathSet = pc, true
		}
	}
	if v, ok := get("GDR_ALLOW_IOMMU"); ok {
		b, err := parseBool(v)
		if err != nil {
			bad("GDR_ALLOW_IOMMU", v, "1 or 0")
		}
		c.AllowIOMMU = b
	}
	if v, ok := get("GDR_LEAK_CHECK"); ok {
		b, err := parseBool(v)
		if err != nil {
			bad("GDR_LEAK_CHECK", v, "1 or 0")
		}
		c.LeakCheck = b
	}
	if v, ok := get("GDR_MEM"); ok {
		switch Mem(strings.ToLower(v)) {
		case MemAuto, MemGPU, MemHost:
			c.Mem = Mem(strings.ToLower(v))
		default:
			bad("GDR_MEM", v, "gpu or host")
		}
	}
	if v, ok := get("GDR_MR"); ok && v != "" {
		switch MRPath(strings.ToLower(v)) {
		case MRAuto, MRPeermem, MRDmabuf:
			c.MR = MRPath(strings.ToLower(v))
		default:
			bad("GDR_MR", v, "auto, peermem or dmabuf")
		}
	}
	if v, ok := get("GDR_ITERS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000_000 {
			bad("GDR_ITERS", v, "a whole number from 1 to 10000000")
		} else {
			c.Iters = n
		}
	}
	if v, ok := get("GDR_BW_ITERS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000_000 {
			bad("GDR_BW_ITERS", v, "a whole number from 1 to 10000000")
		} else {
			c.BWIters = n
		}
	}
	if v, ok := get("GDR_TX_DEPTH"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 8192 {
			bad("GDR_TX_DEPTH", v, "a whole number from 1 to 8192")
		} else {
			c.TxDepth = n
		}
	}
	if v, ok := get("GDR_IB_TIMEOUT"); ok && v != "" {
		// 0 would be an infinite timeout: a lost packet would hang the QP.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 31 {
			bad("GDR_IB_TIMEOUT", v, "an exponent from 1 to 31 (4.096 us x 2^n; 14 is 67 ms, 18 is 1.07 s)")
		} else {
			c.IBTimeout = n
		}
	}
	if v, ok := get("GDR_QPS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			bad("GDR_QPS", v, "a whole number from 1 to 64")
		} else {
			c.QPs = n
		}
	}
	if v, ok := get("GDR_BW_SIZES"); ok && v != "" {
		sizes, err := parseSizes(v)
		if err != nil {
			badWhy("GDR_BW_SIZES", v, err, "comma-separated message sizes in bytes from 1 to 1073741824, e.g. 65536,1048576 (k/m suffixes allowed: 64k,1m)")
		} else {
			c.BWSizes = sizes
		}
	}
	c.MinBWGbps = ParseFloat(get, "GDR_MIN_BW_GBPS", 0, 1e6, "Gb/s, no unit", c.MinBWGbps, bad)
	c.MaxLatUS = ParseFloat(get, "GDR_MAX_LAT_US", 0, 1e9, "microseconds, no unit", c.MaxLatUS, bad)
	c.MaxLatP99US = ParseFloat(get, "GDR_MAX_LAT_P99_US", 0, 1e9, "microseconds, no unit", c.MaxLatP99US, bad)
	c.MaxLatP999US = ParseFloat(get, "GDR_MAX_LAT_P999_US", 0, 1e9, "microseconds, no unit", c.MaxLatP999US, bad)
	c.MinCopyFraction = ParseFloat(get, "GDR_MIN_COPY_FRACTION", 0, 1, "a fraction: 0.6, not 60%", c.MinCopyFraction, bad)
	c.MinConcurrentFraction = ParseFloat(get, "GDR_MIN_CONCURRENT_FRACTION", 0, 1, "a fraction of the solo rate: 0.8, not 80%", c.MinConcurrentFraction, bad)
	c.MinP2PNVLinkFraction = ParseFloat(get, "GDR_MIN_P2P_NVLINK_FRACTION", 0, 1, "a fraction of the links' rate: 0.74, not 333 GB/s", c.MinP2PNVLinkFraction, bad)
	c.MinP2PPCIeFraction = ParseFloat(get, "GDR_MIN_P2P_PCIE_FRACTION", 0, 1, "a fraction of the PCIe link's rate: 0.6, not 60%", c.MinP2PPCIeFraction, bad)

	c.IBTC, c.IBTCFrom = parseClass(get, nccl, "GDR_IB_TC", "NCCL_IB_TC", 255, "traffic class", bad, &errs)
	c.IBSL, c.IBSLFrom = parseClass(get, nccl, "GDR_IB_SL", "NCCL_IB_SL", 15, "service level", bad, &errs)
	if v, ok := get("GDR_GID_NETDEV"); ok && v != "" {
		if !validNetdev(v) {
			bad("GDR_GID_NETDEV", v, "a network interface name as in /sys/class/net (e.g. eth2 or eth2.100): 1 to 15 characters, no '/', ':' or spaces")
		} else {
			c.GIDNetdev = v
		}
	}
	if c.GIDNetdev != "" && c.GIDIndex >= 0 {
		errs = append(errs, fmt.Errorf("GDR_GID_NETDEV=%s and GDR_GID_INDEX=%d both choose the GID: set one of them", clip.Quote(c.GIDNetdev), c.GIDIndex))
	}

	parseSoak(get, &c, bad, &errs)

	if c.Role == Client && c.Peer == "" {
		errs = append(errs, errors.New("GDR_ROLE=client needs GDR_PEER=host[:port] naming the server"))
	}
	if c.Role == Loopback && c.Peer != "" {
		errs = append(errs, fmt.Errorf("GDR_PEER=%s is set but GDR_ROLE is not: set GDR_ROLE=client (or server on the other host)", clip.Quote(c.Peer)))
	}
	return c, errors.Join(errs...)
}

// maxSoak bounds GDR_SOAK: a week is longer than any burn-in, and a
// longer value is a typo (2000h for 200h).
const maxSoak = 7 * 24 * time.Hour

const soakAccepted = "a duration like 10m, 2h or 8h (or plain seconds), 0 for no soak, at most 168h"

// ParseSoak reads a GDR_SOAK value as the suite does ("" and every spelling
// of zero, 0.0h or 00 too, are no soak). gdrcluster plan decides with it
// whether a cluster round soaks, so the two never disagree on a value.
func ParseSoak(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	d, err := parseDuration(v)
	if err != nil || d < 0 || d > maxSoak {
		return 0, fmt.Errorf("GDR_SOAK=%s is not valid: want %s", clip.Quote(v), soakAccepted)
	}
	return d, nil
}

// parseSoak reads GDR_SOAK, GDR_SOAK_INTERVAL, GDR_SOAK_LINK_EVERY,
// GDR_SOAK_FLAP and GDR_SOAK_SKIP. The interval must be at least a second (the counters and
// NVML are read per sample; faster would measure the reads) and no longer
// than the soak, or the soak would have no sample.
func parseSoak(get func(string) (string, bool), c *Config, bad func(string, string, string), errs *[]error) {
	dur := func(name, accepted string, lo, hi time.Duration, dst *time.Duration) bool {
		v, ok := get(name)
		if !ok || v == "" {
			return false
		}
		d, err := parseDuration(v)
		if err != nil || d < lo || d > hi {
			bad(name, v, accepted)
			return false
		}
		*dst = d
		return true
	}
	if v, ok := get("GDR_SOAK"); ok && v != "" {
		if d, err := ParseSoak(v); err != nil {
			bad("GDR_SOAK", v, soakAccepted)
		} else {
			c.Soak = d
		}
	}
	ivSet := dur("GDR_SOAK_INTERVAL", "a duration like 10s or 1m (or plain seconds), at least 1s", time.Second, maxSoak, &c.SoakInterval)
	dur("GDR_SOAK_LINK_EVERY", "a duration like 5m (or plain seconds), at least 10s", 10*time.Second, maxSoak, &c.SoakLinkEvery)
	if v, ok := get("GDR_SOAK_FLAP"); ok {
		b, err := parseBool(v)
		if err != nil {
			bad("GDR_SOAK_FLAP", v, "1 or 0")
		}
		c.SoakFlap = b
	}
	c.SoakRecoveryFraction = ParseFloat(get, "GDR_SOAK_RECOVERY_FRACTION", 0, 1, "a fraction of the rate before the retrain: 0.8, not 80%", c.SoakRecoveryFraction, bad)
	c.SoakStableFraction = ParseFloat(get, "GDR_SOAK_STABLE_FRACTION", 0, 1, "a fraction of the first quarter's rate: 0.8, not 80%", c.SoakStableFraction, bad)
	if v, ok := get("GDR_SOAK_SKIP"); ok && v != "" {
		if len(v) > 500 || strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			bad("GDR_SOAK_SKIP", v, "one line of printable text, at most 500 bytes")
		} else {
			c.SoakSkip = v
		}
	}
	if c.Soak > 0 && c.SoakInterval > c.Soak {
		what := "the default 10s"
		if ivSet {
			what = "GDR_SOAK_INTERVAL=" + c.SoakInterval.String()
		}
		*errs = append(*errs, fmt.Errorf("%s is longer than GDR_SOAK=%s: the soak would end before its first sample; set GDR_SOAK_INTERVAL at most GDR_SOAK", what, c.Soak))
	}
}

// Limits on free-form values.
const (
	maxPath  = 4096 // PATH_MAX
	maxToken = 4096
)

// ParseFloat reads name through get as a number from lo to hi: unset or
// empty is def; a value that is no such number is reported through bad
// (name, value, what is accepted) and gives def. cluster's parser uses it
// too, so both read numbers alike.
func ParseFloat(get func(string) (string, bool), name string, lo, hi float64, unit string, def float64, bad func(string, string, string)) float64 {
	v, ok := get(name)
	if !ok || v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f != f || f < lo || f > hi {
		bad(name, v, fmt.Sprintf("a number from %g to %g (%s)", lo, hi, unit))
		return def
	}
	return f
}

// parseClass reads a fabric class value (GDR_IB_TC 0..255, GDR_IB_SL
// 0..15): the suite's variable, else NCCL's from the environment or NCCL's
// configuration files (whose own default, -1, means unset:
// src/transport/net_ib/connect.cc, NCCL_PARAM(IbTc, "IB_TC", -1)), else 0.
// from names where the value came from.
func parseClass(get func(string) (string, bool), lookup func(string) ncclSetting, name, nccl string, hi int, what string, bad func(string, string, string), errs *[]error) (val int, from string) {
	accepted := fmt.Sprintf("a %s from 0 to %d", what, hi)
	if v, ok := get(name); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > hi {
			bad(name, v, accepted)
			return 0, FromDefault
		}
		return n, name
	}
	st := lookup(nccl)
	if v := strings.TrimSpace(st.value); st.ok && v != "" && v != "-1" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > hi {
			*errs = append(*errs, badNCCL(st, nccl, accepted, name))
			return 0, FromDefault
		}
		return n, st.from
	}
	return 0, FromDefault
}

// validNetdev: what the kernel lets a network interface be called
// (dev_valid_name: at most IFNAMSIZ-1 bytes, not . or .., no '/', ':' or
// white space).
func validNetdev(s string) bool {
	if len(s) == 0 || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '/' || r == ':' || r >= 0x7f {
			return false
		}
	}
	return true
}

// CheckPath rejects what no path can be: longer than PATH_MAX, or holding a NUL.
func CheckPath(v string) error {
	switch {
	case len(v) > maxPath:
		return fmt.Errorf("at most %d bytes, this one has %d", maxPath, len(v))
	case strings.ContainsRune(v, 0):
		return errors.New("no NUL bytes, this one has one")
	}
	return nil
}

// validDevName: what the kernel lets an RDMA device be called (IB_DEVICE_NAME_MAX).
func validDevName(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '/' || r >= 0x7f {
			return false
		}
	}
	return true
}

// parseRails reads "0,2,5": distinct rail indices, in the order given.
func parseRails(v string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 4095 || seen[n] {
			return nil, fmt.Errorf("bad rail %s", clip.Quote(f))
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}

// parseSizes reads "65536,1m,4k" (binary suffixes) into byte counts.
func parseSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mul := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1<<10, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "m"):
			mul, f = 1<<20, strings.TrimSuffix(f, "m")
		}
		n, err := strconv.Atoi(f)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("size %s is not a number of bytes", clip.Quote(f))
		}
		if err != nil || n < 1 || n > (1<<30)/mul {
			return nil, fmt.Errorf("size %s is out of range", clip.Quote(f))
		}
		out = append(out, n*mul)
	}
	return out, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("not a boolean: %s", clip.Quote(v))
}

// ParseDuration reads a duration as every GDR_* duration is read: Go
// durations ("30s", "15m") and plain seconds ("30", "0.5").
func ParseDuration(v string) (time.Duration, error) { return parseDuration(v) }

// parseDuration takes Go durations ("30s") and plain seconds ("30", "0.5").
func parseDuration(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f != f || f > 1e9 {
			return 0, fmt.Errorf("bad seconds %s", clip.Quote(v))
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(v)
}

// withPort checks host[:port] and adds DefaultPort when no port is given.
func withPort(v string) (string, error) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		// No port given (a bare host name or IPv4 address).
		if strings.Count(v, ":") > 1 && !strings.HasPrefix(v, "[") {
			if net.ParseIP(v) == nil {
				return "", errors.New("neither host:port nor an IPv6 address")
			}
			return net.JoinHostPort(v, strconv.Itoa(DefaultPort)), nil // bare IPv6
		}
		if strings.Contains(v, ":") {
			return "", errors.New("not host:port (an IPv6 address with a port goes in brackets: [fd00::1]:18515)")
		}
		host, port = v, strconv.Itoa(DefaultPort)
	}
	if strings.ContainsAny(host, " /\x00") || len(host) > 253 {
		return "", fmt.Errorf("host %s is not a host name or address", clip.Quote(host))
	}
	n, err := strconv.Atoi(port)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return "", fmt.Errorf("port %s is out of range (1-65535)", clip.Quote(port))
	case err != nil:
		return "", fmt.Errorf("port %s is not a number", clip.Quote(port))
	case n < 1 || n > 65535:
		return "", fmt.Errorf("port %d is out of range (1-65535)", n)
	}
	return net.JoinHostPort(host, port), nil
}

func validGPUSelector(s string) bool {
	if n, err := strconv.Atoi(s); err == nil {
		return n >= 0
	}
	// dddd:bb:dd.f or bb:dd.f, each field in range
	_, err := pci.NormalizeAddr(s)
	return err == nil
}

// PathLimit is the worst class TOPO-02 accepts for path p: GDR_MAX_PATH
// where it is set; else NCCL's default level, PXB, raised to P2C for a GPU
// that reaches its CPU over NVLink-C2C (NVIDIA/nccl src/graph/paths.cc
// ncclTopoCheckGdr: NCCL_NET_GDR_C2C, on by default since 2.27.3, sets the
// level to P2C; a P2C path exists only from such a GPU).
func (c Config) PathLimit(p topo.Path) topo.Class {
	if c.MaxPathSet || p.C2C == "" {
		return c.MaxPath
	}
	return max(c.MaxPath, topo.P2C)
}
