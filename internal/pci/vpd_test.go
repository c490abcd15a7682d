package pci

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/pci/cfgbuild"
)

func vpdImage(name string, kws [][2]string, corrupt bool) []byte {
	return cfgbuild.VPD(name, kws, corrupt)
}

var cx7Keywords = [][2]string{
	{"PN", "MCX755106AS-HEAT"}, {"EC", "A7"}, {"V2", "MCX755106AS-HEAT"},
	{"SN", "MT2243X00123"}, {"V3", "d5a1c0e2f0a4ed1180006cfe540e2d80"},
	{"VA", "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX755106A"}, {"V0", "PCIeGen5 x16"},
}

func TestParseVPD(t *testing.T) {
	v, err := ParseVPD(vpdImage("NVIDIA ConnectX-7 HHHL adapter card, 400GbE / NDR IB\x00\x00", cx7Keywords, false))
	require.NoError(t, err)
	assert.True(t, v.ChecksumOK)
	assert.Equal(t, "NVIDIA ConnectX-7 HHHL adapter card, 400GbE / NDR IB", v.Name, "NUL padding trimmed")
	assert.Equal(t, "MCX755106AS-HEAT", v.PartNumber())
	assert.Equal(t, "MT2243X00123", v.Serial())
	assert.Equal(t, "A7", v.EC())
	assert.NotContains(t, v.Keywords, "RV")
	assert.NotContains(t, v.Keywords, "V1", "VPD-W is not identity")
	assert.Equal(t, "EC=A7", v.KeywordList()[0])
}

func TestParseVPDChecksum(t *testing.T) {
	v, err := ParseVPD(vpdImage("card", cx7Keywords, true))
	require.NoError(t, err, "values are kept")
	assert.False(t, v.ChecksumOK)
}

// Damaged images give what parsed and an error naming where; never a panic.
func TestParseVPDBad(t *testing.T) {
	good := vpdImage("card", cx7Keywords, false)
	for name, b := range map[string][]byte{
		"empty":        {},
		"unprogrammed": {0xff, 0xff, 0xff, 0xff},
		"cut header":   good[:2],
		"cut resource": good[:20],
		"no VPD-R":     {tagIDString, 1, 0, 'x', tagEnd},
		"no RV":        {tagVPDR, 5, 0, 'P', 'N', 2, 'a', 'b', tagEnd},
		"long keyword": {tagVPDR, 5, 0, 'P', 'N', 9, 'a', 'b', tagEnd},
		"no end":       good[:len(good)-12],
	} {
		_, err := ParseVPD(b)
		assert.Error(t, err, name)
	}
}

func FuzzParseVPD(f *testing.F) {
	f.Add(vpdImage("card", cx7Keywords, false))
	f.Add([]byte{tagVPDR, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseVPD(b) })
}

func TestReadVPD(t *testing.T) {
	img := vpdImage("card", cx7Keywords, false)
	root := hostfstest.Tree(t, map[string]string{
		DevicesDir + "/0000:3c:00.0/vpd":    string(img),
		DevicesDir + "/0000:3d:00.0/vendor": "0x15b3",
	})
	v, err := ReadVPD(root, "0000:3c:00.0")
	require.NoError(t, err)
	assert.Equal(t, "MT2243X00123", v.Serial())
	_, err = ReadVPD(root, "0000:3d:00.0")
	assert.ErrorIs(t, err, ErrNoVPD)
	_, err = ReadVPD(root, "../../etc")
	assert.ErrorContains(t, err, "not a PCI address")
}
