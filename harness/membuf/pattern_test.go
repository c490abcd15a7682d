package membuf

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPattern(t *testing.T) {
	a, b := make([]byte, 4093), make([]byte, 4093)
	Pattern(a, 1)
	Pattern(b, 1)
	assert.Equal(t, a, b, "deterministic")
	Pattern(b, 2)
	assert.NotEqual(t, a, b, "seed matters")
	// Not constant, and the odd tail is filled too.
	assert.NotEqual(t, bytes.Repeat(a[:1], len(a)), a)
	assert.NotEqual(t, make([]byte, 5), a[4088:])
	assert.NotEqual(t, IterSeed(7, 64, 0), IterSeed(7, 64, 1))
	assert.NotEqual(t, IterSeed(7, 64, 0), IterSeed(7, 65, 0))
	assert.Equal(t, IterSeed(7, 64, 3), IterSeed(7, 64, 3))
}

func TestCompare(t *testing.T) {
	want := make([]byte, 100)
	Pattern(want, 9)
	got := append([]byte(nil), want...)
	require.NoError(t, Compare(got, want, 0xa5))

	got[37] ^= 1
	got[80] ^= 1
	err := Compare(got, want, 0xa5)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 of 100 bytes differ, first at offset 37")
	assert.Contains(t, err.Error(), "corrupted")

	poisoned := bytes.Repeat([]byte{0xa5}, 100)
	err = Compare(poisoned, want, 0xa5)
	assert.ErrorContains(t, err, "nothing arrived")
	assert.ErrorContains(t, Compare(got[:10], want, 0xa5), "got 10 bytes, want 100")
}

func TestGuard(t *testing.T) {
	b := bytes.Repeat([]byte{0xa5}, 200)
	require.NoError(t, Guard(b, 100, 0xa5))
	b[130] = 0
	assert.ErrorContains(t, Guard(b, 100, 0xa5), "byte 30 past the 100-byte transfer")
	require.NoError(t, Guard(b, 200, 0xa5), "nothing after the buffer to check")
}

func TestGuardBefore(t *testing.T) {
	b := []byte{0xa5, 0xa5, 0xa5, 1, 2}
	require.NoError(t, GuardBefore(b, 3, 0xa5))
	b[1] = 0
	err := GuardBefore(b, 3, 0xa5)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "before the transfer's start")
}
