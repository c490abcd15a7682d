package config

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/pairing"
)

func TestClusterDefaults(t *testing.T) {
	c, err := ParseCluster(env())
	require.NoError(t, err)
	assert.Equal(t, ClusterDefaults(), c)
	assert.Equal(t, pairing.Ring, c.Pairing)
	assert.Equal(t, 2, c.RepairRounds)
}

func TestClusterValues(t *testing.T) {
	c, err := ParseCluster(env("GDR_PAIRING", "all", "GDR_CLUSTER_SECRET", " s e ", "GDR_CLUSTER_PORTS", "40000-40999",
		"GDR_PEER_SUFFIX", "-ib", "GDR_REPAIR_ROUNDS", "0", "GDR_REPORTS", "/shared/gdr", "GDR_PAIR_MIN_FRACTION", "0"))
	require.NoError(t, err)
	assert.Equal(t, pairing.All, c.Pairing)
	assert.Equal(t, " s e ", c.Secret, "a secret is not trimmed")
	assert.Equal(t, pairing.Ports{Lo: 40000, Hi: 40999}, c.Ports)
	assert.Equal(t, "-ib", c.PeerSuffix)
	assert.Equal(t, 0, c.RepairRounds)
	assert.Equal(t, "/shared/gdr", c.Reports)
	assert.Zero(t, c.MinFraction)
}

func TestClusterBadValues(t *testing.T) {
	_, err := ParseCluster(env("GDR_PAIRING", "star", "GDR_CLUSTER_PORTS", "5", "GDR_PEER_SUFFIX", "/x",
		"GDR_REPAIR_ROUNDS", "-1", "GDR_PAIR_MIN_FRACTION", "2", "GDR_CLUSTER_SECRET", "a", "GDR_CLUSTER_SECRET_FILE", "/f"))
	require.Error(t, err)
	for _, want := range []string{`GDR_PAIRING="star"`, `GDR_CLUSTER_PORTS="5"`, `GDR_PEER_SUFFIX="/x"`,
		`GDR_REPAIR_ROUNDS="-1"`, `GDR_PAIR_MIN_FRACTION="2"`, "both set"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestDocsDocumentsClusterVariables(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, "<!-- config:begin -->"), strings.Index(s, "<!-- config:end -->")
	require.True(t, i >= 0 && j > i, "docs/configuration.md lacks the configuration table markers")
	for _, v := range ClusterVars {
		assert.Contains(t, s[i:j], "`"+v+"`", "docs/configuration.md's table does not document %s", v)
	}
}
