//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/internal/budget"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestEndsFailureOutcome(t *testing.T) {
	ends := []*End{{Role: "server"}, {Role: "client"}}
	vanished := fmt.Errorf("waiting for the peer's step: %w", &oob.Error{Kind: oob.ErrVanished, Msg: "peer vanished: closed"})
	spent := fmt.Errorf("the client's measurement: %w", budget.ErrExhausted)
	wc := errors.New("work completion error: retry exceeded")

	// The peer lost, the budget spent: the suite could not judge.
	f := endsFailure(ends, []error{vanished, spent}, []int{0, 1})
	assert.Equal(t, verdict.NotJudged, f.Outcome)
	assert.Equal(t, "server: waiting for the peer's step: peer vanished: closed\nclient: the client's measurement: test budget exhausted", f.Cause)

	// One end's own failure beside a lost peer: the host fell short.
	f = endsFailure(ends, []error{vanished, wc}, []int{0, 1})
	assert.Equal(t, verdict.FellShort, f.Outcome)

	// A peer that reported its failure gave a verdict.
	assert.False(t, lostPeer(&oob.Error{Kind: oob.ErrPeer, Msg: "the server failed"}))
	assert.False(t, lostPeer(&oob.Error{Kind: oob.ErrToken, Msg: "wrong token"}))
	assert.True(t, lostPeer(&oob.Error{Kind: oob.ErrStalled, Msg: "heartbeats only"}))

	// A remedy the error carries is a field: the cause never held it.
	mr := fmt.Errorf("registering: %w", verdict.Failf("load nvidia_peermem", "GPU memory could not be registered with mlx5_0 (GDR_MR=auto): peermem: EINVAL"))
	f = endsFailure(ends, []error{nil, mr}, []int{1})
	assert.Equal(t, verdict.FellShort, f.Outcome)
	assert.Equal(t, "client: registering: GPU memory could not be registered with mlx5_0 (GDR_MR=auto): peermem: EINVAL", f.Cause)
	assert.Equal(t, "load nvidia_peermem", f.Remedy)
	assert.Equal(t, "client: registering: GPU memory could not be registered with mlx5_0 (GDR_MR=auto): peermem: EINVAL; remedy: load nvidia_peermem", f.Line(), "the log line")
}

// attrTB records a test's attributes and whether it was stopped.
type attrTB struct {
	testing.TB
	attrs   map[string]string
	stopped string
}

func (a *attrTB) Helper()          {}
func (a *attrTB) Attr(k, v string) { a.attrs[k] = v }
func (a *attrTB) Cleanup(func())   {}
func (a *attrTB) Fatalf(format string, args ...any) {
	a.stopped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// body runs fn as a test would, a Fatalf ending it; it returns the attributes.
func body(t *testing.T, fn func(t testing.TB)) *attrTB {
	a := &attrTB{TB: t, attrs: map[string]string{}}
	done := make(chan struct{})
	go func() { defer close(done); fn(a) }()
	<-done
	return a
}

func TestFailIfAndStopRecordTheOutcome(t *testing.T) {
	ends := []*End{{Role: "server"}, {Role: "client"}}
	lost := &oob.Error{Kind: oob.ErrVanished, Msg: "peer vanished: connection reset"}
	a := body(t, func(tb testing.TB) { FailIf(tb, ends, []error{lost, fmt.Errorf("%w: the server failed", oob.ErrPeer)}) })
	assert.Equal(t, "not_judged", a.attrs["gdr.outcome"])
	assert.Equal(t, "server: peer vanished: connection reset", a.attrs["gdr.cause"], "the peer's echo is not shown")
	assert.Equal(t, "server: peer vanished: connection reset", a.stopped)

	a = body(t, func(tb testing.TB) { Stop(tb, fmt.Errorf("rail 1: %w", budget.ErrExhausted)) })
	assert.Equal(t, "not_judged", a.attrs["gdr.outcome"])
	a = body(t, func(tb testing.TB) { Stop(tb, errors.New("rail 1: work completion error: retry exceeded")) })
	assert.Equal(t, "fell_short", a.attrs["gdr.outcome"])
	// A finding in the chain keeps its outcome and remedy.
	a = body(t, func(tb testing.TB) {
		Stop(tb, fmt.Errorf("rail 1: %w", verdict.NotJudgedf("check the tool's installation", "ethtool: exec format error")))
	})
	assert.Equal(t, "not_judged", a.attrs["gdr.outcome"])
	assert.Equal(t, "rail 1: ethtool: exec format error", a.attrs["gdr.cause"])
	assert.Equal(t, "check the tool's installation", a.attrs["gdr.remedy"])
	a = body(t, func(tb testing.TB) { connectFailed(tb, lost, nil) })
	assert.Equal(t, "not_judged", a.attrs["gdr.outcome"])
	a = body(t, func(tb testing.TB) {
		connectFailed(tb, lost, verdict.Failf("set the same value on both", "GDR_QPS differs"))
	})
	assert.Equal(t, "fell_short", a.attrs["gdr.outcome"], "this host's own reason to fail stands")
	assert.Equal(t, "GDR_QPS differs (the peer could not be told either: peer vanished: connection reset)", a.attrs["gdr.cause"])
}
