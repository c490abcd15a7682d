package mlxconfig

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata holds outputs of our own making in the layout mstflint v4.31's
// mlxcfg_ui.cpp prints (trailing spaces, overflowing enum cells included);
// testdata/README.md says how each was made.
func load(t *testing.T, name string) *Query {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	q, err := Parse(string(b))
	require.NoError(t, err)
	return q
}

func byParam(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Param] = c
	}
	return m
}

func TestParseCX7Good(t *testing.T) {
	q := load(t, "mstconfig-query-cx7-good.txt")
	assert.Equal(t, "ConnectX7", q.DeviceType)
	assert.Equal(t, "MCX75310AAS-NEAT_Ax", q.Name)
	assert.Equal(t, "0000:1a:00.0", q.Device)
	assert.Equal(t, []string{"Next Boot"}, q.Columns)
	assert.Equal(t, "True(1)", q.Params["ADVANCED_PCI_SETTINGS"].Effective())
	assert.Equal(t, "PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED(0)", q.Params["PCI_ATOMIC_MODE"].Next, "an overflowing cell")
	assert.Equal(t, "Array[0..15]", q.Params["PCI_DOWNSTREAM_PORT_OWNER"].Next)
	cs := byParam(Judge(q, false))
	for _, p := range []string{"ADVANCED_PCI_SETTINGS", "MAX_ACC_OUT_READ", "ATS_ENABLED"} {
		assert.True(t, cs[p].Judged && cs[p].Met, "%s: %s", p, cs[p])
	}
	assert.False(t, cs["PCI_WR_ORDERING"].Judged, "reported only")
	assert.Equal(t, "force_relax(1)", cs["PCI_WR_ORDERING"].Value)
	// The same card in a VM: ATS must be on.
	vm := byParam(Judge(q, true))
	assert.False(t, vm["ATS_ENABLED"].Met)
	assert.Equal(t, "True(1)", vm["ATS_ENABLED"].Want)
}

// ADVANCED_PCI_SETTINGS off hides MAX_ACC_OUT_READ (mstflint's dependency
// filter): both judged not met, the absence explained, not "unsupported".
func TestParseCX7Bad(t *testing.T) {
	q := load(t, "mstconfig-query-cx7-bad.txt")
	_, listed := q.Params["MAX_ACC_OUT_READ"]
	assert.False(t, listed)
	cs := byParam(Judge(q, false))
	assert.True(t, cs["ADVANCED_PCI_SETTINGS"].Judged)
	assert.False(t, cs["ADVANCED_PCI_SETTINGS"].Met)
	m := cs["MAX_ACC_OUT_READ"]
	assert.True(t, m.Judged)
	assert.False(t, m.Met)
	assert.Contains(t, m.Why, "hidden while ADVANCED_PCI_SETTINGS is False(0)")
	assert.Equal(t, "MAX_ACC_OUT_READ absent from the query, documented 0 (auto; 44 or 128 also accepted)", m.String())

	mar := byParam(Judge(load(t, "mstconfig-query-cx7-bad-mar.txt"), false))
	assert.Equal(t, "16", mar["MAX_ACC_OUT_READ"].Value)
	assert.False(t, mar["MAX_ACC_OUT_READ"].Met)
}

// MFT's mlxconfig -e: Default/Current/Next Boot columns, '*' markers; the
// current value judges, a value set for the next boot is named as pending.
func TestParseMFTVerbose(t *testing.T) {
	q := load(t, "mlxconfig-query-cx6.txt")
	assert.Equal(t, []string{"Default", "Current", "Next Boot"}, q.Columns)
	p := q.Params["MAX_ACC_OUT_READ"]
	assert.Equal(t, Param{Name: "MAX_ACC_OUT_READ", Default: "0", Current: "44", Next: "44", Modified: true}, p)
	assert.Equal(t, "PCI_ATOMIC_DISABLED_EXT_ATOMIC_ENABLED(0)", q.Params["PCI_ATOMIC_MODE"].Current)
	cs := byParam(Judge(q, false))
	assert.True(t, cs["MAX_ACC_OUT_READ"].Met, "44 on ConnectX-6")
	assert.NotEmpty(t, q.Notes, "the tool's remarks are kept")

	q.Params["ADVANCED_PCI_SETTINGS"] = Param{Name: "ADVANCED_PCI_SETTINGS", Default: "False(0)", Current: "False(0)", Next: "True(1)"}
	c := byParam(Judge(q, false))["ADVANCED_PCI_SETTINGS"]
	assert.False(t, c.Met, "set but not in force")
	assert.Equal(t, "next boot: True(1)", c.Pending)
}

func TestParseErrors(t *testing.T) {
	b, err := os.ReadFile("testdata/mstconfig-not-root.txt")
	require.NoError(t, err)
	_, err = Parse(string(b))
	require.Error(t, err)
	assert.True(t, IsOpenError(err))

	_, err = Parse("Configurations:   Something Else\n")
	assert.ErrorContains(t, err, "unknown configuration header")
	_, err = Parse("")
	assert.ErrorContains(t, err, "no configuration table")
	_, err = Parse("Configurations:                                          Next Boot\n        FOO      1   2\n")
	assert.ErrorContains(t, err, "FOO: 2 values under 1 columns")
}

func TestNumberAndName(t *testing.T) {
	for in, want := range map[string]int64{"True(1)": 1, "False(0)": 0, "force_relax(1)": 1, "44": 44, "0x10": 16} {
		n, ok := Number(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, n, in)
	}
	for _, bad := range []string{"Array[0..15]", "N/A", "", "x(y)"} {
		_, ok := Number(bad)
		assert.False(t, ok, bad)
	}
	assert.Equal(t, "force_relax", Name("force_relax(1)"))
	assert.Equal(t, "44", Name("44"))
}

// A device the documents give no value for (BlueField-3): reported, not judged.
func TestJudgeUnknownDevice(t *testing.T) {
	q := load(t, "mstconfig-query-cx7-good.txt")
	q.DeviceType = "BlueField3"
	c := byParam(Judge(q, false))["MAX_ACC_OUT_READ"]
	assert.False(t, c.Judged)
	assert.Contains(t, c.Why, "no documented value for BlueField3")
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"mstconfig-query-cx7-good.txt", "mlxconfig-query-cx6.txt"} {
		b, _ := os.ReadFile("testdata/" + n)
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		if q, err := Parse(s); err == nil {
			_ = Judge(q, false)
		}
	})
}
