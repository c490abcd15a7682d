package cluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/config"
)

// Config is the configuration of an N-host run under Slurm or Kubernetes,
// read by gdrcluster, gdrreport and the cluster lab. It lives here, not in
// internal/config (the suite's tests read config.Load's Config only), so
// that harness packages do not depend on cluster/pairing.
type Config struct {
	Pairing      pairing.Kind  // GDR_PAIRING: ring or all
	Secret       string        // GDR_CLUSTER_SECRET: the job's shared secret (tokens derive from it)
	SecretFile   string        // GDR_CLUSTER_SECRET_FILE: a file holding it instead
	Ports        pairing.Ports // GDR_CLUSTER_PORTS: out-of-band port range
	PeerSuffix   string        // GDR_PEER_SUFFIX: appended to a node name to form the address a client dials
	RepairRounds int           // GDR_REPAIR_ROUNDS: re-pairing rounds after the schedule, at most
	Reports      string        // GDR_REPORTS: the shared folder, one subfolder per host
	MinFraction  float64       // GDR_PAIR_MIN_FRACTION: a pair below this fraction of its rail's median bandwidth fails
	// StartTimeout (GDR_START_TIMEOUT) bounds the start barrier: hosts not
	// there when the first task's runs out did not start. Long enough for
	// the slowest image pull of a large fleet.
	StartTimeout time.Duration
	// RoundTimeout (GDR_ROUND_TIMEOUT) bounds each round's barrier: hosts
	// that had not finished the round when the first task's runs out
	// stopped in it.
	RoundTimeout time.Duration
	// Topology (GDR_TOPOLOGY_FILE) names the file of the fabric's groups
	// (leaf switches): "<group> <hostlist>" lines or Slurm's
	// topology.conf; Groups is what it says of each host. The schedule's
	// rounds pair hosts across groups (pairing.Order).
	Topology string
	Groups   pairing.Groups
	// Domains are not a variable: the NVLink domains the hosts published
	// at the start barrier (StartDomains), which gdrcluster plan reads
	// before it plans. The schedule's rounds pair hosts across domains
	// first, groups second (pairing.Arrange).
	Domains pairing.Domains
}

// ConfigVars lists every variable ParseConfig reads.
var ConfigVars = []string{
	"GDR_PAIRING", "GDR_CLUSTER_SECRET", "GDR_CLUSTER_SECRET_FILE", "GDR_CLUSTER_PORTS",
	"GDR_PEER_SUFFIX", "GDR_REPAIR_ROUNDS", "GDR_REPORTS", "GDR_PAIR_MIN_FRACTION",
	"GDR_START_TIMEOUT", "GDR_ROUND_TIMEOUT", "GDR_TOPOLOGY_FILE",
}

// DefaultConfig is the cluster configuration with every variable unset.
func DefaultConfig() Config {
	return Config{Pairing: pairing.Ring, Ports: pairing.DefaultPorts, RepairRounds: 2, Reports: "reports", MinFraction: 0.5,
		StartTimeout: 15 * time.Minute, RoundTimeout: 30 * time.Minute}
}

// ParseConfig reads the cluster variables through lookup; all bad values
// are reported together. Paths and numbers follow internal/config's rules.
func ParseConfig(lookup func(string) (string, bool)) (Config, error) {
	c := DefaultConfig()
	var errs []error
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return strings.TrimSpace(v), ok
	}
	bad := func(name, val, accepted string) {
		errs = append(errs, fmt.Errorf("%s=%s is not valid: want %s", name, clip.Quote(val), accepted))
	}
	if v, ok := get("GDR_PAIRING"); ok {
		k, err := pairing.ParseKind(v)
		if err != nil {
			errs = append(errs, err)
		}
		c.Pairing = k
	}
	if v, ok := lookup("GDR_CLUSTER_SECRET"); ok {
		c.Secret = v // taken as given: a secret may hold any bytes
	}
	if v, ok := get("GDR_CLUSTER_SECRET_FILE"); ok && v != "" {
		if err := config.CheckPath(v); err != nil {
			bad("GDR_CLUSTER_SECRET_FILE", v, "a file path: "+err.Error())
		} else {
			c.SecretFile = v
		}
	}
	if c.Secret != "" && c.SecretFile != "" {
		errs = append(errs, errors.New("GDR_CLUSTER_SECRET and GDR_CLUSTER_SECRET_FILE are both set: set one"))
	}
	if v, ok := get("GDR_CLUSTER_PORTS"); ok {
		p, err := pairing.ParsePorts(v)
		if err != nil {
			errs = append(errs, err)
		}
		c.Ports = p
	}
	if v, ok := get("GDR_PEER_SUFFIX"); ok {
		for i := 0; i < len(v); i++ {
			ch := v[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.' || ch == '_') {
				bad("GDR_PEER_SUFFIX", v, "host name characters appended to each node name, e.g. -ib or .fabric.example")
				break
			}
		}
		c.PeerSuffix = v
	}
	if v, ok := get("GDR_REPAIR_ROUNDS"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 16 {
			bad("GDR_REPAIR_ROUNDS", v, "a whole number from 0 to 16")
		}
		c.RepairRounds = n
	}
	if v, ok := get("GDR_REPORTS"); ok && v != "" {
		if err := config.CheckPath(v); err != nil {
			bad("GDR_REPORTS", v, "a folder path: "+err.Error())
		} else {
			c.Reports = v
		}
	}
	c.MinFraction = config.ParseFloat(get, "GDR_PAIR_MIN_FRACTION", 0, 1, "a fraction: 0.5, not 50%", c.MinFraction, bad)
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{"GDR_START_TIMEOUT", &c.StartTimeout}, {"GDR_ROUND_TIMEOUT", &c.RoundTimeout}} {
		if v, ok := get(d.name); ok && v != "" {
			t, err := config.ParseDuration(v)
			if err != nil || t < time.Second || t > 24*time.Hour {
				bad(d.name, v, "a duration from 1s to 24h: 15m, 900s or 900 (seconds)")
				continue
			}
			*d.to = t
		}
	}
	if v, ok := get("GDR_TOPOLOGY_FILE"); ok && v != "" {
		if err := config.CheckPath(v); err != nil {
			bad("GDR_TOPOLOGY_FILE", v, "a file path: "+err.Error())
		} else if top, err := config.ReadTopology(v, hostlist.Expand); err != nil {
			errs = append(errs, err)
		} else {
			c.Topology, c.Groups = v, pairing.Groups{}
			for i, g := range top.Groups {
				for _, h := range g.Hosts {
					c.Groups[h] = i
				}
			}
		}
	}
	return c, errors.Join(errs...)
}
