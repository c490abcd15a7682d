//go:build gpu

package cuda

import (
	"errors"
	"fmt"

	"github.com/gdrconf/gdrconf/internal/multigpu"
)

// CanAccessPeer says whether dev can reach peer's memory directly over NVLink
// or PCIe (cuDeviceCanAccessPeer). It is a property of the pair in one
// direction; the two directions are asked separately.
func (dev Device) CanAccessPeer(peer Device) (bool, error) { return canAccessPeer(dev, peer) }

// EnablePeerAccess lets this context reach peer's memory directly
// (cuCtxEnablePeerAccess). It reports whether this call enabled it: false,
// with no error, when it already was (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
// the primary context is shared, and another user may have done it).
func (c *Context) EnablePeerAccess(peer *Context) (bool, error) {
	var now bool
	err := c.Do(func() error {
		err := ctxEnablePeerAccess(c, peer)
		switch {
		case err == nil:
			now = true
		case Code(err) == ErrPeerAccessAlreadyEnabled:
			err = nil
		}
		return err
	})
	return now, err
}

// DisablePeerAccess undoes EnablePeerAccess (cuCtxDisablePeerAccess).
func (c *Context) DisablePeerAccess(peer *Context) error {
	return c.Do(func() error { return ctxDisablePeerAccess(c, peer) })
}

// PeerCopyLoop copies n bytes from src to dst, device memory of two GPUs,
// with cuMemcpyPeerAsync: each operation queues batch copies on one stream
// of src's context and waits for the stream, so that the host's part in
// timing stays small against copies that take well under a millisecond on
// NVLink. One span per batch (batch*n bytes); l bounds the loop. It runs on
// one locked thread with src's context current; the copy engines of either
// GPU may carry it, as the driver chooses.
func PeerCopyLoop(dst, src *Mem, n, batch int, l Loop) ([]multigpu.Span, error) {
	if batch < 1 {
		return nil, fmt.Errorf("peer copy batch of %d: must be at least 1", batch)
	}
	if err := src.live("peer copy source", n); err != nil {
		return nil, err
	}
	if err := dst.live("peer copy destination", n); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("peer copy of %d bytes: size must be positive", n)
	}
	var spans []multigpu.Span
	err := src.ctx.Do(func() error {
		s, err := streamCreate()
		if err != nil {
			return err
		}
		spans, err = l.run(func() error {
			for i := 0; i < batch; i++ {
				if err := s.memcpyPeerAsync(dst.addr, dst.ctx, src.addr, src.ctx, n); err != nil {
					return err
				}
			}
			return s.sync()
		})
		// Waiting first: a failed copy may leave work queued.
		return errors.Join(err, s.sync(), s.destroy())
	})
	return spans, err
}

// PeerRemedy says what to do about a failed peer-to-peer call.
func PeerRemedy(err error) string {
	switch Code(err) {
	case ErrPeerAccessUnsupported:
		return "the GPUs cannot reach each other directly: check nvidia-smi topo -p2p r; over PCIe, ACS redirection on the switch ports between them, an IOMMU in translated mode and BIOS settings block P2P; over NVLink, check nvidia-smi nvlink -s and, on NVSwitch systems, nvidia-fabricmanager"
	case ErrTooManyPeers:
		return "the context reaches the most peers the platform allows (8 over PCIe): run fewer GPUs per process, or disable peer access the application does not need"
	case ErrNotSupported:
		return "upgrade the NVIDIA driver"
	}
	return "check dmesg for NVRM/Xid errors; nvidia-smi topo -p2p r shows which GPU pairs the driver allows peer access"
}
