package oob

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/budget"
)

type cpRes struct {
	both bool
	err  error
}

func checkpoint(s *Session, point string, ok bool) <-chan cpRes {
	ch := make(chan cpRes, 1)
	go func() { b, err := s.Checkpoint(point, ok); ch <- cpRes{b, err} }()
	return ch
}

// A subtest that failed on one host only: the next subtest's checkpoint
// drops what the failed one left in the stream (the peer's unread result,
// an abort) and both hosts learn that one side failed, so both connect
// afresh; a checkpoint after a clean subtest keeps the session.
func TestCheckpoint(t *testing.T) {
	srv, cli, serr, cerr := pair(t, opts("TestCP", "tok"), opts("TestCP", "tok"))
	require.NoError(t, serr)
	require.NoError(t, cerr)

	// sub1: the client finished and sent its result; the server failed
	// before reading it and aborted.
	require.NoError(t, cli.Send(Message{Type: TResult, Result: &Result{Name: "bw", OK: true}}))
	srv.Abort("failed", "server: completion error")
	c := checkpoint(cli, "T/sub2", true)
	both, err := srv.Checkpoint("T/sub2", false)
	require.NoError(t, err)
	assert.False(t, both, "the server's side failed")
	r := <-c
	require.NoError(t, r.err)
	assert.False(t, r.both, "the client learns that the server failed")

	// sub2 ran clean on both: the session carries sub3.
	c = checkpoint(cli, "T/sub3", true)
	both, err = srv.Checkpoint("T/sub3", true)
	require.NoError(t, err)
	assert.True(t, both)
	r = <-c
	require.NoError(t, r.err)
	assert.True(t, r.both)
	go func() { _ = cli.Barrier("sub3 go", 0) }()
	require.NoError(t, srv.Barrier("sub3 go", 0), "nothing stale is left in the stream")
}

// A peer that closed its session fails the checkpoint at once (the caller
// then connects afresh), naming the peer.
func TestCheckpointClosedPeer(t *testing.T) {
	srv, cli, serr, cerr := pair(t, opts("TestCPClosed", ""), opts("TestCPClosed", ""))
	require.NoError(t, serr)
	require.NoError(t, cerr)
	cli.Close()
	start := time.Now()
	_, err := srv.Checkpoint("T/sub2", true)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Less(t, time.Since(start), time.Second)
	assert.Contains(t, err.Error(), "closed the connection")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.False(t, e.TimedOut, "a closed session can be replaced at once")
}

// A peer that never reaches the checkpoint ends it after the bound, marked
// as a wait that ran out (the caller fails the step instead of waiting again).
func TestCheckpointSilentPeer(t *testing.T) {
	so, co := opts("TestCPSilent", ""), opts("TestCPSilent", "")
	so.Timeout = 300 * time.Millisecond
	srv, _, serr, cerr := pair(t, so, co)
	require.NoError(t, serr)
	require.NoError(t, cerr)
	_, err := srv.Checkpoint("T/sub2", true)
	require.Error(t, err)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.True(t, e.TimedOut)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Contains(t, err.Error(), `resync at "T/sub2"`)
}

// Options.Deadline ends a wait that GDR_TIMEOUT would let go on, with an
// error that says the binary's deadline did it, not a vanished peer.
func TestDeadlineEndsWaits(t *testing.T) {
	so, co := opts("TestDL", ""), opts("TestDL", "")
	so.Timeout, co.Timeout = 10*time.Second, 10*time.Second
	srv, cli, serr, cerr := pair(t, so, co)
	require.NoError(t, serr)
	require.NoError(t, cerr)
	srv.opt.Deadline = time.Now().Add(300 * time.Millisecond)
	start := time.Now()
	err := srv.Barrier("never", 0)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.True(t, errors.Is(err, ErrBudget))
	assert.True(t, errors.Is(err, budget.ErrExhausted))
	assert.Contains(t, err.Error(), "-test.timeout")
	assert.Contains(t, err.Error(), `waiting for barrier "never"`)
	// The peer hears why at once instead of timing out itself.
	m, err := cli.Recv("the server's barrier")
	require.NoError(t, err)
	require.Equal(t, TSync, m.Type)
	_, err = cli.Recv("the server's next frame")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrPeer)
	assert.Contains(t, err.Error(), "-test.timeout")

	// Accept and Dial end at the deadline too.
	so.Deadline = time.Now().Add(300 * time.Millisecond)
	so.History = new(History)
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	_, err = ln.Accept()
	assert.True(t, errors.Is(err, ErrBudget), "%v", err)
	co.Deadline = time.Now().Add(300 * time.Millisecond)
	co.History = new(History)
	start = time.Now()
	_, err = Dial(ln.Addr(), co) // nothing listens any more
	assert.True(t, errors.Is(err, ErrBudget), "%v", err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Contains(t, err.Error(), "connecting to the server")
}
