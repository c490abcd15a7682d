package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	}
	for _, tc := range cases {
		require.True(t, slices.Contains(ConfigVars, tc.Name), "%s is no cluster variable", tc.Name)
	}
	// A secret is taken as given (any bytes, never shown): GDR_CLUSTER_SECRET
	// has no malformed value.
	configtest.CheckMalformed(t, func(lookup func(string) (string, bool)) error { _, err := ParseConfig(lookup); return err }, cases, ConfigVars,
		nil, []string{"GDR_CLUSTER_SECRET"})
}
