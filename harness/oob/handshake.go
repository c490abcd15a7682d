package oob

// The handshake (protocol v2), all frames plain:
//
//	client -> server  Hello{version, test, role "client", caps, nonce Nc, has_token, done}
//	server -> client  Hello{version, test, role "server", caps, nonce Ns, has_token}
//	                  (or Error version|token, and the server waits for the next connection)
//	client -> server  Auth{HMAC(Kc, "client")}
//	server -> client  Auth{HMAC(Ks, "server")}, only for a valid client proof and the same test
//	                  (or Error token|test)
//
// with transcript T = SHA-256(client hello frame | server hello frame) and
// Kc | Ks | K(c->s) | K(s->c) = HKDF-SHA256(secret GDR_TOKEN, salt Nc|Ns,
// info "gdrconf-oob/2 " | T). The server proves nothing to anyone who has not
// proven the token first, so a stranger gets no material for an offline
// guess at a human-chosen token. After the handshake every frame is sealed
// with its direction's key (codec.go).

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// NonceLen is the length of hello nonces.
const NonceLen = 16

const proofLen = sha256.Size

// History is the order in which one process began its tests' sessions. The
// handshake compares it with the peer's to tell a peer one test behind (an
// earlier test ended on one host without the other) from one running a
// different test list. Listen and Dial call Begin; a caller whose test ends
// before it connects may call Begin itself so the peer's diagnosis stays right.
type History struct {
	mu   sync.Mutex
	cur  string
	done []string
}

// DefaultHistory is the history of this process's sessions.
var DefaultHistory = new(History)

// maxHistory bounds what a History keeps.
const maxHistory = 4096

// Begin records test as the current one (the previous current one is done).
func (h *History) Begin(test string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if test == h.cur {
		return // loopback: both ends of one test in one process
	}
	if h.cur != "" {
		h.done = append(h.done, h.cur)
		if len(h.done) > maxHistory {
			h.done = slices.Delete(h.done, 0, len(h.done)-maxHistory)
		}
	}
	h.cur = test
}

// ago is how many tests ago test was current (1 = the test before this
// one), 0 if it was not begun before the current one.
func (h *History) ago(test string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.done) - 1; i >= 0; i-- {
		if h.done[i] == test {
			return len(h.done) - i
		}
	}
	return 0
}

// recent is the tail of the done list that fits a hello, oldest first.
func (h *History) recent() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, bytes := 0, 0
	for i := len(h.done) - 1; i >= 0 && n < maxDone; i-- {
		if l := len(h.done[i]); l > maxText || bytes+l > maxDoneBytes {
			break
		} else {
			bytes += l
		}
		n++
	}
	return slices.Clone(h.done[len(h.done)-n:])
}

func agoIn(done []string, test string) int {
	for i := len(done) - 1; i >= 0; i-- {
		if done[i] == test {
			return len(done) - i
		}
	}
	return 0
}

// Lag on the wire, from the server's point of view.
const (
	lagClientBehind = "client-behind"
	lagServerBehind = "server-behind"
	lagLists        = "lists"
)

// lagFromWire reads ErrorMsg.Lag as the server's view.
func lagFromWire(s string) (Lag, bool) {
	switch s {
	case "":
		return LagNone, true
	case lagClientBehind:
		return LagPeerBehind, true
	case lagServerBehind:
		return LagSelfBehind, true
	case lagLists:
		return LagLists, true
	}
	return LagNone, false
}

// flip turns the other side's view into ours.
func (l Lag) flip() Lag {
	switch l {
	case LagPeerBehind:
		return LagSelfBehind
	case LagSelfBehind:
		return LagPeerBehind
	}
	return l
}

func tests(n int) string {
	if n == 1 {
		return "one test"
	}
	return fmt.Sprintf("%d tests", n)
}

// mismatch explains a test mismatch seen by the server.
func mismatch(srvTest, cliTest string, hist *History, cliDone []string) (Lag, string) {
	if n := hist.ago(cliTest); n > 0 {
		return LagPeerBehind, fmt.Sprintf(
			"the client is %s behind the server: the client is at test %s, which the server ran already, the server at test %s; an earlier test ended on one host without the other (see both logs); the client should skip forward to %s",
			tests(n), cliTest, srvTest, srvTest)
	}
	if n := agoIn(cliDone, srvTest); n > 0 {
		return LagSelfBehind, fmt.Sprintf(
			"the server is %s behind the client: the server is at test %s, which the client ran already, the client at test %s and waiting for the server to get there; an earlier test ended on one host without the other (see both logs)",
			tests(n), srvTest, cliTest)
	}
	return LagLists, fmt.Sprintf(
		"the server runs test %s, the client test %s, and neither ran the other's test earlier in this run: the hosts run different test lists; run the identical command on both hosts (same build, same -run and -skip filters, same GDR_* settings)",
		srvTest, cliTest)
}

func newNonce() []byte {
	b := make([]byte, NonceLen)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return b
}

type keys struct {
	proofC, proofS, c2s, s2c []byte
}

// deriveKeys binds every key to the token, both nonces and both hellos.
func deriveKeys(token string, cn, sn, helloC, helloS []byte) (keys, error) {
	th := sha256.New()
	th.Write(helloC)
	th.Write(helloS)
	okm, err := hkdf.Key(sha256.New, []byte(token), append(slices.Clone(cn), sn...), "gdrconf-oob/2 "+string(th.Sum(nil)), 4*sha256.Size)
	if err != nil {
		return keys{}, fmt.Errorf("oob: session key derivation: %w", err)
	}
	return keys{okm[:32], okm[32:64], okm[64:96], okm[96:]}, nil
}

func proofWith(key []byte, who string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("gdrconf-oob/2 " + who + " proof"))
	return m.Sum(nil)
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

func versionMsg(server, client int) string {
	return fmt.Sprintf("the server speaks oob protocol v%d, the client v%d: run the same gdrconf build on both hosts", server, client)
}

// Listener is the server's socket for one test session.
type Listener struct {
	ln  net.Listener
	opt Options

	mu       sync.Mutex
	rejected []Rejection
}

// Rejection is a connection the server turned away while waiting for its peer.
type Rejection struct {
	Addr string
	Why  string
	Kind error // ErrToken, ErrVersion, ErrTest for a gdrconf peer that disagrees; ErrProtocol otherwise
}

// Listen opens the server's socket on addr ("host:port"; port 0 picks one).
func Listen(addr string, opt Options) (*Listener, error) {
	opt.history().Begin(opt.Test)
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

// Rejected lists the connections Accept turned away, in order.
func (l *Listener) Rejected() []Rejection {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rejected)
}

// maxPending bounds connections in their handshake at once; beyond it the
// oldest is dropped (a stuck stray, most likely).
const maxPending = 16

type acceptOutcome struct {
	s   *Session
	err error // ends Accept (this server is behind its client)
}

// Accept waits at most Timeout for the peer: it accepts connections until one
// completes a valid handshake, turning away (and logging) every other one: a
// port scan, a health probe, garbage, a peer with another version, token or
// test. It closes the listener when it returns.
func (l *Listener) Accept() (*Session, error) {
	defer l.Close()
	to := l.opt.timeout()
	deadline := time.Now().Add(to)
	if tl, ok := l.ln.(*net.TCPListener); ok {
		_ = tl.SetDeadline(deadline)
	}
	var (
		mu       sync.Mutex
		pending  []net.Conn
		stopping bool
		wg       sync.WaitGroup
	)
	won := make(chan acceptOutcome, 1)
	acceptErr := make(chan error, 1)
	remove := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		i := slices.Index(pending, c)
		if i >= 0 {
			pending = slices.Delete(pending, i, i+1)
		}
		return i >= 0
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			mu.Lock()
			if len(pending) >= maxPending {
				old := pending[0]
				pending = pending[1:]
				old.Close()
				l.reject(old.RemoteAddr().String(), fmt.Sprintf("dropped: more than %d connections were in their handshake at once", maxPending), ErrProtocol)
			}
			pending = append(pending, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, rej, out := l.handshake(c, deadline)
				mine := remove(c)
				if s == nil {
					defer c.Close()
				}
				if !mine {
					s.Close() // dropped above, already logged
					return
				}
				if rej != nil {
					mu.Lock()
					if stopping {
						rej.Why = "was still in its handshake when the server stopped accepting"
					}
					mu.Unlock()
					l.reject(rej.Addr, rej.Why, rej.Kind)
					return
				}
				select {
				case won <- acceptOutcome{s, out}:
				default:
					s.Close() // another connection won
				}
			}()
		}
	}()
	var out acceptOutcome
	var aerr error
	select {
	case out = <-won:
	case aerr = <-acceptErr:
		select {
		case out = <-won:
		default:
		}
	}
	l.Close()
	mu.Lock()
	stopping = true
	for _, c := range pending {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	select {
	case late := <-won:
		late.s.Close()
	default:
	}
	if out.s != nil || out.err != nil {
		return out.s, out.err
	}
	if isTimeout(aerr) {
		return nil, l.noPeer(to)
	}
	return nil, fmt.Errorf("oob: accept on %s for test %s: %w", l.Addr(), l.opt.Test, aerr)
}

func (l *Listener) reject(addr, why string, kind error) {
	l.mu.Lock()
	l.rejected = append(l.rejected, Rejection{Addr: addr, Why: why, Kind: kind})
	l.mu.Unlock()
	l.opt.logf("oob: test %s: rejected connection from %s: %s", l.opt.Test, addr, why)
}

// noPeer is Accept's timeout: what was turned away says what to fix.
func (l *Listener) noPeer(to time.Duration) error {
	rej := l.Rejected()
	kind, prefix := ErrVanished, ""
	for _, k := range []error{ErrToken, ErrVersion, ErrTest} {
		if slices.ContainsFunc(rej, func(r Rejection) bool { return r.Kind == k }) {
			kind = k
			prefix = map[error]string{ErrToken: "wrong token: ", ErrVersion: "version mismatch: ", ErrTest: "test mismatch: "}[k]
			break
		}
	}
	msg := fmt.Sprintf("oob: %sno valid peer connected to %s within %v for test %s", prefix, l.Addr(), to, l.opt.Test)
	if len(rej) > 0 {
		var parts []string
		for i, r := range rej {
			if i == 5 {
				parts = append(parts, fmt.Sprintf("and %d more", len(rej)-5))
				break
			}
			parts = append(parts, r.Addr+" "+r.Why)
		}
		msg += fmt.Sprintf(" (turned away %d connection(s): %s)", len(rej), strings.Join(parts, "; "))
	}
	if kind == ErrVanished {
		msg += ": start the same command on the other host with GDR_ROLE=client GDR_PEER=<this host>, or raise GDR_TIMEOUT"
	}
	e := &Error{Kind: kind, Msg: msg}
	if kind == ErrTest {
		for _, r := range rej {
			if r.Kind == ErrTest {
				e.Lag = LagLists
				if strings.HasPrefix(r.Why, "the client is ") {
					e.Lag = LagPeerBehind
				}
				break
			}
		}
	}
	return e
}

// readWhy says why the first frames of a connection were not a handshake.
func readWhy(err error, stage string) (string, error) {
	var fe *FrameError
	switch {
	case errors.As(err, &fe):
		return "sent garbage " + stage + ": " + fe.Reason, ErrProtocol
	case errors.Is(err, net.ErrClosed):
		return "was still in its handshake when the server stopped accepting", ErrProtocol
	case isTimeout(err):
		return "sent nothing complete " + stage + " before the wait ended", ErrProtocol
	case errors.Is(err, io.EOF):
		return "closed the connection " + stage + " (a port scan or health probe?)", ErrProtocol
	case isClosed(err):
		return "closed the connection in the middle of a frame " + stage, ErrProtocol
	}
	return fmt.Sprintf("failed %s: %v", stage, err), ErrProtocol
}

// sendPlain writes a handshake frame within the deadline.
func sendPlain(c net.Conn, m Message, deadline time.Time) ([]byte, error) {
	b, err := Encode(m)
	if err != nil {
		return nil, err
	}
	wd := time.Now().Add(2 * time.Second)
	if deadline.Before(wd) {
		wd = deadline
	}
	_ = c.SetWriteDeadline(wd)
	_, err = c.Write(b)
	return b, err
}

// handshake runs the server side on one connection: a session, or a
// Rejection, or (this server is behind its client) an error for Accept.
func (l *Listener) handshake(c net.Conn, deadline time.Time) (*Session, *Rejection, error) {
	addr := c.RemoteAddr().String()
	rej := func(why string, kind error) (*Session, *Rejection, error) {
		return nil, &Rejection{Addr: addr, Why: why, Kind: kind}, nil
	}
	_ = c.SetDeadline(deadline)
	opt := l.opt
	v := opt.version()
	hasTok := opt.Token != ""
	fail := func(kind, msg string, extra ...string) {
		e := &ErrorMsg{Kind: kind, Msg: msg}
		if len(extra) == 2 {
			e.Test, e.Lag = extra[0], extra[1]
		}
		_, _ = sendPlain(c, Message{Type: TError, Error: e}, deadline)
	}

	rawC, m, err := readPlain(c)
	if err != nil {
		return rej(readWhy(err, "before its hello"))
	}
	if m.Type != THello {
		return rej(fmt.Sprintf("sent a %v frame where a hello belongs: not a gdrconf client, or out of step", m.Type), ErrProtocol)
	}
	ch := m.Hello
	if ch.Role != "client" {
		return rej(fmt.Sprintf("sent a hello with role %s: only clients connect (is GDR_ROLE=server set on both hosts?)", ch.Role), ErrProtocol)
	}
	if ch.Version != v {
		msg := versionMsg(v, ch.Version)
		fail("version", msg)
		return rej(msg, ErrVersion)
	}
	if ch.HasToken != hasTok {
		msg := tokenMismatch(hasTok, ch.HasToken)
		fail("token", msg)
		return rej(msg, ErrToken)
	}
	sn := newNonce()
	rawS, err := sendPlain(c, Message{Type: THello, Hello: &Hello{Version: v, Test: opt.Test, Role: "server", Caps: opt.Caps, Nonce: sn, HasToken: hasTok}}, deadline)
	if err != nil {
		return rej(readWhy(err, "while we sent our hello"))
	}
	k, err := deriveKeys(opt.Token, ch.Nonce, sn, rawC, rawS)
	if err != nil {
		return rej(err.Error(), ErrProtocol)
	}
	_, a, err := readPlain(c)
	if err != nil {
		return rej(readWhy(err, "after our hello, before its token proof"))
	}
	switch a.Type {
	case TAuth:
	case TError:
		return rej("gave up after our hello: "+clipText(a.Error.Msg), ErrProtocol)
	default:
		return rej(fmt.Sprintf("sent a %v frame where its token proof belongs", a.Type), ErrProtocol)
	}
	if !hmac.Equal(a.Auth.Proof, proofWith(k.proofC, "client")) {
		msg := "its token proof does not match: " + tokenMismatch(true, true)
		if !hasTok {
			msg = "its handshake proof does not match ours (no token on either side): the hello was changed on the way"
		}
		fail("token", msg)
		return rej(msg, ErrToken)
	}
	if ch.Test != opt.Test {
		lag, msg := mismatch(opt.Test, ch.Test, opt.history(), ch.Done)
		wire := map[Lag]string{LagPeerBehind: lagClientBehind, LagSelfBehind: lagServerBehind, LagLists: lagLists}[lag]
		fail("test", msg, opt.Test, wire)
		if lag == LagSelfBehind {
			return nil, nil, &Error{Kind: ErrTest, Lag: LagSelfBehind, PeerTest: ch.Test,
				Msg: fmt.Sprintf("oob: test mismatch with %s: %s", addr, msg)}
		}
		return rej(msg, ErrTest)
	}
	if _, err := sendPlain(c, Message{Type: TAuth, Auth: &Auth{Proof: proofWith(k.proofS, "server")}}, deadline); err != nil {
		return rej(readWhy(err, "while we sent our proof"))
	}
	_ = c.SetDeadline(time.Time{})
	s := newSession(c, "server", opt, addr)
	s.PeerCaps = ch.Caps
	s.auth = hasTok
	s.out, s.in = &sealer{key: k.s2c}, &opener{key: k.c2s}
	return s, nil, nil
}

// Dial connects to the server at addr and runs the client side of the
// handshake. Until Timeout it retries what a server between two tests (or
// still finishing the previous one) gives: a refused or dropped connection,
// and a server that says it is behind us.
func Dial(addr string, opt Options) (*Session, error) {
	opt.history().Begin(opt.Test)
	to := opt.timeout()
	deadline := time.Now().Add(to)
	var last error
	for {
		left := time.Until(deadline)
		if left <= 0 {
			var e *Error
			if errors.As(last, &e) && e.Kind == ErrTest {
				return nil, &Error{Kind: ErrTest, Lag: LagPeerBehind, PeerTest: e.PeerTest, Msg: fmt.Sprintf(
					"oob: test mismatch: the server %s stayed behind: it was still at test %s when our wait for test %s ended after %v (%s)",
					addr, e.PeerTest, opt.Test, to, e.Msg)}
			}
			return nil, &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
				"oob: could not reach the server %s within %v for test %s (last error: %v): start the same command there with GDR_ROLE=server, check GDR_PEER and the firewall, or raise GDR_TIMEOUT",
				addr, to, opt.Test, last)}
		}
		c, err := net.DialTimeout("tcp", addr, left)
		if err == nil {
			s := newSession(c, "client", opt, addr)
			err = s.clientHandshake(deadline)
			if err == nil {
				return s, nil
			}
			s.Close()
			if !retryable(err) {
				return nil, err
			}
		}
		last = err
		time.Sleep(min(100*time.Millisecond, max(time.Until(deadline), 0)))
	}
}

// errRetry marks a handshake failure a later connection may not have.
type errRetry struct{ err error }

func (e *errRetry) Error() string { return e.err.Error() }
func (e *errRetry) Unwrap() error { return e.err }

func retryable(err error) bool {
	var r *errRetry
	return errors.As(err, &r)
}

func (s *Session) clientHandshake(deadline time.Time) error {
	c, opt := s.conn, s.opt
	_ = c.SetDeadline(deadline)
	v := opt.version()
	hasTok := opt.Token != ""
	cn := newNonce()
	rawC, err := sendPlain(c, Message{Type: THello, Hello: &Hello{Version: v, Test: opt.Test, Role: "client", Caps: opt.Caps,
		Nonce: cn, HasToken: hasTok, Done: opt.history().recent()}}, deadline)
	if err != nil {
		return s.hsError(err, "sending our hello")
	}
	rawS, m, err := readPlain(c)
	if err != nil {
		return s.hsError(err, "waiting for the server's hello")
	}
	switch m.Type {
	case TError:
		return s.peerError(m.Error)
	case THello:
	default:
		return s.hsProtocol(fmt.Sprintf("sent %v where its hello belongs", m.Type))
	}
	sh := m.Hello
	if sh.Role != "server" {
		return s.hsProtocol(fmt.Sprintf("answered with a hello of role %s", sh.Role))
	}
	if sh.Version != v {
		msg := versionMsg(sh.Version, v)
		s.Abort("version", msg)
		return &Error{Kind: ErrVersion, Msg: fmt.Sprintf("oob: version mismatch with %s (test %s): %s", s.peer, opt.Test, msg)}
	}
	if sh.HasToken != hasTok {
		msg := tokenMismatch(sh.HasToken, hasTok)
		s.Abort("token", msg)
		return &Error{Kind: ErrToken, Msg: fmt.Sprintf("oob: wrong token: %s (test %s): %s", s.peer, opt.Test, msg)}
	}
	k, err := deriveKeys(opt.Token, cn, sh.Nonce, rawC, rawS)
	if err != nil {
		return err
	}
	// We prove first, also when the test names differ: the server decides
	// who is behind, and only from a peer that knows the token.
	if _, err := sendPlain(c, Message{Type: TAuth, Auth: &Auth{Proof: proofWith(k.proofC, "client")}}, deadline); err != nil {
		return s.hsError(err, "sending our token proof")
	}
	_, a, err := readPlain(c)
	if err != nil {
		return s.hsError(err, "waiting for the server's token proof")
	}
	switch a.Type {
	case TError:
		err := s.peerError(a.Error)
		var e *Error
		if errors.As(err, &e) && e.Kind == ErrTest && e.Lag == LagPeerBehind {
			return &errRetry{err} // the server gets to our test soon
		}
		return err
	case TAuth:
	default:
		return s.hsProtocol(fmt.Sprintf("sent %v where its token proof belongs", a.Type))
	}
	if !hmac.Equal(a.Auth.Proof, proofWith(k.proofS, "server")) {
		msg := "the server's token proof does not match ours: it is not the gdrconf server of this run, or the hello was changed on the way"
		s.Abort("token", msg)
		return &Error{Kind: ErrToken, Msg: fmt.Sprintf("oob: wrong token: %s (test %s): %s", s.peer, opt.Test, msg)}
	}
	if sh.Test != opt.Test {
		return s.hsProtocol(fmt.Sprintf("accepted us for test %s while it runs %s", opt.Test, sh.Test))
	}
	_ = c.SetDeadline(time.Time{})
	s.PeerCaps = sh.Caps
	s.auth = hasTok
	s.out, s.in = &sealer{key: k.c2s}, &opener{key: k.s2c}
	return nil
}

func (s *Session) hsProtocol(what string) error {
	return &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: the server %s (test %s) %s: it is not a gdrconf server of this build", s.peer, s.opt.Test, what)}
}

// hsError is a client handshake failure; a dropped connection is worth
// another try (a server between two tests closes connections it cannot take).
func (s *Session) hsError(err error, doing string) error {
	var fe *FrameError
	if errors.As(err, &fe) {
		return &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: the server %s (test %s) while %s: %v", s.peer, s.opt.Test, doing, err)}
	}
	e := s.ioError(err, doing, s.opt.timeout())
	if isClosed(err) {
		return &errRetry{e}
	}
	return e
}
