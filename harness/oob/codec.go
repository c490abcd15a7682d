// Package oob is the out-of-band TCP exchange between the two hosts of a
// pingpong run (or the two ends of a loopback run in one process): hello with
// protocol version and token proof, RDMA endpoints, the agreement to run or to
// skip, barriers and results.
//
// Wire format: every message is one frame
//
//	magic "GDRo" | type (1 byte) | reserved (3 bytes, zero) | length (uint32 BE) | payload (JSON)
//
// The frame header, Hello and Error are frozen across protocol versions, so
// two different versions can always tell each other why they disagree.
package oob

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version this build speaks.
const Version = 1

// MaxPayload bounds a frame's payload; anything larger is rejected before
// it is read, so a wrong peer cannot make us allocate.
const MaxPayload = 64 << 10

const headerLen = 12

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
)

var typeNames = map[Type]string{
	THello: "hello", TAuth: "auth", TAgree: "agree", TEndpoint: "endpoint",
	TSync: "sync", TResult: "result", TError: "error",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type 0x%02x", uint8(t))
}

// Hello opens a session. Its fields are frozen across versions.
type Hello struct {
	Version  int      `json:"version"`
	Test     string   `json:"test"`
	Role     string   `json:"role"`
	Caps     []string `json:"caps,omitempty"`
	Nonce    []byte   `json:"nonce"`
	HasToken bool     `json:"has_token"`
	// Proof is the server's HMAC over both nonces (empty in the client's hello).
	Proof []byte `json:"proof,omitempty"`
}

// Auth carries the client's proof of the token.
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
	GID       []byte `json:"gid"` // 16 bytes; all zero on IB without GRH
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
}

// RemoteMR is one registration of the peer's buffer.
type RemoteMR struct {
	Path string `json:"path"` // host, peermem or dmabuf
	RKey uint32 `json:"rkey"`
	Addr uint64 `json:"addr"`
	Len  uint64 `json:"len"`
}

// maxMRs bounds Endpoint.MRs (one per registration path).
const maxMRs = 4

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

// ErrorMsg tells the peer why we are giving up. Frozen across versions.
type ErrorMsg struct {
	Kind string `json:"kind"` // version, token, test, failed
	Msg  string `json:"msg"`
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

// Encode builds the frame for m.
func Encode(m Message) ([]byte, error) {
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
	default:
		return nil, fmt.Errorf("oob: cannot encode %v", m.Type)
	}
	if v == nil || isNilPtr(v) {
		return nil, fmt.Errorf("oob: %v message without its body", m.Type)
	}
	p, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("oob: encode %v: %w", m.Type, err)
	}
	if len(p) > MaxPayload {
		return nil, fmt.Errorf("oob: %v message is %d bytes, above the %d-byte limit", m.Type, len(p), MaxPayload)
	}
	b := make([]byte, headerLen+len(p))
	copy(b, magic[:])
	b[4] = byte(m.Type)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(p)))
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
	}
	return false
}

// parseHeader checks a frame header and returns the type and payload length.
func parseHeader(h []byte) (Type, int, error) {
	if !bytes.Equal(h[:4], magic[:]) {
		return 0, 0, &FrameError{Reason: fmt.Sprintf("bad magic %q (want %q): the peer is not a gdrconf oob endpoint", h[:4], magic[:])}
	}
	t := Type(h[4])
	if _, ok := typeNames[t]; !ok {
		return 0, 0, &FrameError{Reason: fmt.Sprintf("unknown message type 0x%02x", h[4])}
	}
	if h[5] != 0 || h[6] != 0 || h[7] != 0 {
		return 0, 0, &FrameError{Reason: fmt.Sprintf("reserved header bytes are % x, want zero", h[5:8])}
	}
	n := binary.BigEndian.Uint32(h[8:12])
	if n > MaxPayload {
		return 0, 0, &FrameError{Reason: fmt.Sprintf("%v payload of %d bytes exceeds the %d-byte limit", t, n, MaxPayload)}
	}
	return t, int(n), nil
}

// Decode parses exactly one frame held in b.
func Decode(b []byte) (Message, error) {
	if len(b) < headerLen {
		return Message{}, &FrameError{Reason: fmt.Sprintf("frame of %d bytes is shorter than the %d-byte header", len(b), headerLen)}
	}
	t, n, err := parseHeader(b[:headerLen])
	if err != nil {
		return Message{}, err
	}
	if len(b)-headerLen != n {
		return Message{}, &FrameError{Reason: fmt.Sprintf("%v header says %d payload bytes, frame has %d", t, n, len(b)-headerLen)}
	}
	return decodePayload(t, b[headerLen:])
}

// ReadMessage reads one frame from r.
func ReadMessage(r io.Reader) (Message, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Message{}, err
	}
	t, n, err := parseHeader(h[:])
	if err != nil {
		return Message{}, err
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Message{}, err
	}
	return decodePayload(t, p)
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

const maxText = 4096

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
			return fmt.Errorf("role %q (want server or client)", h.Role)
		}
		if len(h.Nonce) != NonceLen {
			return fmt.Errorf("nonce of %d bytes (want %d)", len(h.Nonce), NonceLen)
		}
		if len(h.Proof) != 0 && len(h.Proof) != proofLen {
			return fmt.Errorf("proof of %d bytes (want %d)", len(h.Proof), proofLen)
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
	}
	return nil
}
