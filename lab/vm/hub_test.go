package vm

import (
	"bytes"
	"encoding/binary"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func frame(dst, src byte, payload string) []byte {
	f := make([]byte, 14, 14+len(payload))
	copy(f[0:6], []byte{0x52, 0x54, 0, 0, 0, dst})
	copy(f[6:12], []byte{0x52, 0x54, 0, 0, 0, src})
	if dst == 0xff {
		copy(f[0:6], bytes.Repeat([]byte{0xff}, 6))
	}
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	return append(f, payload...)
}

// readWithin reads one frame or returns nil when none arrives in d.
func readWithin(t *testing.T, c net.Conn, d time.Duration) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	f, err := ReadFrame(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	require.NoError(t, err)
	return f[4:]
}

func TestSwitchLearnsAndFloods(t *testing.T) {
	s, err := NewSwitch("rail0")
	require.NoError(t, err)
	defer s.Close()
	assert.Contains(t, s.Netdev(), "addr.host=127.0.0.1")
	var c [3]net.Conn
	for i := range c {
		c[i], err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port()))
		require.NoError(t, err)
		defer c[i].Close()
	}
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.ports) == 3 }, 5*time.Second, 10*time.Millisecond)

	// Broadcast from 1 reaches 2 and 3, not 1.
	require.NoError(t, WriteFrame(c[0], frame(0xff, 1, "arp who-has")))
	assert.Equal(t, frame(0xff, 1, "arp who-has"), readWithin(t, c[1], 2*time.Second))
	assert.Equal(t, frame(0xff, 1, "arp who-has"), readWithin(t, c[2], 2*time.Second))
	assert.Nil(t, readWithin(t, c[0], 100*time.Millisecond))

	// 2 answers 1: the switch learned 1's port, so 3 does not see it.
	require.NoError(t, WriteFrame(c[1], frame(1, 2, "arp reply")))
	assert.Equal(t, frame(1, 2, "arp reply"), readWithin(t, c[0], 2*time.Second))
	assert.Nil(t, readWithin(t, c[2], 100*time.Millisecond))

	// Unicast to a MAC not seen yet is flooded.
	require.NoError(t, WriteFrame(c[0], frame(9, 1, "to nobody yet")))
	assert.NotNil(t, readWithin(t, c[1], 2*time.Second))
	assert.NotNil(t, readWithin(t, c[2], 2*time.Second))
	assert.Equal(t, int64(2), s.Flooded.Load())
	assert.Contains(t, s.Stats(), "3 frames")
}

func TestSwitchDropsBrokenStream(t *testing.T) {
	s, err := NewSwitch("rail1")
	require.NoError(t, err)
	defer s.Close()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port()))
	require.NoError(t, err)
	defer c.Close()
	// A length no Ethernet frame has: the switch closes the port.
	_, err = c.Write([]byte{0xff, 0xff, 0xff, 0xff})
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	assert.Equal(t, int64(1), s.Dropped.Load())

	_, err = ReadFrame(bytes.NewReader([]byte{0, 0, 0, 3, 1, 2, 3}))
	assert.ErrorContains(t, err, "frame length 3")
}
