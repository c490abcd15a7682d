package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/config/configtest"
)

var env = configtest.Env

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig(env())
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), c)
	assert.Equal(t, pairing.Ring, c.Pairing)
	assert.Equal(t, 2, c.RepairRounds)
	assert.Equal(t, 15*time.Minute, c.StartTimeout, "generous: image pulls skew a large fleet's start")
	assert.Equal(t, 30*time.Minute, c.RoundTimeout)
}

func TestConfigValues(t *testing.T) {
	c, err := ParseConfig(env("GDR_PAIRING", "all", "GDR_CLUSTER_SECRET", " s e ", "GDR_CLUSTER_PORTS", "40000-40999",
		"GDR_PEER_SUFFIX", "-ib", "GDR_REPAIR_ROUNDS", "0", "GDR_REPORTS", "/shared/gdr", "GDR_PAIR_MIN_FRACTION", "0",
		"GDR_START_TIMEOUT", "20m", "GDR_ROUND_TIMEOUT", "90"))
	require.NoError(t, err)
	assert.Equal(t, pairing.All, c.Pairing)
	assert.Equal(t, " s e ", c.Secret, "a secret is not trimmed")
	assert.Equal(t, pairing.Ports{Lo: 40000, Hi: 40999}, c.Ports)
	assert.Equal(t, "-ib", c.PeerSuffix)
	assert.Equal(t, 0, c.RepairRounds)
	assert.Equal(t, "/shared/gdr", c.Reports)
	assert.Zero(t, c.MinFraction)
	assert.Equal(t, 20*time.Minute, c.StartTimeout)
	assert.Equal(t, 90*time.Second, c.RoundTimeout, "plain seconds, as GDR_TIMEOUT")
}

func TestConfigBadValues(t *testing.T) {
	_, err := ParseConfig(env("GDR_PAIRING", "star", "GDR_CLUSTER_PORTS", "5", "GDR_PEER_SUFFIX", "/x",
		"GDR_REPAIR_ROUNDS", "-1", "GDR_PAIR_MIN_FRACTION", "2", "GDR_CLUSTER_SECRET", "a", "GDR_CLUSTER_SECRET_FILE", "/f"))
	require.Error(t, err)
	for _, want := range []string{`GDR_PAIRING="star"`, `GDR_CLUSTER_PORTS="5"`, `GDR_PEER_SUFFIX="/x"`,
		`GDR_REPAIR_ROUNDS="-1"`, `GDR_PAIR_MIN_FRACTION="2"`, "both set"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestDocsDocumentClusterVariables(t *testing.T) {
	configtest.DocsDocument(t, "../docs/configuration.md", ConfigVars)
}

// Malformed cluster values, held to the rules of the suite's (configtest).
func TestMalformedConfigValues(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	hugeText := strings.Repeat("x", 1<<20)
	cases := []configtest.Malformed{
		{Name: "GDR_PAIRING", Kind: "garbage", Val: "star", Want: "want ring"},
		{Name: "GDR_PAIRING", Kind: "huge", Val: hugeText, Want: "want ring"},
		{Name: "GDR_CLUSTER_SECRET_FILE", Kind: "garbage", Val: "/run/s\x00", Want: "no NUL bytes"},
		{Name: "GDR_CLUSTER_SECRET_FILE", Kind: "huge", Val: hugeText, Want: "at most 4096 bytes"},
		{Name: "GDR_CLUSTER_PORTS", Kind: "out of range", Val: "80-2000", Want: "within 1024-65535"},
		{Name: "GDR_CLUSTER_PORTS", Kind: "garbage", Val: "5", Want: "LO-HI"},
		{Name: "GDR_CLUSTER_PORTS", Kind: "huge", Val: huge, Want: "LO-HI"},
		{Name: "GDR_PEER_SUFFIX", Kind: "garbage", Val: "/x", Want: "host name characters"},
		{Name: "GDR_PEER_SUFFIX", Kind: "huge", Val: hugeText + "/", Want: "host name characters"},
		{Name: "GDR_REPAIR_ROUNDS", Kind: "out of range", Val: "17", Want: "0 to 16"},
		{Name: "GDR_REPAIR_ROUNDS", Kind: "garbage", Val: "x", Want: "0 to 16"},
		{Name: "GDR_REPAIR_ROUNDS", Kind: "huge", Val: huge, Want: "0 to 16"},
		{Name: "GDR_REPORTS", Kind: "garbage", Val: "reports\x00", Want: "no NUL bytes"},
		{Name: "GDR_REPORTS", Kind: "huge", Val: hugeText, Want: "at most 4096 bytes"},
		{Name: "GDR_PAIR_MIN_FRACTION", Kind: "wrong unit", Val: "50%", Want: "0.5, not 50%"},
		{Name: "GDR_PAIR_MIN_FRACTION", Kind: "out of range", Val: "2", Want: "0 to 1"},
		{Name: "GDR_PAIR_MIN_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_START_TIMEOUT", Kind: "garbage", Val: "soon", Want: "a duration from 1s to 24h"},
		{Name: "GDR_START_TIMEOUT", Kind: "out of range", Val: "0", Want: "a duration from 1s to 24h"},
		{Name: "GDR_START_TIMEOUT", Kind: "huge", Val: huge, Want: "a duration from 1s to 24h"},
		{Name: "GDR_ROUND_TIMEOUT", Kind: "garbage", Val: "-5m", Want: "a duration from 1s to 24h"},
		{Name: "GDR_ROUND_TIMEOUT", Kind: "out of range", Val: "48h", Want: "a duration from 1s to 24h"},
		{Name: "GDR_ROUND_TIMEOUT", Kind: "huge", Val: huge, Want: "a duration from 1s to 24h"},
		{Name: "GDR_TOPOLOGY_FILE", Kind: "garbage", Val: "/etc/slurm/topology.conf\x00", Want: "no NUL bytes"},
		{Name: "GDR_TOPOLOGY_FILE", Kind: "missing", Val: "/nonexistent/topology.conf", Want: "no such file"},
		{Name: "GDR_TOPOLOGY_FILE", Kind: "huge", Val: hugeText, Want: "at most 4096 bytes"},
	}
	for _, tc := range cases {
		require.True(t, slices.Contains(ConfigVars, tc.Name), "%s is no cluster variable", tc.Name)
	}
	// A secret is taken as given (any bytes, never shown): GDR_CLUSTER_SECRET
	// has no malformed value.
	configtest.CheckMalformed(t, func(lookup func(string) (string, bool)) error { _, err := ParseConfig(lookup); return err }, cases, ConfigVars,
		nil, []string{"GDR_CLUSTER_SECRET"})
}

// GDR_TOPOLOGY_FILE's groups reach the schedule: a task's round-0 peer is
// in another leaf, where the job's order would pair it within its own; a
// file that does not read is an error naming its line.
func TestConfigTopology(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "topology.conf")
	require.NoError(t, os.WriteFile(f, []byte("SwitchName=leaf1 Nodes=gpu[01-04]\nSwitchName=leaf2 Nodes=gpu[05-08]\nSwitchName=spine Switches=leaf[1-2]\n"), 0o644))
	c, err := ParseConfig(env("GDR_TOPOLOGY_FILE", f))
	require.NoError(t, err)
	assert.Equal(t, f, c.Topology)
	assert.Equal(t, pairing.Groups{"gpu01": 0, "gpu02": 0, "gpu03": 0, "gpu04": 0, "gpu05": 1, "gpu06": 1, "gpu07": 1, "gpu08": 1}, c.Groups)

	task := jobenv.Task{Engine: jobenv.Slurm, JobID: "9", Index: 0}
	for i := 1; i <= 8; i++ {
		task.Names = append(task.Names, fmt.Sprintf("gpu%02d", i))
	}
	task.Addrs = task.Names
	secret := []byte("0123456789abcdef")
	for k := 0; k < 2; k++ {
		s := PlanRound(task, c, secret, k, nil, isolate.Liveness{})
		assert.Contains(t, []string{"gpu05", "gpu06", "gpu07", "gpu08"}, s.Plan.Peer, "round %d: gpu01 meets a host of leaf2", k)
	}
	plain := PlanRound(task, DefaultConfig(), secret, 0, nil, isolate.Liveness{})
	assert.Equal(t, "gpu02", plain.Plan.Peer, "without the file, the job's order")

	require.NoError(t, os.WriteFile(f, []byte("leaf1 gpu[01-04]\nleaf2 gpu[04-08]\n"), 0o644))
	_, err = ParseConfig(env("GDR_TOPOLOGY_FILE", f))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2: host gpu04 is in group \"leaf1\" (line 1)")
	require.NoError(t, os.WriteFile(f, []byte("leaf1 gpu[04-01]\n"), 0o644))
	_, err = ParseConfig(env("GDR_TOPOLOGY_FILE", f))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1: hostlist \"gpu[04-01]\"", "cluster/hostlist's own error, on its line")
}
