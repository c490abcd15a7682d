package oob

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logs collects a listener's log lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Strays before the real client (a port scan's connect-and-close, an HTTP
// probe, an oversized frame, a connection that never speaks, a peer that
// gives up after its hello) change nothing: the run proceeds, and each is
// logged with its address and why.
func TestStrayConnections(t *testing.T) {
	var lg logs
	so := opts("TestStray", "s3cret")
	so.History, so.Logf = new(History), lg.logf
	co := opts("TestStray", "s3cret")
	co.History = new(History)
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	type res struct {
		s   *Session
		err error
	}
	done := make(chan res, 1)
	go func() {
		s, err := ln.Accept()
		done <- res{s, err}
	}()

	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	var addrs []string
	c := dial() // connect and close
	addrs = append(addrs, c.LocalAddr().String())
	c.Close()
	c = dial() // garbage
	addrs = append(addrs, c.LocalAddr().String())
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	over := make([]byte, headerLen)
	putHeader(over, THello, 0, 1<<30)
	c = dial() // a frame header announcing 1 GiB
	addrs = append(addrs, c.LocalAddr().String())
	_, _ = c.Write(over)
	silent := dial() // never speaks: pending while the real client arrives
	c = dial()       // speaks the protocol, then goes away before its proof
	addrs = append(addrs, c.LocalAddr().String())
	b, err := Encode(Message{Type: THello, Hello: v3Hello("client", true, "")})
	require.NoError(t, err)
	_, _ = c.Write(b)
	_, m, err := readPlain(c)
	require.NoError(t, err)
	require.Equal(t, THello, m.Type)
	assert.Empty(t, m.Hello.Proof, "the server's hello carries no proof")
	assert.Equal(t, helloSealed, m.Hello.Test, "nor the test")
	c.Close()
	waitFor(t, "four rejections", func() bool { return len(ln.Rejected()) >= 4 })

	start := time.Now()
	cli, cerr := Dial(ln.Addr(), co)
	r := <-done
	require.NoError(t, cerr)
	require.NoError(t, r.err)
	t.Logf("handshake after the strays: %v", time.Since(start))
	defer cli.Close()
	defer r.s.Close()
	errc := make(chan error, 1)
	go func() { errc <- r.s.Barrier("after strays", 1) }()
	require.NoError(t, cli.Barrier("after strays", 1))
	require.NoError(t, <-errc)

	rej := ln.Rejected()
	require.Len(t, rej, 5, "%v", rej)
	why := map[string]string{}
	for _, x := range rej {
		why[x.Addr] = x.Why
	}
	assert.Contains(t, why[addrs[0]], "closed the connection before its hello")
	assert.Contains(t, why[addrs[1]], `bad magic "GET "`)
	assert.Contains(t, why[addrs[2]], "exceeds the 65536-byte limit")
	assert.Contains(t, why[addrs[3]], "after our hello, before its token proof")
	assert.Contains(t, why[silent.LocalAddr().String()], "still in its handshake when the server stopped accepting")
	text := lg.text()
	for _, a := range append(addrs, silent.LocalAddr().String()) {
		assert.Contains(t, text, "rejected connection from "+a)
	}
	assert.Contains(t, text, "oob: test TestStray: ")
}

// A stray alone: the server's wait ends at its deadline, and the message
// says what it turned away (not "the peer vanished" after a scan).
func TestStrayOnlyTimeout(t *testing.T) {
	so := opts("TestLonely", "")
	so.Timeout, so.Logf, so.History = 300*time.Millisecond, t.Logf, new(History)
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	go func() {
		if c, err := net.Dial("tcp", ln.Addr()); err == nil {
			c.Close()
		}
	}()
	_, err = ln.Accept()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Contains(t, err.Error(), "no valid peer connected")
	assert.Contains(t, err.Error(), "turned away 1 connection(s)")
	assert.Contains(t, err.Error(), "closed the connection before its hello")
}

// The server gives no token-derived bytes to a client that has not proven
// the token: a bad proof gets an error frame, never the server's proof.
func TestServerProvesOnlyAfterClient(t *testing.T) {
	so := opts("TestProof", "correct horse")
	so.Timeout, so.Logf, so.History = 500*time.Millisecond, t.Logf, new(History)
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	go func() { _, _ = ln.Accept() }()
	c, err := net.Dial("tcp", ln.Addr())
	require.NoError(t, err)
	defer c.Close()
	b, _ := Encode(Message{Type: THello, Hello: v3Hello("client", true, "")})
	_, _ = c.Write(b)
	_, m, err := readPlain(c)
	require.NoError(t, err)
	require.Equal(t, THello, m.Type)
	assert.Empty(t, m.Hello.Proof)
	b, _ = Encode(Message{Type: TAuth, Auth: &Auth{Proof: make([]byte, proofLen)}})
	_, _ = c.Write(b)
	_, m, err = readPlain(c)
	require.NoError(t, err)
	require.Equal(t, TError, m.Type, "a bad proof is answered with an error, not a proof")
	assert.Equal(t, "token", m.Error.Kind)
	_, _, err = readPlain(c)
	assert.ErrorIs(t, err, io.EOF, "nothing follows the error")
}

// A peer that sends only heartbeats cannot stall a wait: it ends at its cap
// (heartbeats do not extend it), naming the peer and what we waited for.
func TestHeartbeatOnlyPeer(t *testing.T) {
	for _, c := range []struct {
		name    string
		maxWait time.Duration
		want    string
	}{
		{"default cap", 0, "800ms = 4 x the 200ms bound"},
		{"MaxWait", 1000 * time.Millisecond, "1s (MaxWait)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			so, co := opts("TestBeats", ""), opts("TestBeats", "")
			so.Timeout, co.Timeout = 200*time.Millisecond, 200*time.Millisecond
			so.MaxWait = c.maxWait
			srv, cli, serr, cerr := pair(t, so, co)
			require.NoError(t, serr)
			require.NoError(t, cerr)
			// Heartbeats only, often (margin on a loaded machine), never
			// the result the server waits for.
			quit, sent := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sent)
				for {
					select {
					case <-quit:
						return
					case <-time.After(10 * time.Millisecond):
						if cli.Send(Message{Type: TSync, Sync: &Sync{Step: heartbeatStep}}) != nil {
							return
						}
					}
				}
			}()
			stop := func() {
				select {
				case <-quit:
				default:
					close(quit)
				}
				<-sent
			}
			defer stop()
			start := time.Now()
			_, err := srv.Recv(`the client's result "bw"`)
			el := time.Since(start)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrStalled)
			cap := 4 * so.Timeout
			if c.maxWait > 0 {
				cap = c.maxWait
			}
			assert.GreaterOrEqual(t, el, cap)
			assert.Less(t, el, cap+time.Second)
			for _, s := range []string{"peer stalled", cli.conn.LocalAddr().String(), "sent only heartbeats", `the client's result "bw"`, c.want, "TestBeats"} {
				assert.Contains(t, err.Error(), s)
			}
			t.Logf("wait ended after %v: %v", el, err)
			// The busy side learns why at its next wait.
			stop()
			err = cli.Barrier("done", 3)
			assert.ErrorIs(t, err, ErrPeer)
			assert.Contains(t, err.Error(), "gave up waiting")
		})
	}
}

// mitm sits between client and server on 127.0.0.1: server-to-client bytes
// pass as they are; client-to-server frames pass through edit once the
// handshake is done (sealed frames after the intro).
func mitm(t *testing.T, target string, edit func(i int, raw []byte) [][]byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		t.Cleanup(func() { c.Close(); s.Close() })
		go func() { _, _ = io.Copy(c, s) }()
		i := 0
		for {
			raw, typ, fl, err := readFrame(c)
			if err != nil {
				s.Close()
				return
			}
			out := [][]byte{raw}
			if fl == flagSealed && typ != TIntro {
				out = edit(i, raw)
				i++
			}
			for _, f := range out {
				if _, err := s.Write(f); err != nil {
					return
				}
			}
		}
	}()
	return ln.Addr().String()
}

// pairVia is pair with the client dialing through a man in the middle.
func pairVia(t *testing.T, token string, edit func(i int, raw []byte) [][]byte) (srv, cli *Session) {
	t.Helper()
	so, co := opts("TestMITM", token), opts("TestMITM", token)
	so.History, co.History, so.Logf = new(History), new(History), t.Logf
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var serr error
	done := make(chan struct{})
	go func() { defer close(done); srv, serr = ln.Accept() }()
	cli, cerr := Dial(mitm(t, ln.Addr(), edit), co)
	<-done
	require.NoError(t, serr)
	require.NoError(t, cerr)
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv, cli
}

// A replayed, a changed and a reordered frame are each rejected with an
// error that says which, on the receiving side; the sender hears why.
func TestFrameIntegrity(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(i int, raw []byte) [][]byte
		want string
	}{
		{"replayed", func(i int, raw []byte) [][]byte {
			if i == 0 {
				return [][]byte{raw, raw}
			}
			return [][]byte{raw}
		}, "replayed: frames up to 1 were already received"},
		{"changed verdict", func(i int, raw []byte) [][]byte {
			// The client's result says ok:false; make it say ok:true.
			if j := bytes.Index(raw, []byte(`"ok":false`)); j >= 0 {
				raw = bytes.Clone(raw)
				copy(raw[j:], `"ok":true `)
			}
			return [][]byte{raw}
		}, "fails its MAC check: it was changed on the way"},
		{"dropped", func(i int, raw []byte) [][]byte {
			if i == 0 {
				return nil
			}
			return [][]byte{raw}
		}, "sequence 2 where 1 was next: frames were dropped or reordered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, cli := pairVia(t, "s3cret", c.edit)
			errc := make(chan error, 1)
			go func() {
				_, err := cli.ExchangeResult(Result{Name: "check", OK: false, Msg: "data mismatch at byte 7"})
				if err == nil {
					err = cli.Barrier("next", 1)
				}
				if err == nil {
					_, err = cli.Recv("the server's verdict on the session")
				}
				errc <- err
			}()
			r, err := srv.ExchangeResult(Result{Name: "check", OK: true})
			if err == nil {
				assert.False(t, r.OK, "the verdict must arrive as sent")
				err = srv.Barrier("next", 1)
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrIntegrity)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "not trustworthy")
			cerr := <-errc
			require.Error(t, cerr)
			assert.ErrorIs(t, cerr, ErrPeer, "the client hears the server's reason")
			assert.Contains(t, cerr.Error(), c.want)
		})
	}
}

// Without a token frames are still sealed with sequence numbers (keys from
// an ephemeral key exchange), and the session says it is unauthenticated.
func TestUnauthenticatedSession(t *testing.T) {
	srv, cli := pairVia(t, "", func(i int, raw []byte) [][]byte {
		if i == 0 {
			return [][]byte{raw, raw}
		}
		return [][]byte{raw}
	})
	assert.False(t, srv.Authenticated())
	assert.Equal(t, "none (GDR_TOKEN unset)", cli.Security())
	go func() { _ = cli.Barrier("a", 0) }()
	require.NoError(t, srv.Barrier("a", 0))
	err := srv.Barrier("b", 0)
	assert.ErrorIs(t, err, ErrIntegrity)
	assert.Contains(t, err.Error(), "replayed")

	s2, c2, serr, cerr := pair(t, opts("T", "tok"), opts("T", "tok"))
	require.NoError(t, serr)
	require.NoError(t, cerr)
	assert.True(t, s2.Authenticated())
	assert.Equal(t, "cpace-ristretto255+hmac-sha256", c2.Security())
}

// v3Hello is a well-formed v3 hello with a fresh key share under token.
func v3Hello(role string, hasTok bool, token string) *Hello {
	n := newNonce()
	return &Hello{Version: Version, Test: helloSealed, Role: role, Nonce: n, HasToken: hasTok, Share: newCPace([]byte(token), cpaceCI, n).share}
}

// v1 frames, as the previous build wrote them, for talking to an old peer.
func v1Hello(role string) []byte {
	p, _ := json.Marshal(map[string]any{"version": 1, "test": "T", "role": role, "nonce": make([]byte, NonceLen), "has_token": false})
	b := make([]byte, headerLen+len(p))
	copy(b, "GDRo")
	b[4] = byte(THello)
	binary.BigEndian.PutUint32(b[8:], uint32(len(p)))
	copy(b[headerLen:], p)
	return b
}

// v1ReadFrame reads a frame by v1's rules (reserved bytes zero).
func v1ReadFrame(t *testing.T, c net.Conn) (Type, map[string]any) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var h [headerLen]byte
	_, err := io.ReadFull(c, h[:])
	require.NoError(t, err)
	require.Equal(t, "GDRo", string(h[:4]))
	require.Equal(t, []byte{0, 0, 0}, h[5:8], "v1 requires zero reserved bytes")
	p := make([]byte, binary.BigEndian.Uint32(h[8:]))
	_, err = io.ReadFull(c, p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(p, &m))
	return Type(h[4]), m
}

// A build of protocol v1 on the other side: both get a clear message.
func TestVersionMismatchWithV1(t *testing.T) {
	t.Run("v1 client, this server", func(t *testing.T) {
		so := opts("T", "")
		so.Timeout, so.Logf, so.History = 400*time.Millisecond, t.Logf, new(History)
		ln, err := Listen("127.0.0.1:0", so)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { _, err := ln.Accept(); errc <- err }()
		c, err := net.Dial("tcp", ln.Addr())
		require.NoError(t, err)
		defer c.Close()
		_, _ = c.Write(v1Hello("client"))
		typ, m := v1ReadFrame(t, c)
		require.Equal(t, TError, typ, "v1 reads a plain error frame")
		assert.Equal(t, "version", m["kind"])
		assert.Equal(t, "the server speaks oob protocol v3, the client v1: run the same gdrconf build on both hosts", m["msg"])
		err = <-errc
		assert.ErrorIs(t, err, ErrVersion)
		assert.Contains(t, err.Error(), "the server speaks oob protocol v3, the client v1")
	})
	t.Run("this client, v1 server", func(t *testing.T) {
		raw, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer raw.Close()
		go func() {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			// What v1's server did with a hello of another version.
			typ, m := v1ReadFrame(t, c)
			if typ != THello || m["version"] != float64(3) {
				return
			}
			b, _ := Encode(Message{Type: TError, Error: &ErrorMsg{Kind: "version", Msg: "the server speaks oob protocol v1, the client v3: run the same gdrconf build on both hosts"}})
			_, _ = c.Write(b)
			time.Sleep(200 * time.Millisecond)
		}()
		// Unproven, the error is not acted on at once: the client tries
		// again until its wait ends, then names what the server said.
		o := opts("T", "")
		o.History, o.Timeout, o.Logf = new(History), 500*time.Millisecond, t.Logf
		_, err = Dial(raw.Addr().String(), o)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrVersion)
		assert.Contains(t, err.Error(), "version mismatch")
		assert.Contains(t, err.Error(), "the server speaks oob protocol v1, the client v3")
		assert.Contains(t, err.Error(), "(unproven)")
	})
}

// A client one test behind (the server ran its test already) fails at once,
// told where the server is; its next test meets the server.
func TestClientBehindResync(t *testing.T) {
	sh, ch := new(History), new(History)
	sh.Begin("TestA") // the server ran TestA without the client
	so := opts("TestB", "tok")
	so.History, so.Logf = sh, t.Logf
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	type res struct {
		s   *Session
		err error
	}
	done := make(chan res, 1)
	go func() { s, err := ln.Accept(); done <- res{s, err} }()

	co := opts("TestA", "tok")
	co.History = ch
	start := time.Now()
	_, err = Dial(ln.Addr(), co)
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second, "no wait for the timeout")
	assert.ErrorIs(t, err, ErrTest)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, LagSelfBehind, e.Lag)
	assert.Equal(t, "TestB", e.PeerTest)
	assert.Contains(t, err.Error(), "the client is one test behind the server")
	assert.Contains(t, err.Error(), "skip forward to TestB")
	assert.NotContains(t, err.Error(), "-run filter")

	co.Test = "TestB"
	cli, err := Dial(ln.Addr(), co)
	require.NoError(t, err)
	defer cli.Close()
	r := <-done
	require.NoError(t, r.err)
	defer r.s.Close()
	rej := ln.Rejected()
	require.Len(t, rej, 1)
	assert.ErrorIs(t, rej[0].Kind, ErrTest)
}

// A server one test behind (the client ran the server's test already) ends
// that test at once; the client waits, and the server's next test meets it.
func TestServerBehindResync(t *testing.T) {
	sh, ch := new(History), new(History)
	ch.Begin("TestA") // the client ran TestA without the server
	so := opts("TestA", "tok")
	so.History, so.Logf = sh, t.Logf
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	addr := ln.Addr()
	co := opts("TestB", "tok")
	co.History = ch
	type res struct {
		s   *Session
		err error
	}
	cdone := make(chan res, 1)
	go func() { s, err := Dial(addr, co); cdone <- res{s, err} }()

	start := time.Now()
	_, err = ln.Accept()
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.ErrorIs(t, err, ErrTest)
	assert.Equal(t, LagSelfBehind, e.Lag)
	assert.Equal(t, "TestB", e.PeerTest)
	assert.Contains(t, err.Error(), "the server is one test behind the client")

	so.Test = "TestB"
	ln2, err := Listen(addr, so)
	require.NoError(t, err)
	srv, err := ln2.Accept()
	require.NoError(t, err)
	defer srv.Close()
	r := <-cdone
	require.NoError(t, r.err)
	defer r.s.Close()
	go func() { _ = r.s.Barrier("met", 0) }()
	require.NoError(t, srv.Barrier("met", 0))
}

// A client whose wait ends while the server stays behind says so.
func TestServerStaysBehind(t *testing.T) {
	ch := new(History)
	ch.Begin("TestA")
	so := opts("TestA", "tok")
	so.History, so.Logf = new(History), t.Logf
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	addr := ln.Addr()
	go func() {
		l := ln
		for range 100 { // the server keeps coming back at TestA
			if _, err := l.Accept(); err == nil || !errors.Is(err, ErrTest) {
				return
			}
			var err error
			if l, err = Listen(addr, so); err != nil {
				return
			}
		}
	}()
	co := opts("TestB", "tok")
	// Long enough that a loaded 2-core machine still answers each hello
	// within it (500 ms once timed out with "peer vanished" under make unit).
	co.History, co.Timeout = ch, 2*time.Second
	_, err = Dial(addr, co)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTest)
	assert.Contains(t, err.Error(), "stayed behind: it was still at test TestA when our wait for test TestB ended")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, LagPeerBehind, e.Lag)
}

// Resync drops what a failed step left in the stream (a result nobody read,
// an abort) and both sides go on from the same point.
func TestResync(t *testing.T) {
	srv, cli, serr, cerr := pair(t, opts("TestResync", "tok"), opts("TestResync", "tok"))
	require.NoError(t, serr)
	require.NoError(t, cerr)
	// Subtest 1: the client sends its result and a barrier; the server fails
	// locally before reading either and aborts.
	require.NoError(t, cli.Send(Message{Type: TResult, Result: &Result{Name: "sub1", OK: true}}))
	require.NoError(t, cli.Send(Message{Type: TSync, Sync: &Sync{Step: "sub1 done"}}))
	srv.Abort("failed", "server: sub1 failed locally")
	// Subtest 2 starts with a resync on both sides.
	type res struct {
		n   int
		err error
	}
	rc := make(chan res, 1)
	go func() { n, err := cli.Resync("sub2"); rc <- res{n, err} }()
	n, err := srv.Resync("sub2")
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the server dropped the client's result and barrier")
	r := <-rc
	require.NoError(t, r.err)
	assert.Equal(t, 1, r.n, "the client dropped the server's abort")
	go func() { _ = cli.Barrier("sub2 go", 0) }()
	require.NoError(t, srv.Barrier("sub2 go", 0))

	// Different points are a clear error.
	go func() { _, _ = cli.Resync("sub3") }()
	_, err = srv.Resync("sub4")
	assert.ErrorIs(t, err, ErrProtocol)
	assert.Contains(t, err.Error(), `resynced at "sub3", we at "sub4"`)
}

// Heartbeats and readers beside Within, then Abort and Close from several
// goroutines at once (run with -race: make test does). Within itself belongs
// to one goroutine (restores nest).
func TestConcurrentUse(t *testing.T) {
	so, co := opts("TestRace", "tok"), opts("TestRace", "tok")
	so.Timeout, co.Timeout = 200*time.Millisecond, 200*time.Millisecond
	srv, cli, serr, cerr := pair(t, so, co)
	require.NoError(t, serr)
	require.NoError(t, cerr)
	stop := cli.Heartbeat() // reads the bound while the test changes it
	var wg sync.WaitGroup
	wg.Go(func() { // the test's own goroutine: nested Withins
		for j := range 50 {
			r1 := cli.Within(time.Duration(100+j) * time.Millisecond)
			r2 := cli.Within(time.Second)
			r2()
			r1()
		}
	})
	wg.Go(func() { // a reader elsewhere (a report, a second heartbeat)
		for range 100 {
			_ = cli.Timeout()
		}
	})
	go func() { _ = srv.Barrier("x", 0) }()
	wg.Wait()
	require.NoError(t, cli.Barrier("x", 0))
	stop()
	stop() // twice is fine
	wg.Go(func() { cli.Abort("failed", "bye") })
	wg.Go(func() { cli.Close() })
	wg.Go(func() { cli.Close() })
	wg.Wait()
	assert.Equal(t, 200*time.Millisecond, cli.Timeout(), "every Within restored")
}

// FuzzOpen feeds the sealed-frame checks arbitrary bytes under a fixed key:
// errors only, never a panic, and only intact frames of the right sequence
// number pass.
func FuzzOpen(f *testing.F) {
	key := bytes.Repeat([]byte{7}, 32)
	ep := sampleEndpoint()
	for _, m := range []Message{
		{Type: TSync, Sync: &Sync{Step: "s", Iter: 1}},
		{Type: TEndpoint, Endpoint: &ep},
		{Type: TResult, Result: &Result{Name: "r", OK: true}},
		{Type: TError, Error: &ErrorMsg{Kind: "test", Msg: "m", Test: "T", Lag: lagLists}},
	} {
		b, err := (&sealer{key: key}).seal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, typ, fl, err := readFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		m, err := (&opener{key: key}).open(raw, typ, fl)
		if err != nil {
			var fe *FrameError
			var se *SealError
			if !errors.As(err, &fe) && !errors.As(err, &se) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		// It passed: sealing it again under the same key and sequence opens too.
		b2, err := (&sealer{key: key}).seal(m)
		if err != nil {
			t.Fatalf("opened %+v does not seal: %v", m, err)
		}
		raw2, typ2, fl2, err := readFrame(bytes.NewReader(b2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (&opener{key: key}).open(raw2, typ2, fl2); err != nil {
			t.Fatalf("resealed frame does not open: %v", err)
		}
	})
}
