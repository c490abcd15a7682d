package pairing

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// matching checks that no host appears twice in a round and returns the
// unordered pairs met.
func matching(t *testing.T, n int, r Round, meetRule bool) map[[2]int]bool {
	t.Helper()
	seen := map[int]bool{}
	met := map[[2]int]bool{}
	for _, p := range r.Pairs {
		require.NotEqual(t, p.Server, p.Client, "round %d pairs a host with itself", r.Index)
		for _, h := range []int{p.Server, p.Client} {
			require.True(t, h >= 0 && h < n, "round %d: host %d out of range", r.Index, h)
			require.False(t, seen[h], "round %d: host %d twice", r.Index, h)
			seen[h] = true
		}
		if meetRule {
			assert.Equal(t, Meet(r.Index, p.Server, p.Client), p, "round %d: roles follow the rule", r.Index)
		}
		met[[2]int{min(p.Server, p.Client), max(p.Server, p.Client)}] = true
	}
	return met
}

func TestRing(t *testing.T) {
	assert.Empty(t, Base(Ring, 0))
	assert.Empty(t, Base(Ring, 1))
	assert.Equal(t, []Round{{Index: 0, Pairs: []Pair{{0, 1}}}}, Base(Ring, 2))
	assert.Equal(t, []Round{
		{Index: 0, Pairs: []Pair{{0, 1}, {2, 3}}},
		{Index: 1, Pairs: []Pair{{1, 2}, {3, 0}}},
	}, Base(Ring, 4))
	assert.Equal(t, []Round{
		{Index: 0, Pairs: []Pair{{0, 1}}},
		{Index: 1, Pairs: []Pair{{1, 2}}},
		{Index: 2, Pairs: []Pair{{2, 0}}},
	}, Base(Ring, 3))

	for n := 3; n <= 41; n++ {
		rounds := Base(Ring, n)
		want := 2 + n%2
		require.Len(t, rounds, want, "n=%d", n)
		edges := map[[2]int]int{}
		partners := map[int]map[int]bool{}
		serves := map[int]int{}
		for _, r := range rounds {
			for e := range matching(t, n, r, false) {
				edges[e]++
				for _, h := range e {
					if partners[h] == nil {
						partners[h] = map[int]bool{}
					}
				}
				partners[e[0]][e[1]], partners[e[1]][e[0]] = true, true
			}
			for _, p := range r.Pairs {
				serves[p.Server]++
			}
		}
		require.Len(t, edges, n, "n=%d: every ring edge once", n)
		for i := 0; i < n; i++ {
			e := [2]int{min(i, (i+1)%n), max(i, (i+1)%n)}
			assert.Equal(t, 1, edges[e], "n=%d edge %v", n, e)
			assert.Len(t, partners[i], 2, "n=%d: host %d has two different partners", n, i)
			assert.Equal(t, 1, serves[i], "n=%d: host %d serves once", n, i)
		}
	}
}

func TestAll(t *testing.T) {
	assert.Empty(t, Base(All, 1))
	for n := 2; n <= 33; n++ {
		rounds := Base(All, n)
		want := n - 1
		if n%2 == 1 {
			want = n
		}
		require.Len(t, rounds, want, "n=%d", n)
		met := map[[2]int]int{}
		for i, r := range rounds {
			assert.Equal(t, i, r.Index)
			m := matching(t, n, r, true)
			assert.Equal(t, n/2, len(m), "n=%d round %d: %d pairs, at most one host idle", n, i, len(m))
			for e := range m {
				met[e]++
			}
		}
		assert.Len(t, met, n*(n-1)/2, "n=%d: every pair", n)
		for e, c := range met {
			assert.Equal(t, 1, c, "n=%d: pair %v met once", n, e)
		}
	}
}

func TestPeer(t *testing.T) {
	r := Round{Index: 1, Pairs: []Pair{{Server: 2, Client: 1}}}
	p, srv, ok := r.Peer(1)
	assert.True(t, ok)
	assert.False(t, srv)
	assert.Equal(t, 2, p)
	p, srv, ok = r.Peer(2)
	assert.True(t, ok && srv)
	assert.Equal(t, 1, p)
	_, _, ok = r.Peer(0)
	assert.False(t, ok)
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]Kind{"": Ring, "ring": Ring, " RING ": Ring, "all": All} {
		k, err := ParseKind(in)
		require.NoError(t, err)
		assert.Equal(t, want, k)
	}
	_, err := ParseKind("mesh")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `GDR_PAIRING="mesh"`)
}

func TestParsePorts(t *testing.T) {
	p, err := ParsePorts("")
	require.NoError(t, err)
	assert.Equal(t, DefaultPorts, p)
	p, err = ParsePorts("40000-40015")
	require.NoError(t, err)
	assert.Equal(t, Ports{40000, 40015}, p)
	for _, bad := range []string{"1-2", "40000", "40000-40010", "x-y", "60000-70000", "500-2000", "30000-20000"} {
		_, err := ParsePorts(bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "GDR_CLUSTER_PORTS=", bad)
	}
}

func TestPortsAndTokens(t *testing.T) {
	j := Job{Key: "slurm/c1/4242", Secret: []byte("s3cret"), Ports: DefaultPorts}
	other := Job{Key: "slurm/c1/4243", Secret: []byte("s3cret"), Ports: DefaultPorts}
	otherSecret := Job{Key: "slurm/c1/4242", Secret: []byte("another"), Ports: DefaultPorts}

	assert.Equal(t, j.Token(0, "n1", "n2"), j.Token(0, "n1", "n2"), "deterministic: every task derives the same")
	assert.Equal(t, j.Token(0, "n1", "n2"), j.Token(0, "n2", "n1"), "both ends of a pair derive the same")
	assert.Len(t, j.Token(0, "n1", "n2"), 32)
	assert.NotEqual(t, j.Token(0, "n1", "n2"), j.Token(1, "n1", "n2"), "rounds never share a token")
	assert.NotEqual(t, j.Token(0, "n1", "n2"), other.Token(0, "n1", "n2"), "jobs never share a token")
	assert.NotEqual(t, j.Token(0, "n1", "n2"), otherSecret.Token(0, "n1", "n2"), "the token depends on the secret")
	// Pairs of one round never share a token: n1's token with n2 lets
	// nobody pass for n3, and names cannot be shifted across the boundary.
	assert.NotEqual(t, j.Token(0, "n1", "n2"), j.Token(0, "n1", "n3"))
	assert.NotEqual(t, j.Token(0, "n1", "n2"), j.Token(0, "n3", "n2"))
	assert.NotEqual(t, j.Token(0, "ab", "c"), j.Token(0, "a", "bc"))
	assert.Equal(t, j.Port(3), otherSecret.Port(3), "ports depend on the job, not the secret")

	blocks := (DefaultPorts.Hi - DefaultPorts.Lo + 1) / PortsPerRound
	seen := map[int]bool{}
	for r := 0; r < blocks; r++ {
		p := j.Port(r)
		assert.True(t, p >= DefaultPorts.Lo && p+PortsPerRound-1 <= DefaultPorts.Hi, "round %d port %d in range", r, p)
		assert.Equal(t, 0, (p-DefaultPorts.Lo)%PortsPerRound)
		assert.False(t, seen[p], "round %d reuses port %d before the range wraps", r, p)
		seen[p] = true
	}
	assert.Equal(t, j.Port(0), j.Port(blocks), "wraps after every block was used")

	// Jobs spread over the range: 200 job IDs land on many different blocks.
	starts := map[int]bool{}
	for id := 0; id < 200; id++ {
		starts[Job{Key: "slurm/c1/" + string(rune('a'+id%26)) + string(rune('a'+id/26)), Ports: DefaultPorts}.Port(0)] = true
	}
	assert.Greater(t, len(starts), 150)

	small := Job{Key: "k", Ports: Ports{40000, 40015}}
	assert.Equal(t, 40000, small.Port(0))
	assert.Equal(t, 40000, small.Port(7))
}

// sameNeighbours counts ring neighbours of one group in order.
func sameNeighbours(ord []int, group func(int) int) int {
	n, same := len(ord), 0
	for p := range ord {
		if group(ord[p]) == group(ord[(p+1)%n]) {
			same++
		}
	}
	return same
}

func checkPermutation(t *testing.T, ord []int, n int) {
	t.Helper()
	require.Len(t, ord, n)
	seen := make([]bool, n)
	for _, i := range ord {
		require.False(t, seen[i], "host %d twice", i)
		seen[i] = true
	}
}

// Without groups the schedule keeps the job's order; with them each ring
// neighbour is in another group whenever no group holds more than half the
// hosts, whatever the sizes; the order is a permutation and the same on
// every call.
func TestOrderSpreadsGroups(t *testing.T) {
	hosts := []string{"a", "b", "c", "d"}
	assert.Equal(t, []int{0, 1, 2, 3}, Order(hosts, nil))
	// Two leaves of two, listed leaf by leaf: the ring alternates them.
	ord := Order(hosts, Groups{"a": 0, "b": 0, "c": 1, "d": 1})
	assert.Equal(t, []int{0, 2, 1, 3}, ord)

	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		n := 3 + rng.IntN(60)
		groups := 1 + rng.IntN(8)
		g := Groups{}
		var names []string
		count := map[int]int{}
		for i := 0; i < n; i++ {
			h := fmt.Sprintf("h%d", i)
			names = append(names, h)
			x := rng.IntN(groups + 1) // groups: none
			if x < groups {
				g[h] = x
			}
			count[x]++
		}
		biggest := 0
		for _, c := range count {
			biggest = max(biggest, c)
		}
		ord := Order(names, g)
		checkPermutation(t, ord, n)
		assert.Equal(t, ord, Order(names, g), "deterministic")
		group := func(i int) int {
			if x, ok := g[names[i]]; ok {
				return x
			}
			return -1
		}
		same := sameNeighbours(ord, group)
		if 2*biggest <= n {
			assert.Zero(t, same, "n=%d sizes %v: %v", n, count, ord)
		} else {
			// The largest group's hosts need others between them: what
			// the others cannot separate stays together, and no more.
			assert.Equal(t, 2*biggest-n, same, "n=%d sizes %v", n, count)
		}
	}
}

// A rerun of k failed nodes with 2k known-good ones (the groups "rerun"
// and "known-good"): each failed node meets two good ones, each good one
// meets a failed one and a good one, so every good partner passes
// elsewhere and a failed node that fails with both is found bad within
// the ring's two rounds.
func TestOrderRerunPattern(t *testing.T) {
	for k := 1; k <= 20; k++ {
		var names []string
		g := Groups{}
		for i := 0; i < k; i++ {
			names = append(names, fmt.Sprintf("bad%d", i))
			g[names[len(names)-1]] = 0
		}
		for i := 0; i < 2*k; i++ {
			names = append(names, fmt.Sprintf("good%d", i))
			g[names[len(names)-1]] = 1
		}
		ord := Order(names, g)
		checkPermutation(t, ord, 3*k)
		n := len(ord)
		for p, i := range ord {
			prev, next := g[names[ord[(p+n-1)%n]]], g[names[ord[(p+1)%n]]]
			if g[names[i]] == 0 {
				assert.Equal(t, [2]int{1, 1}, [2]int{prev, next}, "k=%d: %s between two good hosts", k, names[i])
			} else {
				assert.Equal(t, 1, prev+next, "k=%d: %s meets one failed and one good host", k, names[i])
			}
		}
	}
}

// At 1024 hosts in 32 leaves of 32, listed leaf by leaf as node names
// usually are, the ring in list order keeps 992 of 1024 pairs inside a
// leaf; in Order's order every pair crosses the spine, in both rounds.
func TestOrderAt1024In32Leaves(t *testing.T) {
	var hosts []string
	g := Groups{}
	for i := 0; i < 1024; i++ {
		h := fmt.Sprintf("gpu%04d", i+1)
		hosts = append(hosts, h)
		g[h] = i / 32
	}
	base := Base(Ring, len(hosts))
	cross, all := Crossing(base, hosts, g)
	t.Logf("list order: %d of %d pairs cross a leaf (%.1f%%)", cross, all, 100*float64(cross)/float64(all))
	assert.Equal(t, 32, cross)
	ord := Order(hosts, g)
	checkPermutation(t, ord, len(hosts))
	// The schedule's pairs over Order's numbering, as isolate.Round maps them.
	var mapped []Round
	for _, r := range base {
		m := Round{Index: r.Index}
		for _, p := range r.Pairs {
			m.Pairs = append(m.Pairs, Pair{Server: ord[p.Server], Client: ord[p.Client]})
		}
		mapped = append(mapped, m)
	}
	cross, all = Crossing(mapped, hosts, g)
	t.Logf("topology order: %d of %d pairs cross a leaf (%.1f%%)", cross, all, 100*float64(cross)/float64(all))
	assert.Equal(t, all, cross)
	assert.Equal(t, 1024, all)
}

// placed is the schedule's rounds over hosts numbered in ord's order (as
// isolate.Round maps them): indexes into hosts.
func placed(kind Kind, ord []int) []Round {
	rounds := Base(kind, len(ord))
	for k, r := range rounds {
		pairs := make([]Pair, len(r.Pairs))
		for i, p := range r.Pairs {
			pairs[i] = Pair{Server: ord[p.Server], Client: ord[p.Client]}
		}
		rounds[k].Pairs = pairs
	}
	return rounds
}

const (
	rackA = "6b0c2d1e-0000-4000-8000-00000000000a/32766"
	rackB = "6b0c2d1e-0000-4000-8000-00000000000b/32766"
)

// Eight trays of two NVL72 racks, listed rack by rack (Slurm's node list
// does that): no ring pair, round 0's or round 1's, stays inside a rack.
func TestArrangeTwoDomainsOfFour(t *testing.T) {
	hosts := []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"}
	d := Domains{}
	for _, h := range hosts[:4] {
		d[h] = rackA
	}
	for _, h := range hosts[4:] {
		d[h] = rackB
	}
	// Without the domains the job's order pairs a1-a2 in round 0.
	same, _ := SameDomain(placed(Ring, Order(hosts, nil)), hosts, d)
	require.NotZero(t, same, "the test's premise: the job's order pairs inside a rack")

	ord := Arrange(hosts, Layout{Domains: d})
	checkPermutation(t, ord, len(hosts))
	rounds := placed(Ring, ord)
	same, all := SameDomain(rounds[:1], hosts, d)
	assert.Zero(t, same, "round 0 pairs inside a rack: %v", rounds[0].Pairs)
	assert.Equal(t, 4, all)
	same, all = SameDomain(rounds, hosts, d)
	assert.Zero(t, same, "a ring round pairs inside a rack: %v", rounds)
	assert.Equal(t, 8, all)
	assert.Equal(t, ord, Arrange(hosts, Layout{Domains: d}), "every task computes the same")
}

// One rack holding every host steers nothing: the order is the one
// without domains, with and without leaf groups.
func TestArrangeOneDomainIsNone(t *testing.T) {
	hosts := []string{"a", "b", "c", "d"}
	d := Domains{"a": rackA, "b": rackA, "c": rackA, "d": rackA}
	assert.Equal(t, Order(hosts, nil), Arrange(hosts, Layout{Domains: d}))
	g := Groups{"a": 0, "b": 0, "c": 1, "d": 1}
	assert.Equal(t, Order(hosts, g), Arrange(hosts, Layout{Domains: d, Groups: g}))
	assert.Equal(t, []int{0, 2, 1, 3}, Arrange(hosts, Layout{Domains: d, Groups: g}))
	// No domain at all, or only "": Order's, exactly.
	assert.Equal(t, Order(hosts, g), Arrange(hosts, Layout{Groups: g}))
	assert.Equal(t, Order(hosts, g), Arrange(hosts, Layout{Groups: g, Domains: Domains{"a": "", "c": ""}}))
	// A domain of one host steers nothing either.
	assert.Equal(t, Order(hosts, g), Arrange(hosts, Layout{Groups: g, Domains: Domains{"a": rackA, "c": rackB}}))
}

// Hosts without a domain (PCIe or HGX hosts) share NVLink with nobody:
// they sit between a rack's trays, and two of them may meet.
func TestArrangeMixedAbsentAndPresent(t *testing.T) {
	hosts := []string{"a1", "a2", "a3", "x1", "x2", "x3"}
	d := Domains{"a1": rackA, "a2": rackA, "a3": rackA, "x2": ""}
	ord := Arrange(hosts, Layout{Domains: d})
	checkPermutation(t, ord, len(hosts))
	same, all := SameDomain(placed(Ring, ord), hosts, d)
	assert.Zero(t, same, "%v", ord)
	assert.Equal(t, 6, all)
	same, _ = SameDomain(placed(All, ord), hosts, d)
	assert.Equal(t, 3, same, "all pairs: the rack's three pairs, each once")
}

// The domain comes before the leaf: with leaves that follow the racks
// (each rack on its own leaf) and leaves across them, no pair stays in a
// rack; and among orders that keep the racks apart, leaves break ties.
func TestArrangeDomainsBeforeLeaves(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 500; trial++ {
		n := 3 + rng.IntN(40)
		racks := 1 + rng.IntN(5)
		leaves := rng.IntN(5)
		var names []string
		d, g := Domains{}, Groups{}
		count := map[string]int{}
		for i := 0; i < n; i++ {
			h := fmt.Sprintf("h%d", i)
			names = append(names, h)
			if x := rng.IntN(racks + 1); x < racks {
				d[h] = fmt.Sprintf("rack%d/0", x)
				count[d[h]]++
			}
			if leaves > 0 {
				g[h] = rng.IntN(leaves)
			}
		}
		biggest := 0
		for _, c := range count {
			biggest = max(biggest, c)
		}
		ord := Arrange(names, Layout{Domains: d, Groups: g})
		checkPermutation(t, ord, n)
		assert.Equal(t, ord, Arrange(names, Layout{Domains: d, Groups: g}), "deterministic")
		dom := func(i int) int {
			if v := d[names[i]]; v != "" {
				var r int
				fmt.Sscanf(v, "rack%d/0", &r)
				return r
			}
			return -1 - i
		}
		withLeaves := sameNeighbours(ord, dom)
		if 2*biggest <= n {
			assert.Zero(t, withLeaves, "n=%d racks %v: %v", n, count, ord)
		}
		// The leaves never cost a neighbour of one rack.
		assert.LessOrEqual(t, withLeaves, sameNeighbours(Arrange(names, Layout{Domains: d}), dom), "n=%d %v", n, count)
	}
	// Two racks of four, each rack over two leaves: racks alternate, and
	// leaves then differ where they can (the ring alternates racks, so a
	// rack's hosts sit every other place: two neighbours of one leaf at
	// least, six in the domains' own order).
	hosts := []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"}
	d := Domains{}
	g := Groups{}
	for i, h := range hosts {
		d[h] = map[bool]string{true: rackA, false: rackB}[i < 4]
		g[h] = i % 2 * 1
		if i%4 >= 2 {
			g[h] = 1 - i%2
		}
	}
	ord := Arrange(hosts, Layout{Domains: d, Groups: g})
	assert.Zero(t, sameNeighbours(ord, func(i int) int { return map[string]int{rackA: 0, rackB: 1}[d[hosts[i]]] }))
	leaf := func(i int) int { return g[hosts[i]] }
	assert.Equal(t, 6, sameNeighbours(Arrange(hosts, Layout{Domains: d}), leaf))
	assert.Equal(t, 2, sameNeighbours(ord, leaf), "leaves break the tie: %v", ord)
}
