// Package pairing decides who meets whom in each round of an N-host run, and
// the out-of-band port and token of every round.
//
// Hosts are numbered 0..n-1 in the job's order (Slurm's node list, the
// Kubernetes completion index). A round is a matching: every host meets at
// most one peer, as server or client, and runs the two-host suite with it on
// every rail (rail i meets rail i on the peer: rail-aligned fabrics).
//
// Schedules (GDR_PAIRING):
//
//   - ring: round 0 pairs (0,1) (2,3) ...; round 1 shifts by one: (1,2)
//     (3,4) ... (n-1,0). Every host meets both ring neighbours, so a bad host
//     fails with two different partners after two rounds. An odd ring needs a
//     third round for the edge (n-1,0); one host idles in each of the first
//     two. n=2 is one round; n<2 none.
//   - all: every pair once, by the circle method: n-1 rounds for even n, n
//     rounds for odd n with one host idle per round.
//
// Re-pairing rounds after these are computed from results (package isolate).
//
// Topology (GDR_TOPOLOGY_FILE): the hosts are numbered in the order Order
// gives instead of the job's, so that the ring's neighbours, and with them
// every pair of every round, are in different groups of the fabric (leaf
// switches) wherever the groups' sizes allow: a pair within a leaf never
// reaches the spine, whose links and ports are then left untested.
//
// NVLink domains (GB200/GB300 NVL72, as each host published its own at the
// start barrier): Arrange orders the hosts so that ring neighbours are in
// different domains first, different leaf groups second; hosts without a
// domain pair as Order pairs them.
//
// Roles: on a ring the host before its neighbour serves, so each host serves
// once and dials once; in other rounds the lower index serves in even rounds
// and the higher in odd ones (Meet).
package pairing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Kind is a pairing schedule.
type Kind string

const (
	Ring Kind = "ring"
	All  Kind = "all"
)

// ParseKind reads GDR_PAIRING ("" means ring).
func ParseKind(s string) (Kind, error) {
	switch Kind(strings.ToLower(strings.TrimSpace(s))) {
	case "", Ring:
		return Ring, nil
	case All:
		return All, nil
	}
	return "", fmt.Errorf("GDR_PAIRING=%s is not valid: want ring (each host with both neighbours, 2 rounds) or all (every pair, n-1 rounds)", clip.Quote(s))
}

// Pair is one meeting: indices of the server and the client.
type Pair struct {
	Server, Client int
}

// Round is one matching of the schedule.
type Round struct {
	Index  int
	Pairs  []Pair
	Repair bool // added by isolation to re-pair suspects with good hosts
}

// Peer returns the peer of host i in this round and whether i serves;
// ok is false when i idles.
func (r Round) Peer(i int) (peer int, server, ok bool) {
	for _, p := range r.Pairs {
		switch i {
		case p.Server:
			return p.Client, true, true
		case p.Client:
			return p.Server, false, true
		}
	}
	return 0, false, false
}

// Meet orders a and b into a Pair for round index (the role rule above).
func Meet(round, a, b int) Pair {
	lo, hi := min(a, b), max(a, b)
	if round%2 == 0 {
		return Pair{Server: lo, Client: hi}
	}
	return Pair{Server: hi, Client: lo}
}

// Base returns the fixed rounds of a schedule for n hosts.
func Base(kind Kind, n int) []Round {
	if n < 2 {
		return nil
	}
	if kind == All {
		return circle(n)
	}
	if n == 2 {
		return []Round{{Index: 0, Pairs: []Pair{{Server: 0, Client: 1}}}}
	}
	// Round 0 pairs (0,1) (2,3) ...; round 1 the same shifted by one. Even n:
	// round 1 closes the ring with (n-1,0). Odd n: each leaves one host out
	// and a third round closes the ring.
	var rounds []Round
	for shift := 0; shift < 2; shift++ {
		r := Round{Index: shift}
		for a := shift; a+1 < n || (n%2 == 0 && a < n); a += 2 {
			r.Pairs = append(r.Pairs, Pair{Server: a, Client: (a + 1) % n})
		}
		rounds = append(rounds, r)
	}
	if n%2 == 1 {
		rounds = append(rounds, Round{Index: 2, Pairs: []Pair{{Server: n - 1, Client: 0}}})
	}
	return rounds
}

// circle is the round-robin tournament: host m-1 (or a phantom, for odd n)
// stays put while the others rotate.
func circle(n int) []Round {
	m := n
	if m%2 == 1 {
		m++ // host m-1 = n is a phantom: its partner idles
	}
	var rounds []Round
	for r := 0; r < m-1; r++ {
		rd := Round{Index: r}
		add := func(a, b int) {
			if a < n && b < n {
				rd.Pairs = append(rd.Pairs, Meet(r, a, b))
			}
		}
		add(r, m-1)
		for k := 1; k < m/2; k++ {
			add((r+k)%(m-1), (r-k+m-1)%(m-1))
		}
		sort.Slice(rd.Pairs, func(i, j int) bool {
			return min(rd.Pairs[i].Server, rd.Pairs[i].Client) < min(rd.Pairs[j].Server, rd.Pairs[j].Client)
		})
		rounds = append(rounds, rd)
	}
	return rounds
}

// Groups gives hosts their group of the fabric (GDR_TOPOLOGY_FILE): the
// group's position in the file. A host it does not name is in none.
type Groups map[string]int

// Order is the order of hosts the schedule numbers them in: the job's own
// (0, 1, ..., n-1) without groups. With groups, each group is spread
// evenly over the ring (its j-th of s hosts at (j+1/2)/s of the way round,
// ties in the file's group order, then the job's), so that with groups of
// one size every ring neighbour is in another group; then hosts are moved,
// one at a time, while a move leaves fewer neighbours of one group, which
// settles groups of unequal sizes (one large group among single hosts).
// Neighbours of one group are then as few as the sizes allow: none while
// no group holds more than half the hosts. The hosts no group names count
// as one group. Every task computes the same order from the same list.
func Order(hosts []string, g Groups) []int {
	n := len(hosts)
	ord := make([]int, n)
	for i := range ord {
		ord[i] = i
	}
	if len(g) == 0 || n < 3 {
		return ord
	}
	none := 0
	for _, x := range g {
		none = max(none, x+1)
	}
	grp := make([]int, n)
	size := map[int]int{}
	pos := make([]int, n) // a host's place among its group's, in the job's order
	for i, h := range hosts {
		x, ok := g[h]
		if !ok {
			x = none
		}
		grp[i] = x
		pos[i] = size[x]
		size[x]++
	}
	sort.SliceStable(ord, func(a, b int) bool {
		i, j := ord[a], ord[b]
		// (2 pos_i + 1) / (2 s_i) against (2 pos_j + 1) / (2 s_j), exactly.
		ki, kj := (2*pos[i]+1)*size[grp[j]], (2*pos[j]+1)*size[grp[i]]
		if ki != kj {
			return ki < kj
		}
		return grp[i] < grp[j]
	})
	return settle(ord, func(a, b int) int {
		if grp[a] == grp[b] {
			return 1
		}
		return 0
	})
}

// settle moves hosts of the ring ord, one at a time, while a move lowers
// the sum of cost over ring neighbours (cost(a, b): what having a next to b
// costs, symmetric, from 0). Every move lowers the sum, so it ends.
func settle(ord []int, cost func(a, b int) int) []int {
	n := len(ord)
	for moved := true; moved; {
		moved = false
		for p := 0; p < n && !moved; p++ {
			e, prev, next := ord[p], ord[(p+n-1)%n], ord[(p+1)%n]
			gain := cost(prev, e) + cost(e, next) - cost(prev, next) // taking e out
			if gain <= 0 {
				continue
			}
			for q := 0; q < n; q++ {
				a, b := ord[q], ord[(q+1)%n]
				if a == e || b == e {
					continue
				}
				if cost(a, e)+cost(e, b)-cost(a, b) < gain { // putting it between a and b
					rest := append(append(make([]int, 0, n), ord[:p]...), ord[p+1:]...)
					at := slices.Index(rest, a) + 1
					ord = slices.Insert(rest, at, e)
					moved = true
					break
				}
			}
		}
	}
	return ord
}

// Domains gives hosts their multi-node NVLink domain (GB200/GB300 NVL72:
// the cluster UUID and clique ID of NVML's GPU fabric info,
// nvmlDeviceGetGpuFabricInfo; the struct it fills:
// https://docs.nvidia.com/deploy/nvml-api/structnvmlGpuFabricInfo__t.html),
// as each host published it at the start barrier. A host it does not name,
// or names with "", is in none: two such hosts share no NVLink.
type Domains map[string]string

// MaxDomain is the longest NVLink domain a host may publish: NVML's
// "<cluster UUID>/<clique>" is 47 bytes at most.
const MaxDomain = 128

// CheckDomain says why d is not an NVLink domain a host may publish (nil
// when it is): at most MaxDomain bytes of letters, digits and . _ : / -,
// so that it is one line of a marker file, one JSON string and one word of
// a report, whatever wrote it.
func CheckDomain(d string) error {
	if len(d) > MaxDomain {
		return fmt.Errorf("NVLink domain %s is too long: want at most %d bytes (\"<cluster UUID>/<clique>\")", clip.Quote(d), MaxDomain)
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '/' || c == '-') {
			return fmt.Errorf("NVLink domain %s holds byte %#02x at %d: want letters, digits and . _ : / - only (\"<cluster UUID>/<clique>\")", clip.Quote(d), c, i)
		}
	}
	return nil
}

// Layout is what the planner knows of where the hosts sit: the fabric's
// leaf groups (GDR_TOPOLOGY_FILE) and the hosts' NVLink domains.
type Layout struct {
	Groups  Groups
	Domains Domains
}

// Arrange is Order with NVLink domains: the order of hosts the schedule
// numbers them in, such that ring neighbours (every pair of the ring's
// rounds) are in different NVLink domains wherever the domains' sizes
// allow, and, among such orders, in different leaf groups as Order
// places them.
//
// The domain comes first: two trays of one NVL72 rack reach each other
// over NVLink in every real job, so an RDMA pair inside a domain tests a
// path production rarely uses, while a pair within a leaf still tests
// both hosts' NICs, cables and leaf ports (only the spine is left out).
// The leaf groups then break ties: a move of one host, or an exchange of
// two, that keeps as many neighbours of one domain and has fewer of one
// leaf is taken; one that adds a neighbour of one domain never is.
//
// Where the domains cannot steer anything (no host names one, or every
// host is in the same one) the order is Order's: a cluster without NVLink
// domains pairs as it did before they were read.
func Arrange(hosts []string, l Layout) []int {
	n := len(hosts)
	dom := make([]int, n) // the domain's number; a host in none is alone
	ids := map[string]int{}
	size := map[string]int{}
	for i, h := range hosts {
		d := l.Domains[h]
		if d == "" {
			dom[i] = -1 - i
			continue
		}
		if _, ok := ids[d]; !ok {
			ids[d] = len(ids)
		}
		dom[i] = ids[d]
		size[d]++
	}
	steers := false
	for _, s := range size {
		if s >= 2 && s < n {
			steers = true
		}
	}
	if !steers || n < 3 {
		return Order(hosts, l.Groups)
	}
	// The domains spread as Order spreads groups, each host in none a
	// group of its own (it shares NVLink with nobody).
	dg := make(Groups, n)
	for i, h := range hosts {
		if dom[i] >= 0 {
			dg[h] = dom[i]
		} else {
			dg[h] = len(ids) + i
		}
	}
	ord := Order(hosts, dg)
	if len(l.Groups) == 0 {
		return ord
	}
	none := 0
	for _, x := range l.Groups {
		none = max(none, x+1)
	}
	leaf := make([]int, n)
	for i, h := range hosts {
		x, ok := l.Groups[h]
		if !ok {
			x = none // as in Order: the hosts no group names are one group
		}
		leaf[i] = x
	}
	// One neighbour of one domain costs more than any move can save in
	// leaf neighbours (at most 4), so leaves only break ties.
	cost := func(a, b int) int {
		c := 0
		if dom[a] == dom[b] {
			c += 5
		}
		if leaf[a] == leaf[b] {
			c++
		}
		return c
	}
	return swap(settle(ord, cost), cost)
}

// swap exchanges two hosts of the ring ord while that lowers the sum of
// cost over ring neighbours: where the domains alternate round the ring,
// moving one host always puts it next to its own domain, and only an
// exchange of two trays of one rack changes their leaves' neighbours.
// Each pass takes, for each place, the best exchange with a later one;
// every exchange lowers the sum, so it ends.
func swap(ord []int, cost func(a, b int) int) []int {
	n := len(ord)
	at := func(p int) int { return ord[(p+n)%n] }
	around := func(p, q int) int { // the cost of the edges at p and q, each once
		c := cost(at(p-1), at(p)) + cost(at(p), at(p+1)) + cost(at(q-1), at(q)) + cost(at(q), at(q+1))
		if (p+1)%n == q || (q+1)%n == p {
			c -= cost(ord[p], ord[q]) // their shared edge, counted twice
		}
		return c
	}
	for better := true; better; {
		better = false
		for p := 0; p < n; p++ {
			best, bq := 0, -1
			for q := p + 1; q < n; q++ {
				before := around(p, q)
				ord[p], ord[q] = ord[q], ord[p]
				if d := before - around(p, q); d > best {
					best, bq = d, q
				}
				ord[p], ord[q] = ord[q], ord[p]
			}
			if bq >= 0 {
				ord[p], ord[bq] = ord[bq], ord[p]
				better = true
			}
		}
	}
	return ord
}

// SameDomain counts the pairs of rounds whose two hosts are in one NVLink
// domain (hosts indexes the pairs), and all pairs.
func SameDomain(rounds []Round, hosts []string, d Domains) (same, all int) {
	for _, r := range rounds {
		for _, p := range r.Pairs {
			all++
			if a := d[hosts[p.Server]]; a != "" && a == d[hosts[p.Client]] {
				same++
			}
		}
	}
	return same, all
}

// Crossing counts the pairs of rounds whose two hosts are in different
// groups (hosts indexes the pairs, g groups them as Order takes them), and
// all pairs.
func Crossing(rounds []Round, hosts []string, g Groups) (cross, all int) {
	group := func(i int) int {
		if x, ok := g[hosts[i]]; ok {
			return x
		}
		return -1
	}
	for _, r := range rounds {
		for _, p := range r.Pairs {
			all++
			if group(p.Server) != group(p.Client) {
				cross++
			}
		}
	}
	return cross, all
}

// PortsPerRound consecutive ports belong to one round: the suite listens on
// the first and may use the others (per rail, say) without meeting another
// round or job.
const PortsPerRound = 16

// Ports is the range out-of-band ports are taken from (GDR_CLUSTER_PORTS).
// The default stays below Linux's ephemeral range (32768-60999), so an
// outgoing connection never holds a port a later round listens on.
type Ports struct{ Lo, Hi int }

// DefaultPorts is the range used when GDR_CLUSTER_PORTS is unset.
var DefaultPorts = Ports{Lo: 20000, Hi: 29999}

// ParsePorts reads "LO-HI".
func ParsePorts(s string) (Ports, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultPorts, nil
	}
	lo, hi, ok := strings.Cut(s, "-")
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil || l < 1024 || h > 65535 || h-l+1 < PortsPerRound {
		return Ports{}, fmt.Errorf("GDR_CLUSTER_PORTS=%s is not valid: want LO-HI within 1024-65535 holding at least %d ports (default %d-%d)",
			clip.Quote(s), PortsPerRound, DefaultPorts.Lo, DefaultPorts.Hi)
	}
	return Ports{Lo: l, Hi: h}, nil
}

// Job is what makes one job's rounds its own: its identity and secret.
type Job struct {
	// Key names the job uniquely among those that may run at the same time
	// (jobenv.Task.Key: engine, cluster or namespace, job ID or UID).
	Key string
	// Secret is shared by the job's tasks and nobody else (GDR_CLUSTER_SECRET).
	Secret []byte
	Ports  Ports
}

// mac is HMAC-SHA256(Secret, label 0 Key 0 round): every value a job derives
// is bound to its secret, its identity and the round.
func (j Job) mac(label string, round int) []byte {
	m := hmac.New(sha256.New, j.Secret)
	m.Write([]byte("gdrconf/cluster/v1/" + label))
	m.Write([]byte{0})
	m.Write([]byte(j.Key))
	m.Write([]byte{0})
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(round))
	m.Write(b[:])
	return m.Sum(nil)
}

// Token is GDR_TOKEN for the pair of hosts a and b (names as in the job's
// host list, either order) in a round: 128 bits of HMAC-SHA256(secret, job
// key, round, both names sorted, each length-prefixed) in hex. Another job,
// another round or another pair of this round has a different token, so a
// session that reaches the wrong peer fails its proof instead of measuring
// the wrong pair, and a host that knows only its own round's token cannot
// pass for a third host. Every task holds the job secret, so this keeps
// honest hosts apart; it does not stop a host that is not honest, which can
// derive any pair's token (isolation reads pairs from the plans for that).
func (j Job) Token(round int, a, b string) string {
	lo, hi := min(a, b), max(a, b)
	m := hmac.New(sha256.New, j.mac("pair-token", round))
	for _, n := range []string{lo, hi} {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(n)))
		m.Write(l[:])
		m.Write([]byte(n))
	}
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Port is the first out-of-band port of a round. The job picks a starting
// block from its key (not from the secret: ports are public anyway) and each
// round takes the next block, so consecutive rounds never share a port and
// two jobs share one only if their blocks happen to line up; the token still
// keeps them apart then.
func (j Job) Port(round int) int {
	blocks := (j.Ports.Hi - j.Ports.Lo + 1) / PortsPerRound
	if blocks < 1 {
		blocks = 1
	}
	h := sha256.Sum256([]byte("gdrconf/cluster/v1/port\x00" + j.Key))
	start := int(binary.BigEndian.Uint64(h[:8]) % uint64(blocks))
	return j.Ports.Lo + ((start+round)%blocks)*PortsPerRound
}
