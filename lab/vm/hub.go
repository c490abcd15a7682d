package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Switch is one Ethernet segment of the cluster lab: a learning switch on
// 127.0.0.1 that every VM's qemu joins with -netdev stream (TCP, each
// frame preceded by its length as a 4-byte big-endian number, the framing
// of qemu's socket and stream netdevs). qemu's own socket networking is
// point-to-point; four VMs on one network need something in the middle.
// A hub would do, but under TCG every frame a guest receives costs its
// emulated CPU: learning which port owns a MAC keeps one pair's bandwidth
// test off the other VMs.
type Switch struct {
	Name string
	ln   net.Listener

	mu    sync.Mutex
	ports map[*swPort]bool
	macs  map[[6]byte]*swPort

	wg sync.WaitGroup

	Frames, Flooded, Dropped atomic.Int64
}

type swPort struct {
	conn net.Conn
	out  chan []byte
	once sync.Once
}

// swQueue is how many frames may wait for one slow port before the switch
// drops frames to it, as a real switch does when a port is congested (RoCE
// retransmits, like on any lossy Ethernet).
const swQueue = 512

// maxFrame bounds the length prefix: virtio-net without TSO sends at most
// one MTU plus headers; anything near 64 KiB is accepted, anything larger
// means the stream lost its framing.
const maxFrame = 65536 + 64

// NewSwitch listens on a free 127.0.0.1 port.
func NewSwitch(name string) (*Switch, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("switch %s: %w", name, err)
	}
	s := &Switch{Name: name, ln: ln, ports: map[*swPort]bool{}, macs: map[[6]byte]*swPort{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Port is the TCP port the VMs connect to.
func (s *Switch) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Netdev is qemu's -netdev value (without id) that joins this switch.
func (s *Switch) Netdev() string {
	return fmt.Sprintf("stream,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=%d", s.Port())
}

// Close stops the switch and drops every port.
func (s *Switch) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for p := range s.ports {
		p.conn.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// Stats is a one-line account for the lab's log.
func (s *Switch) Stats() string {
	return fmt.Sprintf("switch %s: %d frames, %d flooded, %d dropped", s.Name, s.Frames.Load(), s.Flooded.Load(), s.Dropped.Load())
}

func (s *Switch) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		p := &swPort{conn: c, out: make(chan []byte, swQueue)}
		s.mu.Lock()
		s.ports[p] = true
		s.mu.Unlock()
		s.wg.Add(2)
		go s.writer(p)
		go s.reader(p)
	}
}

func (s *Switch) drop(p *swPort) {
	p.once.Do(func() {
		s.mu.Lock()
		delete(s.ports, p)
		for m, q := range s.macs {
			if q == p {
				delete(s.macs, m)
			}
		}
		s.mu.Unlock()
		p.conn.Close()
		close(p.out)
	})
}

func (s *Switch) writer(p *swPort) {
	defer s.wg.Done()
	for f := range p.out {
		if _, err := p.conn.Write(f); err != nil {
			go s.drop(p)
			for range p.out { // let drop close the channel
			}
			return
		}
	}
}

// ReadFrame reads one length-prefixed frame.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 14 || n > maxFrame {
		return nil, fmt.Errorf("frame length %d: not an Ethernet frame (14..%d bytes): the stream lost its framing", n, maxFrame)
	}
	f := make([]byte, 4+n)
	copy(f, hdr[:])
	if _, err := io.ReadFull(r, f[4:]); err != nil {
		return nil, err
	}
	return f, nil
}

// WriteFrame writes one length-prefixed frame.
func WriteFrame(w io.Writer, frame []byte) error {
	b := make([]byte, 4+len(frame))
	binary.BigEndian.PutUint32(b, uint32(len(frame)))
	copy(b[4:], frame)
	_, err := w.Write(b)
	return err
}

func (s *Switch) reader(p *swPort) {
	defer s.wg.Done()
	defer s.drop(p)
	for {
		f, err := ReadFrame(p.conn)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.Dropped.Add(1)
			}
			return
		}
		s.Frames.Add(1)
		var dst, src [6]byte
		copy(dst[:], f[4:10])
		copy(src[:], f[10:16])
		s.mu.Lock()
		if src[0]&1 == 0 {
			s.macs[src] = p
		}
		var to []*swPort
		if q, ok := s.macs[dst]; ok && dst[0]&1 == 0 {
			if q != p {
				to = append(to, q)
			}
		} else {
			s.Flooded.Add(1)
			for q := range s.ports {
				if q != p {
					to = append(to, q)
				}
			}
		}
		for _, q := range to {
			select {
			case q.out <- f:
			default:
				s.Dropped.Add(1)
			}
		}
		s.mu.Unlock()
	}
}
