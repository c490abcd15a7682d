package budget

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNoDeadline(t *testing.T) {
	var b Budget
	now := time.Now()
	assert.False(t, b.Has())
	d, clipped := b.Bound(time.Hour, now)
	assert.Equal(t, time.Hour, d)
	assert.False(t, clipped)
	require.NoError(t, b.Start("TestX", now))
	b = New(now, false, Reserve)
	assert.False(t, b.Has())
}

func TestBoundKeepsTheReserve(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New(now.Add(60*time.Second), true, 5*time.Second)
	assert.True(t, b.Has())
	assert.Equal(t, 55*time.Second, b.Left(now))

	d, clipped := b.Bound(30*time.Second, now)
	assert.Equal(t, 30*time.Second, d, "a wait shorter than what is left keeps its bound")
	assert.False(t, clipped)

	d, clipped = b.Bound(45*time.Second, now.Add(20*time.Second))
	assert.Equal(t, 35*time.Second, d, "a longer one ends with the budget")
	assert.True(t, clipped)

	d, clipped = b.Bound(time.Second, now.Add(58*time.Second))
	assert.Equal(t, time.Duration(0), d, "inside the reserve nothing is left")
	assert.True(t, clipped)
}

func TestStartAndCut(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := New(now.Add(10*time.Second), true, 5*time.Second)
	require.NoError(t, b.Start("TestPP03Write", now))

	err := b.Start("TestPP08Bandwidth", now.Add(6*time.Second))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrExhausted))
	assert.Contains(t, err.Error(), "TestPP08Bandwidth not started")
	assert.Contains(t, err.Error(), "-test.timeout")
	assert.Contains(t, err.Error(), "4s away")

	err = b.Cut("waiting for the peer's result", now.Add(5*time.Second))
	assert.True(t, errors.Is(err, ErrExhausted))
	assert.Contains(t, err.Error(), "waiting for the peer's result: cut short 5s before the test binary's deadline")
}
