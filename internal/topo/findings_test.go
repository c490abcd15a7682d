package topo

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestUnclassified(t *testing.T) {
	_, err := host(0, 1).Classify("0000:05:00.0", "0000:99:00.0")
	require.Error(t, err)
	f := Unclassified("cannot classify 0000:05:00.0 <-> mlx5_0 (0000:99:00.0)", err)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "cannot classify 0000:05:00.0 <-> mlx5_0 (0000:99:00.0): no PCI function 0000:99:00.0", f.Cause)
	assert.Equal(t, "check "+pci.DevicesDir, f.Remedy)
}

// ACSBridge sorts a turn port into readable, root-only and a finding: a
// port missing from the tree and one whose config space is unusable each
// name what to check.
func TestACSBridge(t *testing.T) {
	ix := host(0, 1)
	ix.Device("0000:02:00.0").Config = &pci.Config{}
	ix.Device("0000:02:01.0").ConfigErr = pci.ErrNeedRoot
	ix.Device("0000:01:00.0").ConfigErr = errors.New("config: short read")

	d, needRoot, f := ix.ACSBridge("0000:02:00.0", "0000:05:00.0", "mlx5_0")
	assert.NotNil(t, d)
	assert.False(t, needRoot)
	assert.Nil(t, f)

	d, needRoot, f = ix.ACSBridge("0000:02:01.0", "0000:05:00.0", "mlx5_0")
	assert.NotNil(t, d)
	assert.True(t, needRoot)
	assert.Nil(t, f)

	_, needRoot, f = ix.ACSBridge("0000:01:00.0", "0000:05:00.0", "mlx5_0")
	assert.False(t, needRoot)
	require.NotNil(t, f)
	assert.Equal(t, "bridge 0000:01:00.0: config space unusable: config: short read", f.Cause)
	assert.Equal(t, "check the bridge with lspci -vvv -s 0000:01:00.0", f.Remedy)

	d, _, f = ix.ACSBridge("0000:09:00.0", "0000:05:00.0", "mlx5_0")
	assert.Nil(t, d)
	require.NotNil(t, f)
	assert.Equal(t, "bridge 0000:09:00.0 on the path 0000:05:00.0 <-> mlx5_0 is not in "+pci.DevicesDir, f.Cause)
	assert.Equal(t, "check "+pci.DevicesDir, f.Remedy)
	assert.Equal(t, verdict.FellShort, f.Kind())
}
