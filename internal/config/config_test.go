package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config/configtest"
	"github.com/gdrconf/gdrconf/internal/topo"
)

var env = configtest.Env

func TestDefaults(t *testing.T) {
	c, err := Parse(env())
	require.NoError(t, err)
	assert.Equal(t, Defaults(), c)
	assert.Equal(t, "/", c.HostRoot)
	assert.Equal(t, topo.PXB, c.MaxPath)
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
		"GDR_SUITE_LOCK", "/run/gdr.lock", "GDR_HOST_NAME", "n2", "GDR_PEER_NAME", "n1",
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
	assert.Equal(t, topo.PHB, c.MaxPath)
	assert.True(t, c.AllowIOMMU)
	assert.Equal(t, MemGPU, c.Mem)
	assert.Equal(t, 50, c.Iters)
	assert.InDelta(t, 90.5, c.MinBWGbps, 1e-9)
	assert.InDelta(t, 0.8, c.MinCopyFraction, 1e-9)
	assert.InDelta(t, 0.5, c.MinConcurrentFraction, 1e-9)
	assert.InDelta(t, 0.9, c.MinP2PNVLinkFraction, 1e-9)
	assert.InDelta(t, 0.25, c.MinP2PPCIeFraction, 1e-9)
	assert.Equal(t, "/run/gdr.lock", c.SuiteLock)
	assert.Equal(t, "n2", c.HostName)
	assert.Equal(t, "n1", c.PeerName)

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
func TestDocsDocumentEveryVariable(t *testing.T) {
	configtest.DocsDocument(t, "../../docs/configuration.md", Vars)
}

// Malformed values of every variable: out of range, wrong unit, garbage,
// huge. Each is an error naming the variable, at most a short prefix of the
// value (GDR_TOKEN: none of it) and what is accepted; no panic, a short line.
func TestMalformedValues(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	hugeText := strings.Repeat("x", 1<<20)
	cases := []configtest.Malformed{
		{Name: "GDR_HOST_ROOT", Kind: "garbage", Val: "/host\x00/x", Want: "no NUL bytes"},
		{Name: "GDR_HOST_ROOT", Kind: "huge", Val: "/" + hugeText, Want: "at most 4096 bytes"},
		{Name: "GDR_SUITE_LOCK", Kind: "garbage", Val: "/tmp/l\x00x", Want: "no NUL bytes"},
		{Name: "GDR_SUITE_LOCK", Kind: "huge", Val: "/" + hugeText, Want: "at most 4096 bytes"},
		{Name: "GDR_RAILS", Kind: "out of range", Val: "4096", Want: "rail indices"},
		{Name: "GDR_RAILS", Kind: "garbage", Val: "0,0", Want: "each at most once"},
		{Name: "GDR_RAILS", Kind: "garbage", Val: "first", Want: "all, or a comma-separated list"},
		{Name: "GDR_RAILS", Kind: "huge", Val: huge, Want: "rail indices"},
		{Name: "GDR_MR", Kind: "garbage", Val: "gdr", Want: "auto, peermem or dmabuf"},
		{Name: "GDR_MR", Kind: "huge", Val: hugeText, Want: "auto, peermem or dmabuf"},
		{Name: "GDR_STRICT", Kind: "out of range", Val: "2", Want: "1 or 0"},
		{Name: "GDR_STRICT", Kind: "garbage", Val: "maybe", Want: "1 or 0"},
		{Name: "GDR_STRICT", Kind: "huge", Val: huge, Want: "1 or 0"},
		{Name: "GDR_GPU", Kind: "out of range", Val: "-1", Want: "GPU index"},
		{Name: "GDR_GPU", Kind: "out of range", Val: "0000:3b:20.0", Want: "device <= 1f"},
		{Name: "GDR_GPU", Kind: "out of range", Val: "0000:3b:00.8", Want: "function <= 7"},
		{Name: "GDR_GPU", Kind: "garbage", Val: "gpu0", Want: "PCI address"},
		{Name: "GDR_GPU", Kind: "huge", Val: huge, Want: "GPU index"},
		{Name: "GDR_RDMA_DEVICE", Kind: "garbage", Val: "mlx5 0", Want: "/sys/class/infiniband"},
		{Name: "GDR_RDMA_DEVICE", Kind: "garbage", Val: "mlx5\x01", Want: "printable"},
		{Name: "GDR_RDMA_DEVICE", Kind: "huge", Val: hugeText, Want: "up to 64"},
		{Name: "GDR_IB_PORT", Kind: "out of range", Val: "0", Want: "1 to 255"},
		{Name: "GDR_IB_PORT", Kind: "out of range", Val: "256", Want: "1 to 255"},
		{Name: "GDR_IB_PORT", Kind: "wrong unit", Val: "1.0", Want: "1 to 255"},
		{Name: "GDR_IB_PORT", Kind: "garbage", Val: "x", Want: "1 to 255"},
		{Name: "GDR_IB_PORT", Kind: "huge", Val: huge, Want: "1 to 255"},
		{Name: "GDR_GID_INDEX", Kind: "out of range", Val: "-2", Want: "0 to 65535"},
		{Name: "GDR_GID_INDEX", Kind: "out of range", Val: "65536", Want: "0 to 65535"},
		{Name: "GDR_GID_INDEX", Kind: "garbage", Val: "first", Want: "or auto"},
		{Name: "GDR_GID_INDEX", Kind: "huge", Val: huge, Want: "0 to 65535"},
		{Name: "GDR_ROLE", Kind: "garbage", Val: "master", Want: "server, client"},
		{Name: "GDR_ROLE", Kind: "huge", Val: hugeText, Want: "server, client"},
		{Name: "GDR_PEER", Kind: "out of range", Val: "host:99999", Want: "port 99999 is out of range (1-65535)"},
		{Name: "GDR_PEER", Kind: "out of range", Val: "host:0", Want: "port 0 is out of range"},
		{Name: "GDR_PEER", Kind: "out of range", Val: "host:" + huge[:30], Want: "out of range (1-65535)"},
		{Name: "GDR_PEER", Kind: "garbage", Val: "host:http", Want: `port "http" is not a number`},
		{Name: "GDR_PEER", Kind: "garbage", Val: "fd00::1:x:", Want: "IPv6"},
		{Name: "GDR_PEER", Kind: "garbage", Val: "a b:1", Want: "not a host name"},
		{Name: "GDR_PEER", Kind: "huge", Val: hugeText, Want: "host or host:port"},
		{Name: "GDR_LISTEN", Kind: "out of range", Val: ":70000", Want: "port 70000 is out of range"},
		{Name: "GDR_LISTEN", Kind: "garbage", Val: "::x::", Want: "port"},
		{Name: "GDR_LISTEN", Kind: "huge", Val: ":" + huge, Want: "out of range"},
		{Name: "GDR_TOKEN", Kind: "huge", Val: hugeText, Want: "at most 4096 bytes"},
		{Name: "GDR_TIMEOUT", Kind: "out of range", Val: "0", Want: "above 0"},
		{Name: "GDR_TIMEOUT", Kind: "out of range", Val: "-5s", Want: "above 0"},
		{Name: "GDR_TIMEOUT", Kind: "out of range", Val: "25h", Want: "at most 24h"},
		{Name: "GDR_TIMEOUT", Kind: "out of range", Val: "1e400", Want: "at most 24h"},
		{Name: "GDR_TIMEOUT", Kind: "wrong unit", Val: "30 sec", Want: "like 30s"},
		{Name: "GDR_TIMEOUT", Kind: "wrong unit", Val: "30S", Want: "like 30s"},
		{Name: "GDR_TIMEOUT", Kind: "garbage", Val: "forever", Want: "duration"},
		{Name: "GDR_TIMEOUT", Kind: "garbage", Val: "NaN", Want: "duration"},
		{Name: "GDR_TIMEOUT", Kind: "huge", Val: huge, Want: "at most 24h"},
		{Name: "GDR_MAX_PATH", Kind: "garbage", Val: "NVL", Want: "PIX, PXB"},
		{Name: "GDR_MAX_PATH", Kind: "huge", Val: hugeText, Want: "PIX, PXB"},
		{Name: "GDR_ALLOW_IOMMU", Kind: "out of range", Val: "2", Want: "1 or 0"},
		{Name: "GDR_ALLOW_IOMMU", Kind: "huge", Val: huge, Want: "1 or 0"},
		{Name: "GDR_LEAK_CHECK", Kind: "garbage", Val: "maybe", Want: "1 or 0"},
		{Name: "GDR_LEAK_CHECK", Kind: "huge", Val: huge, Want: "1 or 0"},
		{Name: "GDR_MEM", Kind: "garbage", Val: "hbm", Want: "gpu or host"},
		{Name: "GDR_MEM", Kind: "huge", Val: hugeText, Want: "gpu or host"},
		{Name: "GDR_ITERS", Kind: "out of range", Val: "0", Want: "1 to 10000000"},
		{Name: "GDR_ITERS", Kind: "out of range", Val: "10000001", Want: "1 to 10000000"},
		{Name: "GDR_ITERS", Kind: "wrong unit", Val: "1k", Want: "whole number"},
		{Name: "GDR_ITERS", Kind: "garbage", Val: "-5", Want: "whole number"},
		{Name: "GDR_ITERS", Kind: "huge", Val: huge, Want: "whole number"},
		{Name: "GDR_BW_ITERS", Kind: "out of range", Val: "0", Want: "1 to 10000000"},
		{Name: "GDR_BW_ITERS", Kind: "wrong unit", Val: "5k", Want: "whole number"},
		{Name: "GDR_BW_ITERS", Kind: "huge", Val: huge, Want: "whole number"},
		{Name: "GDR_TX_DEPTH", Kind: "out of range", Val: "9000", Want: "1 to 8192"},
		{Name: "GDR_TX_DEPTH", Kind: "garbage", Val: "deep", Want: "whole number"},
		{Name: "GDR_TX_DEPTH", Kind: "huge", Val: huge, Want: "whole number"},
		{Name: "GDR_IB_TIMEOUT", Kind: "infinite", Val: "0", Want: "1 to 31"},
		{Name: "GDR_IB_TIMEOUT", Kind: "out of range", Val: "32", Want: "1 to 31"},
		{Name: "GDR_IB_TIMEOUT", Kind: "garbage", Val: "long", Want: "exponent"},
		{Name: "GDR_IB_TIMEOUT", Kind: "huge", Val: huge, Want: "exponent"},
		{Name: "GDR_QPS", Kind: "out of range", Val: "65", Want: "1 to 64"},
		{Name: "GDR_QPS", Kind: "garbage", Val: "many", Want: "whole number"},
		{Name: "GDR_QPS", Kind: "huge", Val: huge, Want: "whole number"},
		{Name: "GDR_PEER_NAME", Kind: "garbage", Val: "a b", Want: "a host name"},
		{Name: "GDR_PEER_NAME", Kind: "huge", Val: hugeText, Want: "a host name"},
		{Name: "GDR_HOST_NAME", Kind: "garbage", Val: "n1/x", Want: "a host name"},
		{Name: "GDR_HOST_NAME", Kind: "huge", Val: hugeText, Want: "a host name"},
		{Name: "GDR_MAX_LAT_P99_US", Kind: "wrong unit", Val: "5us", Want: "microseconds, no unit"},
		{Name: "GDR_MAX_LAT_P99_US", Kind: "huge", Val: huge, Want: "microseconds"},
		{Name: "GDR_MAX_LAT_P999_US", Kind: "out of range", Val: "-1", Want: "microseconds"},
		{Name: "GDR_MAX_LAT_P999_US", Kind: "huge", Val: huge, Want: "microseconds"},
		{Name: "GDR_MIN_BW_GBPS", Kind: "out of range", Val: "-1", Want: "0 to 1e+06"},
		{Name: "GDR_MIN_BW_GBPS", Kind: "out of range", Val: "Inf", Want: "0 to 1e+06"},
		{Name: "GDR_MIN_BW_GBPS", Kind: "wrong unit", Val: "100Gb/s", Want: "Gb/s, no unit"},
		{Name: "GDR_MIN_BW_GBPS", Kind: "garbage", Val: "fast", Want: "number"},
		{Name: "GDR_MIN_BW_GBPS", Kind: "huge", Val: huge, Want: "number"},
		{Name: "GDR_MAX_LAT_US", Kind: "wrong unit", Val: "5us", Want: "microseconds, no unit"},
		{Name: "GDR_MAX_LAT_US", Kind: "out of range", Val: "-1", Want: "0 to 1e+09"},
		{Name: "GDR_MAX_LAT_US", Kind: "garbage", Val: "NaN", Want: "number"},
		{Name: "GDR_MAX_LAT_US", Kind: "huge", Val: huge, Want: "number"},
		{Name: "GDR_MIN_COPY_FRACTION", Kind: "wrong unit", Val: "60%", Want: "0.6, not 60%"},
		{Name: "GDR_MIN_COPY_FRACTION", Kind: "out of range", Val: "1.5", Want: "0 to 1"},
		{Name: "GDR_MIN_COPY_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_MIN_CONCURRENT_FRACTION", Kind: "wrong unit", Val: "80%", Want: "0.8, not 80%"},
		{Name: "GDR_MIN_CONCURRENT_FRACTION", Kind: "out of range", Val: "-0.1", Want: "0 to 1"},
		{Name: "GDR_MIN_CONCURRENT_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_MIN_P2P_NVLINK_FRACTION", Kind: "wrong unit", Val: "333", Want: "0.74, not 333 GB/s"},
		{Name: "GDR_MIN_P2P_NVLINK_FRACTION", Kind: "garbage", Val: "most", Want: "0 to 1"},
		{Name: "GDR_MIN_P2P_NVLINK_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_MIN_P2P_PCIE_FRACTION", Kind: "wrong unit", Val: "60%", Want: "0.6, not 60%"},
		{Name: "GDR_MIN_P2P_PCIE_FRACTION", Kind: "out of range", Val: "2", Want: "0 to 1"},
		{Name: "GDR_MIN_P2P_PCIE_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_SOAK_RECOVERY_FRACTION", Kind: "wrong unit", Val: "80%", Want: "0.8, not 80%"},
		{Name: "GDR_SOAK_RECOVERY_FRACTION", Kind: "out of range", Val: "1.5", Want: "0 to 1"},
		{Name: "GDR_SOAK_RECOVERY_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_SOAK_STABLE_FRACTION", Kind: "wrong unit", Val: "80%", Want: "0.8, not 80%"},
		{Name: "GDR_SOAK_STABLE_FRACTION", Kind: "out of range", Val: "-0.1", Want: "0 to 1"},
		{Name: "GDR_SOAK_STABLE_FRACTION", Kind: "huge", Val: huge, Want: "0 to 1"},
		{Name: "GDR_BW_SIZES", Kind: "wrong unit", Val: "64KB", Want: `size "64kb" is not a number of bytes`},
		{Name: "GDR_BW_SIZES", Kind: "wrong unit", Val: "1g", Want: "k/m suffixes"},
		{Name: "GDR_BW_SIZES", Kind: "out of range", Val: "0", Want: `size "0" is out of range`},
		{Name: "GDR_BW_SIZES", Kind: "out of range", Val: "2048m", Want: "out of range"},
		{Name: "GDR_BW_SIZES", Kind: "garbage", Val: "64k,,1m", Want: "comma-separated message sizes"},
		{Name: "GDR_BW_SIZES", Kind: "huge", Val: huge, Want: "out of range"},
		{Name: "GDR_IB_TC", Kind: "out of range", Val: "256", Want: "traffic class from 0 to 255"},
		{Name: "GDR_IB_TC", Kind: "out of range", Val: "-1", Want: "traffic class from 0 to 255"},
		{Name: "GDR_IB_TC", Kind: "wrong unit", Val: "0x68", Want: "traffic class from 0 to 255"},
		{Name: "GDR_IB_TC", Kind: "huge", Val: huge, Want: "traffic class from 0 to 255"},
		{Name: "GDR_IB_SL", Kind: "out of range", Val: "16", Want: "service level from 0 to 15"},
		{Name: "GDR_IB_SL", Kind: "garbage", Val: "gold", Want: "service level from 0 to 15"},
		{Name: "GDR_IB_SL", Kind: "huge", Val: huge, Want: "service level from 0 to 15"},
		{Name: "GDR_GID_NETDEV", Kind: "garbage", Val: "eth0/1", Want: "/sys/class/net"},
		{Name: "GDR_GID_NETDEV", Kind: "garbage", Val: "eth0:1", Want: "no '/', ':'"},
		{Name: "GDR_GID_NETDEV", Kind: "out of range", Val: "enp0s31f6.1000.1", Want: "1 to 15 characters"},
		{Name: "GDR_GID_NETDEV", Kind: "huge", Val: hugeText, Want: "1 to 15 characters"},
		{Name: "GDR_REPORTS", Kind: "garbage", Val: "/tmp/r\x00x", Want: "no NUL bytes"},
		{Name: "GDR_REPORTS", Kind: "huge", Val: "/" + hugeText, Want: "at most 4096 bytes"},
		{Name: "GDR_SOAK", Kind: "out of range", Val: "-1h", Want: "0 for no soak, at most 168h"},
		{Name: "GDR_SOAK", Kind: "garbage", Val: "long", Want: "a duration like 10m"},
		{Name: "GDR_SOAK", Kind: "huge", Val: huge, Want: "a duration like 10m"},
		{Name: "GDR_SOAK_INTERVAL", Kind: "out of range", Val: "100ms", Want: "at least 1s"},
		{Name: "GDR_SOAK_INTERVAL", Kind: "garbage", Val: "often", Want: "a duration like 10s"},
		{Name: "GDR_SOAK_INTERVAL", Kind: "huge", Val: huge, Want: "a duration like 10s"},
		{Name: "GDR_SOAK_LINK_EVERY", Kind: "out of range", Val: "1s", Want: "at least 10s"},
		{Name: "GDR_SOAK_LINK_EVERY", Kind: "garbage", Val: "hourly", Want: "a duration like 5m"},
		{Name: "GDR_SOAK_LINK_EVERY", Kind: "huge", Val: huge, Want: "a duration like 5m"},
		{Name: "GDR_SOAK_FLAP", Kind: "garbage", Val: "maybe", Want: "1 or 0"},
		{Name: "GDR_SOAK_FLAP", Kind: "out of range", Val: "2", Want: "1 or 0"},
		{Name: "GDR_SOAK_FLAP", Kind: "huge", Val: huge, Want: "1 or 0"},
		{Name: "GDR_SOAK_SKIP", Kind: "garbage", Val: "two\nlines", Want: "one line of printable text"},
		{Name: "GDR_SOAK_SKIP", Kind: "huge", Val: hugeText, Want: "at most 500 bytes"},
	}
	configtest.CheckMalformed(t, func(lookup func(string) (string, bool)) error { _, err := Parse(lookup); return err }, cases, Vars,
		[]string{"GDR_TOKEN"}, nil) // the cluster variables have their cases in cluster/config_test.go
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

// Without GDR_MAX_PATH a GPU on NVLink-C2C (GH200, GB200) may reach a NIC
// of its own Grace as P2C, as NCCL does by default; x86 paths keep PXB,
// and a GDR_MAX_PATH the user set holds for every path.
func TestPathLimitC2C(t *testing.T) {
	c, err := Parse(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	assert.Equal(t, topo.PXB, c.PathLimit(topo.Path{Class: topo.NODE}))
	assert.Equal(t, topo.P2C, c.PathLimit(topo.Path{Class: topo.P2C, C2C: "0009:01:00.0", PCIe: topo.NODE}))
	assert.False(t, topo.P2C.FartherThan(c.PathLimit(topo.Path{Class: topo.P2C, C2C: "0009:01:00.0"})))
	assert.True(t, topo.SYS.FartherThan(c.PathLimit(topo.Path{Class: topo.SYS, C2C: "0009:01:00.0"})))

	c, err = Parse(func(k string) (string, bool) {
		if k == "GDR_MAX_PATH" {
			return "PXB", true
		}
		return "", false
	})
	require.NoError(t, err)
	assert.True(t, c.MaxPathSet)
	assert.Equal(t, topo.PXB, c.PathLimit(topo.Path{Class: topo.P2C, C2C: "0009:01:00.0"}))
}

func TestSoak(t *testing.T) {
	c, err := Parse(env())
	require.NoError(t, err)
	assert.Zero(t, c.Soak, "no soak unless asked")
	assert.Equal(t, 10*time.Second, c.SoakInterval)
	assert.Equal(t, 5*time.Minute, c.SoakLinkEvery)

	c, err = Parse(env("GDR_SOAK", "2h", "GDR_SOAK_INTERVAL", "30", "GDR_SOAK_LINK_EVERY", "1m", "GDR_SOAK_FLAP", "1"))
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, c.Soak)
	assert.Equal(t, 30*time.Second, c.SoakInterval)
	assert.Equal(t, time.Minute, c.SoakLinkEvery)
	assert.True(t, c.SoakFlap)
	assert.Empty(t, c.SoakSkip)

	c, err = Parse(env("GDR_SOAK_SKIP", "idle in round 0"))
	require.NoError(t, err)
	assert.Equal(t, "idle in round 0", c.SoakSkip)

	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"GDR_SOAK", "2 hours"}, `GDR_SOAK="2 hours" is not valid`},
		{[]string{"GDR_SOAK", "-1h"}, `GDR_SOAK="-1h" is not valid`},
		{[]string{"GDR_SOAK", "200d"}, `GDR_SOAK="200d" is not valid`},
		{[]string{"GDR_SOAK", "2000h"}, `at most 168h`},
		{[]string{"GDR_SOAK", "1m", "GDR_SOAK_INTERVAL", "500ms"}, `GDR_SOAK_INTERVAL="500ms" is not valid: want a duration like 10s or 1m (or plain seconds), at least 1s`},
		{[]string{"GDR_SOAK", "30s", "GDR_SOAK_INTERVAL", "1m"}, "GDR_SOAK_INTERVAL=1m0s is longer than GDR_SOAK=30s"},
		{[]string{"GDR_SOAK", "5s"}, "the default 10s is longer than GDR_SOAK=5s"},
		{[]string{"GDR_SOAK_LINK_EVERY", "1s"}, `GDR_SOAK_LINK_EVERY="1s" is not valid`},
		{[]string{"GDR_SOAK_FLAP", "maybe"}, `GDR_SOAK_FLAP="maybe" is not valid: want 1 or 0`},
	} {
		_, err := Parse(env(tc.env...))
		if assert.Error(t, err, "%v", tc.env) {
			assert.Contains(t, err.Error(), tc.want, "%v", tc.env)
		}
	}
}

// ParseSoak, which gdrcluster plan decides a round's soak with, reads
// GDR_SOAK exactly as Parse does: the same value, or the same refusal
// (values long enough for the default interval: Parse checks the two
// together).
func TestParseSoakIsParses(t *testing.T) {
	for _, v := range []string{"", " 0 ", "00", "0.0h", "0m0s", "0", "90s", "2h", "5400", "168h", "169h", "-1", "bogus", "NaN"} {
		d, err := ParseSoak(v)
		c, perr := Parse(env("GDR_SOAK", v))
		if perr != nil {
			assert.ErrorContains(t, err, "GDR_SOAK=", v)
			assert.ErrorContains(t, perr, err.Error(), v)
			continue
		}
		assert.NoError(t, err, v)
		assert.Equal(t, c.Soak, d, v)
	}
	d, err := ParseSoak("0.0h")
	assert.NoError(t, err)
	assert.Zero(t, d, "every spelling of zero is no soak")
}
