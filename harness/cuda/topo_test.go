//go:build gpu

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

func fixture(t *testing.T, name string) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New("../../fixtures/hosts/" + name)
	require.NoError(t, err)
	return r
}

// The pix fixture has GPU 03:00.0 beside mlx5_0 (04:00.0) and GPU 13:00.0
// beside mlx5_1 (14:00.0), each pair under its own switch.
func TestNearestPIX(t *testing.T) {
	r := fixture(t, "pix")
	g0 := Device{Ordinal: 0, PCI: "0000:03:00.0"}
	g1 := Device{Ordinal: 1, PCI: "0000:13:00.0"}

	p, err := NearestNIC(r, g1, []string{"mlx5_0", "mlx5_1"})
	require.NoError(t, err)
	assert.Equal(t, "mlx5_1", p.NIC)
	assert.Equal(t, "PIX", p.Path)
	assert.Contains(t, p.Reason, "nearest RDMA device")

	p, err = NearestNIC(r, g0, []string{"mlx5_1", "mlx5_0"})
	require.NoError(t, err)
	assert.Equal(t, "mlx5_0", p.NIC)

	p, err = NearestGPU(r, []Device{g0, g1}, "mlx5_1")
	require.NoError(t, err)
	assert.Equal(t, g1.PCI, p.GPU.PCI)
	assert.Equal(t, "PIX", p.Path)

	p, err = NearestGPU(r, []Device{g1, g0}, "mlx5_0")
	require.NoError(t, err)
	assert.Equal(t, g0.PCI, p.GPU.PCI)
}

func TestNearestSoftwareAndMissing(t *testing.T) {
	r := fixture(t, "rxe")
	g := Device{PCI: "0000:00:06.0"}
	p, err := NearestNIC(r, g, []string{"rxe0"})
	require.NoError(t, err)
	assert.Equal(t, "rxe0", p.NIC)
	assert.Equal(t, "", p.Path)
	assert.Contains(t, p.Reason, "no RDMA device has a PCI function")

	p, err = NearestGPU(r, []Device{g, {Ordinal: 1, PCI: "0000:00:07.0"}}, "rxe0")
	require.NoError(t, err)
	assert.Equal(t, g.PCI, p.GPU.PCI)
	assert.Contains(t, p.Reason, "software device")

	_, err = NearestNIC(r, g, nil)
	assert.Error(t, err)
	_, err = NearestGPU(r, nil, "rxe0")
	assert.Error(t, err)

	// A NIC name sysfs does not know: the first GPU, with the error.
	p, err = NearestGPU(r, []Device{g, {Ordinal: 1, PCI: "0000:00:07.0"}}, "mlx5_9")
	assert.Error(t, err)
	assert.Equal(t, g.PCI, p.GPU.PCI)
}
