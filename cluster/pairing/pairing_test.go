package pairing

import (
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
