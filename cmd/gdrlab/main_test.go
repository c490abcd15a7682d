package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// LAB_REPEAT: 1 to 20 runs; anything else fails naming the value.
func TestParseRepeat(t *testing.T) {
	for v, want := range map[string]int{"1": 1, "3": 3, " 20 ": 20} {
		n, err := parseRepeat(v)
		require.NoError(t, err, v)
		assert.Equal(t, want, n, v)
	}
	for _, v := range []string{"0", "-1", "21", "three", "", "2.5"} {
		_, err := parseRepeat(v)
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "LAB_REPEAT=")
		assert.Contains(t, err.Error(), v)
	}
}
