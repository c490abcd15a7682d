//go:build rdma

package rc

import (
	"fmt"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
)

// Poison fills bytes a transfer must overwrite, so a short one shows.
const Poison = 0xa5

// FillPattern writes the sending side's pattern for seed to the first size bytes.
func (e *End) FillPattern(size int, seed uint64) error {
	p := make([]byte, size)
	membuf.Pattern(p, seed)
	return e.Buf.Fill(p)
}

// FillPatternAt writes the pattern for seed to size bytes at offset off
// (what comes before it is zero: the sender's bytes there are not sent).
func (e *End) FillPatternAt(off, size int, seed uint64) error {
	p := make([]byte, off+size)
	membuf.Pattern(p[off:], seed)
	return e.Buf.Fill(p)
}

// CheckBufAt reads back offset off + size bytes + a guard and checks the
// pattern for seed at off, with poison in front (nothing written before the
// start) and behind (nothing past the length).
func (e *End) CheckBufAt(off, size int, seed uint64) error { return e.checkRegion(off, size, seed, true) }

// CheckRegion is CheckBufAt for a region whose front is not poison (the
// bidirectional bandwidth run sends from the first half of the buffer and
// receives into the second): the pattern and the guard behind it.
func (e *End) CheckRegion(off, size int, seed uint64) error { return e.checkRegion(off, size, seed, false) }

func (e *End) checkRegion(off, size int, seed uint64, front bool) error {
	got := make([]byte, min(off+size+64, e.Buf.Len()))
	if err := e.Buf.ReadBack(got); err != nil {
		return fmt.Errorf("reading back the %s buffer: %w", membuf.Label(e.Buf), err)
	}
	if front {
		if err := membuf.GuardBefore(got, off, Poison); err != nil {
			return err
		}
	}
	want := make([]byte, size)
	membuf.Pattern(want, seed)
	if err := membuf.Compare(got[off:off+size], want, Poison); err != nil {
		return err
	}
	return membuf.Guard(got[off:], size, Poison)
}

// FillPoison sets the first n bytes of the buffer to poison.
func (e *End) FillPoison(n int, poison byte) error {
	p := make([]byte, n)
	for i := range p {
		p[i] = poison
	}
	return e.Buf.Fill(p)
}

// CheckBuf reads back size bytes plus a guard (through a device-to-host
// copy for GPU memory, which flushes the NIC's writes first) and compares
// them with the pattern for seed.
func (e *End) CheckBuf(size int, seed uint64) error {
	got := make([]byte, min(size+64, e.Buf.Len()))
	if err := e.Buf.ReadBack(got); err != nil {
		return fmt.Errorf("reading back the %s buffer: %w", membuf.Label(e.Buf), err)
	}
	want := make([]byte, size)
	membuf.Pattern(want, seed)
	if err := membuf.Compare(got[:size], want, Poison); err != nil {
		return err
	}
	return membuf.Guard(got, size, Poison)
}

// Settle makes both sides return the checking side's verdict: checker is
// true on the side that looked at the data.
func (e *End) Settle(name string, checker bool, local error) error {
	r := oob.Result{Name: name, OK: true}
	if checker && local != nil {
		r.OK, r.Msg = false, local.Error()
	}
	peer, err := e.Sess.ExchangeResult(r)
	if err != nil {
		return err
	}
	if checker {
		return local
	}
	if !peer.OK {
		return fmt.Errorf("the receiving side (%s) found: %s", e.Sess.Peer(), peer.Msg)
	}
	return nil
}
