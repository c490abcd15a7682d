package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pathclass"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	c, err := Parse(env())
	require.NoError(t, err)
	assert.Equal(t, Defaults(), c)
	assert.Equal(t, "/", c.HostRoot)
	assert.Equal(t, pathclass.PXB, c.MaxPath)
	assert.Equal(t, -1, c.GIDIndex)
	assert.Equal(t, 1, c.IBPort)
	assert.Equal(t, 30*time.Second, c.Timeout)
	assert.Equal(t, 0.8, c.MinConcurrentFraction)
	assert.Equal(t, 0.74, c.MinP2PNVLinkFraction)
	assert.Equal(t, c.MinCopyFraction, c.MinP2PPCIeFraction, "PCIe peer copies have the host copies' floor")
}

func TestValidValues(t *testing.T) {
	c, err := Parse(env(
		"GDR_HOST_ROOT", "/host", "GDR_STRICT", "1", "GDR_GPU", "0000:3B:00.0",
		"GDR_RDMA_DEVICE", "mlx5_0", "GDR_IB_PORT", "2", "GDR_GID_INDEX", "3",
		"GDR_ROLE", "client", "GDR_PEER", "198.18.0.1", "GDR_TIMEOUT", "2m",
		"GDR_MAX_PATH", "phb", "GDR_ALLOW_IOMMU", "yes", "GDR_MEM", "GPU",
		"GDR_ITERS", "50", "GDR_MIN_BW_GBPS", "90.5", "GDR_MAX_LAT_US", "5",
		"GDR_MIN_COPY_FRACTION", "0.8", "GDR_TOKEN", "s3cret", "GDR_LISTEN", "127.0.0.1:9999",
		"GDR_MIN_CONCURRENT_FRACTION", "0.5", "GDR_MIN_P2P_NVLINK_FRACTION", "0.9", "GDR_MIN_P2P_PCIE_FRACTION", "0.25",
	))
	require.NoError(t, err)
	assert.True(t, c.Strict)
	assert.Equal(t, "0000:3b:00.0", c.GPU)
	assert.Equal(t, 2, c.IBPort)
	assert.Equal(t, 3, c.GIDIndex)
	assert.Equal(t, Client, c.Role)
	assert.Equal(t, "198.18.0.1:18515", c.Peer)
	assert.Equal(t, "127.0.0.1:9999", c.Listen)
	assert.Equal(t, 2*time.Minute, c.Timeout)
	assert.Equal(t, pathclass.PHB, c.MaxPath)
	assert.True(t, c.AllowIOMMU)
	assert.Equal(t, MemGPU, c.Mem)
	assert.Equal(t, 50, c.Iters)
	assert.InDelta(t, 90.5, c.MinBWGbps, 1e-9)
	assert.InDelta(t, 0.8, c.MinCopyFraction, 1e-9)
	assert.InDelta(t, 0.5, c.MinConcurrentFraction, 1e-9)
	assert.InDelta(t, 0.9, c.MinP2PNVLinkFraction, 1e-9)
	assert.InDelta(t, 0.25, c.MinP2PPCIeFraction, 1e-9)

	c, err = Parse(env("GDR_TIMEOUT", "1.5", "GDR_GPU", "1", "GDR_PEER", "[fd00::1]:7000", "GDR_ROLE", "client", "GDR_GID_INDEX", "auto"))
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, c.Timeout)
	assert.Equal(t, "1", c.GPU)
	assert.Equal(t, "[fd00::1]:7000", c.Peer)
	assert.Equal(t, -1, c.GIDIndex)
}

// Every bad value names the variable, the value and what is accepted.
func TestBadValuesNameVariableAndValue(t *testing.T) {
	cases := []struct{ name, val, want string }{
		{"GDR_STRICT", "maybe", "1 or 0"},
		{"GDR_GPU", "gpu0", "PCI address"},
		{"GDR_RDMA_DEVICE", "mlx5 0", "/sys/class/infiniband"},
		{"GDR_IB_PORT", "0", "1 to 255"},
		{"GDR_IB_PORT", "x", "1 to 255"},
		{"GDR_GID_INDEX", "-2", "0 to 65535"},
		{"GDR_ROLE", "master", "server, client"},
		{"GDR_PEER", "host:99999", "host:port"},
		{"GDR_LISTEN", "::x::", "port"},
		{"GDR_TIMEOUT", "0", "above 0"},
		{"GDR_TIMEOUT", "forever", "duration"},
		{"GDR_TIMEOUT", "NaN", "duration"},
		{"GDR_MAX_PATH", "NVL", "PIX, PXB"},
		{"GDR_ALLOW_IOMMU", "2", "1 or 0"},
		{"GDR_MEM", "hbm", "gpu or host"},
		{"GDR_ITERS", "-5", "whole number"},
		{"GDR_MIN_BW_GBPS", "fast", "number"},
		{"GDR_MIN_COPY_FRACTION", "1.5", "0 to 1"},
		{"GDR_MIN_CONCURRENT_FRACTION", "-0.1", "0 to 1"},
		{"GDR_MIN_P2P_NVLINK_FRACTION", "335", "0 to 1"},
		{"GDR_MIN_P2P_PCIE_FRACTION", "half", "0 to 1"},
		{"GDR_MAX_LAT_US", "NaN", "number"},
		{"GDR_BW_SIZES", "64k,,1m", "comma-separated message sizes"},
		{"GDR_BW_SIZES", "0", "comma-separated message sizes"},
		{"GDR_BW_SIZES", "2048m", "comma-separated message sizes"},
		{"GDR_BW_SIZES", "big", "comma-separated message sizes"},
		{"GDR_RAILS", "0,0", "each at most once"},
		{"GDR_RAILS", "first", "rail indices"},
		{"GDR_RAILS", "-1", "rail indices"},
		{"GDR_RAILS", "1,,2", "rail indices"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"="+tc.val, func(t *testing.T) {
			_, err := Parse(env(tc.name, tc.val))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.name)
			assert.Contains(t, err.Error(), tc.val)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBWSizes(t *testing.T) {
	assert.Equal(t, []int{4096, 65536, 1048576}, Defaults().BWSizes)
	c, err := Parse(env("GDR_BW_SIZES", "65536, 1m,4K,2"))
	require.NoError(t, err)
	assert.Equal(t, []int{65536, 1 << 20, 4096, 2}, c.BWSizes)
	c, err = Parse(env("GDR_BW_SIZES", ""))
	require.NoError(t, err)
	assert.Equal(t, Defaults().BWSizes, c.BWSizes)
}

func TestRails(t *testing.T) {
	assert.Nil(t, Defaults().Rails, "all")
	for _, v := range []string{"", "all", "ALL"} {
		c, err := Parse(env("GDR_RAILS", v))
		require.NoError(t, err, v)
		assert.Nil(t, c.Rails, v)
	}
	c, err := Parse(env("GDR_RAILS", "5, 0,2"))
	require.NoError(t, err)
	assert.Equal(t, []int{5, 0, 2}, c.Rails)
}

func TestRoleAndPeerMustAgree(t *testing.T) {
	_, err := Parse(env("GDR_ROLE", "client"))
	require.ErrorContains(t, err, "GDR_PEER")
	_, err = Parse(env("GDR_PEER", "hostA"))
	require.ErrorContains(t, err, "GDR_ROLE")
	_, err = Parse(env("GDR_ROLE", "server"))
	require.NoError(t, err)
}

func TestAllBadValuesReportedTogether(t *testing.T) {
	_, err := Parse(env("GDR_IB_PORT", "x", "GDR_MEM", "y"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GDR_IB_PORT")
	assert.Contains(t, err.Error(), "GDR_MEM")
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "1", "0000:3b:00.0", "30s", "host:1", "[::1]", "NaN", "1e309"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range Vars {
			c, err := Parse(env(name, v))
			if err == nil && c.Timeout <= 0 {
				t.Fatalf("%s=%q gave a non-positive timeout", name, v)
			}
		}
	})
}

// The README documents every variable Load reads.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, "<!-- config:begin -->"), strings.Index(s, "<!-- config:end -->")
	require.True(t, i >= 0 && j > i, "README.md lacks the configuration table markers")
	for _, v := range Vars {
		assert.Contains(t, s[i:j], "`"+v+"`", "README's configuration table does not document %s", v)
	}
}
