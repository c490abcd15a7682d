package dmi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

// A server's DMI: values kept, placeholders dropped, a root-only file that
// cannot be read named in Unreadable (not silently absent).
func TestRead(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{
		Dir + "/sys_vendor":     "NVIDIA\n",
		Dir + "/product_name":   "DGXH200\n",
		Dir + "/product_serial": "1660123456789\n",
		Dir + "/board_serial":   "To Be Filled By O.E.M.\n",
		Dir + "/bios_version":   "1.6.7\n",
		Dir + "/bios_date":      "05/14/2024\n",
		Dir + "/product_uuid":   "00000000-0000-0000-0000-000000000000\n",
		Dir + "/chassis_serial": "",
	})
	if os.Geteuid() != 0 { // root reads a 0000 file anyway
		p := filepath.Join(root.Dir(), Dir, "board_name")
		require.NoError(t, os.WriteFile(p, []byte("X13DEG\n"), 0o000))
	}
	i, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, "NVIDIA", i.SysVendor)
	assert.Equal(t, "DGXH200", i.Product)
	assert.Equal(t, "1660123456789", i.ProductSerial)
	assert.Equal(t, "1.6.7", i.BIOSVersion)
	assert.Empty(t, i.BoardSerial, "placeholder")
	assert.Empty(t, i.ProductUUID, "all-zero UUID")
	assert.Empty(t, i.ChassisSerial)
	if os.Geteuid() != 0 {
		assert.Equal(t, []string{"board_name"}, i.Unreadable)
	}
	assert.False(t, i.Empty())
}

// No /sys/class/dmi (ARM hosts, some containers): empty, no error.
func TestReadAbsent(t *testing.T) {
	i, err := Read(hostfstest.Tree(t, map[string]string{"/sys/": ""}))
	require.NoError(t, err)
	assert.True(t, i.Empty())
}

func TestValue(t *testing.T) {
	for in, want := range map[string]string{
		" Default string ": "", "Not Specified": "", "000000": "", "...": "", "S/N 42": "S/N 42",
		"0123456789": "", "PowerEdge XE9680": "PowerEdge XE9680",
	} {
		assert.Equal(t, want, Value(in), in)
	}
}
