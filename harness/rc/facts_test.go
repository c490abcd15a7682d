//go:build rdma

package rc

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
