package oob

import (
	"bytes"
	"testing"
	"time"
)

func BenchmarkEncodeEndpoint(b *testing.B) {
	ep := sampleEndpoint()
	m := Message{Type: TEndpoint, Endpoint: &ep}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEndpoint(b *testing.B) {
	ep := sampleEndpoint()
	f, _ := Encode(Message{Type: TEndpoint, Endpoint: &ep})
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadMessage(bytes.NewReader(f)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBarrier is one barrier round trip over 127.0.0.1, the cost a
// pingpong iteration pays per out-of-band sync.
func BenchmarkBarrier(b *testing.B) {
	ln, err := Listen("127.0.0.1:0", Options{Test: "B", Timeout: 5 * time.Second, History: new(History)})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	n := b.N
	go func() {
		s, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer s.Close()
		for i := 0; i < n; i++ {
			if err := s.Barrier("b", i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	c, err := Dial(ln.Addr(), Options{Test: "B", Timeout: 5 * time.Second, History: new(History)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for i := 0; i < n; i++ {
		if err := c.Barrier("b", i); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHandshake is one session set-up over 127.0.0.1 with a token:
// listen, accept, dial, both hellos and proofs, key derivation.
func BenchmarkHandshake(b *testing.B) {
	o := Options{Test: "B", Token: "s3cret", Timeout: 5 * time.Second, History: new(History)}
	for b.Loop() {
		ln, err := Listen("127.0.0.1:0", o)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			s, err := ln.Accept()
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		c, err := Dial(ln.Addr(), o)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealOpenEndpoint is the MAC and sequence cost of one sealed
// endpoint frame; it reports the frame's size plain and sealed.
func BenchmarkSealOpenEndpoint(b *testing.B) {
	ep := sampleEndpoint()
	m := Message{Type: TEndpoint, Endpoint: &ep}
	plain, _ := Encode(m)
	key := bytes.Repeat([]byte{1}, 32)
	sealed, _ := (&sealer{key: key}).seal(m)
	b.ReportAllocs()
	out, in := &sealer{key: key}, &opener{key: key}
	for b.Loop() {
		f, err := out.seal(m)
		if err != nil {
			b.Fatal(err)
		}
		raw, t, fl, err := readFrame(bytes.NewReader(f))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := in.open(raw, t, fl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(plain)), "plain-B")
	b.ReportMetric(float64(len(sealed)), "sealed-B")
}
