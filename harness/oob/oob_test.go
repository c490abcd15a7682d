package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleEndpoint() Endpoint {
	gid := make([]byte, 16)
	gid[10], gid[11], gid[12], gid[15] = 0xff, 0xff, 198, 2
	return Endpoint{LID: 0, GID: gid, GIDIndex: 1, QPN: 17, PSN: 0x123456, RKey: 0xabc,
		Addr: 0x7f0000001000, Len: 65536, MTU: 1024, LinkLayer: "Ethernet", Mem: "host"}
}

func TestCodecRoundTrip(t *testing.T) {
	ep := sampleEndpoint()
	msgs := []Message{
		{Type: THello, Hello: &Hello{Version: 1, Test: "TestPP03Write", Role: "client", Nonce: make([]byte, NonceLen), Caps: []string{"mem:host"}}},
		{Type: TAuth, Auth: &Auth{Proof: make([]byte, proofLen)}},
		{Type: TAgree, Agree: &Agree{Skip: "no device", Info: map[string]string{"mem": "host"}}},
		{Type: TEndpoint, Endpoint: &ep},
		{Type: TSync, Sync: &Sync{Step: "written", Iter: 3, Seed: 99}},
		{Type: TResult, Result: &Result{Name: "bw", OK: true, Values: map[string]float64{"gbps": 1.5}}},
		{Type: TError, Error: &ErrorMsg{Kind: "token", Msg: "x"}},
	}
	for _, m := range msgs {
		t.Run(m.Type.String(), func(t *testing.T) {
			b, err := Encode(m)
			require.NoError(t, err)
			got, err := Decode(b)
			require.NoError(t, err)
			assert.Equal(t, m, got)
			got2, err := ReadMessage(bytes.NewReader(b))
			require.NoError(t, err)
			assert.Equal(t, m, got2)
		})
	}
}

func frame(t Type, payload string) []byte {
	b := make([]byte, headerLen+len(payload))
	copy(b, magic[:])
	b[4] = byte(t)
	binary.BigEndian.PutUint32(b[8:], uint32(len(payload)))
	copy(b[headerLen:], payload)
	return b
}

func TestDecodeRejects(t *testing.T) {
	over := frame(TSync, "")
	binary.BigEndian.PutUint32(over[8:], MaxPayload+1)
	badMagic := frame(TSync, `{"step":"a"}`)
	copy(badMagic, "HTTP")
	reserved := frame(TSync, `{"step":"a"}`)
	reserved[6] = 1
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", []byte("GDR"), "shorter than the 12-byte header"},
		{"magic", badMagic, "bad magic"},
		{"unknown type", frame(Type(0x7f), "{}"), "unknown message type 0x7f"},
		{"reserved", reserved, "flags/reserved header bytes"},
		{"oversized", over, "exceeds the 65536-byte limit"},
		{"length mismatch", append(frame(TSync, `{"step":"a"}`), 'x'), "header says 12 payload bytes, frame has 13"},
		{"bad json", frame(TSync, `{"step":`), "not valid JSON"},
		{"wrong json type", frame(TSync, `{"step":5}`), "not valid JSON"},
		{"trailing", frame(TSync, `{"step":"a"}{}`), "trailing data"},
		{"empty step", frame(TSync, `{"step":""}`), "empty or oversized step"},
		{"gid length", frame(TEndpoint, `{"gid":"AAE=","qpn":1,"mtu":1024}`), "GID of 2 bytes"},
		{"qpn zero", frame(TEndpoint, `{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":0,"mtu":1024}`), "QPN 0 out of range"},
		{"mtu", frame(TEndpoint, `{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1500}`), "MTU 1500"},
		{"hello role", frame(THello, `{"version":1,"test":"T","role":"boss","nonce":"AAAAAAAAAAAAAAAAAAAAAA=="}`), `role "boss"`},
		{"hello nonce", frame(THello, `{"version":1,"test":"T","role":"client","nonce":"AA=="}`), "nonce of 1 bytes"},
		{"hello version", frame(THello, `{"version":0,"test":"T","role":"client","nonce":"AAAAAAAAAAAAAAAAAAAAAA=="}`), "version 0"},
		{"auth proof", frame(TAuth, `{"proof":"AA=="}`), "proof of 1 bytes"},
		{"null body", frame(TAgree, `null`), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.b)
			if c.want == "" {
				// JSON null decodes to a zero Agree: allowed, but never a panic.
				return
			}
			require.Error(t, err)
			assert.True(t, IsFrameError(err), "%v", err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	_, err := Encode(Message{Type: TSync})
	assert.ErrorContains(t, err, "without its body")
	_, err = Encode(Message{Type: Type(99)})
	assert.ErrorContains(t, err, "cannot encode")
	_, err = Encode(Message{Type: TResult, Result: &Result{Name: "x", Msg: strings.Repeat("a", MaxPayload)}})
	assert.ErrorContains(t, err, "above the 65536-byte limit")
}

// pair runs a server and a client session over 127.0.0.1, each side with
// its own test history (two processes).
func pair(t *testing.T, so, co Options) (srv, cli *Session, serr, cerr error) {
	t.Helper()
	if so.History == nil {
		so.History = new(History)
	}
	if co.History == nil {
		co.History = new(History)
	}
	if so.Logf == nil {
		so.Logf = t.Logf
	}
	ln, err := Listen("127.0.0.1:0", so)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv, serr = ln.Accept()
	}()
	cli, cerr = Dial(ln.Addr(), co)
	<-done
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return
}

func opts(test, token string) Options {
	return Options{Test: test, Token: token, Timeout: 2 * time.Second}
}

func TestSessionHappyPath(t *testing.T) {
	so, co := opts("TestX", "s3cret"), opts("TestX", "s3cret")
	so.Caps, co.Caps = []string{"mem:gpu"}, []string{"mem:host"}
	srv, cli, serr, cerr := pair(t, so, co)
	require.NoError(t, serr)
	require.NoError(t, cerr)
	assert.Equal(t, []string{"mem:host"}, srv.PeerCaps)
	assert.Equal(t, []string{"mem:gpu"}, cli.PeerCaps)

	type out struct {
		ep   Endpoint
		run  bool
		why  string
		seed uint64
		res  Result
		err  error
	}
	ch := make(chan out, 1)
	go func() {
		var o out
		defer func() { ch <- o }()
		if _, o.run, o.why, o.err = srv.Agree(Agree{}); o.err != nil {
			return
		}
		if o.ep, o.err = srv.ExchangeEndpoint(sampleEndpoint()); o.err != nil {
			return
		}
		if o.seed, o.err = srv.BarrierValue("go", 1, 7); o.err != nil {
			return
		}
		o.res, o.err = srv.ExchangeResult(Result{Name: "check", OK: true})
	}()
	_, run, why, err := cli.Agree(Agree{Skip: "no GPU"})
	require.NoError(t, err)
	ep2 := sampleEndpoint()
	ep2.QPN = 99
	gotEP, err := cli.ExchangeEndpoint(ep2)
	require.NoError(t, err)
	seed, err := cli.BarrierValue("go", 1, 42)
	require.NoError(t, err)
	res, err := cli.ExchangeResult(Result{Name: "check", OK: false, Msg: "mismatch"})
	require.NoError(t, err)
	o := <-ch
	require.NoError(t, o.err)

	assert.False(t, run)
	assert.False(t, o.run)
	assert.Equal(t, "client: no GPU", why)
	assert.Equal(t, why, o.why, "both sides skip with the same reason")
	assert.Equal(t, sampleEndpoint(), gotEP)
	assert.Equal(t, uint32(99), o.ep.QPN)
	assert.Equal(t, uint64(7), seed)
	assert.Equal(t, uint64(42), o.seed)
	assert.True(t, res.OK)
	assert.Equal(t, "mismatch", o.res.Msg)
}

// A wrong token fails both sides when their waits end: the server naming
// what it turned away, the client what the unproven server said and did
// (it acts on none of it before then).
func TestWrongToken(t *testing.T) {
	for _, c := range []struct{ name, st, ct, want string }{
		{"different", "a", "b", "GDR_TOKEN differs"},
		{"server only", "a", "", "set on the server but not on the client"},
		{"client only", "", "b", "set on the client but not on the server"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			so, co := opts("T", c.st), opts("T", c.ct)
			so.Timeout, co.Timeout, co.Logf = 400*time.Millisecond, 400*time.Millisecond, t.Logf
			start := time.Now()
			_, _, serr, cerr := pair(t, so, co)
			assert.Less(t, time.Since(start), 2*time.Second)
			for side, err := range map[string]error{"server": serr, "client": cerr} {
				require.Error(t, err, side)
				assert.ErrorIs(t, err, ErrToken, side)
				assert.Contains(t, err.Error(), "wrong token", side)
				assert.Contains(t, err.Error(), c.want, side)
			}
			assert.Contains(t, serr.Error(), "127.0.0.1:", "the server names the client it turned away")
		})
	}
}

func TestVersionMismatch(t *testing.T) {
	for _, c := range []struct {
		name   string
		sv, cv int
	}{{"client newer", 2, 3}, {"server newer", 3, 2}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			so, co := opts("T", ""), opts("T", "")
			so.Timeout, co.Timeout, co.Logf = 400*time.Millisecond, 400*time.Millisecond, t.Logf
			so.Version, co.Version = c.sv, c.cv
			_, _, serr, cerr := pair(t, so, co)
			for side, err := range map[string]error{"server": serr, "client": cerr} {
				require.Error(t, err, side)
				assert.ErrorIs(t, err, ErrVersion, side)
				assert.Contains(t, err.Error(), "version mismatch", side)
				assert.Contains(t, err.Error(), fmt.Sprintf("the server speaks oob protocol v%d, the client v%d: run the same gdrconf build on both hosts", c.sv, c.cv), side)
			}
		})
	}
}

// Different test lists: neither host ran the other's test. The client fails
// at once saying so; the server keeps waiting, then says the same. Without
// a token the server's test name stays in the server's log: the client
// hears only that the lists differ.
func TestTestMismatch(t *testing.T) {
	for _, tok := range []string{"tok", ""} {
		t.Run("token="+tok, func(t *testing.T) {
			so, co := opts("TestA", tok), opts("TestB", tok)
			so.Timeout = 400 * time.Millisecond
			_, _, serr, cerr := pair(t, so, co)
			for side, err := range map[string]error{"server": serr, "client": cerr} {
				require.Error(t, err, side)
				assert.ErrorIs(t, err, ErrTest, side)
				assert.Contains(t, err.Error(), "different test lists", side)
				var e *Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, LagLists, e.Lag, side)
			}
			assert.Contains(t, serr.Error(), "the server runs test TestA, the client test TestB")
			var e *Error
			require.ErrorAs(t, cerr, &e)
			if tok != "" {
				assert.Contains(t, cerr.Error(), "the server runs test TestA, the client test TestB")
				assert.Equal(t, "TestA", e.PeerTest)
			} else {
				assert.NotContains(t, cerr.Error(), "TestA", "not told to an unauthenticated client")
				assert.Empty(t, e.PeerTest)
				assert.Contains(t, cerr.Error(), "the server's test is not told without GDR_TOKEN")
			}
		})
	}
}

// A silent peer during the hello (accepts TCP, never speaks) fails both ways.
func TestSilentDuringHello(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer raw.Close()
	go func() {
		c, err := raw.Accept()
		if err == nil {
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	o := opts("T", "")
	o.Timeout = 200 * time.Millisecond
	start := time.Now()
	_, err = Dial(raw.Addr().String(), o)
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Contains(t, err.Error(), "server's hello")
}

func TestAcceptTimeout(t *testing.T) {
	o := opts("TestLonely", "")
	o.Timeout = 200 * time.Millisecond
	ln, err := Listen("127.0.0.1:0", o)
	require.NoError(t, err)
	addr := ln.Addr()
	_, err = ln.Accept()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Contains(t, err.Error(), "no valid peer connected")
	// The listener is closed after the session: the port is free again.
	ln2, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	ln2.Close()
}

func TestDialTimeout(t *testing.T) {
	// A port nobody listens on: refused until the deadline.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	o := opts("T", "")
	o.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = Dial(addr, o)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Contains(t, err.Error(), "could not reach the server "+addr)
}

// Dial retries while the server is still busy with the previous test.
func TestDialWaitsForServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	errc := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		ln, err := Listen(addr, opts("T", ""))
		if err != nil {
			errc <- err
			return
		}
		s, err := ln.Accept()
		if err == nil {
			s.Close()
		}
		errc <- err
	}()
	s, err := Dial(addr, opts("T", ""))
	require.NoError(t, err)
	s.Close()
	require.NoError(t, <-errc)
}

// Garbage from the peer is a protocol error naming the rule it broke.
func TestGarbagePeer(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer raw.Close()
	go func() {
		c, err := raw.Accept()
		if err == nil {
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			time.Sleep(500 * time.Millisecond)
			c.Close()
		}
	}()
	_, err = Dial(raw.Addr().String(), opts("T", ""))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrProtocol)
	assert.Contains(t, err.Error(), "bad magic")
}

func TestPeerAbort(t *testing.T) {
	srv, cli, serr, cerr := pair(t, opts("T", ""), opts("T", ""))
	require.NoError(t, serr)
	require.NoError(t, cerr)
	cli.Abort("failed", "ibv_modify_qp(RTR): errno 22 (EINVAL)")
	err := srv.Barrier("x", 0)
	assert.ErrorIs(t, err, ErrPeer)
	assert.Contains(t, err.Error(), "errno 22 (EINVAL)")
	var e *Error
	assert.True(t, errors.As(err, &e))
}

func FuzzDecode(f *testing.F) {
	ep := sampleEndpoint()
	for _, m := range []Message{
		{Type: THello, Hello: &Hello{Version: 1, Test: "T", Role: "server", Nonce: make([]byte, NonceLen), Proof: make([]byte, proofLen)}},
		{Type: TEndpoint, Endpoint: &ep},
		{Type: TSync, Sync: &Sync{Step: "s", Iter: 1}},
		{Type: TResult, Result: &Result{Name: "r", Values: map[string]float64{"a": 1}}},
		{Type: TError, Error: &ErrorMsg{Kind: "version", Msg: "m"}},
	} {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("GDRo\x05\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !IsFrameError(err) {
				t.Fatalf("non-frame error %T: %v", err, err)
			}
			return
		}
		// Whatever decodes must re-encode and decode to the same message.
		b2, err := Encode(m)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", m, err)
		}
		m2, err := Decode(b2)
		if err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		b3, err := Encode(m2)
		if err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("encoding not stable: %v", err)
		}
		// A stream reader agrees with the frame decoder.
		if _, err := ReadMessage(bytes.NewReader(b)); err != nil {
			t.Fatalf("ReadMessage rejects what Decode accepts: %v", err)
		}
	})
}

// A busy peer that sends heartbeats keeps the session alive past Timeout;
// once the heartbeats stop, the wait fails within Timeout.
func TestHeartbeat(t *testing.T) {
	so, co := opts("T", ""), opts("T", "")
	// Margins for a loaded 2-core CI machine: heartbeats every 100ms.
	so.Timeout, co.Timeout = 400*time.Millisecond, 400*time.Millisecond
	srv, cli, serr, cerr := pair(t, so, co)
	require.NoError(t, serr)
	require.NoError(t, cerr)
	errc := make(chan error, 1)
	go func() { errc <- srv.Barrier("done", 0) }()
	stop := cli.Heartbeat()
	time.Sleep(1200 * time.Millisecond) // 3x the timeout, busy
	stop()
	require.NoError(t, cli.Barrier("done", 0))
	require.NoError(t, <-errc)

	stop = cli.Heartbeat()
	time.Sleep(100 * time.Millisecond)
	stop()
	start := time.Now()
	err := srv.Barrier("never", 1)
	assert.ErrorIs(t, err, ErrVanished)
	assert.Less(t, time.Since(start), 1500*time.Millisecond)
}

// The fabric class travels in the endpoint; a peer that sends none (an
// older suite) is class 0; a difference is one message, the same on both
// ends, naming both values and their sources; bad values are frame errors.
func TestEndpointClass(t *testing.T) {
	ep := sampleEndpoint()
	ep.SetClass(Class{TC: 104, SL: 3, TCFrom: "NCCL_IB_TC", SLFrom: "GDR_IB_SL"})
	b, err := Encode(Message{Type: TEndpoint, Endpoint: &ep})
	require.NoError(t, err)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, Class{TC: 104, SL: 3, TCFrom: "NCCL_IB_TC", SLFrom: "GDR_IB_SL"}, got.Endpoint.Class())

	old := sampleEndpoint() // no class fields on the wire
	b, err = Encode(Message{Type: TEndpoint, Endpoint: &old})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "ib_tc")
	got, err = Decode(b)
	require.NoError(t, err)
	oldClass := got.Endpoint.Class()
	assert.Equal(t, Class{}, oldClass)

	def := Class{TCFrom: "default", SLFrom: "default"}
	require.NoError(t, AgreeClass("server", def, oldClass), "defaults agree with an older peer")
	require.NoError(t, AgreeClass("client", Class{TC: 104, SL: 3, TCFrom: "GDR_IB_TC", SLFrom: "GDR_IB_SL"}, Class{TC: 104, SL: 3, TCFrom: "NCCL_IB_TC", SLFrom: "NCCL_IB_SL"}),
		"the same values agree whatever their sources")

	srv := Class{TC: 104, SL: 3, TCFrom: "GDR_IB_TC", SLFrom: "NCCL_IB_SL"}
	cli := Class{TC: 0, SL: 3, TCFrom: "default", SLFrom: "NCCL_IB_SL"}
	es, ec := AgreeClass("server", srv, cli), AgreeClass("client", cli, srv)
	require.Error(t, es)
	require.Error(t, ec)
	assert.Equal(t, es.Error(), ec.Error(), "both ends fail with the same message")
	for _, w := range []string{`traffic class: server 104 (from "GDR_IB_TC"), client 0 (from "default")`, "GDR_IB_TC and GDR_IB_SL", "NCCL_IB_TC"} {
		assert.Contains(t, es.Error(), w)
	}
	assert.NotContains(t, es.Error(), "service level:", "only what differs")
	err = AgreeClass("client", Class{SL: 5, SLFrom: "GDR_IB_SL", TCFrom: "default"}, oldClass)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `service level: server 0 (not sent: an older suite, which uses 0), client 5 (from "GDR_IB_SL")`)

	for _, c := range []struct{ body, want string }{
		{`{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1024,"ib_tc":256}`, "traffic class 256 out of range"},
		{`{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1024,"ib_tc":-1}`, "traffic class -1 out of range"},
		{`{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1024,"ib_sl":16}`, "service level 16 out of range"},
		{`{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1024,"ib_sl":0,"ib_sl_from":"` + strings.Repeat("x", 65) + `"}`, "class source of 65 bytes"},
	} {
		_, err := Decode(frame(TEndpoint, c.body))
		require.Error(t, err, c.body)
		assert.True(t, IsFrameError(err), "%v", err)
		assert.Contains(t, err.Error(), c.want)
	}
}

// Whether a port requires a GRH travels in the endpoint; an older peer sends
// nothing and is read as not requiring one; a value of the wrong type is a
// frame error.
func TestEndpointGRHRequired(t *testing.T) {
	for _, want := range []bool{true, false} {
		ep := sampleEndpoint()
		ep.GRHRequired = &want
		b, err := Encode(Message{Type: TEndpoint, Endpoint: &ep})
		require.NoError(t, err)
		assert.Contains(t, string(b), fmt.Sprintf(`"grh_required":%v`, want), "sent also when false: the flags were read")
		got, err := Decode(b)
		require.NoError(t, err)
		require.NotNil(t, got.Endpoint.GRHRequired)
		assert.Equal(t, want, got.Endpoint.PeerGRHRequired())
	}

	old := sampleEndpoint() // flags not read, or an older suite
	b, err := Encode(Message{Type: TEndpoint, Endpoint: &old})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "grh_required")
	got, err := Decode(frame(TEndpoint, `{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1024,"link_layer":"InfiniBand"}`))
	require.NoError(t, err)
	assert.Nil(t, got.Endpoint.GRHRequired)
	assert.False(t, got.Endpoint.PeerGRHRequired())

	_, err = Decode(frame(TEndpoint, `{"gid":"AAAAAAAAAAAAAAAAAAAAAA==","qpn":1,"mtu":1024,"grh_required":"yes"}`))
	require.Error(t, err)
	assert.True(t, IsFrameError(err), "%v", err)
	assert.Contains(t, err.Error(), "grh_required")
}
