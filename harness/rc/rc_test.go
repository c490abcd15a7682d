//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// rxeTree writes an rxe0 on eth0 with port 1 in state and the given
// hw_counters, and returns its root.
func rxeTree(t *testing.T, state, phys, oper string, hw map[string]string) *hostfs.Root {
	t.Helper()
	files := map[string]string{
		"sys/class/infiniband/rxe0/parent":             "eth0\n",
		"sys/class/infiniband/rxe0/node_type":          "1: CA\n",
		"sys/class/infiniband/rxe0/ports/1/state":      state + "\n",
		"sys/class/infiniband/rxe0/ports/1/phys_state": phys + "\n",
		"sys/class/infiniband/rxe0/ports/1/link_layer": "Ethernet\n",
		"sys/class/infiniband/rxe0/ports/1/rate":       "2.5 Gb/sec (1X SDR)\n",
		"sys/class/net/eth0/operstate":                 oper + "\n",
	}
	for k, v := range hw {
		files["sys/class/infiniband/rxe0/ports/1/hw_counters/"+k] = v + "\n"
	}
	return hostfstest.Tree(t, files)
}

func TestPortProblem(t *testing.T) {
	r := rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", nil)
	assert.Empty(t, portProblem(r, "rxe0", 1))
	r = rxeTree(t, "1: DOWN", "3: Disabled", "down", nil)
	assert.Equal(t, "rxe0 port 1 is DOWN, not ACTIVE (physical state Disabled); netdev eth0 is down", portProblem(r, "rxe0", 1))
	assert.Equal(t, "rxe0 has no port 2 (GDR_IB_PORT)", portProblem(r, "rxe0", 2))
	assert.Contains(t, portProblem(r, "mlx5_9", 1), "RDMA device mlx5_9")
}

// A stall is told by what the NIC counted since the connection, not by a
// guess: loss and retransmission, a peer that never answered, a dead link.
func TestStallEvidence(t *testing.T) {
	before := map[string]string{"sent_pkts": "100", "rcvd_pkts": "90", "completer_retry_err": "0", "rcvd_seq_err": "0",
		"retry_exceeded_err": "0", "link_downed": "0", "duplicate_request": "0"}
	e := &End{Cfg: config.Defaults(), Dev: "rxe0", Role: "client"}
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", before)
	require.NoError(t, e.markCounters())

	// Loss: retransmissions, then the NIC gave up.
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", map[string]string{"sent_pkts": "900", "rcvd_pkts": "300",
		"completer_retry_err": "12", "rcvd_seq_err": "3", "retry_exceeded_err": "1", "link_downed": "0", "duplicate_request": "0"})
	we := &verbs.WCError{WC: verbs.WC{Status: 12}, What: "RDMA WRITE"}
	// Wrapped as pingpong wraps it: the outer text was formatted already.
	wrapped := fmt.Errorf("queue pair 0 of 1: %w", we)
	got := e.stalled(wrapped, portSeen{})
	assert.ErrorIs(t, got, wrapped)
	msg := got.Error()
	assert.True(t, strings.HasPrefix(msg, "queue pair 0 of 1: RDMA WRITE: work completion error"), msg)
	assert.Contains(t, msg, "retry exceeded: the NIC gave up after its retransmissions (retry_exceeded_err +1)")
	assert.Contains(t, msg, "rxe0 port 1 counters since the connection")
	assert.Contains(t, msg, "completer_retry_err +12, rcvd_pkts +210, rcvd_seq_err +3, retry_exceeded_err +1, sent_pkts +800")
	assert.NotContains(t, msg, "unreachable GID/LID", "no three-way guess")

	// Retransmitting without giving up yet.
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", map[string]string{"sent_pkts": "900", "rcvd_pkts": "300",
		"completer_retry_err": "5", "rcvd_seq_err": "0", "retry_exceeded_err": "0", "link_downed": "0", "duplicate_request": "2"})
	te := &verbs.TimeoutError{What: "RDMA READ", Timeout: time.Second}
	require.NotEqual(t, te, e.stalled(te, portSeen{}))
	assert.Contains(t, te.Error(), "packets were lost or late and the NIC retransmitted (completer_retry_err +5, duplicate_request +2)")
	assert.NotContains(t, te.Error(), "GDR_TIMEOUT is too short")

	// A stall the NIC shows no cause for says so, with the port and counters.
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", before)
	te = &verbs.TimeoutError{What: "RDMA WRITE", Timeout: time.Second}
	require.NotEqual(t, te, e.stalled(te, portSeen{reads: 5}))
	assert.Contains(t, te.Error(), "likely cause (the NIC shows none): the peer stopped, or GDR_TIMEOUT is too short for this link; rxe0 port 1 is ACTIVE now; ACTIVE at each of 5 reads during the step")
	assert.Contains(t, te.Error(), "none rose")

	// Nothing came back: the peer is unreachable or gone.
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", map[string]string{"sent_pkts": "140", "rcvd_pkts": "90",
		"completer_retry_err": "0", "rcvd_seq_err": "0", "retry_exceeded_err": "0", "link_downed": "0", "duplicate_request": "0"})
	te = &verbs.TimeoutError{What: "RDMA WRITE", Timeout: time.Second}
	require.NotEqual(t, te, e.stalled(te, portSeen{}))
	assert.Contains(t, te.Error(), "sent 40 packets since the connection and received none: the peer is unreachable or gone")

	// The local link went down: named first.
	e.Root = rxeTree(t, "1: DOWN", "3: Disabled", "down", before)
	we = &verbs.WCError{WC: verbs.WC{Status: 4}, What: "RDMA WRITE"}
	got = e.stalled(we, portSeen{})
	require.NotEqual(t, we, got)
	assert.True(t, strings.HasPrefix(we.Evidence, "likely cause: the link went down during the test and is still down; "), we.Evidence)
	assert.NotContains(t, we.Evidence, "remedy", "the remedy is a field, not text")
	f, ok := verdict.As(got)
	require.True(t, ok, "the remedy travels as a finding in the chain")
	assert.Equal(t, portDownRemedy, f.Remedy)
	assert.ErrorIs(t, got, we, "and the chain still reaches the verbs error")
	assert.Contains(t, we.Evidence, "rxe0 port 1 is DOWN, not ACTIVE (physical state Disabled); netdev eth0 is down now")
	assert.Contains(t, we.Evidence, "none rose")

	// Other errors are left alone.
	other := errors.New("not a transfer")
	assert.Equal(t, other, e.stalled(other, portSeen{}))
}

func TestConnectError(t *testing.T) {
	err := connectError(errors.New("oob: could not reach the server"), "rxe0 port 1 is DOWN, not ACTIVE")
	assert.Equal(t, "rxe0 port 1 is DOWN, not ACTIVE (the peer could not be told either: oob: could not reach the server)", err.Error())

	behind := &oob.Error{Kind: oob.ErrTest, Lag: oob.LagSelfBehind, PeerTest: "TestPP05Read", Msg: "oob: test mismatch: ... skip forward to TestPP05Read"}
	err = connectError(behind, "")
	assert.True(t, strings.HasPrefix(err.Error(), "skipped forward: this host is behind its peer, which ran this test already and is at TestPP05Read"), err.Error())
	assert.ErrorIs(t, err, oob.ErrTest)

	remember("TestPP01Device", []oob.Rejection{{Addr: "198.18.0.9:4000", Why: "sent garbage", Kind: oob.ErrProtocol},
		{Addr: "198.18.0.2:4001", Why: "its token proof does not match", Kind: oob.ErrToken}})
	gone := &oob.Error{Kind: oob.ErrVanished, Msg: "oob: no valid peer connected to :18515 within 20s"}
	err = connectError(gone, "")
	assert.Contains(t, err.Error(), "earlier in this run this server turned away: 198.18.0.2:4001 in TestPP01Device: its token proof does not match")
	assert.NotContains(t, err.Error(), "198.18.0.9", "strays are not the peer")
}

// The shared connection's checkpoint: both ends in step and passed keep it;
// a side that failed makes both connect afresh, and what the failed
// subtest left unread does not reach the next one.
func TestSharedCheckpoint(t *testing.T) {
	pair := func(name string) []*End {
		opt := oob.Options{Test: name, Timeout: 2 * time.Second, History: new(oob.History), Logf: t.Logf}
		ln, err := oob.Listen("127.0.0.1:0", opt)
		require.NoError(t, err)
		var srv *oob.Session
		var serr error
		done := make(chan struct{})
		go func() { defer close(done); srv, serr = ln.Accept() }()
		cli, cerr := oob.Dial(ln.Addr(), opt)
		<-done
		require.NoError(t, serr)
		require.NoError(t, cerr)
		t.Cleanup(func() { srv.Close(); cli.Close() })
		return []*End{{Role: "server", Sess: srv}, {Role: "client", Sess: cli}}
	}
	ends := pair("TestShared")
	both, err := checkpoint(ends, "TestShared/WRITE/4096", true)
	require.NoError(t, err)
	assert.True(t, both)

	// The client sent its result, the server failed before reading it.
	require.NoError(t, ends[1].Sess.Send(oob.Message{Type: oob.TResult, Result: &oob.Result{Name: "bw WRITE 4096", OK: true}}))
	ends[0].Sess.Abort("failed", "server: completion error")
	both, err = checkpoint(ends, "TestShared/WRITE/65536", false)
	require.NoError(t, err)
	assert.False(t, both, "a failed subtest makes the next one connect afresh")
	errc := make(chan error, 1)
	go func() { errc <- ends[1].Sess.Barrier("next", 0) }()
	require.NoError(t, ends[0].Sess.Barrier("next", 0), "the stale result was dropped")
	require.NoError(t, <-errc)

	// A session the peer closed: an error that is not a timeout (reconnect).
	ends[1].Sess.Close()
	_, err = checkpoint(ends[:1], "TestShared/READ/4096", true)
	require.Error(t, err)
	assert.False(t, timedOut(err))
	assert.Contains(t, err.Error(), "server: ")
}

// A client one test behind its server (the server ran this test without
// it) skips forward at once with a message saying so, and its next test
// meets the server. Without a token the server does not tell its test.
func TestSkipForward(t *testing.T) {
	for _, tok := range []string{"tok", ""} {
		t.Run("token="+tok, func(t *testing.T) {
			sh, ch := new(oob.History), new(oob.History)
			sh.Begin("TestPP03Write/rail0") // the server ran PP-03 alone: the client's PP-03 ended early
			so := oob.Options{Test: "TestPP04WriteImm/rail0", Token: tok, Timeout: 5 * time.Second, History: sh, Logf: t.Logf}
			ln, err := oob.Listen("127.0.0.1:0", so)
			require.NoError(t, err)
			accepted := make(chan error, 1)
			go func() {
				s, err := ln.Accept()
				if s != nil {
					defer s.Close()
				}
				accepted <- err
			}()
			co := oob.Options{Test: "TestPP03Write/rail0", Token: tok, Timeout: 5 * time.Second, History: ch}
			start := time.Now()
			_, err = oob.Dial(ln.Addr(), co)
			require.Error(t, err)
			msg := connectError(err, "").Error()
			assert.Less(t, time.Since(start), 2*time.Second, "no wait for GDR_TIMEOUT")
			want := "skipped forward: this host is behind its peer, which ran this test already and is at TestPP04WriteImm/rail0"
			if tok == "" {
				want = "skipped forward: this host is behind its peer, which ran this test already and is further on (which test, a peer without GDR_TOKEN does not tell)"
				assert.NotContains(t, msg, "TestPP04WriteImm")
			}
			assert.True(t, strings.HasPrefix(msg, want), msg)

			co.Test = "TestPP04WriteImm/rail0"
			s, err := oob.Dial(ln.Addr(), co)
			require.NoError(t, err, "the next test meets the server")
			s.Close()
			require.NoError(t, <-accepted)
		})
	}
}

// Every completion error carries the same evidence as a stall, and names a
// likely cause: from the port and counters when they show one, else the
// status's own (lab: linkdown-5s ended in status 2 with no cause named).
func TestCompletionErrorEvidence(t *testing.T) {
	quiet := map[string]string{"sent_pkts": "100", "rcvd_pkts": "90", "retry_exceeded_err": "0",
		"link_downed": "0", "send_err": "0", "completer_retry_err": "0"}
	e := &End{Cfg: config.Defaults(), Dev: "rxe0", Role: "client"}
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", quiet)
	require.NoError(t, e.markCounters())
	bw := func(status int) (*verbs.WCError, error) {
		we := &verbs.WCError{WC: verbs.WC{Status: status}, What: "RDMA_WRITE bandwidth (after 100 of 200 iterations)"}
		return we, fmt.Errorf("queue pair 0 of 1: %w", we)
	}
	cases := []struct {
		name          string
		state, oper   string
		hw            map[string]string
		during        portSeen
		status        int
		want, notWant []string
	}{
		{name: "link down now (status 2)", state: "1: DOWN", oper: "down", status: 2,
			hw:      map[string]string{"sent_pkts": "400", "rcvd_pkts": "300", "link_downed": "1", "send_err": "3"},
			want:    []string{"likely cause: the link went down during the test", "the link went down and up (link_downed +1)", "could not put packets on the wire (send_err +3)", "rxe0 port 1 is DOWN, not ACTIVE", "netdev eth0 is down now", "counters since the connection"},
			notWant: []string{"bad WR or routing problem"}},
		{name: "link flapped and is back (status 2)", state: "4: ACTIVE", oper: "up", status: 2,
			during:  portSeen{reads: 30, problem: "rxe0 port 1 is DOWN, not ACTIVE; netdev eth0 is down, 2.0s into the step"},
			hw:      map[string]string{"sent_pkts": "400", "rcvd_pkts": "300", "link_downed": "1", "send_err": "1"},
			want:    []string{"likely cause: the link went down during the test and came back", "rxe0 port 1 is ACTIVE again now", "during the step: rxe0 port 1 is DOWN, not ACTIVE; netdev eth0 is down, 2.0s into the step", "link_downed +1"},
			notWant: []string{"bad WR or routing problem"}},
		{name: "retry exceeded, counted (status 12)", state: "4: ACTIVE", oper: "up", status: 12, during: portSeen{reads: 40},
			hw:      map[string]string{"sent_pkts": "900", "rcvd_pkts": "100", "retry_exceeded_err": "1", "completer_retry_err": "7"},
			want:    []string{"likely cause: retry exceeded: the NIC gave up after its retransmissions (retry_exceeded_err +1)", "rxe0 port 1 is ACTIVE now", "ACTIVE at each of 40 reads during the step", "completer_retry_err +7"},
			notWant: []string{"the peer did not acknowledge"}},
		{name: "retry exceeded, nothing counted (status 12)", state: "4: ACTIVE", oper: "up", status: 12, hw: quiet,
			want: []string{"likely cause (the NIC shows none): the peer did not acknowledge", "rxe0 port 1 is ACTIVE now", "none rose"}},
		{name: "local QP operation error, nothing counted (status 2)", state: "4: ACTIVE", oper: "up", status: 2, hw: quiet,
			want: []string{"likely cause (the NIC shows none): local QP operation error (bad WR or routing problem)", "none rose"}},
		{name: "remote access error (status 10)", state: "4: ACTIVE", oper: "up", status: 10, hw: quiet,
			want: []string{"likely cause (the NIC shows none): the peer's MR rejected the access"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hw := map[string]string{}
			for k, v := range quiet {
				hw[k] = v
			}
			for k, v := range c.hw {
				hw[k] = v
			}
			e.Root = rxeTree(t, c.state, "5: LinkUp", c.oper, hw)
			we, wrapped := bw(c.status)
			got := e.stalled(wrapped, c.during)
			assert.ErrorIs(t, got, wrapped)
			msg := got.Error()
			t.Log(msg)
			assert.True(t, strings.HasPrefix(msg, "queue pair 0 of 1: RDMA_WRITE bandwidth (after 100 of 200 iterations): work completion error"), msg)
			assert.Contains(t, msg, we.Evidence, "the wrapper's text carries the evidence")
			for _, w := range c.want {
				assert.Contains(t, msg, w)
			}
			for _, w := range c.notWant {
				assert.NotContains(t, msg, w)
			}
		})
	}
}

// The port watch names a link that went down during a step, with when.
func TestWatchPort(t *testing.T) {
	e := &End{Cfg: config.Defaults(), Dev: "rxe0", Role: "client"}
	e.Root = rxeTree(t, "4: ACTIVE", "5: LinkUp", "up", nil)
	stop := e.watchPort()
	time.Sleep(3 * portSample)
	state := filepath.Join(e.Root.Dir(), "sys/class/infiniband/rxe0/ports/1/state")
	require.NoError(t, os.WriteFile(state, []byte("1: DOWN\n"), 0o644))
	time.Sleep(3 * portSample)
	seen := stop()
	assert.GreaterOrEqual(t, seen.reads, 2)
	assert.Contains(t, seen.problem, "rxe0 port 1 is DOWN, not ACTIVE")
	assert.Contains(t, seen.problem, "s into the step")

	// ACTIVE throughout: reads, no problem; and no device, no watch.
	require.NoError(t, os.WriteFile(state, []byte("4: ACTIVE\n"), 0o644))
	stop = e.watchPort()
	time.Sleep(3 * portSample)
	seen = stop()
	assert.Positive(t, seen.reads)
	assert.Empty(t, seen.problem)
	assert.Equal(t, portSeen{}, (&End{}).watchPort()())
}

// GDR_MR=auto registers GPU memory through every path, peermem first (the
// suite checks both where NCCL would prefer dma-buf); a named path only
// through itself.
func TestMRPathOrder(t *testing.T) {
	assert.Equal(t, []string{verbs.PathPeermem, verbs.PathDmabuf}, mrPaths(config.MRAuto))
	assert.Equal(t, []string{verbs.PathPeermem, verbs.PathDmabuf}, mrPaths(""))
	assert.Equal(t, []string{verbs.PathPeermem}, mrPaths(config.MRPeermem))
	assert.Equal(t, []string{verbs.PathDmabuf}, mrPaths(config.MRDmabuf))
	// Every MR asks for relaxed ordering.
	assert.NotZero(t, Access&verbs.AccessRelaxed)
}

// The connect path's GRH: plain InfiniBand in one subnet sends none; a port
// whose flags require one (this one or, as its endpoint says, the peer's),
// subnets that differ and RoCE send one; gdr.grh says why and
// gdr.ib_tc_note follows. An older peer (no flag) counts as not requiring
// one; a GRH towards an all-zero GID is refused naming it.
func TestGRHPlan(t *testing.T) {
	ib := func(required, read bool) verbs.PortAttr {
		return verbs.PortAttr{LinkLayer: "InfiniBand", GRHRequired: required, FlagsRead: read, LID: 5}
	}
	gid := func(s string) []byte { return net.ParseIP(s).To16() }
	local := [16]byte(gid("fe80::248a:703:9a:1"))
	peer := func(g string, required *bool) oob.Endpoint {
		return oob.Endpoint{GID: gid(g), GIDIndex: 0, LID: 9, LinkLayer: "InfiniBand", GRHRequired: required}
	}
	yes, no := true, false
	cases := []struct {
		name   string
		port   verbs.PortAttr
		peer   oob.Endpoint
		use    bool
		why    string
		tcNote string
	}{
		{"plain IB", ib(false, true), peer("fe80::248a:703:9a:2", &no), false, "",
			"InfiniBand without GRH: the traffic class is not sent, the service level selects the virtual lane"},
		{"plain IB, older peer", ib(false, true), peer("fe80::248a:703:9a:2", nil), false, "",
			"InfiniBand without GRH: the traffic class is not sent, the service level selects the virtual lane"},
		{"this port requires a GRH", ib(true, true), peer("fe80::248a:703:9a:2", &no), true, verbs.GRHPortFlags,
			"InfiniBand with GRH (required by port flags): the traffic class is sent in the GRH, the service level selects the virtual lane"},
		{"the peer's port requires a GRH", ib(false, true), peer("fe80::248a:703:9a:2", &yes), true, verbs.GRHPeerFlags,
			"InfiniBand with GRH (required by the peer's port flags): the traffic class is sent in the GRH, the service level selects the virtual lane"},
		{"subnets differ", ib(false, false), peer("fec0:0:0:7::9a:2", nil), true, verbs.GRHSubnets,
			"InfiniBand with GRH (subnets differ): the traffic class is sent in the GRH, the service level selects the virtual lane"},
		{"RoCE", verbs.PortAttr{LinkLayer: "Ethernet"}, peer("::ffff:198.18.0.2", nil), true, verbs.GRHRoCE, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := grhPlan(c.port, local, c.peer)
			require.NoError(t, err)
			assert.Equal(t, c.use, g.Use)
			assert.Equal(t, c.why, g.Why)
			assert.Equal(t, c.tcNote, tcNote(g))
		})
	}

	bad := peer("::", &yes)
	bad.GIDIndex = 3
	_, err := grhPlan(ib(false, true), local, bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "all-zero GID (its GID index 3), and this connection needs a GRH (required by the peer's port flags)")
	_, err = grhPlan(ib(false, true), local, peer("::", &no))
	assert.NoError(t, err, "no GRH, no GID needed")

	assert.Nil(t, portGRH(ib(true, false)), "flags not read: not sent")
	assert.Equal(t, &yes, portGRH(ib(true, true)))
	assert.Equal(t, &no, portGRH(ib(false, true)))
}
