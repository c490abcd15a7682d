package mlxconfig

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Unmet settings are one finding naming each and how to set them; a NIC
// whose judged settings are all met has none.
func TestUnmet(t *testing.T) {
	assert.Nil(t, Unmet("mlx5_0", "0000:17:00.0", load(t, "mstconfig-query-cx7-good.txt"), Judge(load(t, "mstconfig-query-cx7-good.txt"), false)))

	q := load(t, "mstconfig-query-cx7-bad.txt")
	f := Unmet("mlx5_0", "0000:17:00.0", q, Judge(q, false))
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "mlx5_0", f.Device)
	assert.Equal(t, "nic firmware settings", f.Part)
	assert.Regexp(t, `^mlx5_0 \(0000:17:00\.0, ConnectX7\): firmware settings differ from the documented values for GPUDirect: ADVANCED_PCI_SETTINGS False\(0\), documented True\(1\).*; MAX_ACC_OUT_READ absent from the query`, f.Cause)
	assert.Equal(t, "set them with mstconfig -d 0000:17:00.0 set <NAME>=<value> (or mlxconfig), then reboot or mlxfwreset; the suite only reads them", f.Remedy)
	assert.Regexp(t, `^ADVANCED_PCI_SETTINGS: .*; MAX_ACC_OUT_READ: `, f.Source)
}

func TestParseAt(t *testing.T) {
	b, err := os.ReadFile("testdata/mstconfig-query-cx7-good.txt")
	require.NoError(t, err)
	q, err := ParseAt(string(b), "mstconfig -d 0000:17:00.0 -e query")
	require.NoError(t, err)
	assert.NotEmpty(t, q.Params)

	_, err = ParseAt("", "rec.txt")
	f, ok := verdict.As(err)
	require.True(t, ok)
	assert.Equal(t, verdict.NotJudged, f.Kind())
	assert.Regexp(t, `^rec\.txt: no configuration table`, f.Cause)
	assert.Equal(t, "run the query by hand and compare with the layout docs/checks.md describes", f.Remedy)
}
