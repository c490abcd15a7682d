package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conf is an NCCL configuration lookup over files: name=value lines per
// file, searched in order, as nccltopo.Setting does.
func conf(files ...[2]string) NCCLConf {
	return func(name string) (string, string, bool, error) {
		for _, f := range files {
			for _, line := range strings.Split(f[1], "\n") {
				if k, v, ok := strings.Cut(line, "="); ok && k == name {
					return v, f[0], true, nil
				}
			}
		}
		return "", "", false, nil
	}
}

// NCCL_IB_HCA as NCCL parses and matches it (src/misc/utils.cc
// parseStringList, matchIfList; src/transport/net_ib/init.cc).
func TestParseHCA(t *testing.T) {
	for _, tc := range []struct {
		v       string
		dev     string
		port    int
		allowed bool
	}{
		{"mlx5_0", "mlx5_0", 1, true},
		{"mlx5_0", "mlx5_1", 1, false},
		{"mlx5_1", "mlx5_10", 1, true},   // prefix match: mlx5_1 keeps mlx5_10
		{"=mlx5_1", "mlx5_10", 1, false}, // exact
		{"=mlx5_1", "mlx5_1", 1, true},
		{"mlx5", "mlx5_3", 1, true},
		{"mlx5_0:1", "mlx5_0", 1, true},
		{"mlx5_0:2", "mlx5_0", 1, false}, // another port
		{"mlx5_0:1,mlx5_1:1", "mlx5_1", 1, true},
		{"^mlx5_4", "mlx5_4", 1, false},
		{"^mlx5_4", "mlx5_0", 1, true},
		{"^mlx5_4:2", "mlx5_4", 1, true}, // only port 2 excluded
		{"^=mlx5_1", "mlx5_10", 1, true},
		{"^=mlx5_1", "mlx5_1", 1, false},
		{"=^mlx5_1", "mlx5_1", 1, false}, // '=' then '^' is a name starting with '^'
		{"^", "mlx5_0", 1, false},        // an empty list matches all: all excluded
		{"=", "mlx5_0", 1, true},
		{"mlx5_0,,mlx5_1", "mlx5_1", 1, true}, // empty entries skipped
		{":1,mlx5_1", "mlx5_1", 1, true},      // entries without a name skipped
		{":1", "mlx5_1", 1, true},             // ... so the list is empty: all match
		{"mlx5_0:1:0:0", "mlx5_0", 1, true},   // rail and plane fields ignored
		{"mlx5_0:", "mlx5_0", 2, true},        // empty port: any
		{"mlx5_0 ", "mlx5_0", 1, false},       // names are taken as written
	} {
		f, err := ParseHCA(tc.v, "the environment")
		require.NoError(t, err, tc.v)
		assert.Equal(t, tc.allowed, f.Allows(tc.dev, tc.port), "NCCL_IB_HCA=%s: %s port %d", tc.v, tc.dev, tc.port)
	}
	for _, bad := range []string{"mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "^mlx5_0:1x"} {
		_, err := ParseHCA(bad, "the environment")
		assert.Error(t, err, bad)
	}
	_, err := ParseHCA("mlx5_0:x", "")
	assert.ErrorContains(t, err, `NCCL would read it as 0 and match no port`)
	// Only NCCL's first 32 entries count.
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, "dev"+strings.Repeat("x", i))
	}
	f, err := ParseHCA(strings.Join(many, ","), "the environment")
	require.NoError(t, err)
	assert.Len(t, f.Entries, 32)
	assert.False(t, (HCAFilter{}).Set())
	assert.True(t, (HCAFilter{}).Allows("anything", 1))
}

// NCCL_IB_HCA is inherited while GDR_RDMA_DEVICE is unset, from the
// environment or, as NCCL's initEnv does, from its configuration files.
func TestInheritHCA(t *testing.T) {
	c, err := Parse(env("NCCL_IB_HCA", "^mlx5_4,mlx5_8"))
	require.NoError(t, err)
	assert.True(t, c.IBHCA.Set())
	assert.Equal(t, "NCCL_IB_HCA=^mlx5_4,mlx5_8 (from the environment)", c.IBHCA.String())
	assert.True(t, c.IBHCA.Exclude)

	c, err = Parse(env("NCCL_IB_HCA", "^mlx5_4", "GDR_RDMA_DEVICE", "mlx5_0"))
	require.NoError(t, err)
	assert.False(t, c.IBHCA.Set(), "GDR_RDMA_DEVICE chooses the NIC: NCCL_IB_HCA is not read")
	_, err = Parse(env("NCCL_IB_HCA", "mlx5_0:x", "GDR_RDMA_DEVICE", "mlx5_0"))
	assert.NoError(t, err, "not read, so not judged")

	etc := [2]string{"/etc/nccl.conf", "NCCL_IB_HCA==mlx5_0:1\nNCCL_IB_GID_INDEX=3"}
	c, err = ParseConf(env(), conf(etc))
	require.NoError(t, err)
	assert.Equal(t, "NCCL_IB_HCA==mlx5_0:1 (from /etc/nccl.conf)", c.IBHCA.String())
	assert.True(t, c.IBHCA.Exact)
	// The environment beats the files; set empty there, it is set: NCCL
	// then uses every device and no file can change it (setenv without
	// overwrite).
	c, err = ParseConf(env("NCCL_IB_HCA", "mlx5_1"), conf(etc))
	require.NoError(t, err)
	assert.Equal(t, "the environment", c.IBHCA.From)
	c, err = ParseConf(env("NCCL_IB_HCA", ""), conf(etc))
	require.NoError(t, err)
	assert.False(t, c.IBHCA.Set())

	_, err = ParseConf(env(), conf([2]string{"/etc/nccl.conf", "NCCL_IB_HCA=mlx5_0:one"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `NCCL_IB_HCA="mlx5_0:one" (in /etc/nccl.conf) is not valid: want NCCL's device list`)
	assert.Contains(t, err.Error(), "set GDR_RDMA_DEVICE to override it")
}

// NCCL_IB_GID_INDEX is inherited while GDR_GID_INDEX and GDR_GID_NETDEV
// are unset, and applies on RoCE ports only, as in NCCL.
func TestInheritGIDIndex(t *testing.T) {
	c, err := Parse(env("NCCL_IB_GID_INDEX", "3"))
	require.NoError(t, err)
	assert.Equal(t, 3, c.GIDIndex)
	assert.Equal(t, "NCCL_IB_GID_INDEX", c.GIDIndexFrom)
	i, note := c.GIDIndexFor("Ethernet")
	assert.Equal(t, 3, i)
	assert.Empty(t, note)
	i, note = c.GIDIndexFor("InfiniBand")
	assert.Equal(t, -1, i, "NCCL takes index 0 on InfiniBand whatever NCCL_IB_GID_INDEX says")
	assert.Contains(t, note, "NCCL_IB_GID_INDEX=3 not applied: NCCL uses it on RoCE (Ethernet) ports only")
	assert.Contains(t, note, "ncclIbGetGidIndex")

	c, err = Parse(env("NCCL_IB_GID_INDEX", "3", "GDR_GID_INDEX", "1"))
	require.NoError(t, err)
	assert.Equal(t, [2]any{1, "GDR_GID_INDEX"}, [2]any{c.GIDIndex, c.GIDIndexFrom})
	i, _ = c.GIDIndexFor("InfiniBand")
	assert.Equal(t, 1, i, "the suite's own variable applies everywhere")
	c, err = Parse(env("NCCL_IB_GID_INDEX", "3", "GDR_GID_INDEX", "auto"))
	require.NoError(t, err)
	assert.Equal(t, -1, c.GIDIndex, "auto is a choice: NCCL's value is not inherited")
	c, err = Parse(env("NCCL_IB_GID_INDEX", "3", "GDR_GID_NETDEV", "eth2.100"))
	require.NoError(t, err, "GDR_GID_NETDEV chooses the GID: no conflict")
	assert.Equal(t, [2]any{-1, FromDefault}, [2]any{c.GIDIndex, c.GIDIndexFrom})
	for _, unset := range []string{"-1", ""} {
		c, err = Parse(env("NCCL_IB_GID_INDEX", unset))
		require.NoError(t, err)
		assert.Equal(t, [2]any{-1, FromDefault}, [2]any{c.GIDIndex, c.GIDIndexFrom}, "%q is NCCL's automatic choice", unset)
	}

	home := [2]string{"/root/.nccl.conf", "NCCL_IB_GID_INDEX=5"}
	etc := [2]string{"/etc/nccl.conf", "NCCL_IB_GID_INDEX=3\nNCCL_IB_TC=106"}
	c, err = ParseConf(env(), conf(home, etc))
	require.NoError(t, err)
	assert.Equal(t, [2]any{5, "NCCL_IB_GID_INDEX in /root/.nccl.conf"}, [2]any{c.GIDIndex, c.GIDIndexFrom}, "the first file that sets it wins")
	assert.Equal(t, [2]any{106, "NCCL_IB_TC in /etc/nccl.conf"}, [2]any{c.IBTC, c.IBTCFrom}, "NCCL_IB_TC is read from the files too")

	_, err = ParseConf(env(), conf([2]string{"/etc/nccl.conf", "NCCL_IB_GID_INDEX=three"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `NCCL_IB_GID_INDEX="three" (in /etc/nccl.conf) is not valid: want a GID table index from 0 to 65535, or -1 for NCCL's automatic choice (read because GDR_GID_INDEX is unset; set GDR_GID_INDEX to override it)`)

	// A file the suite cannot read fails the configuration, naming it.
	_, err = ParseConf(env(), func(string) (string, string, bool, error) {
		return "", "", false, errors.New("read NCCL configuration /etc/nccl.conf: permission denied")
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/etc/nccl.conf: permission denied")
}

// A From string travels in the out-of-band exchange (at most 64 bytes): a
// long file name is named by its role.
func TestNCCLFromIsShort(t *testing.T) {
	long := "/very/long/path/" + strings.Repeat("d/", 30) + "nccl.conf"
	c, err := ParseConf(env("NCCL_CONF_FILE", long), conf([2]string{long, "NCCL_IB_SL=3"}))
	require.NoError(t, err)
	assert.Equal(t, "NCCL_IB_SL in NCCL_CONF_FILE", c.IBSLFrom)
	c, err = ParseConf(env(), conf([2]string{"/home/" + strings.Repeat("u", 60) + "/.nccl.conf", "NCCL_IB_SL=3"}))
	require.NoError(t, err)
	assert.Equal(t, "NCCL_IB_SL in $HOME/.nccl.conf", c.IBSLFrom)
	assert.LessOrEqual(t, len(c.IBSLFrom), maxFrom)
}
