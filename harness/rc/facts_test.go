//go:build rdma

package rc

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/config"
)

func TestDeviceFactChecks(t *testing.T) {
	assert.Empty(t, gidWarning("Ethernet", "RoCE v2", 3))
	assert.Empty(t, gidWarning("Ethernet", "", 0), "no type known: nothing to say")
	assert.Empty(t, gidWarning("InfiniBand", "IB", 0))
	assert.Equal(t, "GID 1 is IB/RoCE v1, not RoCE v2: RoCE v1 is not routable", gidWarning("Ethernet", "IB/RoCE v1", 1))
	assert.NoError(t, lidProblem("InfiniBand", 7, "mlx5_0", 1))
	assert.NoError(t, lidProblem("Ethernet", 0, "mlx5_0", 1))
	assert.EqualError(t, lidProblem("InfiniBand", 0, "mlx5_0", 1), "mlx5_0 port 1 is ACTIVE on InfiniBand but has LID 0: start a subnet manager (opensm)")
}

// Both hosts must agree on these settings: each one the traffic depends on
// is in the agreement, with its value.
func TestSettings(t *testing.T) {
	s := Settings(config.Config{Iters: 1000, BWIters: 5000, TxDepth: 128, QPs: 4, BWSizes: []int{4096, 65536}})
	assert.Equal(t, map[string]string{"GDR_ITERS": "1000", "GDR_BW_ITERS": "5000", "GDR_TX_DEPTH": "128", "GDR_QPS": "4", "GDR_BW_SIZES": JoinInts([]int{4096, 65536})}, s)
}
