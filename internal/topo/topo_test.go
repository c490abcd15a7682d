package topo

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pathclass"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// dev makes a function from its sysfs path; bridges are class 0x0604 and
// carry no config space, so port types are inferred from the tree.
func dev(p string, numa int) *pci.Device {
	root, chain, err := pci.SplitPath(p)
	if err != nil {
		panic(err)
	}
	d := &pci.Device{BDF: chain[len(chain)-1], SysPath: p, Root: root, Chain: chain, NUMANode: numa, Class: 0x030200, Vendor: 0x10de}
	return d
}

func bridge(p string, numa int) *pci.Device {
	d := dev(p, numa)
	d.Class = 0x060400
	d.Vendor = 0x1000
	return d
}

const (
	rp0  = "/sys/devices/pci0000:00/0000:00:01.0"
	usp  = rp0 + "/0000:01:00.0"
	dspA = usp + "/0000:02:00.0"
	dspB = usp + "/0000:02:01.0"
	usp2 = dspA + "/0000:03:00.0"
	dsp2 = usp2 + "/0000:04:00.0"
	rp1  = "/sys/devices/pci0000:00/0000:00:02.0"
)

func host(numa0, numa1 int) *Index {
	return New([]*pci.Device{
		bridge(rp0, numa0), bridge(usp, numa0), bridge(dspA, numa0), bridge(dspB, numa0),
		bridge(usp2, numa0), bridge(dsp2, numa0), bridge(rp1, numa0),
		dev(dspA+"/0000:05:00.0", numa0),                   // GPU below dspA (PIX to NIC below dspB)
		dev(dspB+"/0000:06:00.0", numa0),                   // NIC
		dev(dsp2+"/0000:07:00.0", numa0),                   // GPU below the second switch
		dev(rp1+"/0000:08:00.0", numa0),                    // NIC on another root port
		dev("/sys/devices/pci0000:00/0000:00:06.0", numa0), // on the root bus
		dev("/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0", numa0),
		dev("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", numa1),
		dev(dspB+"/0000:06:00.1", numa0), // second function of the NIC
	})
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name         string
		numa0, numa1 int
		a, b         string
		class        pathclass.Class
		bridges      string
		switches     int
	}{
		{"one switch", 0, 1, "0000:05:00.0", "0000:06:00.0", pathclass.PIX, "0000:02:00.0 0000:01:00.0 0000:02:01.0", 1},
		{"one switch reversed", 0, 1, "0000:06:00.0", "0000:05:00.0", pathclass.PIX, "0000:02:01.0 0000:01:00.0 0000:02:00.0", 1},
		{"two switches", 0, 1, "0000:07:00.0", "0000:06:00.0", pathclass.PXB, "0000:04:00.0 0000:03:00.0 0000:02:00.0 0000:01:00.0 0000:02:01.0", 2},
		{"functions of one device", 0, 1, "0000:06:00.0", "0000:06:00.1", pathclass.PIX, "0000:02:01.0", 1},
		{"two root ports", 0, 1, "0000:05:00.0", "0000:08:00.0", pathclass.PHB, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:00:02.0", 1},
		{"root bus", 0, 1, "0000:00:06.0", "0000:06:00.0", pathclass.PHB, "0000:00:01.0 0000:01:00.0 0000:02:01.0", 1},
		{"two host bridges one node", 0, 1, "0000:05:00.0", "0000:41:00.0", pathclass.NODE, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:40:01.0", 1},
		{"two nodes", 0, 1, "0000:05:00.0", "0000:81:00.0", pathclass.SYS, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:80:01.0", 1},
		{"unknown node is not a different node", -1, 1, "0000:05:00.0", "0000:81:00.0", pathclass.NODE, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:80:01.0", 1},
		{"both unknown", -1, -1, "0000:00:06.0", "0000:81:00.0", pathclass.NODE, "0000:80:01.0", 0},
	} {
		ix := host(tc.numa0, tc.numa1)
		p, err := ix.Classify(tc.a, tc.b)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.class, p.Class, tc.name)
		assert.Equal(t, tc.bridges, strings.Join(p.Bridges, " "), tc.name)
		assert.Equal(t, tc.switches, p.Switches, tc.name)
	}
}

func TestClassifyErrors(t *testing.T) {
	ix := host(0, 1)
	_, err := ix.Classify("0000:05:00.0", "0000:99:00.0")
	assert.ErrorContains(t, err, "0000:99:00.0")
	_, err = ix.Classify("0000:05:00.0", "0000:05:00.0")
	assert.Error(t, err)
}

func TestPortTypeInference(t *testing.T) {
	ix := host(0, 0)
	assert.Equal(t, pci.TypeRootPort, ix.PortType("0000:00:01.0"))
	assert.Equal(t, pci.TypeUpstream, ix.PortType("0000:01:00.0"))
	assert.Equal(t, pci.TypeDownstream, ix.PortType("0000:02:00.0"))
	assert.Equal(t, pci.TypeUpstream, ix.PortType("0000:03:00.0"))
	assert.Equal(t, pci.TypeDownstream, ix.PortType("0000:04:00.0"))
	assert.Equal(t, pci.TypeEndpoint, ix.PortType("0000:05:00.0"))
	assert.Equal(t, -1, ix.PortType("0000:99:00.0"))
}

func TestNearest(t *testing.T) {
	ix := host(0, 1)
	c, err := ix.Nearest("0000:05:00.0", map[string]string{"mlx5_0": "0000:81:00.0", "mlx5_1": "0000:08:00.0", "mlx5_2": "0000:06:00.0", "mlx5_3": "0000:06:00.1"})
	require.NoError(t, err)
	require.Len(t, c, 4)
	assert.Equal(t, []string{"mlx5_2", "mlx5_3", "mlx5_1", "mlx5_0"}, []string{c[0].NIC, c[1].NIC, c[2].NIC, c[3].NIC})
	assert.Equal(t, pathclass.PIX, c[0].Path.Class)
	assert.Equal(t, pathclass.SYS, c[3].Path.Class)
	_, err = ix.Nearest("0000:05:00.0", map[string]string{"mlx5_9": "0000:99:00.0"})
	assert.ErrorContains(t, err, "mlx5_9")
}

// The constructed trees classify as their names say, with port types read
// from config space (and inferred where config is 64 bytes).
func TestFixtureTrees(t *testing.T) {
	for tree, want := range map[string]map[[2]string]pathclass.Class{
		"pix":    {{"0000:03:00.0", "0000:04:00.0"}: pathclass.PIX, {"0000:03:00.0", "0000:14:00.0"}: pathclass.PHB, {"0000:13:00.0", "0000:14:00.0"}: pathclass.PIX},
		"pxb":    {{"0000:05:00.0", "0000:06:00.0"}: pathclass.PXB},
		"phb":    {{"0000:01:00.0", "0000:02:00.0"}: pathclass.PHB},
		"node":   {{"0000:01:00.0", "0000:41:00.0"}: pathclass.NODE},
		"sys":    {{"0000:01:00.0", "0000:81:00.0"}: pathclass.SYS},
		"noroot": {{"0000:03:00.0", "0000:04:00.0"}: pathclass.PIX},
	} {
		r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", tree))
		require.NoError(t, err)
		devs, err := pci.Scan(r)
		require.NoError(t, err, tree)
		ix := New(devs)
		for pair, class := range want {
			p, err := ix.Classify(pair[0], pair[1])
			require.NoError(t, err, tree)
			assert.Equal(t, class, p.Class, "%s %v", tree, pair)
		}
	}
}
