package config

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/clip"
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

// GDR_IB_TC/GDR_IB_SL: the suite's variable wins, NCCL's is the default
// when set (-1 is NCCL's own "unset"), else 0; each says where it came from.
func TestFabricClass(t *testing.T) {
	c, err := Parse(env())
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, 0}, [2]int{c.IBTC, c.IBSL})
	assert.Equal(t, [2]string{FromDefault, FromDefault}, [2]string{c.IBTCFrom, c.IBSLFrom})

	c, err = Parse(env("NCCL_IB_TC", "106", "NCCL_IB_SL", "3"))
	require.NoError(t, err)
	assert.Equal(t, 106, c.IBTC)
	assert.Equal(t, "NCCL_IB_TC", c.IBTCFrom)
	assert.Equal(t, 3, c.IBSL)
	assert.Equal(t, "NCCL_IB_SL", c.IBSLFrom)

	c, err = Parse(env("GDR_IB_TC", "104", "NCCL_IB_TC", "106", "GDR_IB_SL", "0", "NCCL_IB_SL", "3"))
	require.NoError(t, err)
	assert.Equal(t, 104, c.IBTC)
	assert.Equal(t, "GDR_IB_TC", c.IBTCFrom)
	assert.Equal(t, 0, c.IBSL, "an explicit 0 overrides NCCL's value")
	assert.Equal(t, "GDR_IB_SL", c.IBSLFrom)

	c, err = Parse(env("NCCL_IB_TC", "-1", "NCCL_IB_SL", ""))
	require.NoError(t, err)
	assert.Equal(t, FromDefault, c.IBTCFrom, "NCCL's -1 is unset")
	assert.Equal(t, FromDefault, c.IBSLFrom)

	_, err = Parse(env("NCCL_IB_TC", "300"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `NCCL_IB_TC="300"`)
	assert.Contains(t, err.Error(), "GDR_IB_TC is unset")
	_, err = Parse(env("NCCL_IB_SL", "x", "GDR_IB_SL", "2"))
	require.NoError(t, err, "NCCL's value is not read when GDR_IB_SL is set")
}

// GDR_GID_NETDEV names the netdev; with GDR_GID_INDEX as well it is an
// error naming both.
func TestGIDNetdev(t *testing.T) {
	c, err := Parse(env("GDR_GID_NETDEV", "eth2.100"))
	require.NoError(t, err)
	assert.Equal(t, "eth2.100", c.GIDNetdev)
	c, err = Parse(env("GDR_GID_NETDEV", "eth2", "GDR_GID_INDEX", "auto"))
	require.NoError(t, err)
	assert.Equal(t, "eth2", c.GIDNetdev)
	_, err = Parse(env("GDR_GID_NETDEV", "eth2", "GDR_GID_INDEX", "3"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `GDR_GID_NETDEV="eth2"`)
	assert.Contains(t, err.Error(), "GDR_GID_INDEX=3")
}

// The manual (docs/configuration.md) documents every variable Load reads.
func TestDocsDocumentsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	s := string(b)
	i, j := strings.Index(s, "<!-- config:begin -->"), strings.Index(s, "<!-- config:end -->")
	require.True(t, i >= 0 && j > i, "docs/configuration.md lacks the configuration table markers")
	for _, v := range Vars {
		assert.Contains(t, s[i:j], "`"+v+"`", "docs/configuration.md's table does not document %s", v)
	}
}

// Malformed values of every variable: out of range, wrong unit, garbage,
// huge. Each is an error naming the variable, at most a short prefix of the
// value (GDR_TOKEN: none of it) and what is accepted; no panic, a short line.
func TestMalformedValues(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	hugeText := strings.Repeat("x", 1<<20)
	cases := []struct {
		name, kind, val, want string
	}{
		{"GDR_HOST_ROOT", "garbage", "/host\x00/x", "no NUL bytes"},
		{"GDR_HOST_ROOT", "huge", "/" + hugeText, "at most 4096 bytes"},
		{"GDR_RAILS", "out of range", "4096", "rail indices"},
		{"GDR_RAILS", "garbage", "0,0", "each at most once"},
		{"GDR_RAILS", "garbage", "first", "all, or a comma-separated list"},
		{"GDR_RAILS", "huge", huge, "rail indices"},
		{"GDR_MR", "garbage", "gdr", "auto, peermem or dmabuf"},
		{"GDR_MR", "huge", hugeText, "auto, peermem or dmabuf"},
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
		{"GDR_STRICT", "out of range", "2", "1 or 0"},
		{"GDR_STRICT", "garbage", "maybe", "1 or 0"},
		{"GDR_STRICT", "huge", huge, "1 or 0"},
		{"GDR_GPU", "out of range", "-1", "GPU index"},
		{"GDR_GPU", "out of range", "0000:3b:20.0", "device <= 1f"},
		{"GDR_GPU", "out of range", "0000:3b:00.8", "function <= 7"},
		{"GDR_GPU", "garbage", "gpu0", "PCI address"},
		{"GDR_GPU", "huge", huge, "GPU index"},
		{"GDR_RDMA_DEVICE", "garbage", "mlx5 0", "/sys/class/infiniband"},
		{"GDR_RDMA_DEVICE", "garbage", "mlx5\x01", "printable"},
		{"GDR_RDMA_DEVICE", "huge", hugeText, "up to 64"},
		{"GDR_IB_PORT", "out of range", "0", "1 to 255"},
		{"GDR_IB_PORT", "out of range", "256", "1 to 255"},
		{"GDR_IB_PORT", "wrong unit", "1.0", "1 to 255"},
		{"GDR_IB_PORT", "garbage", "x", "1 to 255"},
		{"GDR_IB_PORT", "huge", huge, "1 to 255"},
		{"GDR_GID_INDEX", "out of range", "-2", "0 to 65535"},
		{"GDR_GID_INDEX", "out of range", "65536", "0 to 65535"},
		{"GDR_GID_INDEX", "garbage", "first", "or auto"},
		{"GDR_GID_INDEX", "huge", huge, "0 to 65535"},
		{"GDR_ROLE", "garbage", "master", "server, client"},
		{"GDR_ROLE", "huge", hugeText, "server, client"},
		{"GDR_PEER", "out of range", "host:99999", "port 99999 is out of range (1-65535)"},
		{"GDR_PEER", "out of range", "host:0", "port 0 is out of range"},
		{"GDR_PEER", "out of range", "host:" + huge[:30], "out of range (1-65535)"},
		{"GDR_PEER", "garbage", "host:http", `port "http" is not a number`},
		{"GDR_PEER", "garbage", "fd00::1:x:", "IPv6"},
		{"GDR_PEER", "garbage", "a b:1", "not a host name"},
		{"GDR_PEER", "huge", hugeText, "host or host:port"},
		{"GDR_LISTEN", "out of range", ":70000", "port 70000 is out of range"},
		{"GDR_LISTEN", "garbage", "::x::", "port"},
		{"GDR_LISTEN", "huge", ":" + huge, "out of range"},
		{"GDR_TOKEN", "huge", hugeText, "at most 4096 bytes"},
		{"GDR_TIMEOUT", "out of range", "0", "above 0"},
		{"GDR_TIMEOUT", "out of range", "-5s", "above 0"},
		{"GDR_TIMEOUT", "out of range", "25h", "at most 24h"},
		{"GDR_TIMEOUT", "out of range", "1e400", "at most 24h"},
		{"GDR_TIMEOUT", "wrong unit", "30 sec", "like 30s"},
		{"GDR_TIMEOUT", "wrong unit", "30S", "like 30s"},
		{"GDR_TIMEOUT", "garbage", "forever", "duration"},
		{"GDR_TIMEOUT", "garbage", "NaN", "duration"},
		{"GDR_TIMEOUT", "huge", huge, "at most 24h"},
		{"GDR_MAX_PATH", "garbage", "NVL", "PIX, PXB"},
		{"GDR_MAX_PATH", "huge", hugeText, "PIX, PXB"},
		{"GDR_ALLOW_IOMMU", "out of range", "2", "1 or 0"},
		{"GDR_ALLOW_IOMMU", "huge", huge, "1 or 0"},
		{"GDR_LEAK_CHECK", "garbage", "maybe", "1 or 0"},
		{"GDR_LEAK_CHECK", "huge", huge, "1 or 0"},
		{"GDR_MEM", "garbage", "hbm", "gpu or host"},
		{"GDR_MEM", "huge", hugeText, "gpu or host"},
		{"GDR_ITERS", "out of range", "0", "1 to 10000000"},
		{"GDR_ITERS", "out of range", "10000001", "1 to 10000000"},
		{"GDR_ITERS", "wrong unit", "1k", "whole number"},
		{"GDR_ITERS", "garbage", "-5", "whole number"},
		{"GDR_ITERS", "huge", huge, "whole number"},
		{"GDR_BW_ITERS", "out of range", "0", "1 to 10000000"},
		{"GDR_BW_ITERS", "wrong unit", "5k", "whole number"},
		{"GDR_BW_ITERS", "huge", huge, "whole number"},
		{"GDR_TX_DEPTH", "out of range", "9000", "1 to 8192"},
		{"GDR_TX_DEPTH", "garbage", "deep", "whole number"},
		{"GDR_TX_DEPTH", "huge", huge, "whole number"},
		{"GDR_IB_TIMEOUT", "infinite", "0", "1 to 31"},
		{"GDR_IB_TIMEOUT", "out of range", "32", "1 to 31"},
		{"GDR_IB_TIMEOUT", "garbage", "long", "exponent"},
		{"GDR_IB_TIMEOUT", "huge", huge, "exponent"},
		{"GDR_QPS", "out of range", "65", "1 to 64"},
		{"GDR_QPS", "garbage", "many", "whole number"},
		{"GDR_QPS", "huge", huge, "whole number"},
		{"GDR_PEER_NAME", "garbage", "a b", "a host name"},
		{"GDR_PEER_NAME", "huge", hugeText, "a host name"},
		{"GDR_MAX_LAT_P99_US", "wrong unit", "5us", "microseconds, no unit"},
		{"GDR_MAX_LAT_P99_US", "huge", huge, "microseconds"},
		{"GDR_MAX_LAT_P999_US", "out of range", "-1", "microseconds"},
		{"GDR_MAX_LAT_P999_US", "huge", huge, "microseconds"},
		{"GDR_MIN_BW_GBPS", "out of range", "-1", "0 to 1e+06"},
		{"GDR_MIN_BW_GBPS", "out of range", "Inf", "0 to 1e+06"},
		{"GDR_MIN_BW_GBPS", "wrong unit", "100Gb/s", "Gb/s, no unit"},
		{"GDR_MIN_BW_GBPS", "garbage", "fast", "number"},
		{"GDR_MIN_BW_GBPS", "huge", huge, "number"},
		{"GDR_MAX_LAT_US", "wrong unit", "5us", "microseconds, no unit"},
		{"GDR_MAX_LAT_US", "out of range", "-1", "0 to 1e+09"},
		{"GDR_MAX_LAT_US", "garbage", "NaN", "number"},
		{"GDR_MAX_LAT_US", "huge", huge, "number"},
		{"GDR_MIN_COPY_FRACTION", "wrong unit", "60%", "0.6, not 60%"},
		{"GDR_MIN_COPY_FRACTION", "out of range", "1.5", "0 to 1"},
		{"GDR_MIN_COPY_FRACTION", "huge", huge, "0 to 1"},
		{"GDR_MIN_CONCURRENT_FRACTION", "wrong unit", "80%", "0.8, not 80%"},
		{"GDR_MIN_CONCURRENT_FRACTION", "out of range", "-0.1", "0 to 1"},
		{"GDR_MIN_CONCURRENT_FRACTION", "huge", huge, "0 to 1"},
		{"GDR_MIN_P2P_NVLINK_FRACTION", "wrong unit", "333", "0.74, not 333 GB/s"},
		{"GDR_MIN_P2P_NVLINK_FRACTION", "garbage", "most", "0 to 1"},
		{"GDR_MIN_P2P_NVLINK_FRACTION", "huge", huge, "0 to 1"},
		{"GDR_MIN_P2P_PCIE_FRACTION", "wrong unit", "60%", "0.6, not 60%"},
		{"GDR_MIN_P2P_PCIE_FRACTION", "out of range", "2", "0 to 1"},
		{"GDR_MIN_P2P_PCIE_FRACTION", "huge", huge, "0 to 1"},
		{"GDR_BW_SIZES", "wrong unit", "64KB", `size "64kb" is not a number of bytes`},
		{"GDR_BW_SIZES", "wrong unit", "1g", "k/m suffixes"},
		{"GDR_BW_SIZES", "out of range", "0", `size "0" is out of range`},
		{"GDR_BW_SIZES", "out of range", "2048m", "out of range"},
		{"GDR_BW_SIZES", "garbage", "64k,,1m", "comma-separated message sizes"},
		{"GDR_BW_SIZES", "huge", huge, "out of range"},
		{"GDR_IB_TC", "out of range", "256", "traffic class from 0 to 255"},
		{"GDR_IB_TC", "out of range", "-1", "traffic class from 0 to 255"},
		{"GDR_IB_TC", "wrong unit", "0x68", "traffic class from 0 to 255"},
		{"GDR_IB_TC", "huge", huge, "traffic class from 0 to 255"},
		{"GDR_IB_SL", "out of range", "16", "service level from 0 to 15"},
		{"GDR_IB_SL", "garbage", "gold", "service level from 0 to 15"},
		{"GDR_IB_SL", "huge", huge, "service level from 0 to 15"},
		{"GDR_GID_NETDEV", "garbage", "eth0/1", "/sys/class/net"},
		{"GDR_GID_NETDEV", "garbage", "eth0:1", "no '/', ':'"},
		{"GDR_GID_NETDEV", "out of range", "enp0s31f6.1000.1", "1 to 15 characters"},
		{"GDR_GID_NETDEV", "huge", hugeText, "1 to 15 characters"},
	}
	covered := map[string]map[string]bool{}
	for _, tc := range cases {
		if covered[tc.name] == nil {
			covered[tc.name] = map[string]bool{}
		}
		covered[tc.name][tc.kind] = true
		t.Run(tc.name+" "+tc.kind+" "+clip.Quote(tc.val), func(t *testing.T) {
			var err error
			if slices.Contains(ClusterVars, tc.name) {
				require.NotPanics(t, func() { _, err = ParseCluster(env(tc.name, tc.val)) })
			} else {
				require.NotPanics(t, func() { _, err = Parse(env(tc.name, tc.val)) })
			}
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, tc.name)
			assert.Contains(t, msg, tc.want)
			assert.Less(t, len(msg), 600, "a short message, whatever the value: %s", msg)
			if tc.name == "GDR_TOKEN" {
				assert.NotContains(t, msg, tc.val[:8], "a secret is never quoted")
			} else {
				assert.Contains(t, msg, clip.Quote(strings.TrimSpace(tc.val)), "the value, or a short prefix of it")
			}
		})
	}
	// Every variable has its huge case and at least one other; a secret is
	// taken as given (any bytes, never shown): GDR_TOKEN has only its length
	// cap, GDR_CLUSTER_SECRET not even that.
	for _, v := range append(slices.Clone(Vars), ClusterVars...) {
		if v == "GDR_CLUSTER_SECRET" {
			continue
		}
		assert.True(t, covered[v]["huge"], "%s has no huge-value case", v)
		if v != "GDR_TOKEN" {
			assert.GreaterOrEqual(t, len(covered[v]), 2, "%s needs more malformed cases", v)
		}
	}
}

// An empty value is the same as unset: the default, no error.
func TestEmptyValuesAreDefaults(t *testing.T) {
	for _, v := range Vars {
		t.Run(v, func(t *testing.T) {
			c, err := Parse(env(v, ""))
			require.NoError(t, err)
			assert.Equal(t, Defaults(), c)
			c, err = Parse(env(v, "   "))
			require.NoError(t, err)
			assert.Equal(t, Defaults(), c)
		})
	}
}
