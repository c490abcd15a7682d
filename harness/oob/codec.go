// Package oob is the out-of-band TCP exchange between the two hosts of a
// pingpong run (or the two ends of a loopback run in one process): hellos
// with the protocol version and a PAKE key share, token proofs, the sealed
// intros (test, host), RDMA endpoints, the agreement to run or to skip,
// barriers and results.
//
// Wire format: every message is one frame. The 12-byte header is the same in
// every protocol version:
//
//	magic "GDRo" | type (1 byte) | flags (1 byte) | reserved (2 bytes, zero) | length (uint32 BE) | body
//
// Plain frames (flags 0) carry a JSON body; only the handshake uses them.
// After the handshake every frame is sealed (flags 0x01):
//
//	header | sequence (uint64 BE, per direction, from 0) | JSON | HMAC-SHA256 (32 bytes)
//
// where length counts sequence, JSON and MAC, and the MAC covers header,
// sequence and JSON under the session key of that direction (session.go).
// The header, Hello and ErrorMsg stay decodable across protocol versions (v1
// called the flags byte reserved and required zero), so two different builds
// can always tell each other why they disagree.
package oob

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// Version is the protocol version this build speaks. v2: the client proves
// the token first, frames after the handshake are sealed (MAC, sequence).
// v3: the token keys a PAKE (CPace) instead of the proofs themselves, and
// the test, history, capabilities and host names travel sealed, after both
// proofs (handshake.go).
const Version = 3

// MaxPayload bounds a frame's body; anything larger is rejected before it is
// read, so a wrong peer cannot make us allocate.
const MaxPayload = 64 << 10

const headerLen = 12

const (
	flagSealed = 0x01
	seqLen     = 8
	macLen     = sha256.Size
	// SealedOverhead is what sealing adds to a frame: sequence and MAC.
	SealedOverhead = seqLen + macLen
)

var magic = [4]byte{'G', 'D', 'R', 'o'}

// Type is a message type.
type Type uint8

const (
	THello    Type = 1
	TAuth     Type = 2
	TAgree    Type = 3
	TEndpoint Type = 4
	TSync     Type = 5
	TResult   Type = 6
	TError    Type = 7
	TIntro    Type = 8 // v3: sealed, right after the proofs
)

var typeNames = map[Type]string{
	THello: "hello", TAuth: "auth", TAgree: "agree", TEndpoint: "endpoint",
	TSync: "sync", TResult: "result", TError: "error", TIntro: "intro",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type 0x%02x", uint8(t))
}

// Hello opens a session. Fields present in v1 keep their meaning. A v3
// hello names no test (Test is helloSealed, which v1 and v2 decoders still
// accept, so an older build answers it with its version error), no host,
// no capabilities and no history: those travel in Intro, sealed.
type Hello struct {
	Version  int      `json:"version"`
	Test     string   `json:"test"`
	Role     string   `json:"role"`
	Caps     []string `json:"caps,omitempty"`
	Nonce    []byte   `json:"nonce"`
	HasToken bool     `json:"has_token"`
	// Proof was v1's server proof; v2 never sends it (proofs travel in Auth).
	Proof []byte `json:"proof,omitempty"`
	// Done (v2, client) lists the tests the client began before this one,
	// oldest first, so the server can tell a client one test behind from one
	// running a different test list. v3 sends it in Intro.
	Done []string `json:"done,omitempty"`
	// Share (v3) is the sender's CPace key share (cpace.go).
	Share []byte `json:"share,omitempty"`
}

// helloSealed is a v3 hello's Test: a placeholder, never a test name.
const helloSealed = "(sealed)"

// Intro (v3) is what each side says once both proved the token: the client
// first, the server only when the tests match (else a sealed Error).
type Intro struct {
	Test string   `json:"test"`
	Host string   `json:"host,omitempty"` // the sender's host name (GDR_HOST_NAME, else the kernel's)
	Caps []string `json:"caps,omitempty"`
	Done []string `json:"done,omitempty"` // client only: as Hello.Done in v2
}

// Auth carries one side's proof of the token over the handshake transcript.
type Auth struct {
	Proof []byte `json:"proof"`
}

// Agree is one side's readiness: Skip non-empty means it cannot run the test.
type Agree struct {
	Skip string            `json:"skip,omitempty"`
	Info map[string]string `json:"info,omitempty"`
}

// Endpoint is what the peer needs to connect an RC QP and address our buffer.
type Endpoint struct {
	LID       uint16 `json:"lid"`
	GID       []byte `json:"gid"` // 16 bytes: the GID this side uses, on InfiniBand too
	GIDIndex  int    `json:"gid_index"`
	QPN       uint32 `json:"qpn"`
	PSN       uint32 `json:"psn"`
	RKey      uint32 `json:"rkey"`
	Addr      uint64 `json:"addr"`
	Len       uint64 `json:"len"`
	MTU       int    `json:"mtu"` // bytes: 256..4096
	LinkLayer string `json:"link_layer,omitempty"`
	Mem       string `json:"mem,omitempty"`
	// MRs are every registration of the buffer, preferred first, when it was
	// registered more than once (GPU memory through both nvidia_peermem and
	// dma-buf); RKey/Addr above are MRs[0]. Older peers send none.
	MRs []RemoteMR `json:"mrs,omitempty"`
	// QPNs and PSNs are every queue pair's, QPN/PSN's first, when the
	// connection has several (GDR_QPS).
	QPNs []uint32 `json:"qpns,omitempty"`
	PSNs []uint32 `json:"psns,omitempty"`
	// TC and SL are the fabric class this side puts into its address
	// vectors (GDR_IB_TC 0..255, GDR_IB_SL 0..15), TCFrom and SLFrom the
	// variable each came from (for the message when they differ). Older
	// peers send none: see Endpoint.Class.
	TC     *int   `json:"ib_tc,omitempty"`
	SL     *int   `json:"ib_sl,omitempty"`
	TCFrom string `json:"ib_tc_from,omitempty"`
	SLFrom string `json:"ib_sl_from,omitempty"`
	// GRHRequired says whether this side's port requires a GRH
	// (IBV_QPF_GRH_REQUIRED in ibv_port_attr.flags): the peer then sends one
	// too (harness/verbs NeedGRH). Absent where the sender could not read
	// its flags, and from older peers: read as not required.
	GRHRequired *bool `json:"grh_required,omitempty"`
}

// PeerGRHRequired is the endpoint's GRHRequired, false when it sent none.
func (e Endpoint) PeerGRHRequired() bool { return e.GRHRequired != nil && *e.GRHRequired }

// RemoteMR is one registration of the peer's buffer.
type RemoteMR struct {
	Path string `json:"path"` // host, peermem or dmabuf
	RKey uint32 `json:"rkey"`
	Addr uint64 `json:"addr"`
	Len  uint64 `json:"len"`
}

// maxMRs bounds Endpoint.MRs (one per registration path).
const maxMRs = 4

// maxClassFrom bounds Endpoint.TCFrom/SLFrom (a variable's name).
const maxClassFrom = 64

// Class is the fabric class of a side's traffic: the GRH traffic class and
// the service level of its address vectors.
type Class struct {
	TC, SL         int
	TCFrom, SLFrom string // where each came from; "" for a peer that sent none
}

// Class is the class the endpoint's sender uses. A peer that sends no class
// is an older suite, which hard-coded service level 0 and traffic class 0
// in its RTR: reading it as 0 says what it really does, so two hosts at the
// default still run together, and a host that asks for another class is
// told the peer cannot follow (rather than the two directions silently
// riding different classes).
func (e Endpoint) Class() Class {
	c := Class{}
	if e.TC != nil {
		c.TC, c.TCFrom = *e.TC, orSet(e.TCFrom)
	}
	if e.SL != nil {
		c.SL, c.SLFrom = *e.SL, orSet(e.SLFrom)
	}
	return c
}

// SetClass records c in the endpoint this side sends.
func (e *Endpoint) SetClass(c Class) {
	tc, sl := c.TC, c.SL
	e.TC, e.SL, e.TCFrom, e.SLFrom = &tc, &sl, c.TCFrom, c.SLFrom
}

// AgreeClass compares this side's class with the peer's. Both ends of a
// connection call it with their own role and get the same message: the
// server's values come first whichever side writes it.
func AgreeClass(role string, mine, peer Class) error {
	srv, cli := mine, peer
	if role != "server" {
		srv, cli = peer, mine
	}
	var diff []string
	if srv.TC != cli.TC {
		diff = append(diff, fmt.Sprintf("traffic class: server %d (%s), client %d (%s)", srv.TC, from(srv.TCFrom), cli.TC, from(cli.TCFrom)))
	}
	if srv.SL != cli.SL {
		diff = append(diff, fmt.Sprintf("service level: server %d (%s), client %d (%s)", srv.SL, from(srv.SLFrom), cli.SL, from(cli.SLFrom)))
	}
	if len(diff) == 0 {
		return nil
	}
	return fmt.Errorf("the hosts' fabric classes differ (%s): the two directions would ride different classes of the fabric; set the same GDR_IB_TC and GDR_IB_SL (or NCCL_IB_TC and NCCL_IB_SL) on both hosts",
		strings.Join(diff, "; "))
}

// orSet: a value sent without its source is still a value.
func orSet(s string) string {
	if s == "" {
		return "set"
	}
	return s
}

// from says where a class value came from; "" is a peer that sent none.
func from(s string) string {
	if s == "" {
		return "not sent: an older suite, which uses 0"
	}
	return "from " + clip.QuoteN(s, maxClassFrom)
}

// Sync is a barrier step; both sides send the same Step and Iter.
type Sync struct {
	Step string `json:"step"`
	Iter int    `json:"iter"`
	Seed uint64 `json:"seed,omitempty"`
}

// Result is an outcome one side tells the other (a check or a measurement).
type Result struct {
	Name   string             `json:"name"`
	OK     bool               `json:"ok"`
	Msg    string             `json:"msg,omitempty"`
	Values map[string]float64 `json:"values,omitempty"`
}

// ErrorMsg tells the peer why we are giving up. Kind and Msg are read by
// every version; Test and Lag (v2) detail a test mismatch.
type ErrorMsg struct {
	Kind string `json:"kind"` // version, token, test, failed, protocol
	Msg  string `json:"msg"`
	Test string `json:"test,omitempty"` // the sender's current test
	Lag  string `json:"lag,omitempty"`  // test mismatch: see Lag.wire
}

// Message is one decoded frame: Type and exactly one of the pointers.
type Message struct {
	Type     Type
	Hello    *Hello
	Auth     *Auth
	Agree    *Agree
	Endpoint *Endpoint
	Sync     *Sync
	Result   *Result
	Error    *ErrorMsg
	Intro    *Intro
}

// FrameError is a frame the decoder rejects; Reason says which rule it broke.
type FrameError struct {
	Reason string
}

func (e *FrameError) Error() string { return "malformed oob frame: " + e.Reason }

// IsFrameError reports whether err is a rejected frame.
func IsFrameError(err error) bool {
	var fe *FrameError
	return errors.As(err, &fe)
}

// SealError is a well-formed sealed frame that fails the session's checks:
// a MAC that does not verify (changed on the way) or a sequence number out of
// step (replayed, dropped or reordered).
type SealError struct {
	Reason string
}

func (e *SealError) Error() string { return "rejected oob frame: " + e.Reason }

func body(m Message) (any, error) {
	var v any
	switch m.Type {
	case THello:
		v = m.Hello
	case TAuth:
		v = m.Auth
	case TAgree:
		v = m.Agree
	case TEndpoint:
		v = m.Endpoint
	case TSync:
		v = m.Sync
	case TResult:
		v = m.Result
	case TError:
		v = m.Error
	case TIntro:
		v = m.Intro
	default:
		return nil, fmt.Errorf("oob: cannot encode %v", m.Type)
	}
	if v == nil || isNilPtr(v) {
		return nil, fmt.Errorf("oob: %v message without its body", m.Type)
	}
	return v, nil
}

func marshal(m Message, overhead int) ([]byte, error) {
	v, err := body(m)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("oob: encode %v: %w", m.Type, err)
	}
	if len(p)+overhead > MaxPayload {
		return nil, fmt.Errorf("oob: %v message is %d bytes, above the %d-byte limit", m.Type, len(p)+overhead, MaxPayload)
	}
	return p, nil
}

func putHeader(b []byte, t Type, flags byte, n int) {
	copy(b, magic[:])
	b[4] = byte(t)
	b[5] = flags
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint32(b[8:12], uint32(n))
}

// Encode builds the plain frame for m (handshake frames).
func Encode(m Message) ([]byte, error) {
	p, err := marshal(m, 0)
	if err != nil {
		return nil, err
	}
	b := make([]byte, headerLen+len(p))
	putHeader(b, m.Type, 0, len(p))
	copy(b[headerLen:], p)
	return b, nil
}

func isNilPtr(v any) bool {
	switch p := v.(type) {
	case *Hello:
		return p == nil
	case *Auth:
		return p == nil
	case *Agree:
		return p == nil
	case *Endpoint:
		return p == nil
	case *Sync:
		return p == nil
	case *Result:
		return p == nil
	case *ErrorMsg:
		return p == nil
	case *Intro:
		return p == nil
	}
	return false
}

// parseHeader checks a frame header and returns type, flags and body length.
func parseHeader(h []byte) (Type, byte, int, error) {
	if !bytes.Equal(h[:4], magic[:]) {
		return 0, 0, 0, &FrameError{Reason: fmt.Sprintf("bad magic %q (want %q): the peer is not a gdrconf oob endpoint", h[:4], magic[:])}
	}
	t := Type(h[4])
	if _, ok := typeNames[t]; !ok {
		return 0, 0, 0, &FrameError{Reason: fmt.Sprintf("unknown message type 0x%02x", h[4])}
	}
	if h[5]&^flagSealed != 0 || h[6] != 0 || h[7] != 0 {
		return 0, 0, 0, &FrameError{Reason: fmt.Sprintf("flags/reserved header bytes are % x, want 00 or 01 then 00 00", h[5:8])}
	}
	n := binary.BigEndian.Uint32(h[8:12])
	if n > MaxPayload {
		return 0, 0, 0, &FrameError{Reason: fmt.Sprintf("%v payload of %d bytes exceeds the %d-byte limit", t, n, MaxPayload)}
	}
	if h[5] == flagSealed && n < SealedOverhead {
		return 0, 0, 0, &FrameError{Reason: fmt.Sprintf("sealed %v body of %d bytes is shorter than its sequence number and MAC (%d bytes)", t, n, SealedOverhead)}
	}
	return t, h[5], int(n), nil
}

var errSealedPlain = "sealed %v frame outside a session (only the handshake is plain): the peer is out of step"

// Decode parses exactly one plain frame held in b.
func Decode(b []byte) (Message, error) {
	if len(b) < headerLen {
		return Message{}, &FrameError{Reason: fmt.Sprintf("frame of %d bytes is shorter than the %d-byte header", len(b), headerLen)}
	}
	t, fl, n, err := parseHeader(b[:headerLen])
	if err != nil {
		return Message{}, err
	}
	if fl != 0 {
		return Message{}, &FrameError{Reason: fmt.Sprintf(errSealedPlain, t)}
	}
	if len(b)-headerLen != n {
		return Message{}, &FrameError{Reason: fmt.Sprintf("%v header says %d payload bytes, frame has %d", t, n, len(b)-headerLen)}
	}
	return decodePayload(t, b[headerLen:])
}

// ReadMessage reads one plain frame from r.
func ReadMessage(r io.Reader) (Message, error) {
	_, m, err := readPlain(r)
	return m, err
}

// readFrame reads one frame's header and body.
func readFrame(r io.Reader) (raw []byte, t Type, flags byte, err error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, 0, 0, err
	}
	t, flags, n, err := parseHeader(h[:])
	if err != nil {
		return nil, 0, 0, err
	}
	raw = make([]byte, headerLen+n)
	copy(raw, h[:])
	if _, err := io.ReadFull(r, raw[headerLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, 0, err
	}
	return raw, t, flags, nil
}

// readPlain reads one plain frame and also returns its bytes (the handshake
// transcript covers them).
func readPlain(r io.Reader) ([]byte, Message, error) {
	raw, t, fl, err := readFrame(r)
	if err != nil {
		return nil, Message{}, err
	}
	if fl != 0 {
		return nil, Message{}, &FrameError{Reason: fmt.Sprintf(errSealedPlain, t)}
	}
	m, err := decodePayload(t, raw[headerLen:])
	return raw, m, err
}

// sealer writes one direction's sealed frames.
type sealer struct {
	key []byte
	seq uint64
}

func (s *sealer) seal(m Message) ([]byte, error) {
	p, err := marshal(m, SealedOverhead)
	if err != nil {
		return nil, err
	}
	n := seqLen + len(p) + macLen
	b := make([]byte, headerLen+n)
	putHeader(b, m.Type, flagSealed, n)
	binary.BigEndian.PutUint64(b[headerLen:], s.seq)
	copy(b[headerLen+seqLen:], p)
	mac := hmac.New(sha256.New, s.key)
	mac.Write(b[:headerLen+seqLen+len(p)])
	mac.Sum(b[:headerLen+seqLen+len(p)])
	s.seq++
	return b, nil
}

// opener checks one direction's sealed frames: MAC first (a changed frame),
// then the sequence number (a replayed, dropped or reordered one).
type opener struct {
	key []byte
	seq uint64
}

func (o *opener) open(raw []byte, t Type, flags byte) (Message, error) {
	if flags != flagSealed {
		return Message{}, &FrameError{Reason: fmt.Sprintf("plain %v frame after the handshake, where every frame is sealed: the peer is out of step or not the peer", t)}
	}
	end := len(raw) - macLen
	mac := hmac.New(sha256.New, o.key)
	mac.Write(raw[:end])
	if !hmac.Equal(mac.Sum(nil), raw[end:]) {
		return Message{}, &SealError{Reason: fmt.Sprintf("%v frame (sequence %d expected) fails its MAC check: it was changed on the way, or does not belong to this session",
			t, o.seq)}
	}
	seq := binary.BigEndian.Uint64(raw[headerLen:])
	switch {
	case seq < o.seq:
		return Message{}, &SealError{Reason: fmt.Sprintf("%v frame with sequence %d replayed: frames up to %d were already received", t, seq, o.seq-1)}
	case seq > o.seq:
		return Message{}, &SealError{Reason: fmt.Sprintf("%v frame with sequence %d where %d was next: frames were dropped or reordered on the way", t, seq, o.seq)}
	}
	m, err := decodePayload(t, raw[headerLen+seqLen:end])
	if err != nil {
		return Message{}, err
	}
	o.seq++
	return m, nil
}

func decodePayload(t Type, p []byte) (Message, error) {
	m := Message{Type: t}
	var v any
	switch t {
	case THello:
		m.Hello = new(Hello)
		v = m.Hello
	case TAuth:
		m.Auth = new(Auth)
		v = m.Auth
	case TAgree:
		m.Agree = new(Agree)
		v = m.Agree
	case TEndpoint:
		m.Endpoint = new(Endpoint)
		v = m.Endpoint
	case TSync:
		m.Sync = new(Sync)
		v = m.Sync
	case TResult:
		m.Result = new(Result)
		v = m.Result
	case TError:
		m.Error = new(ErrorMsg)
		v = m.Error
	case TIntro:
		m.Intro = new(Intro)
		v = m.Intro
	}
	d := json.NewDecoder(bytes.NewReader(p))
	if err := d.Decode(v); err != nil {
		return Message{}, &FrameError{Reason: fmt.Sprintf("%v payload is not valid JSON for its type: %v", t, err)}
	}
	if d.More() {
		return Message{}, &FrameError{Reason: fmt.Sprintf("%v payload has trailing data after its JSON object", t)}
	}
	if err := m.validate(); err != nil {
		return Message{}, &FrameError{Reason: fmt.Sprintf("%v message: %v", t, err)}
	}
	return m, nil
}

const (
	maxText = 4096
	// maxDone bounds Hello.Done: names, and bytes over all names.
	maxDone      = 256
	maxDoneBytes = 16 << 10
)

// maxHost bounds Intro.Host (a host name, as GDR_PEER_NAME).
const maxHost = 255

func validDone(done []string) error {
	if len(done) > maxDone {
		return fmt.Errorf("%d earlier tests listed (at most %d)", len(done), maxDone)
	}
	for _, d := range done {
		if d == "" || len(d) > maxText {
			return fmt.Errorf("earlier test name of %d bytes (want 1..%d)", len(d), maxText)
		}
	}
	return nil
}

// short quotes at most a short prefix of a peer's value in an error.
func short(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

func (m Message) validate() error {
	switch m.Type {
	case THello:
		h := m.Hello
		if h.Version < 1 {
			return fmt.Errorf("version %d is not a protocol version", h.Version)
		}
		if h.Test == "" || len(h.Test) > maxText {
			return fmt.Errorf("test name of %d bytes (want 1..%d)", len(h.Test), maxText)
		}
		if h.Role != "server" && h.Role != "client" {
			return fmt.Errorf("role %s (want server or client)", clip.Quote(h.Role))
		}
		if len(h.Nonce) != NonceLen {
			return fmt.Errorf("nonce of %d bytes (want %d)", len(h.Nonce), NonceLen)
		}
		if len(h.Proof) != 0 && len(h.Proof) != proofLen {
			return fmt.Errorf("proof of %d bytes (want %d)", len(h.Proof), proofLen)
		}
		if err := validDone(h.Done); err != nil {
			return err
		}
		if len(h.Share) != 0 && len(h.Share) != cpaceShareLen {
			return fmt.Errorf("key share of %d bytes (want %d)", len(h.Share), cpaceShareLen)
		}
	case TIntro:
		in := m.Intro
		if in.Test == "" || len(in.Test) > maxText {
			return fmt.Errorf("test name of %d bytes (want 1..%d)", len(in.Test), maxText)
		}
		if len(in.Host) > maxHost || strings.ContainsAny(in.Host, " \t\n/\x00") {
			return fmt.Errorf("host name %s (want at most %d characters, no blanks or slashes)", clip.Quote(in.Host), maxHost)
		}
		if len(in.Caps) > maxDone {
			return fmt.Errorf("%d capabilities (at most %d)", len(in.Caps), maxDone)
		}
		if err := validDone(in.Done); err != nil {
			return err
		}
	case TAuth:
		if len(m.Auth.Proof) != proofLen {
			return fmt.Errorf("proof of %d bytes (want %d)", len(m.Auth.Proof), proofLen)
		}
	case TEndpoint:
		e := m.Endpoint
		if len(e.GID) != 16 {
			return fmt.Errorf("GID of %d bytes (want 16)", len(e.GID))
		}
		if e.QPN == 0 || e.QPN >= 1<<24 {
			return fmt.Errorf("QPN %d out of range (1..2^24-1)", e.QPN)
		}
		if e.PSN >= 1<<24 {
			return fmt.Errorf("PSN %d out of range (0..2^24-1)", e.PSN)
		}
		switch e.MTU {
		case 256, 512, 1024, 2048, 4096:
		default:
			return fmt.Errorf("MTU %d (want 256, 512, 1024, 2048 or 4096)", e.MTU)
		}
		if e.GIDIndex < 0 || e.GIDIndex > 65535 {
			return fmt.Errorf("GID index %d out of range", e.GIDIndex)
		}
		if e.Addr+e.Len < e.Addr {
			return fmt.Errorf("buffer 0x%x+%d wraps around", e.Addr, e.Len)
		}
		if len(e.QPNs) != len(e.PSNs) || len(e.QPNs) > 64 {
			return fmt.Errorf("%d QPNs and %d PSNs (want equal counts, at most 64)", len(e.QPNs), len(e.PSNs))
		}
		for i := range e.QPNs {
			if e.QPNs[i] == 0 || e.QPNs[i] >= 1<<24 || e.PSNs[i] >= 1<<24 {
				return fmt.Errorf("QP %d: QPN %d / PSN %d out of range", i, e.QPNs[i], e.PSNs[i])
			}
		}
		if e.TC != nil && (*e.TC < 0 || *e.TC > 255) {
			return fmt.Errorf("traffic class %d out of range (0..255)", *e.TC)
		}
		if e.SL != nil && (*e.SL < 0 || *e.SL > 15) {
			return fmt.Errorf("service level %d out of range (0..15)", *e.SL)
		}
		for _, f := range []string{e.TCFrom, e.SLFrom} {
			if len(f) > maxClassFrom {
				return fmt.Errorf("class source of %d bytes (at most %d)", len(f), maxClassFrom)
			}
		}
		if len(e.MRs) > maxMRs {
			return fmt.Errorf("%d MRs (want at most %d)", len(e.MRs), maxMRs)
		}
		for i, r := range e.MRs {
			switch r.Path {
			case "host", "peermem", "dmabuf":
			default:
				return fmt.Errorf("MR %d: path %q (want host, peermem or dmabuf)", i, short(r.Path))
			}
			if r.Addr+r.Len < r.Addr {
				return fmt.Errorf("MR %d: 0x%x+%d wraps around", i, r.Addr, r.Len)
			}
		}
	case TSync:
		if m.Sync.Step == "" || len(m.Sync.Step) > maxText {
			return errors.New("empty or oversized step name")
		}
	case TResult:
		if m.Result.Name == "" {
			return errors.New("result without a name")
		}
	case TError:
		if m.Error.Kind == "" {
			return errors.New("error without a kind")
		}
		if _, ok := lagFromWire(m.Error.Lag); !ok {
			return fmt.Errorf("test mismatch lag %s (want %s, %s or %s)", clip.Quote(m.Error.Lag), lagClientBehind, lagServerBehind, lagLists)
		}
	}
	return nil
}
