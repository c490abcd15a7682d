package membuf

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestHostBuffer(t *testing.T) {
	b, err := NewHost(5000)
	require.NoError(t, err)
	assert.Equal(t, Host, b.Kind())
	assert.Equal(t, 5000, b.Len())
	assert.Zero(t, b.Addr()%uintptr(os.Getpagesize()), "page aligned")
	assert.Equal(t, make([]byte, 5000), b.Bytes(), "zeroed")

	require.NoError(t, b.Fill([]byte("pattern")))
	got := make([]byte, 7)
	require.NoError(t, b.ReadBack(got))
	assert.Equal(t, "pattern", string(got))
	assert.ErrorContains(t, b.Fill(make([]byte, 5001)), "5001 bytes into a 5000-byte")
	assert.ErrorContains(t, b.ReadBack(make([]byte, 5001)), "5001 bytes from a 5000-byte")
	fd, _, ok, err := b.DmabufFD()
	assert.False(t, ok)
	assert.Equal(t, -1, fd)
	assert.NoError(t, err)

	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "second Close is a no-op")
	assert.Zero(t, b.Addr())
	assert.ErrorContains(t, b.Fill([]byte("x")), "closed")

	_, err = NewHost(0)
	assert.ErrorContains(t, err, "size 0")
}

// A mapping the kernel refuses is the host's shortfall with its remedy,
// so a test records it with testenv.Stop and writes none of its own.
func TestNewHostRefusedIsFinding(t *testing.T) {
	for _, mk := range []func() error{
		func() error { _, err := NewHost(1 << 50); return err },
		func() error { _, _, err := NewHostOn(1<<50, 0); return err },
	} {
		err := mk()
		f, ok := verdict.As(err)
		if !ok {
			t.Fatalf("error %v carries no finding", err)
		}
		if f.Remedy != HostMemoryRemedy || f.Kind() != verdict.FellShort {
			t.Fatalf("finding %+v, want remedy %q, fell short", f, HostMemoryRemedy)
		}
	}
}

// Host buffers cover whole pages of the running kernel: 64 KiB on arm64
// kernels with 64K pages, where a 4 KiB request maps (and registers) 64 KiB.
func TestPageRound(t *testing.T) {
	assert.Equal(t, 65536, pageRound(1, 65536))
	assert.Equal(t, 65536, pageRound(4096, 65536))
	assert.Equal(t, 65536, pageRound(65536, 65536))
	assert.Equal(t, 2*65536, pageRound(65537, 65536))
	assert.Equal(t, 4096, pageRound(4096, 4096))
	b, err := NewHost(1)
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, 1, b.Len())
	assert.Zero(t, b.Addr()%uintptr(os.Getpagesize()))
}
