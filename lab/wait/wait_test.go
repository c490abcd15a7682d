package wait

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFor(t *testing.T) {
	bg := context.Background()
	n := 0
	require.NoError(t, For(bg, time.Now().Add(time.Minute), time.Millisecond, "the third call", func() bool { n++; return n == 3 }))
	assert.Equal(t, 3, n)

	// Past the deadline: ok still runs once, and the error names the wait.
	n = 0
	err := For(bg, time.Now().Add(-time.Second), time.Hour, "eth0 to appear", func() bool { n++; return false })
	assert.EqualError(t, err, "timed out waiting for eth0 to appear")
	var wt *Timeout
	assert.True(t, errors.As(err, &wt))
	assert.Equal(t, 1, n)

	// A context that ends stops the wait before its deadline, sleep included.
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	err = For(ctx, time.Now().Add(time.Hour), time.Hour, "the job", func() bool { return false })
	assert.Less(t, time.Since(start), time.Minute)
	assert.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, "stopped waiting for the job: context canceled")
}
