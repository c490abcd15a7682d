package oob

// The handshake (protocol v3). Until both proofs, every frame is plain and
// carries nothing about the run but the protocol version, whether a token
// is set and random values:
//
//	client -> server  Hello{version, role "client", nonce Nc, has_token, share Ya}
//	server -> client  Hello{version, role "server", nonce Ns, has_token, share Yb}
//	                  (or, to a hello of another version only, Error version:
//	                  older builds act on it; this build ignores it, below)
//	client -> server  Auth{HMAC(Kc, "client")}
//	server -> client  Auth{HMAC(Ks, "server")}, only for a valid client proof
//	                  (else an Error token, and the server waits for the next)
//
// Ya and Yb are the CPace shares (cpace.go: draft-irtf-cfrg-cpace,
// CPACE-RISTR255-SHA512, initiator the client) under PRS = GDR_TOKEN,
// CI = "gdrconf-oob/3", sid = Nc; with ISK the CPace key and
// T = SHA-256(client hello frame | server hello frame),
// Kc | Ks | K(c->s) | K(s->c) = HKDF-SHA256(ISK, salt Nc|Ns, info "gdrconf-oob/3 " | T).
// Then, sealed with the direction keys (codec.go), as the first frames:
//
//	client -> server  Intro{test, host, caps, tests done}
//	server -> client  Intro{test, host, caps} when the tests match, else a
//	                  sealed Error test with which side is behind
//
// What each party can learn:
//   - Nobody learns the test, the history, the capabilities or the host
//     names before both proofs: the hellos carry none (a v3 hello's test is
//     the placeholder "(sealed)", which v1 and v2 still decode, so an older
//     build answers with its version error naming both versions).
//   - A fake server (or client) that runs the exchange with a guessed token
//     learns whether that one guess was right, and nothing that tests a
//     second guess offline: the transcript holds random shares and MACs under
//     a key that needs the discrete log of a share (CDH on ristretto255) for
//     any token other than the one it used. v2 let a fake server test every
//     guess offline against the client's proof (hostile_test.go shows both).
//     Each connection is one online guess; the server logs every refused
//     proof with the address.
//   - Without GDR_TOKEN the key exchange still runs (with an empty token):
//     frames are sealed against a passive eavesdropper, but nothing is
//     authenticated: whoever reaches the port completes the exchange. The
//     server then still tells the client nothing of its own: on a test
//     mismatch its sealed Error says which side is behind and withholds its
//     test name (its own log names both). What it leaks, once per
//     connection and logged: whether the client's claimed test is one it ran,
//     and whether its current test is among the client's claimed ones, from
//     which side it says is behind. The client's Intro (its test, history and
//     host) goes to whoever answers at GDR_PEER, and a stranger that claims
//     to be ahead makes the server end its test as behind. That is the price
//     of detecting "the peer runs another test" with no secret to tell a
//     stranger from the peer, who could as well become the peer outright;
//     reports flag every tokenless two-host result.
//   - Frames are authenticated, not encrypted: someone on the path reads
//     the intros, endpoints and results in both modes.
//
// Error frames before the proofs are unproven: the client logs each one as a
// stray, counts it (Session.Strays), and never acts on it (no skip forward,
// no message of the sender's adopted as its own); it tries again until its
// wait ends, and only then says what the ignored frames claimed. A test
// mismatch arrives sealed, after both proofs, or not at all.

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

	"github.com/gdrconf/gdrconf/internal/clip"
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

// cpaceCI is CPace's channel identifier: the protocol and its version, so a
// key from another protocol (or version) never matches.
var cpaceCI = []byte("gdrconf-oob/3")

// deriveKeys binds every key to the CPace key (and so to the token), both
// nonces and both hello frames as sent.
func deriveKeys(isk, cn, sn, helloC, helloS []byte) (keys, error) {
	th := sha256.New()
	th.Write(helloC)
	th.Write(helloS)
	okm, err := hkdf.Key(sha256.New, isk, append(slices.Clone(cn), sn...), "gdrconf-oob/3 "+string(th.Sum(nil)), 4*sha256.Size)
	if err != nil {
		return keys{}, fmt.Errorf("oob: session key derivation: %w", err)
	}
	return keys{okm[:32], okm[32:64], okm[64:96], okm[96:]}, nil
}

func proofWith(key []byte, who string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("gdrconf-oob/3 " + who + " proof"))
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
	Kind error // ErrToken, ErrVersion, ErrPeerName, ErrTest for a gdrconf peer that disagrees; ErrProtocol otherwise
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
	deadline, cut := l.opt.until(time.Now().Add(to))
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
		if cut {
			e := l.opt.budgetError(l.Addr(), "accepting the peer")
			if rej := l.Rejected(); len(rej) > 0 {
				e.Msg += fmt.Sprintf(" (turned away %d connection(s) meanwhile, the last %s: %s)", len(rej), rej[len(rej)-1].Addr, rej[len(rej)-1].Why)
			}
			return nil, e
		}
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
	for _, k := range []error{ErrToken, ErrVersion, ErrPeerName, ErrTest} {
		if slices.ContainsFunc(rej, func(r Rejection) bool { return r.Kind == k }) {
			kind = k
			prefix = map[error]string{ErrToken: "wrong token: ", ErrVersion: "version mismatch: ", ErrPeerName: "not the planned peer: ", ErrTest: "test mismatch: "}[k]
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

// withheld is the test mismatch as the server tells it to a client that is
// not authenticated (no GDR_TOKEN): which side is behind, never the
// server's test or how many tests apart; the server's own log names both.
func withheld(lag Lag) string {
	const why = "the server's test is not told without GDR_TOKEN; its log names both"
	switch lag {
	case LagPeerBehind:
		return "the client is behind the server: the server ran the client's test already (" + why + "); an earlier test ended on one host without the other (see both logs); the client skips forward"
	case LagSelfBehind:
		return "the server is behind the client: the client ran the server's test already (" + why + "); an earlier test ended on one host without the other (see both logs)"
	}
	return "the hosts run different test lists: neither ran the other's test (" + why + "); run the identical command on both hosts (same build, same -run and -skip filters, same GDR_* settings)"
}

// peerNameMsg is the message for a proven peer that names another host
// than the plan's; role is the side that checked.
func peerNameMsg(role, want, got string) string {
	if got == "" {
		got = "no host name"
	} else {
		got = "host " + clip.Quote(got)
	}
	return fmt.Sprintf("the %s expected its peer to be host %s (GDR_PEER_NAME, from the plan), and the proven peer names %s: the two hosts do not run the same round of the same plan (GDR_HOST_NAME and GDR_PEER_NAME disagree)",
		role, clip.Quote(want), got)
}

// sendSealed writes one sealed handshake frame within the deadline.
func (s *Session) sendSealed(m Message, deadline time.Time) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b, err := s.frame(m)
	if err != nil {
		return err
	}
	wd := time.Now().Add(2 * time.Second)
	if deadline.Before(wd) {
		wd = deadline
	}
	_ = s.conn.SetWriteDeadline(wd)
	_, err = s.conn.Write(b)
	return err
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
	fail := func(kind, msg string) {
		_, _ = sendPlain(c, Message{Type: TError, Error: &ErrorMsg{Kind: kind, Msg: msg}}, deadline)
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
		// Plain: an older client acts on it; it says nothing about the run.
		msg := versionMsg(v, ch.Version)
		fail("version", msg)
		return rej(msg, ErrVersion)
	}
	if len(ch.Share) != cpaceShareLen {
		return rej(fmt.Sprintf("sent a v%d hello without its key share", v), ErrProtocol)
	}
	cp := newCPace([]byte(opt.Token), cpaceCI, ch.Nonce)
	sn := newNonce()
	rawS, err := sendPlain(c, Message{Type: THello, Hello: &Hello{Version: v, Test: helloSealed, Role: "server", Nonce: sn, HasToken: hasTok, Share: cp.share}}, deadline)
	if err != nil {
		return rej(readWhy(err, "while we sent our hello"))
	}
	if ch.HasToken != hasTok {
		// Our hello told the client the same (its flag against ours).
		msg := tokenMismatch(hasTok, ch.HasToken)
		fail("token", msg)
		return rej(msg, ErrToken)
	}
	isk, err := cp.isk(ch.Nonce, ch.Share, false, nil, nil)
	if err != nil {
		return rej("sent a hello whose "+err.Error(), ErrProtocol)
	}
	k, err := deriveKeys(isk, ch.Nonce, sn, rawC, rawS)
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
	if _, err := sendPlain(c, Message{Type: TAuth, Auth: &Auth{Proof: proofWith(k.proofS, "server")}}, deadline); err != nil {
		return rej(readWhy(err, "while we sent our proof"))
	}
	s := newSession(c, "server", opt, addr)
	s.auth = hasTok
	s.out, s.in = &sealer{key: k.s2c}, &opener{key: k.c2s}
	in, err := s.read()
	if err != nil {
		var se *SealError
		if errors.As(err, &se) {
			return rej("its first sealed frame fails the session's checks: "+se.Reason, ErrProtocol)
		}
		return rej(readWhy(err, "after the proofs, before its intro"))
	}
	if in.Type != TIntro {
		return rej(fmt.Sprintf("sent a %v frame where its intro belongs", in.Type), ErrProtocol)
	}
	ci := in.Intro
	if opt.PeerHost != "" && ci.Host != opt.PeerHost {
		msg := peerNameMsg("server", opt.PeerHost, ci.Host)
		_ = s.sendSealed(Message{Type: TError, Error: &ErrorMsg{Kind: "peer", Msg: msg}}, deadline)
		return rej(msg, ErrPeerName)
	}
	if ci.Test != opt.Test {
		lag, msg := mismatch(opt.Test, ci.Test, opt.history(), ci.Done)
		wire := map[Lag]string{LagPeerBehind: lagClientBehind, LagSelfBehind: lagServerBehind, LagLists: lagLists}[lag]
		e := &ErrorMsg{Kind: "test", Msg: msg, Test: opt.Test, Lag: wire}
		if !hasTok {
			e.Msg, e.Test = withheld(lag), ""
		}
		_ = s.sendSealed(Message{Type: TError, Error: e}, deadline)
		if lag == LagSelfBehind {
			return nil, nil, &Error{Kind: ErrTest, Lag: LagSelfBehind, PeerTest: ci.Test,
				Msg: fmt.Sprintf("oob: test mismatch with %s: %s", addr, msg)}
		}
		return rej(msg, ErrTest)
	}
	if err := s.sendSealed(Message{Type: TIntro, Intro: &Intro{Test: opt.Test, Host: opt.Host, Caps: opt.Caps}}, deadline); err != nil {
		return rej(readWhy(err, "while we sent our intro"))
	}
	_ = c.SetDeadline(time.Time{})
	s.PeerCaps, s.PeerHost = ci.Caps, ci.Host
	return s, nil, nil
}

// unproven is what one connection to the server ended with before the
// server proved the token: the client ignores it and tries again, and says
// it only when its wait ends.
type unproven struct {
	kind error // ErrVersion, ErrToken or ErrVanished: what the last one suggests
	what string
}

func (u *unproven) Error() string { return u.what }

// Dial connects to the server at addr and runs the client side of the
// handshake. Until Timeout it retries what a server between two tests (or
// still finishing the previous one) gives: a refused or dropped connection,
// a server that says (sealed) it is behind us, and whatever a server that
// has not proven the token sends or does.
func Dial(addr string, opt Options) (*Session, error) {
	opt.history().Begin(opt.Test)
	to := opt.timeout()
	deadline, cut := opt.until(time.Now().Add(to))
	var last error
	var pre *unproven // the last unproven outcome
	strays, refusals := 0, 0
	pause := 100 * time.Millisecond
	for {
		left := time.Until(deadline)
		if left <= 0 && cut {
			e := opt.budgetError(addr, "connecting to the server")
			if last != nil {
				e.Msg += fmt.Sprintf(" (last error: %v)", last)
			}
			return nil, e
		}
		if left <= 0 {
			var e *Error
			if errors.As(last, &e) && e.Kind == ErrTest {
				at := "an earlier test (not told without GDR_TOKEN)"
				if e.PeerTest != "" {
					at = "test " + e.PeerTest
				}
				return nil, &Error{Kind: ErrTest, Lag: LagPeerBehind, PeerTest: e.PeerTest, Msg: fmt.Sprintf(
					"oob: test mismatch: the server %s stayed behind: it was still at %s when our wait for test %s ended after %v (%s)",
					addr, at, opt.Test, to, e.Msg)}
			}
			if pre != nil {
				return nil, &Error{Kind: pre.kind, Msg: fmt.Sprintf(
					"oob: %sno proven session with the server %s within %v for test %s: %d connection(s) ended before the server proved the token, the last: %s; nothing it sent before its proof was acted on (%d error frame(s) ignored)",
					unprovenPrefix(pre.kind), addr, to, opt.Test, refusals, pre.what, strays)}
			}
			return nil, &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
				"oob: could not reach the server %s within %v for test %s (last error: %v): start the same command there with GDR_ROLE=server, check GDR_PEER and the firewall, or raise GDR_TIMEOUT",
				addr, to, opt.Test, last)}
		}
		c, err := net.DialTimeout("tcp", addr, left)
		if err == nil {
			s := newSession(c, "client", opt, addr)
			err = s.clientHandshake(deadline)
			strays += s.strays
			if err == nil {
				s.strays = strays
				return s, nil
			}
			s.Close()
			var u *unproven
			if errors.As(err, &u) {
				pre, refusals = u, refusals+1
				// Back off: a server that refuses us will not change its
				// mind ten times a second, and each try is a log line there.
				pause = min(2*pause, time.Second)
			} else if !retryable(err) {
				if cut && !time.Now().Before(deadline) {
					return nil, opt.budgetError(addr, "the handshake with the server")
				}
				var e *Error
				behind := errors.As(last, &e) && e.Kind == ErrTest
				if time.Now().Before(deadline) || pre == nil && !behind {
					return nil, err
				}
				// The wait ended in the middle of a handshake after earlier
				// outcomes (a server behind us, unproven refusals) that say
				// more than this last timeout.
				continue
			}
		}
		last = err
		time.Sleep(min(pause, max(time.Until(deadline), 0)))
	}
}

func unprovenPrefix(kind error) string {
	switch kind {
	case ErrVersion:
		return "version mismatch: "
	case ErrToken:
		return "wrong token: "
	}
	return ""
}

// errRetry marks a handshake failure a later connection may not have.
type errRetry struct{ err error }

func (e *errRetry) Error() string { return e.err.Error() }
func (e *errRetry) Unwrap() error { return e.err }

func retryable(err error) bool {
	var r *errRetry
	return errors.As(err, &r)
}

// stray logs and counts an error frame from a server that has not proven
// the token, and returns what it claimed, for the message when the wait
// ends. Its text is quoted as the sender's, never adopted.
func (s *Session) stray(e *ErrorMsg, when string) *unproven {
	s.strays++
	s.opt.logf("oob: test %s: ignored an error frame from %s %s (unproven, not acted on): %s: %s",
		s.opt.Test, s.peer, when, clip.QuoteN(e.Kind, 32), clip.QuoteN(e.Msg, 512))
	kind := ErrVanished
	switch e.Kind {
	case "version":
		kind = ErrVersion
	case "token":
		kind = ErrToken
	}
	return &unproven{kind: kind, what: fmt.Sprintf("it sent an error frame %s, which says (unproven) %s: %s", when, clip.QuoteN(e.Kind, 32), clip.QuoteN(e.Msg, 512))}
}

func (s *Session) clientHandshake(deadline time.Time) error {
	c, opt := s.conn, s.opt
	_ = c.SetDeadline(deadline)
	v := opt.version()
	hasTok := opt.Token != ""
	cn := newNonce()
	cp := newCPace([]byte(opt.Token), cpaceCI, cn)
	rawC, err := sendPlain(c, Message{Type: THello, Hello: &Hello{Version: v, Test: helloSealed, Role: "client",
		Nonce: cn, HasToken: hasTok, Share: cp.share}}, deadline)
	if err != nil {
		return s.hsError(err, "sending our hello")
	}
	rawS, m, err := readPlain(c)
	if err != nil {
		return s.hsError(err, "waiting for the server's hello")
	}
	switch m.Type {
	case TError:
		return s.stray(m.Error, "instead of its hello")
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
		_, _ = sendPlain(c, Message{Type: TError, Error: &ErrorMsg{Kind: "version", Msg: msg}}, deadline)
		return &unproven{kind: ErrVersion, what: "its hello says (unproven): " + msg}
	}
	if sh.HasToken != hasTok {
		msg := tokenMismatch(sh.HasToken, hasTok)
		return &unproven{kind: ErrToken, what: "its hello says (unproven): " + msg}
	}
	isk, err := cp.isk(cn, sh.Share, true, nil, nil)
	if err != nil {
		return s.hsProtocol("sent a hello whose " + err.Error())
	}
	k, err := deriveKeys(isk, cn, sh.Nonce, rawC, rawS)
	if err != nil {
		return err
	}
	if _, err := sendPlain(c, Message{Type: TAuth, Auth: &Auth{Proof: proofWith(k.proofC, "client")}}, deadline); err != nil {
		return s.hsError(err, "sending our token proof")
	}
	_, a, err := readPlain(c)
	if err != nil {
		if isClosed(err) {
			return &unproven{kind: ErrToken, what: "it closed the connection after our token proof without its own"}
		}
		return s.hsError(err, "waiting for the server's token proof")
	}
	switch a.Type {
	case TError:
		return s.stray(a.Error, "after our token proof, without its own")
	case TAuth:
	default:
		return s.hsProtocol(fmt.Sprintf("sent %v where its token proof belongs", a.Type))
	}
	if !hmac.Equal(a.Auth.Proof, proofWith(k.proofS, "server")) {
		msg := "the server's token proof does not match ours: it is not the gdrconf server of this run (another GDR_TOKEN, or something else answers at this address), or the hello was changed on the way"
		return &unproven{kind: ErrToken, what: msg}
	}
	// Proven (with a token): what follows is sealed and acted on.
	s.auth = hasTok
	s.out, s.in = &sealer{key: k.c2s}, &opener{key: k.s2c}
	if err := s.sendSealed(Message{Type: TIntro, Intro: &Intro{Test: opt.Test, Host: opt.Host, Caps: opt.Caps, Done: opt.history().recent()}}, deadline); err != nil {
		return s.hsError(err, "sending our intro")
	}
	in, err := s.read()
	if err != nil {
		var se *SealError
		if errors.As(err, &se) {
			return &Error{Kind: ErrIntegrity, Msg: fmt.Sprintf("oob: the server %s (test %s): its first sealed frame: %v", s.peer, opt.Test, err)}
		}
		return s.hsError(err, "waiting for the server's intro")
	}
	switch in.Type {
	case TError:
		err := s.peerError(in.Error)
		var e *Error
		if errors.As(err, &e) && e.Kind == ErrTest && e.Lag == LagPeerBehind {
			return &errRetry{err} // the server gets to our test soon
		}
		return err
	case TIntro:
	default:
		return s.hsProtocol(fmt.Sprintf("sent %v where its intro belongs", in.Type))
	}
	si := in.Intro
	if si.Test != opt.Test {
		return s.hsProtocol(fmt.Sprintf("accepted us for test %s while it runs %s", opt.Test, si.Test))
	}
	if opt.PeerHost != "" && si.Host != opt.PeerHost {
		msg := peerNameMsg("client", opt.PeerHost, si.Host)
		_ = s.sendSealed(Message{Type: TError, Error: &ErrorMsg{Kind: "peer", Msg: msg}}, deadline)
		return &Error{Kind: ErrPeerName, Msg: fmt.Sprintf("oob: not the planned peer: the server %s (test %s): %s", s.peer, opt.Test, msg)}
	}
	_ = c.SetDeadline(time.Time{})
	s.PeerCaps, s.PeerHost = si.Caps, si.Host
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
