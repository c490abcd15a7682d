package verbs

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/membuf"
)

// resetScatterEnv forgets that the process forced the variable, so that each
// test starts from its own environment (t.Setenv restores the value).
func resetScatterEnv(t *testing.T) {
	t.Helper()
	scatterEnvState.mu.Lock()
	scatterEnvState.forced, scatterEnvState.had, scatterEnvState.prev = false, false, ""
	scatterEnvState.mu.Unlock()
	t.Cleanup(func() {
		scatterEnvState.mu.Lock()
		scatterEnvState.forced = false
		scatterEnvState.mu.Unlock()
	})
}

// Every combination of receive memory and device: device memory on mlx5
// goes through mlx5dv where libmlx5 has it, else through the environment;
// non-mlx5 devices and host memory keep the provider's default.
func TestScatterToCQEPolicy(t *testing.T) {
	for _, c := range []struct {
		mem       membuf.Kind
		dev       mlx5Kind
		dvRefused bool
		dv, env   bool
		attr      string
	}{
		{membuf.GPU, mlx5DV, false, true, false, ScatterDV},
		{membuf.GPU, mlx5DV, true, false, true, ScatterEnv},
		{membuf.GPU, mlx5NoDV, false, false, true, ScatterEnv},
		{membuf.GPU, mlx5Unknown, false, false, true, ScatterEnv},
		{membuf.GPU, mlx5Not, false, false, false, ScatterNotMLX5}, // rxe in the lab
		{membuf.GPU, mlx5Absent, false, false, false, ScatterNotMLX5},
		{membuf.Host, mlx5DV, false, false, false, ScatterHost},
		{membuf.Host, mlx5NoDV, false, false, false, ScatterHost},
		{membuf.Host, mlx5Not, false, false, false, ScatterHost},
	} {
		p, err := planScatter(c.mem, c.dev, c.dvRefused, false)
		require.NoError(t, err)
		assert.Equal(t, c.dv, p.DV, "%s memory on %v (dv refused %v): mlx5dv", c.mem, c.dev, c.dvRefused)
		assert.Equal(t, c.env, p.ForceEnv, "%s memory on %v (dv refused %v): env", c.mem, c.dev, c.dvRefused)
		assert.Equal(t, c.attr, p.Attr, "%s memory on %v", c.mem, c.dev)
		assert.NotEmpty(t, p.Why)
		assert.False(t, p.DV && p.ForceEnv, "one way, not both")
	}
	// A kind that is neither host nor GPU memory is refused, named.
	_, err := planScatter("", mlx5DV, false, false)
	assert.ErrorContains(t, err, `receive memory kind ""`)
	_, err = planScatter("hbm", mlx5Not, false, false)
	assert.ErrorContains(t, err, `"hbm"`)
	_, err = planScatter(membuf.GPU, mlx5Kind(42), false, false)
	assert.ErrorContains(t, err, "42")
	// Host memory after the process forced the variable says so.
	p, err := planScatter(membuf.Host, mlx5NoDV, false, true)
	require.NoError(t, err)
	assert.Contains(t, p.Why, ScatterEnvVar+"=0 is set")
}

// A device-memory QP on mlx5 without the dv path gets MLX5_SCATTER_TO_CQE=0,
// overwriting an explicit =1 (which would crash the first small receive).
func TestScatterToCQEEnvForced(t *testing.T) {
	resetScatterEnv(t)
	t.Setenv(ScatterEnvVar, "1")
	p, err := prepareScatter(membuf.GPU, mlx5NoDV, false, false)
	require.NoError(t, err)
	assert.Equal(t, ScatterEnv, p.Attr)
	assert.Equal(t, "0", os.Getenv(ScatterEnvVar))
	assert.Contains(t, p.Why, `overrode MLX5_SCATTER_TO_CQE="1"`)

	// The dv path and host memory leave the environment alone.
	resetScatterEnv(t)
	t.Setenv(ScatterEnvVar, "1")
	for _, c := range []struct {
		mem membuf.Kind
		dev mlx5Kind
	}{{membuf.GPU, mlx5DV}, {membuf.Host, mlx5NoDV}, {membuf.GPU, mlx5Not}} {
		_, err := prepareScatter(c.mem, c.dev, false, false)
		require.NoError(t, err)
		assert.Equal(t, "1", os.Getenv(ScatterEnvVar), "%s memory on %v", c.mem, c.dev)
	}

	// Unset before: forced, and said so.
	resetScatterEnv(t)
	t.Setenv(ScatterEnvVar, "")
	require.NoError(t, os.Unsetenv(ScatterEnvVar))
	p, err = prepareScatter(membuf.GPU, mlx5Unknown, false, false)
	require.NoError(t, err)
	assert.Equal(t, "0", os.Getenv(ScatterEnvVar))
	assert.Contains(t, p.Why, "was unset")
}
