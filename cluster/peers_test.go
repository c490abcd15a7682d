package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// rec is one pair test a host wrote in a round, on rail 0.
type rec struct {
	status string // pass or fail
	peer   string // its gdr.peer
}

// writeRound writes host's plan for round k and its test.json.
func writeRound(t *testing.T, root, host string, k int, role, peer string, recs ...rec) {
	t.Helper()
	idx := int(host[0] - 'a')
	require.NoError(t, WritePlan(root, Plan{Round: k, Host: host, Index: idx, Hosts: 5, Role: role, Peer: peer, Pairing: "all", Job: "slurm//7"}))
	var b strings.Builder
	for i, r := range recs {
		name := fmt.Sprintf("TestPP03Write/rail0/%d", i)
		for _, kv := range [][2]string{{"gdr.rail", "0"}, {"gdr.peer", r.peer}, {"gdr.role", role}} {
			fmt.Fprintf(&b, `{"Action":"attr","Package":"p","Test":%q,"Key":%q,"Value":%q}`+"\n", name, kv[0], kv[1])
		}
		fmt.Fprintf(&b, `{"Action":%q,"Package":"p","Test":%q}`+"\n", r.status, name)
	}
	if len(recs) > 0 {
		require.NoError(t, os.WriteFile(filepath.Join(RoundDir(root, host, k), "test.json"), []byte(b.String()), 0o644))
	}
}

// A pair whose both ends claim a third host (gdr.peer) cannot shift its
// failures onto it: b (the bad host) and d fail together and both record c,
// which idles every round; b also records c in its round with e, and b and
// d report a pass together later. Reading gdr.peer over the plan made c
// "bad" (failed with b and d, both of whom passed elsewhere) and cleared b;
// read from the plans, every record stays with its planned pair, the claims
// show as failures naming both hosts, c is never judged, and the failed
// pairs left are b's two, with the claims as their evidence.
func TestPairClaimingThirdHost(t *testing.T) {
	root := t.TempDir()
	// Round 0: b-d (both claim c), a-e pass, c idle.
	writeRound(t, root, "b", 0, "server", "d", rec{"fail", "c"})
	writeRound(t, root, "d", 0, "client", "b", rec{"fail", "c"})
	writeRound(t, root, "a", 0, "server", "e", rec{"pass", "e"})
	writeRound(t, root, "e", 0, "client", "a", rec{"pass", "a"})
	writeRound(t, root, "c", 0, Idle, "")
	// Round 1: b-e (e honest: fails with b; b claims c), a-d pass, c idle.
	writeRound(t, root, "b", 1, "server", "e", rec{"fail", "c"})
	writeRound(t, root, "e", 1, "client", "b", rec{"fail", "b"})
	writeRound(t, root, "a", 1, "server", "d", rec{"pass", "d"})
	writeRound(t, root, "d", 1, "client", "a", rec{"pass", "a"})
	writeRound(t, root, "c", 1, Idle, "")
	// Round 2: b-d report a pass together, a-e pass, c idle.
	writeRound(t, root, "b", 2, "server", "d", rec{"pass", "d"})
	writeRound(t, root, "d", 2, "client", "b", rec{"pass", "b"})
	writeRound(t, root, "a", 2, "server", "e", rec{"pass", "e"})
	writeRound(t, root, "e", 2, "client", "a", rec{"pass", "a"})
	writeRound(t, root, "c", 2, Idle, "")

	res, _, err := Load(root, "")
	require.NoError(t, err)
	var claims int
	for _, r := range res {
		assert.NotEqual(t, "c", r.Peer, "round %d: %s's record was given to c", r.Round, r.Host)
		assert.NotEqual(t, "c", r.Host)
		if strings.Contains(r.Detail, "records gdr.peer c, and plan.json names") {
			claims++
			assert.Equal(t, isolate.Fail, r.Status)
		}
	}
	assert.Equal(t, 3, claims, "every claim of c is a failure of the planned pair, naming both")

	a := isolate.Analyze([]string{"a", "b", "c", "d", "e"}, res, isolate.Options{})
	t.Logf("rail 0: b %s, c %s, d %s, e %s", a.State("b", 0), a.State("c", 0), a.State("d", 0), a.State("e", 0))
	assert.NotEqual(t, isolate.Bad, a.State("c", 0), "c ran nothing: nothing may be held against it")
	assert.NotEqual(t, isolate.Suspected, a.State("c", 0))
	assert.False(t, a.Met("b", "c"))
	assert.NotEqual(t, isolate.Good, a.State("e", 0), "e's failure with b stands")
	assert.True(t, a.Met("b", "e"))
	var failed int
	for _, p := range a.Pairs {
		if p.Status.Failed() {
			failed++
			assert.True(t, p.A == "b" || p.B == "b", "failed pair %s-%s in round %d", p.A, p.B, p.Round)
		}
	}
	assert.Equal(t, 2, failed, "b-d in round 0 and b-e in round 1")
}

// Plans that disagree (x names y, y's plan names z): x's round counts as a
// failure of the pair its plan names, with a detail naming both plans; y's
// own round with z is untouched.
func TestPlansDisagree(t *testing.T) {
	root := t.TempDir()
	writeRound(t, root, "a", 0, "server", "b", rec{"pass", "b"})
	writeRound(t, root, "b", 0, "server", "c", rec{"pass", "c"})
	writeRound(t, root, "c", 0, "client", "b", rec{"pass", "b"})
	res, _, err := Load(root, "")
	require.NoError(t, err)
	byHost := map[string]isolate.Result{}
	for _, r := range res {
		byHost[r.Host] = r
	}
	assert.Equal(t, isolate.Fail, byHost["a"].Status)
	assert.Equal(t, "b", byHost["a"].Peer)
	assert.Contains(t, byHost["a"].Detail, "plan.json of a names b as its peer in round 0, and b's plan.json names c: the plans disagree")
	assert.Equal(t, isolate.Pass, byHost["b"].Status)
	assert.Equal(t, "c", byHost["b"].Peer)
	assert.Equal(t, isolate.Pass, byHost["c"].Status)
}

// Without a plan, a host's gdr.peer counts only where the named peer's
// records name it back in that round.
func TestPlanlessPeerConfirmed(t *testing.T) {
	root := t.TempDir()
	write := func(host string, recs ...rec) {
		var b strings.Builder
		for i, r := range recs {
			name := fmt.Sprintf("TestPP03Write/rail0/%d", i)
			for _, kv := range [][2]string{{"gdr.rail", "0"}, {"gdr.peer", r.peer}} {
				fmt.Fprintf(&b, `{"Action":"attr","Package":"p","Test":%q,"Key":%q,"Value":%q}`+"\n", name, kv[0], kv[1])
			}
			fmt.Fprintf(&b, `{"Action":%q,"Package":"p","Test":%q}`+"\n", r.status, name)
		}
		dir := RoundDir(root, host, 0)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "test.json"), []byte(b.String()), 0o644))
	}
	write("a", rec{"pass", "b"})
	write("b", rec{"pass", "a"})
	write("x", rec{"fail", "c"}) // c wrote nothing: x's word alone
	res, _, err := Load(root, "")
	require.NoError(t, err)
	var peers []string
	for _, r := range res {
		peers = append(peers, r.Host+">"+r.Peer)
	}
	assert.ElementsMatch(t, []string{"a>b", "b>a"}, peers)
}
