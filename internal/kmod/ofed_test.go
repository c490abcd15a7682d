package kmod

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseOFEDInfo(t *testing.T) {
	for in, want := range map[string]OFED{
		"MLNX_OFED_LINUX-23.10-1.1.9.0:\n": {"MLNX_OFED_LINUX", "23.10-1.1.9.0"},
		"MLNX_OFED_LINUX-5.8-1.0.1.1:":     {"MLNX_OFED_LINUX", "5.8-1.0.1.1"},
		"OFED-internal-24.07-0.6.1:":       {"OFED-internal", "24.07-0.6.1"},
		"MLNX_OFED_LINUX-4.9-7.1.0.0":      {"MLNX_OFED_LINUX", "4.9-7.1.0.0"},
	} {
		got, err := ParseOFEDInfo(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	v, _ := ParseOFEDInfo("MLNX_OFED_LINUX-23.10-1.1.9.0:")
	assert.Equal(t, "MLNX_OFED_LINUX-23.10-1.1.9.0", v.String())
	for _, bad := range []string{"", ":", "MLNX_OFED_LINUX", "23.10-1.1.9.0", "MLNX_OFED_LINUX-x.y:", "a-1.2:\nb-3.4:", "sh: ofed_info: not found"} {
		_, err := ParseOFEDInfo(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func FuzzParseOFEDInfo(f *testing.F) {
	f.Add("MLNX_OFED_LINUX-23.10-1.1.9.0:")
	f.Add("OFED-internal-24.07-0.6.1:")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseOFEDInfo(s)
		if err != nil {
			return
		}
		if v.Distro == "" || v.Release == "" {
			t.Fatalf("ParseOFEDInfo(%q) = %+v", s, v)
		}
	})
}
