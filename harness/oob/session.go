package oob

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/internal/budget"
)

// Options configure one session.
type Options struct {
	Test    string        // test name; both sides must run the same test
	Token   string        // GDR_TOKEN; "" = unauthenticated
	Timeout time.Duration // bound on each wait for the peer (silence), and on accept and dial
	Caps    []string      // capabilities this side offers (e.g. mem:gpu)
	// MaxWait caps one wait on the peer however many heartbeats arrive; 0 is
	// CapFactor times the bound in effect (Timeout, or what Within set).
	MaxWait time.Duration
	// Logf receives one line per connection the server rejects (address and
	// why); nil writes them to standard error.
	Logf func(format string, args ...any)
	// History is the order of this process's tests, for telling a peer one
	// test behind from one running a different test list; nil is
	// DefaultHistory.
	History *History
	// Version overrides the protocol version (tests of version mismatch only).
	Version int
	// Host is this side's host name, told to the peer once both sides
	// proved the token (GDR_HOST_NAME; a cluster round sets it).
	Host string
	// PeerHost, when set, is the host name the peer must tell (the plan's
	// peer, GDR_PEER_NAME): a peer that names another host is refused with
	// an error naming both (ErrPeerName).
	PeerHost string
	// Deadline, when set, is a moment no wait, accept or dial goes past:
	// the test binary's deadline less a reserve (harness/rc, internal/budget).
	// A wait it ends fails with ErrBudget, so a slow fabric ends in one
	// verdict per test instead of go test's timeout panic.
	Deadline time.Time
}

// until is t, or the session's Deadline when that comes first; cut says so.
func (o Options) until(t time.Time) (time.Time, bool) {
	if !o.Deadline.IsZero() && o.Deadline.Before(t) {
		return o.Deadline, true
	}
	return t, false
}

// budgetError is a wait on what that the Deadline ended.
func (o Options) budgetError(peer, what string) *Error {
	return &Error{Kind: ErrBudget, TimedOut: true, Msg: fmt.Sprintf("oob: peer %s (test %s): %v", peer, o.Test,
		(&budget.Error{What: what, Limit: o.Deadline.Add(budget.Reserve), At: time.Now()}).Error())}
}

// CapFactor is how many times its bound one wait may last while the peer
// sends only heartbeats (Options.MaxWait overrides it).
const CapFactor = 4

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

func (o Options) history() *History {
	if o.History != nil {
		return o.History
	}
	return DefaultHistory
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Kinds of session failure, so callers and users can tell them apart.
var (
	ErrVanished  = errors.New("peer vanished")
	ErrStalled   = errors.New("peer stalled: heartbeats only")
	ErrToken     = errors.New("wrong token")
	ErrVersion   = errors.New("protocol version mismatch")
	ErrTest      = errors.New("peer runs a different test")
	ErrPeer      = errors.New("peer reported a failure")
	ErrProtocol  = errors.New("protocol violation")
	ErrIntegrity = errors.New("frame failed the session's integrity check")
	// ErrPeerName: the proven peer names another host than the plan's.
	ErrPeerName = errors.New("peer is not the planned host")
	// ErrBudget: Options.Deadline ended the wait (the test binary's
	// deadline is near); errors.Is(err, budget.ErrExhausted) holds too.
	ErrBudget = budget.ErrExhausted
)

// Lag says, for a test mismatch (ErrTest), which side is behind.
type Lag int

const (
	LagNone       Lag = iota // not a test mismatch
	LagLists                 // neither side ran the other's test: different test lists
	LagPeerBehind            // the peer is at a test this side ran earlier
	LagSelfBehind            // this side is at a test the peer ran earlier: skip forward
)

func (l Lag) String() string {
	return [...]string{"none", "different test lists", "peer behind", "this side behind"}[l]
}

// Error is a session failure: Kind is one of the Err* values above.
type Error struct {
	Kind error
	Msg  string
	// For ErrTest: the peer's current test and which side is behind, so a
	// caller can skip forward (LagSelfBehind) instead of failing every test
	// after one that ended early.
	PeerTest string
	Lag      Lag
	// TimedOut: the wait ran out (silence, the cap on heartbeats, the
	// Deadline), as opposed to a peer that closed, aborted or broke the
	// protocol: a caller may retry the latter on a fresh session at once.
	TimedOut bool
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

// Session is one test's connection to the peer. Its methods may be called
// from the test and from one Heartbeat at the same time.
type Session struct {
	conn     net.Conn
	role     string
	opt      Options
	peer     string
	PeerCaps []string
	// PeerHost is the host name the peer told once proven ("" if it told
	// none). With a token it is the authenticated peer's word; without one,
	// anyone's.
	PeerHost string
	auth     bool // the session keys depend on a token
	strays   int  // error frames ignored before the peer was proven (client)

	bound  atomic.Int64 // current wait bound in ns (Within changes it)
	closed atomic.Bool

	wmu sync.Mutex // heartbeats write concurrently with the test
	out *sealer    // nil during the handshake

	rmu sync.Mutex
	in  *opener
}

func newSession(c net.Conn, role string, opt Options, peer string) *Session {
	s := &Session{conn: c, role: role, opt: opt, peer: peer}
	s.bound.Store(int64(opt.timeout()))
	return s
}

// Peer is the peer's address.
func (s *Session) Peer() string { return s.peer }

// Role is "server" or "client".
func (s *Session) Role() string { return s.role }

// Authenticated reports whether GDR_TOKEN keys the session: without a token
// frames are still sealed under keys from an ephemeral key exchange (a
// passive eavesdropper cannot forge them), but whoever reaches the port, or
// sits on the path, can be the peer.
func (s *Session) Authenticated() bool { return s.auth }

// Security names the session's protection for reports: the PAKE and the
// frame MAC with a token, "none (GDR_TOKEN unset)" without (reports test
// for the "none" prefix).
func (s *Session) Security() string {
	if s.auth {
		return "cpace-ristretto255+hmac-sha256"
	}
	return "none (GDR_TOKEN unset)"
}

// Strays is how many error frames the client ignored, while dialing,
// from servers that had not proven the token: each was logged, none acted
// on.
func (s *Session) Strays() int { return s.strays }

// Close ends the session; safe to call twice and concurrently.
func (s *Session) Close() error {
	if s == nil || s.closed.Swap(true) {
		return nil
	}
	return s.conn.Close()
}

// Timeout is the current bound on each wait, read and write.
func (s *Session) Timeout() time.Duration { return time.Duration(s.bound.Load()) }

// Within sets the bound for the following waits to d (e.g. while the peer
// runs a long transfer without heartbeats) and returns a func that restores
// it. The cap on one wait grows with it (CapFactor×d, or MaxWait). Heartbeat
// may run meanwhile; Within itself belongs to one goroutine (restores nest).
func (s *Session) Within(d time.Duration) (restore func()) {
	if d <= 0 {
		return func() {}
	}
	old := s.bound.Swap(int64(d))
	return func() { s.bound.Store(old) }
}

// maxWait is the cap on one wait whose bound is bound.
func (s *Session) maxWait(bound time.Duration) time.Duration {
	if s.opt.MaxWait > 0 {
		return max(s.opt.MaxWait, bound)
	}
	return CapFactor * bound
}

// frame encodes m: plain during the handshake, sealed after. Call with wmu.
func (s *Session) frame(m Message) ([]byte, error) {
	if s.out == nil {
		return Encode(m)
	}
	return s.out.seal(m)
}

// Send writes one message within Timeout.
func (s *Session) Send(m Message) error {
	to := s.Timeout()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b, err := s.frame(m)
	if err != nil {
		return err
	}
	wd, cut := s.opt.until(time.Now().Add(to))
	_ = s.conn.SetWriteDeadline(wd)
	if _, err := s.conn.Write(b); err != nil {
		if cut && isTimeout(err) {
			return s.opt.budgetError(s.peer, "sending "+m.Type.String())
		}
		return s.ioError(err, "sending "+m.Type.String(), to)
	}
	return nil
}

// read reads one frame (sealed once the handshake is done).
func (s *Session) read() (Message, error) {
	raw, t, fl, err := readFrame(s.conn)
	if err != nil {
		return Message{}, err
	}
	if s.in == nil {
		if fl != 0 {
			return Message{}, &FrameError{Reason: fmt.Sprintf(errSealedPlain, t)}
		}
		return decodePayload(t, raw[headerLen:])
	}
	return s.in.open(raw, t, fl)
}

const (
	heartbeatStep  = "\x00heartbeat"
	resyncStep     = "\x00resync "
	checkpointStep = "\x00checkpoint"
)

func isHeartbeat(m Message) bool { return m.Type == TSync && m.Sync.Step == heartbeatStep }

// wait reads frames until one that drop does not discard, within the bound
// of silence (Timeout; heartbeats reset it) and the cap on the whole wait
// (heartbeats do not extend it). It returns the frame and how many it dropped.
func (s *Session) wait(what string, drop func(Message) bool) (Message, int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	bound := s.Timeout()
	limit := s.maxWait(bound)
	start := time.Now()
	hard, cutHard := s.opt.until(start.Add(limit))
	beats, dropped := 0, 0
	for {
		dl := time.Now().Add(bound)
		atCap := !dl.Before(hard)
		if atCap {
			dl = hard
		}
		_ = s.conn.SetReadDeadline(dl)
		m, err := s.read()
		if err != nil {
			var fe *FrameError
			var se *SealError
			switch {
			case isTimeout(err) && atCap && cutHard:
				e := s.opt.budgetError(s.peer, "waiting for "+what)
				s.abortLocked("failed", fmt.Sprintf("the %s gave up waiting for %s: %s", s.role, what, e.Msg))
				return Message{}, dropped, e
			case isTimeout(err) && atCap && beats > 0:
				e := &Error{Kind: ErrStalled, TimedOut: true, Msg: fmt.Sprintf(
					"oob: peer stalled: %s (test %s) sent only heartbeats (%d) for %v while we waited for %s, the cap on one wait (%s): it is alive but stuck in a step, or the step needs longer; see its log, or raise GDR_TIMEOUT",
					s.peer, s.opt.Test, beats, time.Since(start).Round(time.Millisecond), what, s.capWhy(bound, limit))}
				s.abortLocked("failed", fmt.Sprintf("the %s gave up waiting for %s: %s", s.role, what, e.Msg))
				return Message{}, dropped, e
			case errors.As(err, &se):
				e := &Error{Kind: ErrIntegrity, Msg: fmt.Sprintf(
					"oob: peer %s (test %s) while waiting for %s: %v; the session is not trustworthy: something on the path between the hosts changes or injects traffic, or the peer is not the gdrconf process it claims to be",
					s.peer, s.opt.Test, what, err)}
				s.abortLocked("protocol", e.Msg)
				return Message{}, dropped, e
			case errors.As(err, &fe):
				e := &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: peer %s (test %s) while waiting for %s: %v", s.peer, s.opt.Test, what, err)}
				s.abortLocked("protocol", e.Msg)
				return Message{}, dropped, e
			}
			return Message{}, dropped, s.ioError(err, "waiting for "+what, bound)
		}
		if isHeartbeat(m) {
			beats++ // alive but busy (a long measurement): wait on, up to the cap
			continue
		}
		if drop != nil && drop(m) {
			dropped++
			continue
		}
		return m, dropped, nil
	}
}

func (s *Session) capWhy(bound, limit time.Duration) string {
	if s.opt.MaxWait > 0 {
		return fmt.Sprintf("%v (MaxWait)", limit)
	}
	return fmt.Sprintf("%v = %d x the %v bound", limit, CapFactor, bound)
}

// Recv reads the next message, waiting at most Timeout of silence and the
// cap in all; what names what we wait for, for the error text. A peer's
// Error message comes back as an *Error.
func (s *Session) Recv(what string) (Message, error) {
	m, _, err := s.wait(what, nil)
	if err != nil {
		return Message{}, err
	}
	if m.Type == TError {
		return Message{}, s.peerError(m.Error)
	}
	return m, nil
}

// Resync brings both sides to the same point after a failed step: each side
// calls it with the same point, and every frame of the peer's that was sent
// before its marker (a result nobody read, an Abort) is dropped. It returns
// how many frames were dropped. A peer that does not resync fails the wait
// as any silent peer does.
func (s *Session) Resync(point string) (dropped int, err error) {
	if point == "" || len(point) > maxText-len(resyncStep) {
		return 0, fmt.Errorf("oob: resync point of %d bytes (want 1..%d)", len(point), maxText-len(resyncStep))
	}
	if err := s.Send(Message{Type: TSync, Sync: &Sync{Step: resyncStep + point}}); err != nil {
		return 0, err
	}
	m, n, err := s.wait(fmt.Sprintf("the peer to resync at %q", point), func(m Message) bool {
		return m.Type != TSync || !strings.HasPrefix(m.Sync.Step, resyncStep)
	})
	if err != nil {
		return n, err
	}
	if got := strings.TrimPrefix(m.Sync.Step, resyncStep); got != point {
		e := &Error{Kind: ErrProtocol, Msg: fmt.Sprintf("oob: peer %s (test %s) resynced at %q, we at %q: the hosts got out of step", s.peer, s.opt.Test, got, point)}
		s.Abort("protocol", e.Msg)
		return n, e
	}
	return n, nil
}

// Checkpoint starts a step on a session that the step before may have left
// out of step (a subtest that failed on one host and not the other): both
// sides Resync at point, dropping what the earlier step left unread, then
// tell each other whether their side of it went well (ok). It returns
// whether both did, so both hosts decide alike to go on with what the
// session carries or to connect afresh; an error means the session itself
// is unusable (the peer vanished, closed it, or resynced elsewhere).
func (s *Session) Checkpoint(point string, ok bool) (both bool, err error) {
	if _, err := s.Resync(point); err != nil {
		return false, err
	}
	var v uint64
	if ok {
		v = 1
	}
	peer, err := s.BarrierValue(checkpointStep, 0, v)
	if err != nil {
		return false, err
	}
	return ok && peer == 1, nil
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

// maxErrText bounds the text of an Error frame we send or show.
const maxErrText = 2048

func clipText(s string) string {
	if len(s) <= maxErrText {
		return s
	}
	return s[:maxErrText] + fmt.Sprintf("... (%d bytes)", len(s))
}

// Abort tells the peer why we give up (best effort) so it fails with our reason.
func (s *Session) Abort(kind, msg string) {
	if s == nil || s.closed.Load() {
		return
	}
	s.abortLocked(kind, msg)
}

// abortLocked is Abort for callers that may hold rmu (it takes only wmu).
func (s *Session) abortLocked(kind, msg string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b, err := s.frame(Message{Type: TError, Error: &ErrorMsg{Kind: kind, Msg: clipText(msg)}})
	if err != nil {
		return
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(min(s.Timeout(), 2*time.Second)))
	_, _ = s.conn.Write(b)
}

// Heartbeat tells the peer every Timeout/4 that this side is alive while it
// is busy outside the session (a measurement in C), so the peer's waits stay
// bounded by Timeout of silence yet survive a step longer than Timeout, up to
// the peer's cap on one wait. Call the returned stop when the busy part ends.
func (s *Session) Heartbeat() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	every := max(s.Timeout()/4, 10*time.Millisecond)
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
	var once sync.Once
	return func() { once.Do(func() { close(done) }); <-finished }
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
	case "peer":
		kind = ErrPeerName
	}
	prefix := map[error]string{ErrVersion: "version mismatch", ErrToken: "wrong token", ErrTest: "test mismatch", ErrPeer: "peer failed",
		ErrPeerName: "not the planned peer"}[kind]
	out := &Error{Kind: kind, Msg: fmt.Sprintf("oob: %s: peer %s (test %s) says: %s", prefix, s.peer, s.opt.Test, clipText(e.Msg))}
	if kind == ErrTest {
		out.PeerTest = e.Test
		out.Lag, _ = lagFromWire(e.Lag)
		out.Lag = out.Lag.flip()
	}
	return out
}

func (s *Session) ioError(err error, doing string, to time.Duration) error {
	switch {
	case isTimeout(err):
		return &Error{Kind: ErrVanished, TimedOut: true, Msg: fmt.Sprintf(
			"oob: peer vanished: %s (test %s) gave no answer within %v while we were %s: the other host's test died, hangs or lost its network; check its log, or raise GDR_TIMEOUT",
			s.peer, s.opt.Test, to, doing)}
	case isClosed(err):
		return &Error{Kind: ErrVanished, Msg: fmt.Sprintf(
			"oob: peer vanished: %s (test %s) closed the connection while we were %s: the other host's test failed or was killed; see its log",
			s.peer, s.opt.Test, doing)}
	}
	return &Error{Kind: ErrVanished, Msg: fmt.Sprintf("oob: peer %s (test %s) while %s: %v", s.peer, s.opt.Test, doing, err)}
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
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
