package kmod

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRelease(t *testing.T) {
	for in, want := range map[string][2]int{
		"6.18.44-fc-v657-gpu":          {6, 18},
		"5.14.0-427.13.1.el9_4.x86_64": {5, 14},
		"6.1.0-28-amd64\n":             {6, 1},
		"5.12":                         {5, 12},
		"4.18.0-553.el8_10.x86_64":     {4, 18},
	} {
		a, b, err := ParseRelease(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, [2]int{a, b}, in)
	}
	for _, bad := range []string{"", "6", "x.y", "6.-1", "0.1", ".5", "6..1", "66666.1"} {
		_, _, err := ParseRelease(bad)
		assert.Error(t, err, bad)
	}
	ok, err := AtLeast("6.18.44-fc", 5, 12)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, _ = AtLeast("5.11.0", 5, 12)
	assert.False(t, ok)
	ok, _ = AtLeast("5.12.0", 5, 12)
	assert.True(t, ok)
	ok, _ = AtLeast("4.18.0-553.el8", 5, 12)
	assert.False(t, ok)
}

func FuzzParseRelease(f *testing.F) {
	f.Add("6.18.44-fc-v657-gpu")
	f.Add("5.14.0-427.13.1.el9_4.x86_64")
	f.Fuzz(func(t *testing.T, s string) {
		a, b, err := ParseRelease(s)
		if err == nil && (a <= 0 || b < 0) {
			t.Fatalf("ParseRelease(%q) = %d.%d", s, a, b)
		}
	})
}
