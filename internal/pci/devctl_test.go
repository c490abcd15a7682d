package pci

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pci/cfgbuild"
)

// The H200 as recorded on the GPU machine: DevCap 0x112c8021, DevCtl
// 0x5134, DevCap2 0x00070813, DevCtl2 0x1040 (read from the recorded
// image): MaxPayload 256 of 256, MaxReadReq 4096, Relaxed Ordering and
// Extended Tags on, 10-bit tags supported both ways and enabled as
// requester, no ATS capability.
func TestSettingsRecordedH200(t *testing.T) {
	b, err := os.ReadFile("../../fixtures/hosts/h200-1/sys/devices/pci0000:00/0000:00:06.0/config")
	require.NoError(t, err)
	c, err := ParseConfig(b)
	require.NoError(t, err)
	require.NotNil(t, c.PCIe)
	assert.Equal(t, 2, c.PCIe.Version)
	assert.EqualValues(t, 0x112c8021, c.PCIe.DevCap)
	assert.EqualValues(t, 0x5134, c.PCIe.DevCtl)
	assert.True(t, c.PCIe.Has2)
	assert.EqualValues(t, 0x00070813, c.PCIe.DevCap2)
	assert.EqualValues(t, 0x1040, c.PCIe.DevCtl2)
	s, ok := c.Settings()
	require.True(t, ok)
	assert.Equal(t, Settings{MaxPayload: 256, MaxPayloadSupported: 256, MaxReadRequest: 4096, RelaxedOrdering: true,
		ExtTagSupported: true, ExtTag: true, Has2: true, TenBitCompleter: true, TenBitRequesterSupported: true, TenBitRequester: true}, s)
	assert.Nil(t, c.ATS)
	assert.Equal(t, "MaxPayload 256 (max 256) MaxReadReq 4096 RlxdOrd+ NoSnoop- ExtTag+ 10BitTagReq+ 10BitTagComp+ ATS(none)", s.String())
}

func TestSettingsBuilt(t *testing.T) {
	img := cfgbuild.Build(cfgbuild.Spec{Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, PortType: TypeEndpoint,
		MaxSpeedEnc: 5, MaxWidth: 16, CurSpeedEnc: 5, CurWidth: 16,
		DevCap: cfgbuild.DevCap(512, true), DevCtl: cfgbuild.DevCtl(256, 4096, false, true, true),
		DevCap2: DevCap2TenBitComp | DevCap2TenBitReq, ACS: true, ATS: true, ATSCap: 0x20, ATSCtrl: ATSCtrlEnable | 2})
	c, err := ParseConfig(img)
	require.NoError(t, err)
	require.NotNil(t, c.ATS)
	assert.Equal(t, 0x160, c.ATS.Offset)
	assert.True(t, c.ATS.Enabled())
	assert.Equal(t, 2, c.ATS.SmallestTranslationUnit())
	require.NotNil(t, c.ACS, "ACS and ATS both in the chain")
	assert.Len(t, c.ExtCaps, 3)
	s, ok := c.Settings()
	require.True(t, ok)
	assert.Equal(t, 256, s.MaxPayload)
	assert.Equal(t, 512, s.MaxPayloadSupported)
	assert.Equal(t, 4096, s.MaxReadRequest)
	assert.False(t, s.RelaxedOrdering)
	assert.True(t, s.NoSnoop)
	assert.True(t, s.ExtTag)
	assert.False(t, s.TenBitRequester)
	assert.True(t, s.TenBitRequesterSupported)
	assert.Equal(t, "MaxPayload 256 (max 512) MaxReadReq 4096 RlxdOrd- NoSnoop+ ExtTag+ 10BitTagReq- 10BitTagComp+ ATS+", s.String())

	// ATS only, no ACS: AER -> ATS.
	c, err = ParseConfig(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, ATS: true}))
	require.NoError(t, err)
	require.NotNil(t, c.ATS)
	assert.False(t, c.ATS.Enabled())
	assert.Nil(t, c.ACS)

	// Reserved encodings decode as 0, named "reserved".
	img = cfgbuild.Build(cfgbuild.Spec{Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, DevCap: 6, DevCtl: 7<<5 | 6<<12})
	c, err = ParseConfig(img)
	require.NoError(t, err)
	_, ok = c.PCIe.MaxPayload()
	assert.False(t, ok)
	s, _ = c.Settings()
	assert.Equal(t, 0, s.MaxPayload)
	assert.Contains(t, s.String(), "MaxPayload reserved (max reserved) MaxReadReq reserved")
	assert.Contains(t, s.String(), "ExtTag-(unsupported)")
}

func TestSettingsVersion1AndUnreadable(t *testing.T) {
	img := cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x1db4, Class: 0x030200, DevCap2: DevCap2TenBitComp, DevCtl2: DevCtl2TenBitReq})
	img[0x62] = img[0x62]&0xf0 | 1 // capability version 1: no "2" registers
	c, err := ParseConfig(img)
	require.NoError(t, err)
	assert.False(t, c.PCIe.Has2)
	assert.False(t, c.PCIe.TenBitCompleter())
	assert.False(t, c.PCIe.TenBitRequester())
	s, ok := c.Settings()
	require.True(t, ok)
	assert.NotContains(t, s.String(), "10BitTag")

	c, err = ParseConfig(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x1db4, Class: 0x030200, Size: 64}))
	require.ErrorIs(t, err, ErrNeedRoot)
	_, ok = c.Settings()
	assert.False(t, ok)
	var nilCfg *Config
	_, ok = nilCfg.Settings()
	assert.False(t, ok)
}

func TestCfgbuildEncodings(t *testing.T) {
	assert.EqualValues(t, 0x5930, cfgbuild.DevCtl(256, 4096, true, true, true))
	assert.EqualValues(t, 0x0000, cfgbuild.DevCtl(128, 128, false, false, false))
	assert.EqualValues(t, 0x22, cfgbuild.DevCap(512, true))
	assert.EqualValues(t, 0x5, cfgbuild.DevCap(4096, false))
}
