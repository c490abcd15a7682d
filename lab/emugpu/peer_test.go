//go:build gpu

package emugpu_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
)

// twoFakeGPUs loads the emulated driver with two devices and retains both
// primary contexts for t.
func twoFakeGPUs(t *testing.T, cflags ...string) (*cuda.Context, *cuda.Context) {
	t.Helper()
	useFake(t, cflags...)
	t.Setenv("FAKE_CUDA_DEVICES", "2")
	d, err := cuda.Load()
	require.NoError(t, err)
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 2)
	require.NotEqual(t, devs[0].PCI, devs[1].PCI)
	return cuda.Primary(t, devs[0]), cuda.Primary(t, devs[1])
}

func TestFakePeerAccess(t *testing.T) {
	a, b := twoFakeGPUs(t)
	ok, err := a.Dev.CanAccessPeer(b.Dev)
	require.NoError(t, err)
	assert.True(t, ok, "emulated devices reach each other's memory")
	ok, err = a.Dev.CanAccessPeer(a.Dev)
	require.NoError(t, err)
	assert.False(t, ok, "a device is not its own peer")

	now, err := a.EnablePeerAccess(b)
	require.NoError(t, err)
	assert.True(t, now)
	now, err = a.EnablePeerAccess(b)
	require.NoError(t, err, "ALREADY_ENABLED is no error")
	assert.False(t, now)
	require.NoError(t, a.DisablePeerAccess(b))
	err = a.DisablePeerAccess(b)
	require.Error(t, err)
	assert.Equal(t, cuda.ErrPeerAccessNotEnabled, cuda.Code(err))
	assert.Contains(t, err.Error(), "cuCtxDisablePeerAccess(gpu 0 -> gpu 1): CUDA_ERROR_PEER_ACCESS_NOT_ENABLED")

	_, err = a.EnablePeerAccess(a)
	require.Error(t, err, "a context cannot be its own peer")

	// EnablePeer disables what it enabled when the test ends, and leaves
	// what was enabled before it alone.
	t.Run("cleanup", func(t *testing.T) {
		assert.True(t, cuda.EnablePeer(t, b, a))
	})
	now, err = b.EnablePeerAccess(a)
	require.NoError(t, err)
	assert.True(t, now, "EnablePeer's cleanup disabled it again")
	t.Run("already", func(t *testing.T) {
		assert.False(t, cuda.EnablePeer(t, b, a))
	})
	now, err = b.EnablePeerAccess(a)
	require.NoError(t, err)
	assert.False(t, now, "enabled before EnablePeer: still enabled after it")
}

func TestFakePeerCopy(t *testing.T) {
	a, b := twoFakeGPUs(t)
	const n = 1 << 20
	src := cuda.Alloc(t, a, n)
	dst := cuda.Alloc(t, b, n+4096)
	want := make([]byte, n)
	membuf.Pattern(want, 42)
	require.NoError(t, src.Fill(want))
	require.NoError(t, b.Memset(dst.Addr(), 0xa5, n+4096))

	spans, err := cuda.PeerCopyLoop(dst, src, n, 3, cuda.Loop{Reps: 4})
	require.NoError(t, err)
	require.Len(t, spans, 4)
	for _, s := range spans {
		assert.False(t, s.End.Before(s.Start))
	}
	got := make([]byte, n+64)
	require.NoError(t, dst.ReadBack(got))
	require.NoError(t, membuf.Compare(got[:n], want, 0xa5))
	require.NoError(t, membuf.Guard(got, n, 0xa5))

	// The other way, bounded by time and stopped early.
	stop := make(chan struct{})
	close(stop)
	spans, err = cuda.PeerCopyLoop(src, dst, n, 1, cuda.Loop{Stop: stop, Limit: time.Second})
	require.NoError(t, err)
	assert.Empty(t, spans, "a closed stop ends the loop before the first copy")
	spans, err = cuda.PeerCopyLoop(src, dst, n, 1, cuda.Loop{Limit: 20 * time.Millisecond})
	require.NoError(t, err)
	assert.NotEmpty(t, spans)

	_, err = cuda.PeerCopyLoop(dst, src, n, 1, cuda.Loop{})
	require.ErrorContains(t, err, "without a bound")
	_, err = cuda.PeerCopyLoop(dst, src, n, 0, cuda.Loop{Reps: 1})
	require.ErrorContains(t, err, "batch of 0")
	_, err = cuda.PeerCopyLoop(src, dst, n+4096, 1, cuda.Loop{Reps: 1})
	require.ErrorContains(t, err, "into a 1048576-byte GPU buffer")

	// Bytes a NIC wrote into the source and nobody flushed are refused, as
	// a device-to-host read of them is.
	nicWrite(t, src)
	_, err = cuda.PeerCopyLoop(dst, src, n, 1, cuda.Loop{Reps: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cuFlushGPUDirectRDMAWrites")
	require.NoError(t, src.ReadBack(make([]byte, 16)), "ReadBack flushes the NIC's writes first")
	_, err = cuda.PeerCopyLoop(dst, src, n, 1, cuda.Loop{Reps: 1})
	require.NoError(t, err, "after the flush the copy goes through")
	require.NoError(t, dst.ReadBack(got[:16]))
	assert.Equal(t, bytes.Repeat([]byte{0xee}, 16), got[:16], "the NIC's bytes arrived at the peer")

	// A device pointer handed in with the wrong context is refused (the
	// emulator says why on stderr).
	_, err = cuda.PeerCopyLoop(dst, src.Misowned(b), n, 1, cuda.Loop{Reps: 1})
	require.Error(t, err)
	assert.Equal(t, cuda.ErrInvalidValue, cuda.Code(err))
}

func TestFakeNoPeer(t *testing.T) {
	a, b := twoFakeGPUs(t)
	t.Setenv("FAKE_CUDA_PEER", "0")
	ok, err := a.Dev.CanAccessPeer(b.Dev)
	require.NoError(t, err)
	assert.False(t, ok)
	_, err = a.EnablePeerAccess(b)
	require.Error(t, err)
	assert.Equal(t, cuda.ErrPeerAccessUnsupported, cuda.Code(err))
	assert.Contains(t, err.Error(), "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED")
	assert.Contains(t, cuda.PeerRemedy(err), "nvidia-smi topo -p2p r")
}

func TestFakePeerSymbolMissing(t *testing.T) {
	a, b := twoFakeGPUs(t, "-DNO_PEER_SYMBOL")
	_, err := a.Dev.CanAccessPeer(b.Dev)
	require.Error(t, err)
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err))
	assert.Contains(t, err.Error(), "does not export cuDeviceCanAccessPeer")
	_, err = a.EnablePeerAccess(b)
	require.ErrorContains(t, err, "cuDeviceCanAccessPeer", "every peer call names the first missing symbol")
	assert.Equal(t, "upgrade the NVIDIA driver", cuda.PeerRemedy(err))
}

func TestFakeCopyLoop(t *testing.T) {
	a, _ := twoFakeGPUs(t)
	const n = 1 << 20
	dev := cuda.Alloc(t, a, n)
	host := cuda.HostAlloc(t, a, n)
	spans, err := a.CopyLoop(cuda.HtoD, dev, host, n, cuda.Loop{Reps: 3})
	require.NoError(t, err)
	require.Len(t, spans, 3)
	assert.Len(t, cuda.Durations(spans), 3)
	_, err = a.CopyLoop(cuda.HtoD, dev, host, n, cuda.Loop{})
	require.ErrorContains(t, err, "without a bound")
	k, err := a.CopyUntil(cuda.DtoH, dev, host, n, nil, 20*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, k)
}
