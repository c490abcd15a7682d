//go:build rdma

package rc

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// The export's path class is the selection's rail from that GPU to that
// NIC; any other pair, or a rail without a PCIe path (rxe), is Unknown,
// which keeps flags 0.
func TestPathClass(t *testing.T) {
	s := &rails.Selection{All: []*rails.Rail{
		{GPU: &rails.GPU{PCI: "0008:06:00.0"}, NIC: &rails.NIC{Name: "mlx5_0"}, HasPath: true, Path: topo.Path{Class: topo.P2C}},
		{GPU: &rails.GPU{PCI: "0009:06:00.0"}, NIC: &rails.NIC{Name: "mlx5_1"}, HasPath: true, Path: topo.Path{Class: topo.PXB}},
		{GPU: &rails.GPU{PCI: "0000:3b:00.0", DriverOnly: true}, NIC: &rails.NIC{Name: "rxe0"}},
	}}
	assert.Equal(t, topo.P2C, pathClass(s, "0008:06:00.0", "mlx5_0"))
	assert.Equal(t, topo.PXB, pathClass(s, "0009:06:00.0", "mlx5_1"))
	assert.Equal(t, topo.Unknown, pathClass(s, "0009:06:00.0", "mlx5_0"), "not a rail of the selection")
	assert.Equal(t, topo.Unknown, pathClass(s, "0000:3b:00.0", "rxe0"), "no PCIe path")
}
