//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/internal/budget"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/stretchr/testify/assert"
)

func TestEndsFailureOutcome(t *testing.T) {
	ends := []*End{{Role: "server"}, {Role: "client"}}
	vanished := fmt.Errorf("waiting for the peer's step: %w", &oob.Error{Kind: oob.ErrVanished, Msg: "peer vanished: closed"})
	spent := fmt.Errorf("the client's measurement: %w", budget.ErrExhausted)
	wc := errors.New("work completion error: retry exceeded")

	// The peer lost, the budget spent: the suite could not judge.
	f := endsFailure(ends, []error{vanished, spent}, []int{0, 1})
	assert.True(t, f.NotJudged)
	assert.Equal(t, "server: waiting for the peer's step: peer vanished: closed\nclient: the client's measurement: test budget exhausted", f.Cause)

	// One end's own failure beside a lost peer: the host fell short.
	f = endsFailure(ends, []error{vanished, wc}, []int{0, 1})
	assert.False(t, f.NotJudged)

	// A peer that reported its failure gave a verdict.
	assert.False(t, lostPeer(&oob.Error{Kind: oob.ErrPeer, Msg: "the server failed"}))
	assert.False(t, lostPeer(&oob.Error{Kind: oob.ErrToken, Msg: "wrong token"}))
	assert.True(t, lostPeer(&oob.Error{Kind: oob.ErrStalled, Msg: "heartbeats only"}))

	// A remedy the error carries leaves the cause for the remedy.
	mr := fmt.Errorf("registering: %w", &verdict.Failure{Msg: "GPU memory could not be registered with mlx5_0 (GDR_MR=auto): peermem: EINVAL", Remedy: "load nvidia_peermem"})
	f = endsFailure(ends, []error{nil, mr}, []int{1})
	assert.False(t, f.NotJudged)
	assert.Equal(t, "client: registering: GPU memory could not be registered with mlx5_0 (GDR_MR=auto): peermem: EINVAL", f.Cause)
	assert.Equal(t, "load nvidia_peermem", f.Remedy)
	assert.Equal(t, "client: "+mr.Error(), f.Cause+"; remedy: "+f.Remedy, "the log line stays today's")
}
