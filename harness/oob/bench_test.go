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
	ln, err := Listen("127.0.0.1:0", Options{Test: "B", Timeout: 5 * time.Second})
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
	c, err := Dial(ln.Addr(), Options{Test: "B", Timeout: 5 * time.Second})
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
