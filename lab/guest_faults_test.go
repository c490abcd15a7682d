package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/oob"
)

// Each hostile connection the faults lab makes is turned away by a server
// of this build, for what it is: the replayed hello gets as far as the
// server's own hello and is refused where its proof belongs.
func TestHostileConnTurnedAway(t *testing.T) {
	ln, err := oob.Listen("127.0.0.1:0", oob.Options{Test: "TestPP01Device", Timeout: 3 * time.Second, History: new(oob.History), Logf: t.Logf})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = ln.Accept() }()
	var what []string
	for i := range 4 {
		what = append(what, hostileConn(ln.Addr(), i))
	}
	assert.Equal(t, []string{"garbage", "oversized", "replayed", "reflected"}, what)
	deadline := time.Now().Add(3 * time.Second)
	for len(ln.Rejected()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var why []string
	for _, r := range ln.Rejected() {
		why = append(why, r.Why)
	}
	all := strings.Join(why, "\n")
	assert.Contains(t, all, "sent garbage before its hello")
	assert.Contains(t, all, "exceeds the 65536-byte limit")
	assert.Contains(t, all, "sent a hello frame where its token proof belongs")
	assert.Contains(t, all, "only clients connect")
	ln.Close()
	<-done
}
