package oob

// Hostile peers against protocol v3 on 127.0.0.1: a fake client that
// records what the server tells it before (and without) proving anything, a
// fake server that records the whole handshake and then tries a dictionary
// of tokens offline, error frames sent before any proof, and a proven peer
// that names another host than the plan.

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dictionary is the attacker's word list; the run's token is among them.
var dictionary = []string{"spring2026", "winter2025", "summer2026", "autumn2024", "password"}

const runToken = "summer2026"

// rawConn wraps a connection and keeps every byte the other side sent.
type rawConn struct {
	net.Conn
	got bytes.Buffer
}

func (r *rawConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.got.Write(p[:n])
	return n, err
}

func (r *rawConn) send(t *testing.T, m Message) []byte {
	t.Helper()
	b, err := Encode(m)
	require.NoError(t, err)
	_, err = r.Write(b)
	require.NoError(t, err)
	return b
}

// startServer runs a real server for test with token and history, and
// returns its address; what Accept returns arrives on the channel.
func startServer(t *testing.T, test, token string, hist *History) (string, <-chan error) {
	t.Helper()
	so := opts(test, token)
	so.History, so.Logf, so.Timeout = hist, t.Logf, 2*time.Second
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	done := make(chan error, 1)
	go func() {
		s, err := ln.Accept()
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	return ln.Addr(), done
}

// A fake client learns nothing of the run from the server before it proves
// the token: the server's hello names no test and no host, and a wrong
// proof gets an error about the token only. Protocol v2's server hello
// carried the test name to anyone who connected.
func TestNoTestNameToUnprovenClient(t *testing.T) {
	hist := new(History)
	hist.Begin("TestSecretEarlier")
	addr, _ := startServer(t, "TestSecretNow", runToken, hist)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	r := &rawConn{Conn: c}
	_ = r.SetDeadline(time.Now().Add(2 * time.Second))
	guess := v3Hello("client", true, "winter2025")
	r.send(t, Message{Type: THello, Hello: guess})
	_, m, err := readPlain(r)
	require.NoError(t, err)
	require.Equal(t, THello, m.Type)
	r.send(t, Message{Type: TAuth, Auth: &Auth{Proof: make([]byte, proofLen)}})
	_, m, err = readPlain(r)
	require.NoError(t, err)
	assert.Equal(t, TError, m.Type)
	assert.Equal(t, "token", m.Error.Kind)
	_, _, err = readPlain(r)
	assert.Error(t, err, "nothing follows")
	for _, secret := range []string{"TestSecretNow", "TestSecretEarlier", "Secret"} {
		assert.NotContains(t, r.got.String(), secret, "the server told an unproven client %q", secret)
	}
}

// fakeClientTokenless completes the exchange without a token (anyone can)
// and claims test and done; it returns the bytes the server sent and the
// sealed reply.
func fakeClientTokenless(t *testing.T, addr, test string, done []string) (string, Message) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	r := &rawConn{Conn: c}
	_ = r.SetDeadline(time.Now().Add(2 * time.Second))
	h := &Hello{Version: Version, Test: helloSealed, Role: "client", Nonce: newNonce()}
	cp := newCPace(nil, cpaceCI, h.Nonce)
	h.Share = cp.share
	rawC := r.send(t, Message{Type: THello, Hello: h})
	rawS, m, err := readPlain(r)
	require.NoError(t, err)
	require.Equal(t, THello, m.Type)
	isk, err := cp.isk(h.Nonce, m.Hello.Share, true, nil, nil)
	require.NoError(t, err)
	k, err := deriveKeys(isk, h.Nonce, m.Hello.Nonce, rawC, rawS)
	require.NoError(t, err)
	r.send(t, Message{Type: TAuth, Auth: &Auth{Proof: proofWith(k.proofC, "client")}})
	_, a, err := readPlain(r)
	require.NoError(t, err)
	require.Equal(t, TAuth, a.Type, "without a token anyone completes the exchange")
	out := &sealer{key: k.c2s}
	b, err := out.seal(Message{Type: TIntro, Intro: &Intro{Test: test, Done: done, Host: "stranger"}})
	require.NoError(t, err)
	_, err = r.Write(b)
	require.NoError(t, err)
	raw, typ, fl, err := readFrame(r)
	require.NoError(t, err)
	reply, err := (&opener{key: k.s2c}).open(raw, typ, fl)
	require.NoError(t, err)
	return r.got.String(), reply
}

// Without GDR_TOKEN a stranger completes the exchange, but the server still
// tells it neither its test nor its history: a mismatched claim gets which
// side is behind, no names, no count. What that leaks (one membership bit
// per logged connection) is written in handshake.go's header.
func TestTokenlessServerWithholdsTest(t *testing.T) {
	for _, c := range []struct {
		name, test string
		done       []string
		lag        string
	}{
		{"other list", "TestProbe", []string{"TestX"}, lagLists},
		{"claims behind", "TestSecretEarlier", nil, lagClientBehind},
		{"claims ahead", "TestProbe", []string{"TestSecretNow"}, lagServerBehind},
	} {
		t.Run(c.name, func(t *testing.T) {
			hist := new(History)
			hist.Begin("TestSecretEarlier")
			addr, _ := startServer(t, "TestSecretNow", "", hist)
			got, reply := fakeClientTokenless(t, addr, c.test, c.done)
			require.Equal(t, TError, reply.Type)
			assert.Equal(t, "test", reply.Error.Kind)
			assert.Equal(t, c.lag, reply.Error.Lag)
			assert.Empty(t, reply.Error.Test)
			for _, secret := range []string{"TestSecretNow", "TestSecretEarlier", "one test"} {
				if secret == c.test || slices.Contains(c.done, secret) {
					continue // the stranger's own claim comes back in nothing but its own words
				}
				assert.NotContains(t, got, secret)
			}
			assert.Contains(t, reply.Error.Msg, "the server's test is not told without GDR_TOKEN")
		})
	}
}

// v2Transcript is what a fake server saw of a v2 client: both hellos as
// sent and the client's proof.
type v2Transcript struct {
	rawC, rawS, cn, sn, proof []byte
}

// v2Check is the dictionary check on a v2 transcript: protocol v2 keyed the
// client's proof with HKDF-SHA256(token, Nc|Ns, "gdrconf-oob/2 "|T), so every
// candidate can be tried offline (the derivation as v2's handshake.go had
// it in deriveKeys and proofWith).
func v2Check(tr v2Transcript, candidate string) bool {
	th := sha256.New()
	th.Write(tr.rawC)
	th.Write(tr.rawS)
	okm, err := hkdf.Key(sha256.New, []byte(candidate), append(slices.Clone(tr.cn), tr.sn...), "gdrconf-oob/2 "+string(th.Sum(nil)), 4*sha256.Size)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, okm[:32])
	m.Write([]byte("gdrconf-oob/2 client proof"))
	return hmac.Equal(m.Sum(nil), tr.proof)
}

// v2ClientTranscript is what a v2 client sent a fake server: the v2 hello
// (with the test name) and the proof v2 computed before the server proved
// anything.
func v2ClientTranscript(t *testing.T, token string) v2Transcript {
	t.Helper()
	cn, sn := newNonce(), newNonce()
	rawC, err := Encode(Message{Type: THello, Hello: &Hello{Version: 2, Test: "TestPP03Write/rail0", Role: "client", Nonce: cn, HasToken: true}})
	require.NoError(t, err)
	rawS, err := Encode(Message{Type: THello, Hello: &Hello{Version: 2, Test: "TestPP03Write/rail0", Role: "server", Nonce: sn, HasToken: true}})
	require.NoError(t, err)
	tr := v2Transcript{rawC: rawC, rawS: rawS, cn: cn, sn: sn}
	th := sha256.New()
	th.Write(rawC)
	th.Write(rawS)
	okm, err := hkdf.Key(sha256.New, []byte(token), append(slices.Clone(cn), sn...), "gdrconf-oob/2 "+string(th.Sum(nil)), 4*sha256.Size)
	require.NoError(t, err)
	m := hmac.New(sha256.New, okm[:32])
	m.Write([]byte("gdrconf-oob/2 client proof"))
	tr.proof = m.Sum(nil)
	return tr
}

// v3Transcript is everything a fake server saw and chose in a v3
// handshake with the real client: both hellos as sent, its own secret
// scalar, and the client's proof.
type v3Transcript struct {
	rawC, rawS []byte
	hc, hs     *Hello
	self       *cpaceParty // the fake server's own CPace state (its scalar)
	proof      []byte
}

// fakeServer accepts one connection, plays the server's part of v3 with
// its one online guess at the token, and records everything; the client's
// Dial ends when the fake closes.
func fakeServer(t *testing.T, guess string) (string, <-chan v3Transcript) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	out := make(chan v3Transcript, 1)
	go func() {
		defer close(out)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		var tr v3Transcript
		var m Message
		if tr.rawC, m, err = readPlain(c); err != nil || m.Type != THello {
			return
		}
		tr.hc = m.Hello
		tr.self = newCPace([]byte(guess), cpaceCI, tr.hc.Nonce)
		tr.hs = &Hello{Version: Version, Test: helloSealed, Role: "server", Nonce: newNonce(), HasToken: true, Share: tr.self.share}
		if tr.rawS, err = sendPlain(c, Message{Type: THello, Hello: tr.hs}, time.Now().Add(time.Second)); err != nil {
			return
		}
		if _, m, err = readPlain(c); err != nil || m.Type != TAuth {
			return
		}
		tr.proof = m.Auth.Proof
		out <- tr
	}()
	return ln.Addr().String(), out
}

// v3Check is the best a fake server can do with a v3 transcript for a
// candidate token: the client's key is ya*Yb, and the only such value the
// fake can compute is yb*Ya, which equals it only when the client's token
// was the fake's own online guess. For any other candidate it would need
// ya*yb*g(guess) from Ya = ya*g(candidate): the discrete logarithm problem
// on ristretto255; no computation from the candidate exists, so the
// candidate does not enter this function at all.
func v3Check(tr v3Transcript, _ string) bool {
	isk, err := tr.self.isk(tr.hc.Nonce, tr.hc.Share, false, nil, nil)
	if err != nil {
		return false
	}
	k, err := deriveKeys(isk, tr.hc.Nonce, tr.hs.Nonce, tr.rawC, tr.rawS)
	if err != nil {
		return false
	}
	return hmac.Equal(proofWith(k.proofC, "client"), tr.proof)
}

// A fake server recovers a weak token offline from a v2 transcript, and has
// nothing to work with from a v3 one: the real client's transcript checks
// the fake's one online guess and no other word of the dictionary.
func TestFakeServerCannotGuessOffline(t *testing.T) {
	v2 := v2ClientTranscript(t, runToken)
	var found []string
	for _, w := range dictionary {
		if v2Check(v2, w) {
			found = append(found, w)
		}
	}
	assert.Equal(t, []string{runToken}, found, "v2: the token falls to an offline dictionary")

	for _, c := range []struct {
		guess string
		right bool
	}{{"winter2025", false}, {runToken, true}} {
		addr, rec := fakeServer(t, c.guess)
		co := opts("TestPP03Write/rail0", runToken)
		co.History, co.Timeout, co.Logf = new(History), 300*time.Millisecond, t.Logf
		_, err := Dial(addr, co)
		require.Error(t, err, "a fake server never completes the handshake")
		tr, ok := <-rec
		require.True(t, ok, "the fake recorded the client's proof")
		assert.NotContains(t, string(tr.rawC), "TestPP03Write", "the client's hello names no test")
		for _, w := range dictionary {
			assert.Equal(t, c.right, v3Check(tr, w), "guess %s, candidate %s: only the online guess is answered", c.guess, w)
		}
	}
}

// Error frames before the server proved the token are ignored: a stray that
// claims the client is behind (v2 made the client skip forward at once with
// the stray's text) is logged and counted, and the client goes on to meet
// the real server on the same port.
func TestPreProofErrorsIgnored(t *testing.T) {
	for _, when := range []string{"instead of its hello", "after our token proof"} {
		t.Run(when, func(t *testing.T) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := raw.Addr().String()
			evil := &ErrorMsg{Kind: "test", Msg: "the client is one test behind the server: skip forward to TestEvil", Test: "TestEvil", Lag: lagClientBehind}
			fakeDone := make(chan struct{})
			go func() {
				defer close(fakeDone)
				for range 2 { // two strays, then the port goes to the real server
					c, err := raw.Accept()
					if err != nil {
						return
					}
					_ = c.SetDeadline(time.Now().Add(2 * time.Second))
					if _, m, err := readPlain(c); err == nil && m.Type == THello && when != "instead of its hello" {
						h := v3Hello("server", true, "not the token")
						_, _ = sendPlain(c, Message{Type: THello, Hello: h}, time.Now().Add(time.Second))
						_, _, _ = readPlain(c) // the client's proof
					}
					_, _ = sendPlain(c, Message{Type: TError, Error: evil}, time.Now().Add(time.Second))
					c.Close()
				}
				raw.Close()
			}()
			var lg logs
			co := opts("TestReal", runToken)
			co.History, co.Logf, co.Timeout = new(History), lg.logf, 5*time.Second
			type res struct {
				s   *Session
				err error
			}
			dialed := make(chan res, 1)
			go func() { s, err := Dial(addr, co); dialed <- res{s, err} }()
			<-fakeDone
			so := opts("TestReal", runToken)
			so.History, so.Logf = new(History), t.Logf
			ln, err := Listen(addr, so)
			require.NoError(t, err)
			srv, err := ln.Accept()
			require.NoError(t, err)
			defer srv.Close()
			r := <-dialed
			require.NoError(t, r.err, "the strays did not end the client's wait")
			defer r.s.Close()
			assert.Equal(t, 2, r.s.Strays())
			assert.Contains(t, lg.text(), "ignored an error frame from "+addr)
			assert.Contains(t, lg.text(), "(unproven, not acted on)")
		})
	}

	// With only a stray there, the wait ends as any wait for an absent
	// server does: not a test mismatch, no skip forward, the stray's claim
	// quoted as unproven.
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer raw.Close()
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			_, _, _ = readPlain(c)
			_, _ = sendPlain(c, Message{Type: TError, Error: &ErrorMsg{Kind: "test", Msg: "skip forward to TestEvil", Test: "TestEvil", Lag: lagClientBehind}}, time.Now().Add(time.Second))
			c.Close()
		}
	}()
	co := opts("TestReal", "")
	co.History, co.Logf, co.Timeout = new(History), t.Logf, 400*time.Millisecond
	_, err = Dial(raw.Addr().String(), co)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrTest)
	assert.ErrorIs(t, err, ErrVanished)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, LagNone, e.Lag)
	assert.Empty(t, e.PeerTest)
	assert.Contains(t, err.Error(), "which says (unproven)")
	assert.Contains(t, err.Error(), "nothing it sent before its proof was acted on")
}

// A proven peer that names another host than the plan is refused on both
// sides with an error naming both hosts (a cluster pair whose ends do not
// run the same round).
func TestPeerHostChecked(t *testing.T) {
	so, co := opts("TestPP03Write/rail0", "pairtoken"), opts("TestPP03Write/rail0", "pairtoken")
	so.Host, so.PeerHost = "n1", "n2"
	co.Host, co.PeerHost = "n3", "n1" // n3 claims to be n1's peer
	so.Timeout, co.Timeout = 400*time.Millisecond, 400*time.Millisecond
	_, _, serr, cerr := pair(t, so, co)
	require.Error(t, serr)
	require.Error(t, cerr)
	assert.ErrorIs(t, serr, ErrPeerName)
	assert.Contains(t, serr.Error(), `the server expected its peer to be host "n2"`)
	assert.Contains(t, serr.Error(), `the proven peer names host "n3"`)
	assert.ErrorIs(t, cerr, ErrPeerName, "the client hears why, sealed")
	assert.Contains(t, cerr.Error(), `host "n3"`)

	// Matching names: each side holds the peer's word.
	so.PeerHost, co.Host = "n3", "n3"
	srv, cli, serr, cerr := pair(t, so, co)
	require.NoError(t, serr)
	require.NoError(t, cerr)
	assert.Equal(t, "n3", srv.PeerHost)
	assert.Equal(t, "n1", cli.PeerHost)
	assert.True(t, strings.HasPrefix(cli.Security(), "cpace"))
}
