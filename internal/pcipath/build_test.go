package pcipath

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestBuild(t *testing.T) {
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", "sriov"))
	require.NoError(t, err)
	ix, err := topo.Load(r)
	require.NoError(t, err)
	var gpu, vf *pci.Device
	for _, d := range ix.Devices() {
		if d.IsGPU() && gpu == nil {
			gpu = d
		}
		if d.PhysFn != "" && vf == nil {
			vf = d
		}
	}
	require.NotNil(t, gpu)
	require.NotNil(t, vf)

	p := AboveGPU(ix, gpu)
	require.Len(t, p, len(gpu.Chain), "the GPU and every port above it")
	assert.Equal(t, gpu, p[0].Dev)
	assert.Equal(t, gpu.Parent(), p[1].Dev.BDF, "nearest port first")
	assert.Equal(t, Bridge, p[len(p)-1].Role)

	p, pf, err := ToNIC(ix, gpu, nil, "mlx5_2", vf.BDF)
	require.NoError(t, err)
	require.NotNil(t, pf, "a VF is judged by its PF")
	assert.Equal(t, vf.PhysFn, pf.BDF)
	assert.Equal(t, Member{Dev: pf, Role: NIC}, p[len(p)-1])

	p, pf, err = ToNIC(ix, gpu, []string{gpu.Parent()}, "mlx5_0", vf.PhysFn)
	require.NoError(t, err)
	assert.Nil(t, pf)
	assert.Equal(t, []Role{GPU, Bridge, NIC}, []Role{p[0].Role, p[1].Role, p[2].Role})

	_, _, err = ToNIC(ix, gpu, []string{"0000:ee:00.0"}, "mlx5_0", vf.PhysFn)
	var m *verdict.Finding
	require.ErrorAs(t, err, &m)
	assert.Equal(t, verdict.FellShort, m.Kind())
	assert.Equal(t, "bridge 0000:ee:00.0 on the path "+gpu.BDF+" <-> mlx5_0 is not in /sys/bus/pci/devices", m.Cause)
	assert.Equal(t, "check /sys/bus/pci/devices", m.Remedy)

	_, _, err = ToNIC(ix, gpu, nil, "mlx5_9", "0000:ee:00.1")
	require.ErrorAs(t, err, &m)
	assert.Equal(t, verdict.FellShort, m.Kind())
	assert.Equal(t, "NIC mlx5_9's PCI function 0000:ee:00.1 is not in /sys/bus/pci/devices", m.Cause)
	assert.Equal(t, "check the driver of mlx5_9", m.Remedy)
}
