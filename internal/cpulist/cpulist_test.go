package cpulist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"0-31": "0-31", "0-27,56-83\n": "0-27,56-83", "3,1,2": "1-3", "0-3,2-5": "0-5", "": "", "7": "7", "0-0": "0",
	} {
		s, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, s.String(), in)
	}
	for _, bad := range []string{"a", "1-", "-1", "3-1", "1,,2", "1 2", "0x1", "99999999", "0-70000", "+1"} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}

func TestCompare(t *testing.T) {
	p := func(s string) Set {
		v, err := Parse(s)
		require.NoError(t, err)
		return v
	}
	a, b, c := p("0-27,56-83"), p("28-55,84-111"), p("0-27,56-83")
	assert.True(t, a.Equal(c))
	assert.False(t, a.Equal(b))
	assert.False(t, a.Intersects(b))
	assert.True(t, a.Intersects(p("80-90")))
	assert.Equal(t, 56, a.Count())
	assert.True(t, a.Contains(60))
	assert.False(t, a.Contains(30))
	assert.Equal(t, 0, a.First())
	assert.Equal(t, -1, Set{}.First())
	assert.True(t, Set{}.Empty())
	assert.False(t, Set{}.Intersects(a))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-31", "0-27,56-83", "", "1,3-4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(v.String())
		if err != nil || !again.Equal(v) {
			t.Fatalf("Parse(%q) = %q, which does not read back (%v)", s, v, err)
		}
	})
}
