package pci

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

func TestGBps(t *testing.T) {
	for _, c := range []struct {
		gts   float64
		width int
		want  float64
	}{
		{2.5, 1, 0.25},
		{5, 16, 8},
		{8, 16, 15.754},
		{16, 16, 31.508},
		{32, 16, 63.015},
		{32, 8, 31.508},
		{64, 16, 121.0}, // FLIT 242/256
	} {
		got, err := GBps(c.gts, c.width)
		require.NoError(t, err)
		assert.InDelta(t, c.want, got, 0.001, "%g GT/s x%d", c.gts, c.width)
	}
	for _, bad := range []struct {
		gts   float64
		width int
	}{{0, 16}, {-8, 16}, {32, 0}, {32, 64}} {
		_, err := GBps(bad.gts, bad.width)
		assert.Error(t, err, "%g GT/s x%d", bad.gts, bad.width)
	}
}

func TestParseSpeedUnknown(t *testing.T) {
	for in, want := range map[string]float64{
		"32.0 GT/s PCIe\n": 32, "8 GT/s": 8, "2.5 GT/s": 2.5, "16.0 GT/s PCIe": 16, "5.0 GT/s PCIe": 5,
	} {
		got, err := parseSpeed(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := parseSpeed("Unknown speed")
	assert.ErrorIs(t, err, ErrUnknown)
	_, err = parseSpeed("Unknown")
	assert.ErrorIs(t, err, ErrUnknown)
	for _, bad := range []string{"", "fast", "32.0 Gb/s", "x GT/s", "-1 GT/s"} {
		_, err := parseSpeed(bad)
		assert.Error(t, err, "%q", bad)
		assert.NotErrorIs(t, err, ErrUnknown, "%q", bad)
	}
}

// Values strconv.ParseFloat accepts but sysfs never writes: NaN compares
// false with every bound, so a range check alone lets it through.
func TestParseSpeedNonDecimal(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{"NaN GT/s", "NaN"},
		{"nan GT/s PCIe", "NaN, lower case"},
		{"+NaN GT/s", "signed NaN"},
		{"Inf GT/s", "infinity"},
		{"+Inf GT/s", "signed infinity"},
		{"-Inf GT/s", "negative infinity"},
		{"infinity GT/s", "infinity spelt out"},
		{"0x1p4 GT/s", "hex float (16)"},
		{"1e1 GT/s", "exponent (10)"},
		{"+8 GT/s", "explicit sign"},
		{"0 GT/s", "zero"},
		{"1000.5 GT/s", "above the bound"},
		{"8.0.0 GT/s", "two points"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			v, err := parseSpeed(tc.in)
			require.Error(t, err, "%q gave %v", tc.in, v)
			assert.Contains(t, err.Error(), tc.in[:strings.IndexByte(tc.in, ' ')], "the error names the value")
			assert.Zero(t, v)
		})
	}
}

func TestParseWidth(t *testing.T) {
	n, err := ParseWidth("16\n")
	require.NoError(t, err)
	assert.Equal(t, 16, n)
	n, err = ParseWidth("0")
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	for _, bad := range []string{"", "x16", "-1", "33"} {
		_, err := ParseWidth(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestGeneration(t *testing.T) {
	assert.Equal(t, "gen5", Generation(32))
	assert.Equal(t, "gen1", Generation(2.5))
	assert.Equal(t, "12 GT/s", Generation(12))
}

func TestNormalizeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3B:00.0":     "0000:3b:00.0",
		"00000000:3B:00.0": "0000:3b:00.0",
		"3b:00.0":          "0000:3b:00.0",
		"0000:00:06.0":     "0000:00:06.0",
	} {
		got, err := NormalizeAddr(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "3b", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "0000:100:00.0", "10000:00:00.0", "zz:00.0", "0:0:0:0.0"} {
		_, err := NormalizeAddr(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestReadLink(t *testing.T) {
	dev := func(addr string) string { return DevicesDir + "/" + addr + "/" }
	root := hostfstest.Tree(t, map[string]string{
		dev("0000:00:06.0") + maxSpeedFile: "32.0 GT/s PCIe\n", dev("0000:00:06.0") + maxWidthFile: "16\n",
		dev("0000:00:06.0") + curSpeedFile: "2.5 GT/s PCIe\n", dev("0000:00:06.0") + curWidthFile: "16\n",
		dev("0000:00:07.0") + maxSpeedFile: "16.0 GT/s PCIe\n", dev("0000:00:07.0") + maxWidthFile: "16\n",
		dev("0000:00:07.0") + curSpeedFile: "Unknown\n", dev("0000:00:07.0") + curWidthFile: "0\n",
		dev("0000:00:08.0") + "vendor":     "0x10de\n",
		dev("0000:00:09.0") + maxSpeedFile: "fast\n", dev("0000:00:09.0") + maxWidthFile: "16\n",
		dev("0000:00:09.0") + curSpeedFile: "8 GT/s\n", dev("0000:00:09.0") + curWidthFile: "16\n",
	})

	l, err := ReadLink(root, "0000:00:06.0")
	require.NoError(t, err)
	assert.Equal(t, Link{CurGTs: 2.5, MaxGTs: 32, CurWidth: 16, MaxWidth: 16}, l)
	m, err := l.MaxGBps()
	require.NoError(t, err)
	assert.InDelta(t, 63.015, m, 0.001)
	c, err := l.CurGBps()
	require.NoError(t, err)
	assert.InDelta(t, 4.0, c, 0.001)
	assert.Equal(t, "2.5 GT/s x16 (max 32 GT/s x16)", l.String())

	l, err = ReadLink(root, "0000:00:07.0")
	require.NoError(t, err, "an unknown current speed is not an error")
	assert.Equal(t, 0.0, l.CurGTs)
	assert.Equal(t, 0, l.CurWidth)

	_, err = ReadLink(root, "0000:00:08.0")
	require.Error(t, err)
	assert.True(t, IsNotExist(err))
	assert.Contains(t, err.Error(), "max_link_speed")

	_, err = ReadLink(root, "0000:00:09.0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"fast"`)

	_, err = ReadLink(root, "not-an-address")
	assert.Error(t, err)
}
