package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/hostfs"
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
		class        Class
		bridges      string
		switches     int
	}{
		{"one switch", 0, 1, "0000:05:00.0", "0000:06:00.0", PIX, "0000:02:00.0 0000:01:00.0 0000:02:01.0", 1},
		{"one switch reversed", 0, 1, "0000:06:00.0", "0000:05:00.0", PIX, "0000:02:01.0 0000:01:00.0 0000:02:00.0", 1},
		{"two switches", 0, 1, "0000:07:00.0", "0000:06:00.0", PXB, "0000:04:00.0 0000:03:00.0 0000:02:00.0 0000:01:00.0 0000:02:01.0", 2},
		{"functions of one device", 0, 1, "0000:06:00.0", "0000:06:00.1", PIX, "0000:02:01.0", 1},
		{"two root ports", 0, 1, "0000:05:00.0", "0000:08:00.0", PHB, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:00:02.0", 1},
		{"root bus", 0, 1, "0000:00:06.0", "0000:06:00.0", PHB, "0000:00:01.0 0000:01:00.0 0000:02:01.0", 1},
		{"two host bridges one node", 0, 1, "0000:05:00.0", "0000:41:00.0", NODE, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:40:01.0", 1},
		{"two nodes", 0, 1, "0000:05:00.0", "0000:81:00.0", SYS, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:80:01.0", 1},
		{"unknown node is not the same node", -1, 1, "0000:05:00.0", "0000:81:00.0", SYS, "0000:02:00.0 0000:01:00.0 0000:00:01.0 0000:80:01.0", 1},
		{"both unknown", -1, -1, "0000:00:06.0", "0000:81:00.0", SYS, "0000:80:01.0", 0},
	} {
		ix := host(tc.numa0, tc.numa1)
		p, err := ix.Classify(tc.a, tc.b)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.class, p.Class, tc.name)
		assert.Equal(t, tc.bridges, strings.Join(p.Bridges, " "), tc.name)
		assert.Equal(t, tc.switches, p.Switches, tc.name)
	}
}

// NUMA node -1 is unknown: one node online or equal local_cpulists make it
// NODE, disjoint local_cpulists SYS, anything else SYS flagged unknown.
func TestUnknownNUMA(t *testing.T) {
	mk := func(nodes int, cpusA, cpusB string, online ...string) Path {
		a := dev("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", -1)
		b := dev("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", -1)
		var err error
		a.LocalCPUs, err = cpulist.Parse(cpusA)
		require.NoError(t, err)
		b.LocalCPUs, err = cpulist.Parse(cpusB)
		require.NoError(t, err)
		info := HostInfo{NUMANodes: nodes}
		if len(online) > 0 {
			info.OnlineCPUs, err = cpulist.Parse(online[0])
			require.NoError(t, err)
		}
		p, err := NewHost([]*pci.Device{a, b, bridge("/sys/devices/pci0000:00/0000:00:01.0", -1), bridge("/sys/devices/pci0000:80/0000:80:01.0", -1)}, info).
			Classify("0000:01:00.0", "0000:81:00.0")
		require.NoError(t, err)
		return p
	}
	for _, tc := range []struct {
		name         string
		nodes        int
		cpusA, cpusB string
		class        Class
		unknown      bool
		note         string
	}{
		{"one node online", 1, "", "", NODE, false, "one NUMA node online"},
		{"same cpulist", 2, "0-27,56-83", "0-27,56-83", NODE, false, "same local_cpulist 0-27,56-83"},
		{"disjoint cpulists", 2, "0-27,56-83", "28-55,84-111", SYS, false, "disjoint"},
		{"overlapping cpulists", 2, "0-31", "16-47", SYS, true, "NUMA unknown"},
		{"no cpulists, two nodes", 2, "", "", SYS, true, "2 NUMA nodes online"},
		{"nothing known", 0, "", "", SYS, true, "unknown NUMA nodes online"},
		{"one cpulist", 0, "0-31", "", SYS, true, "NUMA unknown"},
	} {
		p := mk(tc.nodes, tc.cpusA, tc.cpusB)
		assert.Equal(t, tc.class, p.Class, tc.name)
		assert.Equal(t, tc.unknown, p.NUMAUnknown, tc.name)
		assert.Contains(t, p.NUMANote, tc.note, tc.name)
	}
	// Equal lists that are every online CPU are what the kernel writes for
	// an unknown node: no evidence.
	p := mk(2, "0-63", "0-63", "0-63")
	assert.Equal(t, SYS, p.Class)
	assert.True(t, p.NUMAUnknown)
	assert.Contains(t, p.NUMANote, "every online CPU")
	p = mk(2, "0-31", "0-31", "0-63")
	assert.Equal(t, NODE, p.Class)
	// Known nodes need no note.
	p, err := host(0, 1).Classify("0000:05:00.0", "0000:81:00.0")
	require.NoError(t, err)
	assert.Empty(t, p.NUMANote)
	// Load reads the node count and the online CPUs.
	dir := t.TempDir()
	for f, c := range map[string]string{"sys/devices/system/node/online": "0-1\n", "sys/devices/system/cpu/online": "0-63\n"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644))
	}
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	ix, err := Load(r)
	assert.Error(t, err, "no /sys/bus/pci/devices")
	assert.Equal(t, 2, ix.Info().NUMANodes)
	assert.Equal(t, 64, ix.Info().OnlineCPUs.Count())
	assert.False(t, p.NUMAUnknown)
}

func TestReadNUMANodes(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"online": {"online": "0-1\n", "node0/x": "", "node1/x": ""},
		"dirs":   {"node0/cpulist": "0-3\n", "node1/cpulist": "4-7\n", "possible": "0-1\n"},
	} {
		dir := t.TempDir()
		for f, c := range files {
			full := filepath.Join(dir, "sys/devices/system/node", f)
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
		}
		r, err := hostfs.New(dir)
		require.NoError(t, err)
		n, err := ReadNUMANodes(r)
		require.NoError(t, err, name)
		assert.Equal(t, 2, n, name)
	}
	r, err := hostfs.New(t.TempDir())
	require.NoError(t, err)
	n, err := ReadNUMANodes(r)
	require.NoError(t, err)
	assert.Zero(t, n, "no node directory: unknown")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/devices/system/node"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sys/devices/system/node/online"), []byte("zero\n"), 0o644))
	r, err = hostfs.New(dir)
	require.NoError(t, err)
	_, err = ReadNUMANodes(r)
	assert.ErrorContains(t, err, "online")
}

// A link is judged against the lower of its own maximum and its partner's.
func TestExpectedLink(t *testing.T) {
	withLink := func(d *pci.Device, maxS float64, maxW int) *pci.Device {
		d.MaxGTs, d.MaxWidth, d.CurGTs, d.CurWidth = maxS, maxW, maxS, maxW
		return d
	}
	ix := New([]*pci.Device{
		withLink(bridge(rp0, 0), 16, 16), withLink(bridge(usp, 0), 32, 16), withLink(bridge(dspA, 0), 32, 16),
		withLink(bridge(dspB, 0), 32, 16),
		withLink(dev(dspA+"/0000:05:00.0", 0), 32, 16), // Gen5 GPU on a Gen5 port
		withLink(dev(dspB+"/0000:06:00.0", 0), 16, 8),  // Gen4 x8 NIC on a Gen5 x16 port
		withLink(dev(dspB+"/0000:06:00.1", 0), 16, 8),
		withLink(dev("/sys/devices/pci0000:00/0000:00:06.0", -1), 32, 16), // on the root bus: no partner
		dev(rp1, 0), // a port without link attributes
	})
	for _, tc := range []struct {
		bdf     string
		speed   float64
		width   int
		partner string
		limited bool
	}{
		{"0000:01:00.0", 16, 16, "0000:00:01.0", true}, // Gen5 switch behind a Gen4 root port
		{"0000:00:01.0", 16, 16, "0000:01:00.0", false},
		{"0000:05:00.0", 32, 16, "0000:02:00.0", false},
		{"0000:02:01.0", 16, 8, "0000:06:00.0", true}, // a port's partner is the lowest function below it
		{"0000:06:00.1", 16, 8, "0000:02:01.0", false},
		{"0000:00:06.0", 32, 16, "", false},
	} {
		l, err := ix.ExpectedLink(tc.bdf)
		require.NoError(t, err, tc.bdf)
		assert.Equal(t, tc.speed, l.Speed, tc.bdf)
		assert.Equal(t, tc.width, l.Width, tc.bdf)
		assert.Equal(t, tc.partner, l.Partner, tc.bdf)
		assert.Equal(t, tc.limited, l.Limited, tc.bdf)
	}
	l, _ := ix.ExpectedLink("0000:01:00.0")
	assert.Equal(t, "16 GT/s x16 (limited by link partner 0000:00:01.0: max 16 GT/s x16)", l.String())
	_, err := ix.ExpectedLink("0000:00:02.0")
	assert.ErrorContains(t, err, "no max_link_speed")
	_, err = ix.ExpectedLink("0000:99:00.0")
	assert.ErrorContains(t, err, "no PCI function 0000:99:00.0")
	assert.Nil(t, ix.LinkPartner("0000:99:00.0"))
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
	assert.Equal(t, PIX, c[0].Path.Class)
	assert.Equal(t, SYS, c[3].Path.Class)
	_, err = ix.Nearest("0000:05:00.0", map[string]string{"mlx5_9": "0000:99:00.0"})
	assert.ErrorContains(t, err, "mlx5_9")
}

// The constructed trees classify as their names say, with port types read
// from config space (and inferred where config is 64 bytes).
func TestFixtureTrees(t *testing.T) {
	for tree, want := range map[string]map[[2]string]Class{
		"pix":    {{"0000:03:00.0", "0000:04:00.0"}: PIX, {"0000:03:00.0", "0000:14:00.0"}: PHB, {"0000:13:00.0", "0000:14:00.0"}: PIX},
		"pxb":    {{"0000:05:00.0", "0000:06:00.0"}: PXB},
		"phb":    {{"0000:01:00.0", "0000:02:00.0"}: PHB},
		"node":   {{"0000:01:00.0", "0000:41:00.0"}: NODE},
		"sys":    {{"0000:01:00.0", "0000:81:00.0"}: SYS},
		"noroot": {{"0000:03:00.0", "0000:04:00.0"}: PIX},
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

func TestSharedUpstream(t *testing.T) {
	ix := host(0, 1)
	// 0000:05:00.0 sits below dspA of the first switch; 0000:07:00.0 below
	// a second switch under dspA; 0000:06:00.0 below dspB; 0000:08:00.0 on
	// another root port of the same host bridge; 0000:81:00.0 elsewhere.
	got, err := ix.SharedUpstream("0000:05:00.0", []string{"0000:05:00.0", "0000:07:00.0", "0000:06:00.0", "0000:08:00.0", "0000:81:00.0", "0000:00:06.0"})
	require.NoError(t, err)
	require.Len(t, got, 4, "itself and the function under another host bridge are left out")
	assert.Equal(t, "0000:07:00.0", got[0].Peer)
	assert.Equal(t, "0000:02:00.0", got[0].Bridge, "both hang below the downstream port")
	assert.Equal(t, "switch downstream port 0000:02:00.0", got[0].Where())
	assert.Equal(t, "0000:01:00.0", got[1].Bridge, "the NIC's downstream port differs: the upstream port is shared")
	assert.Equal(t, "switch upstream port 0000:01:00.0", got[1].Where())
	assert.Equal(t, "", got[2].Bridge, "another root port: only the host bridge")
	assert.Equal(t, "host bridge pci0000:00 (no PCI bridge in common)", got[2].Where())
	assert.Equal(t, "/sys/devices/pci0000:00", got[2].HostBridge)
	assert.Equal(t, "0000:00:06.0", got[3].Peer, "a function on the root bus shares the host bridge")
	assert.Equal(t, -1, got[3].BridgeType)

	_, err = ix.SharedUpstream("0000:99:00.0", nil)
	require.ErrorContains(t, err, "no PCI function 0000:99:00.0")
	_, err = ix.SharedUpstream("0000:05:00.0", []string{"0000:98:00.0"})
	require.ErrorContains(t, err, "no PCI function 0000:98:00.0")
}

// A GPU on NVLink-C2C (GH200: its own PCI domain below a Grace root port)
// reaches a NIC on another root port of the same Grace as NCCL's P2C; the
// tree's class stays what nvidia-smi topo -m compares with; a NIC on the
// other Grace of a tray stays SYS; two C2C GPUs keep the tree's class.
func TestClassifyC2C(t *testing.T) {
	gpu := &pci.Device{BDF: "0009:01:00.0", Class: 0x030200, NUMANode: 0, Root: "pci0009:00", Chain: []string{"0009:00:00.0", "0009:01:00.0"}}
	gpu2 := &pci.Device{BDF: "0019:01:00.0", Class: 0x030200, NUMANode: 0, Root: "pci0019:00", Chain: []string{"0019:00:00.0", "0019:01:00.0"}}
	nic := &pci.Device{BDF: "0000:01:00.0", Class: 0x020700, NUMANode: 0, Root: "pci0000:00", Chain: []string{"0000:00:00.0", "0000:01:00.0"}}
	far := &pci.Device{BDF: "0010:01:00.0", Class: 0x020700, NUMANode: 1, Root: "pci0010:00", Chain: []string{"0010:00:00.0", "0010:01:00.0"}}
	ix := New([]*pci.Device{gpu, gpu2, nic, far})
	p, err := ix.Classify(gpu.BDF, nic.BDF)
	require.NoError(t, err)
	assert.Equal(t, NODE, p.Class, "without C2C the tree's class")
	assert.Equal(t, NODE, p.TreeClass())

	ix.MarkC2C([]string{gpu.BDF, gpu2.BDF})
	p, err = ix.Classify(gpu.BDF, nic.BDF)
	require.NoError(t, err)
	assert.Equal(t, P2C, p.Class)
	assert.Equal(t, gpu.BDF, p.C2C)
	assert.Equal(t, NODE, p.TreeClass())
	p, err = ix.Classify(nic.BDF, gpu.BDF)
	require.NoError(t, err)
	assert.Equal(t, P2C, p.Class, "either order")
	p, err = ix.Classify(gpu.BDF, far.BDF)
	require.NoError(t, err)
	assert.Equal(t, SYS, p.Class, "the other Grace")
	p, err = ix.Classify(gpu.BDF, gpu2.BDF)
	require.NoError(t, err)
	assert.Equal(t, NODE, p.Class, "GPU to GPU is no P2C path")
	assert.Equal(t, PIX, PIX.ViaC2C())
	assert.Equal(t, PXB, PXB.ViaC2C())
	assert.Equal(t, P2C, PHB.ViaC2C())
	assert.True(t, P2C.FartherThan(PXB))
	assert.False(t, P2C.FartherThan(PHB))
	c, err := ParseClass("p2c")
	require.NoError(t, err)
	assert.Equal(t, P2C, c)
}

func TestClassThrough(t *testing.T) {
	for c, want := range map[Class]string{PIX: "PCIe fabric", PXB: "PCIe fabric", P2C: "NVLink-C2C to the CPU and the CPU's PCIe", PHB: "CPU's host bridge", NODE: "interconnect between host bridges", SYS: "inter-socket link"} {
		assert.Equal(t, want, c.Through(), c.String())
	}
}
