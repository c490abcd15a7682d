package oob

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NonceLen is the length of hello nonces.
const NonceLen = 16

const proofLen = sha256.Size

// Options configure one session.
type Options struct {
	Test    string        // test name; both sides must run the same test
	Token   string        // GDR_TOKEN; "" = unauthenticated
	Timeout time.Duration // bound on every read, write, accept and dial
	Caps    []string      // capabilities this side offers (e.g. mem:gpu)
	// Version overrides the protocol version (tests of version mismatch only).
	Version int
}

func (o Options) version() int {
	if o.Version != 0 {
		return o.Version
	}
	return Version
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 30 * time.Second
	}
	return o.Timeout
}

// Kinds of session failure, so callers and users can tell them apart.
var (
	ErrVanished = errors.New("peer vanished")
	ErrToken    = errors.New("wrong token")
	ErrVersion  = errors.New("protocol version mismatch")
	ErrTest     = errors.New("peer runs a different test")
	ErrPeer     = errors.New("peer reported a failure")
	ErrProtocol = errors.New("protocol violation")
)

// Error is a session failure: Kind is one of the Err* values above.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

// Session is one test's connection to the peer.
type Session struct {
	conn     net.Conn
	role     string
	opt      Options
	peer     string
	PeerCaps []string
	closed   bool
	wmu      sync.Mutex // heartbeats write concurrently with the test
}

// Listener is the server's socket for one test session.
type Listener struct {
	ln  net.Listener
	opt Options
}

// Listen opens the server's socket on addr ("host:port"; port 0 picks one).
func Listen(addr string, opt Options) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("oob: listen on %s for test %s: %w (another test run on this host, or GDR_LISTEN names a port in use)", addr, opt.Test, err)
	}
	return &Listener{ln: ln, opt: opt}, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close closes the listening socket; safe to call twice.
func (l *Listener) Close() error {
	err := l.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Accept waits (at most Timeout) for exactly one peer, closes the listener and
// runs the server side of the hello.
func (l *Listener) Accept() (*Session, error) {
	defer l.Close() // exactly one peer per test session
	to := l.opt.timeout()
	if tl, ok := l.ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(time.Now().Add(to))
	}
	c, err := l.ln.Accept()
	if err != nil {
		if isTimeout(err) {
			return nil, &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
				"oob: no peer connected to %s within %v for test %s: start the same command on the other host with GDR_ROLE=client GDR_PEER=<this host>, or raise GDR_TIMEOUT",
				l.Addr(), to, l.opt.Test)}
		}
		return nil, fmt.Errorf("oob: accept on %s for test %s: %w", l.Addr(), l.opt.Test, err)
	}
	s := &Session{conn: c, role: "server", opt: l.opt, peer: c.RemoteAddr().String()}
	if err := s.serverHello(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Dial connects to the server at addr, retrying refused connections until
// Timeout (the server may still be finishing the previous test), and runs the
// client side of the hello.
func Dial(addr string, opt Options) (*Session, error) {
	to := opt.timeout()
	deadline := time.Now().Add(to)
	var last error
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
				"oob: could not reach the server %s within %v for test %s (last error: %v): start the same command there with GDR_ROLE=server, check GDR_PEER and the firewall, or raise GDR_TIMEOUT",
				addr, to, opt.Test, last)}
		}
		c, err := net.DialTimeout("tcp", addr, left)
		if err == nil {
			s := &Session{conn: c, role: "client", opt: opt, peer: addr}
			if err := s.clientHello(); err != nil {
				s.Close()
				return nil, err
			}
			return s, nil
		}
		last = err
		time.Sleep(min(100*time.Millisecond, max(time.Until(deadline), 0)))
	}
}

// Peer is the peer's address.
func (s *Session) Peer() string { return s.peer }

// Role is "server" or "client".
func (s *Session) Role() string { return s.role }

// Close ends the session; safe to call twice.
func (s *Session) Close() error {
	if s == nil || s.closed {
		return nil
	}
	s.closed = true
	return s.conn.Close()
}

// Send writes one message within Timeout.
func (s *Session) Send(m Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	to := s.opt.timeout()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(to))
	if _, err := s.conn.Write(b); err != nil {
		return s.ioError(err, "sending "+m.Type.String(), to)
	}
	return nil
}

// Recv reads the next message within Timeout; what names what we wait for,
// for the error text. A peer's Error message comes back as an *Error.
func (s *Session) Recv(what string) (Message, error) {
	to := s.opt.timeout()
	_ = s.conn.SetReadDeadline(time.Now().Add(to))
	m, err := ReadMessage(s.conn)
	for err == nil && m.Type == TSync && m.Sync.Step == heartbeatStep {
		// The peer is alive but busy (a long measurement): wait on.
		_ = s.conn.SetReadDeadline(time.Now().Add(to))
		m, err = ReadMessage(s.conn)
	}
	if err != nil {
		if IsFrameError(err) {
			return Message{}, &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: peer %s (test %s) while waiting for %s: %v", s.peer, s.opt.Test, what, err)}
		}
		return Message{}, s.ioError(err, "waiting for "+what, to)
	}
	if m.Type == TError {
		return Message{}, s.peerError(m.Error)
	}
	return m, nil
}

// expect receives a message of type t.
func (s *Session) expect(t Type, what string) (Message, error) {
	m, err := s.Recv(what)
	if err != nil {
		return m, err
	}
	if m.Type != t {
		err := &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: peer %s (test %s) sent %v while we waited for %s: the two hosts run different suite builds or got out of step", s.peer, s.opt.Test, m.Type, what)}
		s.Abort("protocol", err.Msg)
		return Message{}, err
	}
	return m, nil
}

// Abort tells the peer why we give up (best effort) so it fails with our reason.
func (s *Session) Abort(kind, msg string) {
	if s == nil || s.closed {
		return
	}
	b, err := Encode(Message{Type: TError, Error: &ErrorMsg{Kind: kind, Msg: msg}})
	if err != nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.conn.SetWriteDeadline(time.Now().Add(min(s.opt.timeout(), 2*time.Second)))
	_, _ = s.conn.Write(b)
}

const heartbeatStep = "\x00heartbeat"

// Heartbeat tells the peer every Timeout/4 that this side is alive while it
// is busy outside the session (a measurement in C), so the peer's waits stay
// bounded by Timeout yet survive a measurement longer than Timeout. Call
// the returned stop when the busy part ends.
func (s *Session) Heartbeat() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	every := max(s.opt.timeout()/4, 10*time.Millisecond)
	go func() {
		defer close(finished)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if s.Send(Message{Type: TSync, Sync: &Sync{Step: heartbeatStep}}) != nil {
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (s *Session) peerError(e *ErrorMsg) error {
	kind := ErrPeer
	switch e.Kind {
	case "version":
		kind = ErrVersion
	case "token":
		kind = ErrToken
	case "test":
		kind = ErrTest
	}
	prefix := map[error]string{ErrVersion: "version mismatch", ErrToken: "wrong token", ErrTest: "test mismatch", ErrPeer: "peer failed"}[kind]
	return &Error{Kind: kind, Msg: fmt.Sprintf("oob: %s: peer %s (test %s) says: %s", prefix, s.peer, s.opt.Test, e.Msg)}
}

func (s *Session) ioError(err error, doing string, to time.Duration) error {
	switch {
	case isTimeout(err):
		return &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
			"oob: peer vanished: %s (test %s) gave no answer within %v while we were %s: the other host's test died, hangs or lost its network; check its log, or raise GDR_TIMEOUT",
			s.peer, s.opt.Test, to, doing)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
			"oob: peer vanished: %s (test %s) closed the connection while we were %s: the other host's test failed or was killed; see its log",
			s.peer, s.opt.Test, doing)}
	}
	return &Error{Kind: ErrVanished, Msg: fmt.Sprintf("oob: peer %s (test %s) while %s: %v", s.peer, s.opt.Test, doing, err)}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func newNonce() []byte {
	b := make([]byte, NonceLen)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return b
}

// proof binds the token to both nonces, the test and the direction, so a
// proof cannot be replayed for another session or reflected back.
func proof(token, dir, test string, a, b []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	fmt.Fprintf(m, "gdrconf-oob|%s|%s|", dir, test)
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

func (s *Session) versionError(peerV int) error {
	sv, cv := s.opt.version(), peerV
	if s.role == "client" {
		sv, cv = peerV, s.opt.version()
	}
	msg := fmt.Sprintf("the server speaks oob protocol v%d, the client v%d: run the same gdrconf build on both hosts", sv, cv)
	s.Abort("version", msg)
	return &Error{Kind: ErrVersion, Msg: fmt.Sprintf("oob: version mismatch with %s (test %s): %s", s.peer, s.opt.Test, msg)}
}

func (s *Session) tokenError(msg string) error {
	s.Abort("token", msg)
	return &Error{Kind: ErrToken, Msg: fmt.Sprintf("oob: wrong token: %s (test %s): %s", s.peer, s.opt.Test, msg)}
}

func (s *Session) testError(peerTest string) error {
	msg := fmt.Sprintf("the %s runs test %s, the peer test %s: run the identical command (same -run filter) on both hosts", s.role, s.opt.Test, peerTest)
	s.Abort("test", msg)
	return &Error{Kind: ErrTest, Msg: fmt.Sprintf("oob: test mismatch with %s: %s", s.peer, msg)}
}

func tokenMismatch(serverHas, clientHas bool) string {
	switch {
	case serverHas && !clientHas:
		return "GDR_TOKEN is set on the server but not on the client: set the same GDR_TOKEN on both hosts"
	case !serverHas && clientHas:
		return "GDR_TOKEN is set on the client but not on the server: set the same GDR_TOKEN on both hosts"
	}
	return "GDR_TOKEN differs between the hosts: set the same value on both"
}

func (s *Session) clientHello() error {
	cn := newNonce()
	h := &Hello{Version: s.opt.version(), Test: s.opt.Test, Role: "client", Caps: s.opt.Caps, Nonce: cn, HasToken: s.opt.Token != ""}
	if err := s.Send(Message{Type: THello, Hello: h}); err != nil {
		return err
	}
	m, err := s.expect(THello, "the server's hello")
	if err != nil {
		return err
	}
	sh := m.Hello
	if sh.Version != s.opt.version() {
		return s.versionError(sh.Version)
	}
	if sh.Test != s.opt.Test {
		return s.testError(sh.Test)
	}
	if sh.HasToken != (s.opt.Token != "") {
		return s.tokenError(tokenMismatch(sh.HasToken, s.opt.Token != ""))
	}
	if !hmac.Equal(sh.Proof, proof(s.opt.Token, "server", s.opt.Test, cn, sh.Nonce)) {
		return s.tokenError(tokenMismatch(true, true))
	}
	s.PeerCaps = sh.Caps
	if err := s.Send(Message{Type: TAuth, Auth: &Auth{Proof: proof(s.opt.Token, "client", s.opt.Test, sh.Nonce, cn)}}); err != nil {
		return err
	}
	// The server confirms, so a rejection reaches us here and not later.
	_, err = s.expectSync("hello accepted", 0)
	return err
}

func (s *Session) serverHello() error {
	m, err := s.expect(THello, "the client's hello")
	if err != nil {
		return err
	}
	ch := m.Hello
	if ch.Version != s.opt.version() {
		return s.versionError(ch.Version)
	}
	if ch.Test != s.opt.Test {
		return s.testError(ch.Test)
	}
	if ch.HasToken != (s.opt.Token != "") {
		return s.tokenError(tokenMismatch(s.opt.Token != "", ch.HasToken))
	}
	sn := newNonce()
	h := &Hello{Version: s.opt.version(), Test: s.opt.Test, Role: "server", Caps: s.opt.Caps, Nonce: sn,
		HasToken: s.opt.Token != "", Proof: proof(s.opt.Token, "server", s.opt.Test, ch.Nonce, sn)}
	if err := s.Send(Message{Type: THello, Hello: h}); err != nil {
		return err
	}
	a, err := s.expect(TAuth, "the client's token proof")
	if err != nil {
		return err
	}
	if !hmac.Equal(a.Auth.Proof, proof(s.opt.Token, "client", s.opt.Test, sn, ch.Nonce)) {
		return s.tokenError(tokenMismatch(true, true))
	}
	s.PeerCaps = ch.Caps
	return s.Send(Message{Type: TSync, Sync: &Sync{Step: "hello accepted"}})
}

func (s *Session) expectSync(step string, iter int) (*Sync, error) {
	m, err := s.expect(TSync, fmt.Sprintf("barrier %q (iteration %d)", step, iter))
	if err != nil {
		return nil, err
	}
	if m.Sync.Step != step || m.Sync.Iter != iter {
		err := &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: peer %s (test %s) is at barrier %q iteration %d, we are at %q iteration %d: the hosts got out of step",
			s.peer, s.opt.Test, m.Sync.Step, m.Sync.Iter, step, iter)}
		s.Abort("protocol", err.Msg)
		return nil, err
	}
	return m.Sync, nil
}

// Barrier sends step/iter and waits for the peer to reach the same point.
func (s *Session) Barrier(step string, iter int) error {
	return s.BarrierSeed(step, iter, 0)
}

// BarrierSeed is Barrier carrying a value (e.g. a pattern seed) from the
// sender; it returns the peer's value.
func (s *Session) BarrierSeed(step string, iter int, seed uint64) error {
	_, err := s.BarrierValue(step, iter, seed)
	return err
}

// BarrierValue is a barrier that also exchanges one number each way.
func (s *Session) BarrierValue(step string, iter int, v uint64) (uint64, error) {
	if err := s.Send(Message{Type: TSync, Sync: &Sync{Step: step, Iter: iter, Seed: v}}); err != nil {
		return 0, err
	}
	m, err := s.expectSync(step, iter)
	if err != nil {
		return 0, err
	}
	return m.Seed, nil
}

// Agree exchanges readiness. If either side must skip, both get the same
// reason (server's first, then client's) and run is false.
func (s *Session) Agree(local Agree) (peer Agree, run bool, reason string, err error) {
	if err := s.Send(Message{Type: TAgree, Agree: &local}); err != nil {
		return Agree{}, false, "", err
	}
	m, err := s.expect(TAgree, "the peer's agreement to run")
	if err != nil {
		return Agree{}, false, "", err
	}
	peer = *m.Agree
	srv, cli := local, peer
	if s.role == "client" {
		srv, cli = peer, local
	}
	var rs []string
	if srv.Skip != "" {
		rs = append(rs, "server: "+srv.Skip)
	}
	if cli.Skip != "" {
		rs = append(rs, "client: "+cli.Skip)
	}
	return peer, len(rs) == 0, strings.Join(rs, "; "), nil
}

// ExchangeEndpoint sends ours and returns the peer's endpoint.
func (s *Session) ExchangeEndpoint(local Endpoint) (Endpoint, error) {
	if err := s.Send(Message{Type: TEndpoint, Endpoint: &local}); err != nil {
		return Endpoint{}, err
	}
	m, err := s.expect(TEndpoint, "the peer's RDMA endpoint")
	if err != nil {
		return Endpoint{}, err
	}
	return *m.Endpoint, nil
}

// ExchangeResult sends our result and returns the peer's; a peer result with
// OK false is not an error here (the caller decides).
func (s *Session) ExchangeResult(local Result) (Result, error) {
	if err := s.Send(Message{Type: TResult, Result: &local}); err != nil {
		return Result{}, err
	}
	m, err := s.expect(TResult, fmt.Sprintf("the peer's result %q", local.Name))
	if err != nil {
		return Result{}, err
	}
	if m.Result.Name != local.Name {
		err := &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: peer %s (test %s) sent result %q while we exchanged %q: the hosts got out of step", s.peer, s.opt.Test, m.Result.Name, local.Name)}
		s.Abort("protocol", err.Msg)
		return Result{}, err
	}
	return *m.Result, nil
}

// Within sets the bound for the following reads and writes to d (e.g. while
// the peer runs a long measurement) and returns a func that restores it.
func (s *Session) Within(d time.Duration) (restore func()) {
	old := s.opt.Timeout
	s.opt.Timeout = d
	return func() { s.opt.Timeout = old }
}

// Timeout is the current bound on each read and write.
func (s *Session) Timeout() time.Duration { return s.opt.timeout() }
