package cluster

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/pairing"
	"github.com/gdrconf/gdrconf/internal/clip"
)

// env is a lookup over the given name, value pairs.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig(env())
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), c)
	assert.Equal(t, pairing.Ring, c.Pairing)
	assert.Equal(t, 2, c.RepairRounds)
}

func TestConfigValues(t *testing.T) {
	c, err := ParseConfig(env("GDR_PAIRING", "all", "GDR_CLUSTER_SECRET", " s e ", "GDR_CLUSTER_PORTS", "40000-40999",
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

func TestConfigBadValues(t *testing.T) {
	_, err := ParseConfig(env("GDR_PAIRING", "star", "GDR_CLUSTER_PORTS", "5", "GDR_PEER_SUFFIX", "/x",
		"GDR_REPAIR_ROUNDS", "-1", "GDR_PAIR_MIN_FRACTION", "2", "GDR_CLUSTER_SECRET", "a", "GDR_CLUSTER_SECRET_FILE", "/f"))
	require.Error(t, err)
	for _, want := range []string{`GDR_PAIRING="star"`, `GDR_CLUSTER_PORTS="5"`, `GDR_PEER_SUFFIX="/x"`,
		`GDR_REPAIR_ROUNDS="-1"`, `GDR_PAIR_MIN_FRACTION="2"`, "both set"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestReadmeDocumentsClusterVariables(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, "<!-- config:begin -->"), strings.Index(s, "<!-- config:end -->")
	require.True(t, i >= 0 && j > i, "README.md lacks the configuration table markers")
	for _, v := range ConfigVars {
		assert.Contains(t, s[i:j], "`"+v+"`", "README's configuration table does not document %s", v)
	}
}

// Malformed cluster values, as internal/config's TestMalformedValues checks
// the suite's: each names the variable and (a short prefix of) the value.
func TestMalformedConfigValues(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	hugeText := strings.Repeat("x", 1<<20)
	cases := []struct {
		name, kind, val, want string
	}{
		{"GDR_PAIRING", "garbage", "star", "want ring"},
		{"GDR_PAIRING", "huge", hugeText, "want ring"},
		{"GDR_CLUSTER_SECRET_FILE", "garbage", "/run/s\x00", "no NUL bytes"},
		{"GDR_CLUSTER_SECRET_FILE", "huge", hugeText, "at most 4096 bytes"},
		{"GDR_CLUSTER_PORTS", "out of range", "80-2000", "within 1024-65535"},
		{"GDR_CLUSTER_PORTS", "garbage", "5", "LO-HI"},
		{"GDR_CLUSTER_PORTS", "huge", huge, "LO-HI"},
		{"GDR_PEER_SUFFIX", "garbage", "/x", "host name characters"},
		{"GDR_PEER_SUFFIX", "huge", hugeText + "/", "host name characters"},
		{"GDR_REPAIR_ROUNDS", "out of range", "17", "0 to 16"},
		{"GDR_REPAIR_ROUNDS", "garbage", "x", "0 to 16"},
		{"GDR_REPAIR_ROUNDS", "huge", huge, "0 to 16"},
		{"GDR_REPORTS", "garbage", "reports\x00", "no NUL bytes"},
		{"GDR_REPORTS", "huge", hugeText, "at most 4096 bytes"},
		{"GDR_PAIR_MIN_FRACTION", "wrong unit", "50%", "0.5, not 50%"},
		{"GDR_PAIR_MIN_FRACTION", "out of range", "2", "0 to 1"},
		{"GDR_PAIR_MIN_FRACTION", "huge", huge, "0 to 1"},
	}
	covered := map[string]map[string]bool{}
	for _, tc := range cases {
		require.True(t, slices.Contains(ConfigVars, tc.name), "%s is no cluster variable", tc.name)
		if covered[tc.name] == nil {
			covered[tc.name] = map[string]bool{}
		}
		covered[tc.name][tc.kind] = true
		t.Run(tc.name+" "+tc.kind+" "+clip.Quote(tc.val), func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { _, err = ParseConfig(env(tc.name, tc.val)) })
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, tc.name)
			assert.Contains(t, msg, tc.want)
			assert.Less(t, len(msg), 600, "a short message, whatever the value: %s", msg)
			assert.Contains(t, msg, clip.Quote(strings.TrimSpace(tc.val)), "the value, or a short prefix of it")
		})
	}
	// Every variable has its huge case and at least one other; a secret is
	// taken as given (any bytes, never shown): GDR_CLUSTER_SECRET has none.
	for _, v := range ConfigVars {
		if v == "GDR_CLUSTER_SECRET" {
			continue
		}
		assert.True(t, covered[v]["huge"], "%s has no huge-value case", v)
		assert.GreaterOrEqual(t, len(covered[v]), 2, "%s needs more malformed cases", v)
	}
}
