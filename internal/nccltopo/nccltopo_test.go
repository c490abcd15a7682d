package nccltopo

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// ndv5Like has the shape of Azure's ndv5-topo.xml (Azure/azhpc-images
// topology/ndv5-topo.xml): per socket, fictional switch elements
// (ffff:ff:0N.0) each holding one GPU and one NIC by the guest's bus ids.
// Here GPU 0002 pairs with NIC 0103 and GPU 0003 with 0102, against address
// order, so that the file, not the address, must decide.
const ndv5Like = `<system version="1">
  <cpu numaid="0" affinity="00000000,0000ffff,ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0101:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0002:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0103:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
    <pci busid="ffff:ff:03.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0003:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0102:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ffffffff,ffff0000,00000000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="ffff:ff:05.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="ffff:fe:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
        <pci busid="0009:00:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"/>
      </pci>
      <pci busid="0105:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_an0" dev="4" speed="400000" port="1" gdr="1"/></nic>
      </pci>
    </pci>
    <pci busid="0106:00:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
`

func TestClassify(t *testing.T) {
	f, err := Parse([]byte(ndv5Like))
	require.NoError(t, err)
	assert.Equal(t, []string{"0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0009:00:00.0"}, f.GPUs)
	assert.Equal(t, []string{"0101:00:00.0", "0103:00:00.0", "0102:00:00.0", "0105:00:00.0", "0106:00:00.0"}, f.NICs)
	for _, c := range []struct {
		gpu, nic, name string
		class          topo.Class
		via            string
	}{
		{"0001:00:00.0", "0101:00:00.0", "", topo.PIX, "PCI switch ffff:ff:01.0"},
		{"0002:00:00.0", "0103:00:00.0", "", topo.PIX, "PCI switch ffff:ff:02.0"},
		{"0002:00:00.0", "0102:00:00.0", "", topo.PHB, "cpu numaid 0"},
		{"0001:00:00.0", "0105:00:00.0", "", topo.SYS, "cpu numaid 0 and 1"},
		{"0009:00:00.0", "0105:00:00.0", "", topo.PXB, "ffff:ff:05.0 (2 switches)"},
		{"0009:00:00.0", "0106:00:00.0", "", topo.PHB, "cpu numaid 1"},
		// A NIC named by its net element, the bus id unknown to the file.
		{"0009:00:00.0", "0000:99:00.0", "mlx5_an0", topo.PXB, "2 switches"},
		// Bus ids in other spellings (upper case, no domain) match.
		{"1:00:00.0", "0101:00:00.0", "", topo.PIX, "ffff:ff:01.0"},
	} {
		p, ok := f.Classify(c.gpu, c.nic, c.name)
		require.True(t, ok, "%s <-> %s", c.gpu, c.nic)
		assert.Equal(t, c.class, p.Class, "%s <-> %s: %+v", c.gpu, c.nic, p)
		assert.Contains(t, p.Via, c.via)
	}
	_, ok := f.Classify("0004:00:00.0", "0101:00:00.0", "")
	assert.False(t, ok, "a GPU the file does not list")
	_, ok = f.Classify("0001:00:00.0", "0001:00:00.0", "")
	assert.False(t, ok, "a function with itself")
	assert.True(t, f.Has("0001:00:00.0", ""))
	assert.False(t, f.Has("0000:17:00.0", ""))
}

func TestParseRejects(t *testing.T) {
	for name, x := range map[string]string{
		"empty":         "",
		"not xml":       "NCCL_TOPO_FILE=/x",
		"wrong top":     `<graphs version="1"></graphs>`,
		"truncated":     `<system version="1"><cpu numaid="0"><pci busid="0001:00:00.0" class="0x0302"`,
		"bad busid":     `<system><cpu numaid="0"><pci busid="zz:yy" class="0x030200"/></cpu></system>`,
		"no busid":      `<system><cpu numaid="0"><pci class="0x030200"/></cpu></system>`,
		"cpu no numaid": `<system><cpu><pci busid="0001:00:00.0" class="0x030200"/></cpu></system>`,
		"duplicate":     `<system><cpu numaid="0"><pci busid="0001:00:00.0" class="0x030200"/><pci busid="0001:00:00.0" class="0x020700"/></cpu></system>`,
		"two tops":      `<system></system><system></system>`,
	} {
		_, err := Parse([]byte(x))
		assert.Error(t, err, name)
	}
}

func root(t *testing.T, files map[string]string) *hostfs.Root {
	return hostfstest.Tree(t, files)
}

func TestLocateOrder(t *testing.T) {
	files := map[string]string{
		"/etc/nccl.conf":     "NCCL_IB_PCI_RELAXED_ORDERING=1\r\n# NCCL_TOPO_FILE=/commented\nNCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\nNCCL_TOPO_FILE=/second\n",
		"/home/u/.nccl.conf": "NCCL_DEBUG=INFO\nNCCL_TOPO_FILE=/home/u/topo.xml\n",
		"/cfg/nccl.conf":     "NCCL_TOPO_FILE = /spaces-make-another-name\n",
		"/var/run/nvidia-topologyd/virtualTopology.xml": ndv5Like,
	}
	r := root(t, files)
	for _, c := range []struct {
		env        Env
		path, from string
	}{
		{Env{TopoFile: "/env/topo.xml", ConfFile: "/cfg/nccl.conf", Home: "/home/u"}, "/env/topo.xml", "environment"},
		{Env{Home: "/home/u"}, "/home/u/topo.xml", "/home/u/.nccl.conf"},
		// NCCL_CONF_FILE replaces ~/.nccl.conf; its "NAME = v" line names
		// another variable, so /etc/nccl.conf's first line decides.
		{Env{ConfFile: "/cfg/nccl.conf", Home: "/home/u"}, "/opt/microsoft/ndv5/topo.xml", "/etc/nccl.conf"},
		{Env{}, "/opt/microsoft/ndv5/topo.xml", "/etc/nccl.conf"},
	} {
		src, ok, err := Locate(r, c.env)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, c.path, src.Path)
		assert.Contains(t, src.From, c.from)
	}
	delete(files, "/etc/nccl.conf")
	src, ok, err := Locate(root(t, files), Env{})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, DefaultFile, src.Path)
	_, ok, err = Locate(root(t, map[string]string{"/etc/hostname": "x\n"}), Env{})
	require.NoError(t, err)
	assert.False(t, ok, "nothing names a file")
	_, _, err = Locate(r, Env{ConfFile: "relative.conf"})
	assert.ErrorContains(t, err, "relative.conf")
}

func TestLoad(t *testing.T) {
	r := root(t, map[string]string{
		"/etc/nccl.conf":               "NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\n",
		"/opt/microsoft/ndv5/topo.xml": ndv5Like,
		"/bad.xml":                     "<system><cpu numaid=\"0\"><pci busid=\"nope\"/></cpu></system>",
	})
	f, err := Load(r, Env{})
	require.NoError(t, err)
	require.NotNil(t, f)
	assert.Equal(t, "/opt/microsoft/ndv5/topo.xml", f.Path)
	assert.Equal(t, "NCCL_TOPO_FILE in /etc/nccl.conf", f.From)

	_, err = Load(r, Env{TopoFile: "/missing.xml"})
	require.True(t, errors.Is(err, ErrIgnored), "%v", err)
	assert.ErrorContains(t, err, "/missing.xml")
	assert.ErrorContains(t, err, "NCCL ignores it")
	assert.Nil(t, Unusable(err), "NCCL goes on without an ignored file")

	_, err = Load(r, Env{TopoFile: "/bad.xml"})
	require.True(t, errors.Is(err, ErrUnusable), "%v", err)
	assert.ErrorContains(t, err, `"nope"`)
	assert.ErrorContains(t, err, "NCCL fails")
	u := Unusable(err)
	require.NotNil(t, u, "a file NCCL fails with is a finding")
	assert.Equal(t, err.Error(), u.Cause)
	assert.Equal(t, verdict.FellShort, u.Kind())
	assert.Contains(t, u.Remedy, "fix the file or the setting that names it (NCCL_TOPO_FILE")

	_, err = Load(r, Env{TopoFile: "topo.xml"})
	assert.ErrorIs(t, err, ErrIgnored)
	assert.ErrorContains(t, err, "not an absolute path")

	f, err = Load(root(t, map[string]string{"/etc/hostname": "x\n"}), Env{})
	assert.NoError(t, err)
	assert.Nil(t, f)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(ndv5Like))
	f.Add([]byte(`<system><cpu numaid="0"><pci busid="0001:00:00.0"><pci busid="0002:00:00.0"/></pci></cpu></system>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tf, err := Parse(b)
		if err != nil {
			return
		}
		for _, g := range tf.GPUs {
			for _, n := range tf.NICs {
				tf.Classify(g, n, "")
			}
		}
	})
}

func TestGDRLevel(t *testing.T) {
	r := root(t, map[string]string{"/etc/nccl.conf": "NCCL_NET_GDR_LEVEL=SYS\n"})
	for _, c := range []struct {
		env   string
		level topo.Class
		ok    bool
	}{
		{"PIX", topo.PIX, true}, {"PXB", topo.PXB, true}, {"P2C", topo.P2C, true}, {"PXN", topo.P2C, true},
		{"PHB", topo.NODE, true}, {"LOC", topo.Unknown, true},
		{"0", topo.Unknown, true}, {"1", topo.PIX, true}, {"3", topo.NODE, true}, {"9", topo.SYS, true},
		{"phb", topo.Unknown, false}, // NCCL compares case-sensitively and keeps its default
	} {
		l, setting, ok, err := GDRLevel(r, Env{GDRLevel: c.env})
		require.NoError(t, err)
		assert.Equal(t, c.ok, ok, c.env)
		assert.Equal(t, c.level, l, c.env)
		assert.Contains(t, setting, "in the environment", c.env)
	}
	l, setting, ok, err := GDRLevel(r, Env{})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, topo.SYS, l)
	assert.Equal(t, `NCCL_NET_GDR_LEVEL="SYS" in /etc/nccl.conf`, setting)
	_, _, ok, err = GDRLevel(root(t, map[string]string{"/etc/hostname": "x\n"}), Env{})
	require.NoError(t, err)
	assert.False(t, ok, "unset")
}
