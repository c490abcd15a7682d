package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Chains are a recording's attributes, so input: two chains that order
// the same bridges both ways, one that names a bridge twice, and one with
// a word that is no PCI address draw a tree (each device once) instead of
// recursing forever or slicing past a short string.
func TestTreeSurvivesBadChains(t *testing.T) {
	gpu, nic, other := "0000:18:00.0", "0000:19:00.0", "0000:5d:00.0"
	top := Topology{GPUs: map[string]string{gpu: "H200", other: "H200"}, NICs: map[string]string{nic: "mlx5_0"},
		Chains: map[string][]string{
			gpu:   {"0000:15:01.0", "0000:16:00.0", "0000:17:00.0", gpu},
			nic:   {"0000:15:01.0", "0000:17:00.0", "0000:16:00.0", nic}, // the same bridges the other way round
			other: {"x", "0000:5c:00.0", "0000:5c:00.0", other},
		}}
	svg := top.TreeSVG()
	assert.Equal(t, 1, strings.Count(svg, "<title>GPU "+gpu), "each device drawn once")
	assert.Equal(t, 1, strings.Count(svg, "<title>RDMA NIC mlx5_0 at "+nic))
	assert.Contains(t, svg, "<title>GPU "+other, "a device whose chain is not one still hangs off its root")
	assert.NotContains(t, svg, ">x<")

	loop := Topology{GPUs: map[string]string{gpu: ""}, Chains: map[string][]string{gpu: {"0000:15:01.0", "0000:16:00.0", "0000:15:01.0", gpu}}}
	assert.Contains(t, loop.TreeSVG(), "<title>GPU "+gpu)
}
