package cluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
)

const (
	rackA = "6b0c2d1e-0000-4000-8000-00000000000a/32766"
	rackB = "6b0c2d1e-0000-4000-8000-00000000000b/32766"
)

// Each host publishes its NVLink domain in its start marker; the task that
// closes the barrier reads them once into start.json, which every planner
// reads (StartDomains). A host without one is left out.
func TestStartPublishesDomains(t *testing.T) {
	root, run := t.TempDir(), "slurm//11"
	hosts := []string{"a1", "a2", "b1", "x"}
	dom := map[string]string{"a1": rackA, "a2": rackA, "b1": rackB}
	for _, h := range hosts[1:] {
		o := opts(root, run, h, hosts, time.Minute)
		o.Domain = dom[h]
		require.NoError(t, newBarrier(o, StartBarrier, time.Now()).arrive(time.Now()))
	}
	o := opts(root, run, "a1", hosts, time.Minute)
	o.Domain = rackA
	c, err := Start(context.Background(), o)
	require.NoError(t, err)
	assert.Empty(t, c.Missing)
	assert.Equal(t, dom, c.Domains)
	assert.Empty(t, c.DomainNotes)
	got, err := StartDomains(root, run)
	require.NoError(t, err)
	assert.Equal(t, pairing.Domains(dom), got)

	none, err := StartDomains(root, "slurm//12")
	require.NoError(t, err)
	assert.Nil(t, none, "no start barrier closed: no domains, no error")
}

// A domain that is not one never reaches the plan: the publisher's own is
// refused with its value named; another host's in a marker (written by
// hand, a damaged file) becomes a note and that host is planned as one
// without; one in a foreign start.json is an error naming the host and the
// value. Nothing panics, and no message floods a terminal.
func TestHostileDomains(t *testing.T) {
	huge := strings.Repeat("d", 1<<20)
	for _, bad := range []string{huge, "rack\x00a", "rack\nnvlink-domain " + rackB, "rack a", "rack;rm -rf /", "ünicode"} {
		err := pairing.CheckDomain(bad)
		require.Error(t, err, "%q", bad)
		assert.Less(t, len(err.Error()), 400, "a short message: %q", err.Error()[:min(80, len(err.Error()))])
		assert.NotContains(t, err.Error(), "\x00")
		assert.NotContains(t, err.Error(), "\n")

		root, run := t.TempDir(), "slurm//13"
		o := opts(root, run, "a", []string{"a"}, time.Minute)
		o.Domain = bad
		_, err = Start(context.Background(), o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "a cannot publish its NVLink domain: NVLink domain ")
		_, statErr := os.Stat(filepath.Join(RunDir(root, run), StartBarrier, "a"))
		assert.True(t, os.IsNotExist(statErr), "nothing published")
	}
	assert.NoError(t, pairing.CheckDomain(rackA))
	assert.NoError(t, pairing.CheckDomain(strings.Repeat("a", pairing.MaxDomain)))
	assert.Error(t, pairing.CheckDomain(strings.Repeat("a", pairing.MaxDomain+1)))

	// Markers written by other hands: a NUL, a newline that forges a second
	// domain line (only the first counts, and it is not one), a huge file.
	root, run := t.TempDir(), "slurm//14"
	hosts := []string{"a", "b", "c", "d", "e"}
	dir := filepath.Join(RunDir(root, run), StartBarrier)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	now := time.Now().UTC().Format(time.RFC3339)
	write := func(h, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, h), []byte(body), 0o644))
	}
	write("b", run+"\n"+now+"\nnvlink-domain rack\x00b\n")
	write("c", run+"\n"+now+"\nnvlink-domain rack c\nnvlink-domain "+rackB+"\n")
	write("d", run+"\n"+now+"\nnvlink-domain "+strings.Repeat("x", 8<<10)+"\n")
	write("e", run+"\n"+now+"\nnvlink-domain "+rackB+"\n")
	o := opts(root, run, "a", hosts, time.Minute)
	o.Domain = rackA
	c, err := Start(context.Background(), o)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": rackA, "e": rackB}, c.Domains)
	require.Len(t, c.DomainNotes, 3)
	assert.Contains(t, c.DomainNotes[0], `b: NVLink domain "rack\x00b" holds byte 0x00 at 4`)
	assert.Contains(t, c.DomainNotes[1], `c: NVLink domain "rack c" holds byte 0x20 at 4`)
	assert.Contains(t, c.DomainNotes[2], "d: its start marker does not read")
	for _, n := range c.DomainNotes {
		assert.Contains(t, n, "planned without an NVLink domain")
		assert.Less(t, len(n), 400)
	}
	raw, err := os.ReadFile(filepath.Join(RunDir(root, run), StartBarrier+".json"))
	require.NoError(t, err)
	assert.True(t, json.Valid(raw))

	// start.json edited by hand: the planner stops with the value named.
	var file map[string]any
	require.NoError(t, json.Unmarshal(raw, &file))
	file["nvlink_domains"] = map[string]string{"a": rackA, "e": "rack\ne"}
	raw, err = json.Marshal(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(RunDir(root, run), StartBarrier+".json"), raw, 0o644))
	_, err = StartDomains(root, run)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `host "e": NVLink domain "rack\ne" holds byte 0x0a at 4`)
}

// A host's domain is the one its GPUs share; none, or GPUs that disagree,
// publish none (the latter with the reason).
func TestHostDomain(t *testing.T) {
	d, err := HostDomain(nil)
	assert.NoError(t, err)
	assert.Empty(t, d)
	d, err = HostDomain([]string{rackA, rackA, "", rackA})
	assert.NoError(t, err)
	assert.Equal(t, rackA, d)
	d, err = HostDomain([]string{rackA, rackB})
	assert.Empty(t, d)
	assert.ErrorContains(t, err, "this host's GPUs are in 2 NVLink domains ("+rackA+", "+rackB+"): it publishes none")
	d, err = HostDomain([]string{rackA, "bad\x00"})
	assert.Empty(t, d)
	assert.ErrorContains(t, err, `"bad\x00"`)
}

// The plan pairs across the domains published: 8 trays of two racks,
// listed rack by rack, meet only trays of the other rack in the ring's
// rounds, and each plan.json names both domains.
func TestPlanRoundAcrossDomains(t *testing.T) {
	names := []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"}
	c := DefaultConfig()
	c.Reports = t.TempDir()
	c.Domains = pairing.Domains{}
	for i, h := range names {
		c.Domains[h] = map[bool]string{true: rackA, false: rackB}[i < 4]
	}
	secret := []byte("0123456789abcdef0123")
	for k := 0; k < 2; k++ {
		for i, h := range names {
			task := jobenv.Task{Engine: jobenv.Slurm, JobID: "9", Index: i, Names: names, Addrs: names}
			s := PlanRound(task, c, secret, k, nil, isolate.Liveness{})
			require.False(t, s.Done)
			require.NotEqual(t, Idle, s.Plan.Role, "round %d %s", k, h)
			assert.Equal(t, c.Domains[h], s.Plan.NVLinkDomain)
			assert.Equal(t, c.Domains[s.Plan.Peer], s.Plan.PeerNVLinkDomain)
			assert.NotEqual(t, s.Plan.NVLinkDomain, s.Plan.PeerNVLinkDomain, "round %d: %s meets %s in its own rack", k, h, s.Plan.Peer)
		}
	}
	// Without the domains, round 0 pairs a1 with a2 (the job's order).
	c.Domains = nil
	task := jobenv.Task{Engine: jobenv.Slurm, JobID: "9", Index: 0, Names: names, Addrs: names}
	s := PlanRound(task, c, secret, 0, nil, isolate.Liveness{})
	assert.Equal(t, "a2", s.Plan.Peer)
	assert.Empty(t, s.Plan.NVLinkDomain)
	raw, err := json.Marshal(s.Plan)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "nvlink_domain", "absent, not empty")
}
