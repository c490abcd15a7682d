package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// NCCL's settings the suite inherits where its own variable is unset, so
// that it tests what NCCL uses: NCCL_IB_TC and NCCL_IB_SL (GDR_IB_TC,
// GDR_IB_SL), NCCL_IB_GID_INDEX (GDR_GID_INDEX, GDR_GID_NETDEV) and
// NCCL_IB_HCA (GDR_RDMA_DEVICE).
//
// Where NCCL reads them: NCCL's ncclGetEnv calls initEnv once, which reads
// NCCL_CONF_FILE (or, without it, $HOME/.nccl.conf) and then /etc/nccl.conf
// and sets every NAME=value line with setenv(..., 0) (NVIDIA/nccl
// src/misc/param.cc initEnvFunc, setEnvFile): the environment beats both
// files, the first file that sets a name beats the next, and a variable set
// to "" in the environment is set (no file can change it). ParseConf does
// the same through an NCCLConf lookup (internal/nccltopo.Setting, which the
// topology file's lookup shares).

// NCCLConf finds name in NCCL's configuration files: its value, the file,
// and whether one sets it. An error is a file that exists but cannot be read.
type NCCLConf func(name string) (value, file string, ok bool, err error)

// ncclSetting is where an NCCL variable is set: its value, and from (the
// variable's name for the environment, "<name> in <file>" for a
// configuration file); ok is false when neither sets it.
type ncclSetting struct {
	value, from, file string
	ok                bool
}

// maxFrom bounds a From string: the out-of-band exchange carries the class
// sources (harness/oob maxClassFrom). A longer file name is named by its role.
const maxFrom = 64

// ncclLookup reads NCCL variable name as NCCL would: the environment, then
// the configuration files, the value untrimmed (NCCL_IB_HCA's names are
// taken as written; numbers are trimmed by their readers, as strtoll skips
// white space).
func (c *Config) ncclLookup(lookup func(string) (string, bool), conf NCCLConf, name string) (ncclSetting, error) {
	if v, ok := lookup(name); ok {
		return ncclSetting{value: v, from: name, ok: true}, nil
	}
	if conf == nil {
		return ncclSetting{}, nil
	}
	v, file, ok, err := conf(name)
	if err != nil {
		return ncclSetting{}, fmt.Errorf("%s: %w (set %s in the environment to not depend on the file)", name, err, name)
	}
	if !ok {
		return ncclSetting{}, nil
	}
	from := name + " in " + file
	if len(from) > maxFrom {
		switch {
		case c.NCCLConfFile != "" && file == c.NCCLConfFile:
			from = name + " in NCCL_CONF_FILE"
		case strings.HasSuffix(file, "/.nccl.conf"):
			from = name + " in $HOME/.nccl.conf"
		default:
			from = name + " in an NCCL configuration file"
		}
	}
	return ncclSetting{value: v, from: from, file: file, ok: true}, nil
}

// badNCCL is an inherited NCCL value that is not valid: the variable, the
// value, where it was set, what is accepted and how to override it.
func badNCCL(s ncclSetting, name, accepted, gdr string) error {
	where := ""
	if s.file != "" {
		where = " (in " + s.file + ")"
	}
	return fmt.Errorf("%s=%s%s is not valid: want %s (read because %s is unset; set %s to override it)", name, clip.Quote(s.value), where, accepted, gdr, gdr)
}

// GIDIndexFor is the GID index to ask for on a port of link layer
// linkLayer: GDR_GID_INDEX as given; NCCL_IB_GID_INDEX only on RoCE
// (Ethernet) ports, since NCCL uses it there alone and takes index 0 (or
// the routable FLID index) on InfiniBand (src/transport/net_ib/connect.cc
// ncclIbGetGidIndex; before NCCL 2.21 it was applied only to peers without
// a LID, which InfiniBand ports have). note says why an inherited index
// was not applied; -1 is the automatic choice.
func (c Config) GIDIndexFor(linkLayer string) (index int, note string) {
	if c.GIDIndex < 0 || !strings.HasPrefix(c.GIDIndexFrom, "NCCL_") || linkLayer == "Ethernet" {
		return c.GIDIndex, ""
	}
	return -1, fmt.Sprintf("%s=%d not applied: NCCL uses it on RoCE (Ethernet) ports only, and this port's link layer is %s (src/transport/net_ib/connect.cc ncclIbGetGidIndex); the automatic choice applies",
		c.GIDIndexFrom, c.GIDIndex, orUnknown(linkLayer))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// HCAFilter is NCCL_IB_HCA as NCCL reads it (src/transport/net_ib/init.cc
// ncclIbInitDevices; src/misc/utils.cc parseStringList, matchIfList): a
// leading '^' excludes the devices listed instead of keeping only them,
// then a leading '=' matches names exactly instead of by prefix (so
// "mlx5_1" also keeps mlx5_10); entries are comma separated, each
// "name[:port]" (newer NCCL reads ":rail:plane" after the port, which
// select no devices and are ignored here); empty entries and entries
// without a name are skipped, names are cut at 63 bytes and only the first
// 32 entries count (struct netIf's prefix[64], MAX_IB_DEVS), as in NCCL. A
// port NCCL's atoi would read as 0 (matching no port) is an error here.
type HCAFilter struct {
	// Value is the setting as written; From where: "the environment" or
	// the NCCL configuration file. Both "" when unset or empty (NCCL then
	// uses every device).
	Value, From string
	Exclude     bool // '^'
	Exact       bool // '='
	Entries     []HCAEntry
}

// HCAEntry is one device, and its port or -1 for any.
type HCAEntry struct {
	Name string
	Port int
}

// Set reports a filter in force.
func (f HCAFilter) Set() bool { return f.From != "" }

// String is "NCCL_IB_HCA=^mlx5_4 (from /etc/nccl.conf)".
func (f HCAFilter) String() string {
	return "NCCL_IB_HCA=" + f.Value + " (from " + f.From + ")"
}

// Allows reports whether NCCL uses port port of RDMA device dev
// (matchIfList, negated for '^'; an empty list matches everything, so "^"
// alone excludes every device).
func (f HCAFilter) Allows(dev string, port int) bool {
	if !f.Set() {
		return true
	}
	match := len(f.Entries) == 0
	for _, e := range f.Entries {
		name := dev == e.Name
		if !f.Exact {
			name = strings.HasPrefix(dev, e.Name)
		}
		if name && (e.Port == -1 || port == -1 || e.Port == port) {
			match = true
			break
		}
	}
	return match != f.Exclude
}

// maxHCAEntries and maxHCAName are NCCL's MAX_IB_DEVS and netIf's prefix
// size less its NUL.
const (
	maxHCAEntries = 32
	maxHCAName    = 63
)

// ParseHCA reads an NCCL_IB_HCA value (see HCAFilter); from is where it was
// set.
func ParseHCA(v, from string) (HCAFilter, error) {
	f := HCAFilter{Value: v, From: from}
	s := v
	if f.Exclude = strings.HasPrefix(s, "^"); f.Exclude {
		s = s[1:]
	}
	if f.Exact = strings.HasPrefix(s, "="); f.Exact {
		s = s[1:]
	}
	for _, entry := range strings.Split(s, ",") {
		if len(f.Entries) == maxHCAEntries {
			break
		}
		fields := strings.Split(entry, ":")
		if fields[0] == "" {
			continue // strtok skips empty entries; parseStringList those without a name
		}
		e := HCAEntry{Name: fields[0], Port: -1}
		if len(e.Name) > maxHCAName {
			e.Name = e.Name[:maxHCAName]
		}
		if len(fields) > 1 && fields[1] != "" {
			p, err := strconv.Atoi(fields[1])
			if err != nil || p < 1 || p > 255 {
				nccl := fmt.Sprintf("NCCL would read it as %d", atoi(fields[1]))
				if atoi(fields[1]) == 0 {
					nccl += " and match no port"
				}
				return HCAFilter{}, fmt.Errorf("entry %s: port %s is not a port number from 1 to 255 (%s)", clip.Quote(entry), clip.Quote(fields[1]), nccl)
			}
			e.Port = p
		}
		f.Entries = append(f.Entries, e)
	}
	return f, nil
}

// atoi is C's atoi: the leading digits, 0 without any.
func atoi(s string) int {
	n, neg := 0, false
	s = strings.TrimLeft(s, " \t")
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9' && n < 1<<20; i++ {
		n = n*10 + int(s[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

// hcaAccepted is what an NCCL_IB_HCA value may be.
const hcaAccepted = "NCCL's device list: [^][=]name[:port][,name[:port]...], e.g. mlx5_0:1,mlx5_1:1 or ^mlx5_4 (NCCL_IB_HCA in NCCL's documentation)"
