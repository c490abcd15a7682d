//go:build rdma

package traffic

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// VerifySizes are the sizes a data check moves (odd ones catch length
// handling), each a few iterations with a fresh pattern, so they stay quick
// under emulation.
var VerifySizes = []int{1, 4093, 65536, 1 << 20}

// VerifyBuf is the buffer a data check needs: the largest verify size plus
// a guard.
const VerifyBuf = 1<<20 + 4096

// verifyIters is how many transfers of each size a data check makes.
func verifyIters(iters int) int { return min(max(iters, 1), 4) }

// Xfer is one data check's transfer: Size bytes of the pattern for Seed at
// byte offset Off of both buffers (odd offsets: nothing is aligned for the
// NIC's convenience), iteration I.
type Xfer struct {
	Seed         uint64
	Off, Size, I int
}

// verifyOffset is the transfer's offset: unaligned, different per size and
// iteration, and small enough that offset + size + guard fit VerifyBuf.
func verifyOffset(size, i int) int { return (size%61 + i*1021) % 4001 }

// roundSeed is the pattern seed of round r's transfer of size, iteration i.
func roundSeed(seed uint64, r, size, i int) uint64 {
	return membuf.IterSeed(seed+uint64(r)*0x100000001, size, i)
}

// Transfer is one data check: the client moves x's bytes with some opcode
// between its registration local and the peer's registration remote; the
// receiving side compares the whole transfer and the poison around it.
type Transfer func(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x Xfer) error

// Verify runs fn over VerifySizes on connected ends (buffers of at least
// VerifyBuf bytes), once per pair of registrations (rc.End.Rounds: GPU
// memory registered through both peermem and dma-buf carries data through
// each), and returns each end's error.
func Verify(ends []*rc.End, fn Transfer) []error {
	return rc.Each(ends, func(e *rc.End) error { return verifyEnd(e, fn) })
}

func verifyEnd(e *rc.End, fn Transfer) error {
	n := 0
	var rounds []string
	for r := 0; r < e.Rounds(); r++ {
		local, remote := e.Round(r)
		for _, size := range VerifySizes {
			for i := 0; i < verifyIters(e.Cfg.Iters); i++ {
				x := Xfer{Seed: roundSeed(e.Seed, r, size, i), Off: verifyOffset(size, i), Size: size, I: i}
				if err := fn(e, local, remote, x); err != nil {
					return fmt.Errorf("%d bytes at offset %d, iteration %d, local %s MR -> peer %s MR: %w", size, x.Off, i, local.Path, remote.Path, err)
				}
				n++
			}
		}
		rounds = append(rounds, local.Path+"->"+remote.Path)
	}
	e.Attr("mr_paths", strings.Join(rounds, ", ")) // one per round, in order
	e.Attr("checked_transfers", n)
	e.Attr("sizes_bytes", rc.JoinInts(VerifySizes))
	return nil
}

// chunks splits [0,size) into up to 4 WRs, so the list is posted chained with
// only the last one signaled (RC completes them in order).
func chunks(size int) [][2]int {
	n := min(4, size)
	var out [][2]int
	step := size / n
	for off := 0; off < size; off += step {
		l := min(step, size-off)
		if len(out) == n-1 {
			l = size - off
		}
		out = append(out, [2]int{off, l})
		if len(out) == n {
			break
		}
	}
	return out
}

// chained is size bytes of op as up to 4 chained WRs, the last one signaled.
func chained(op verbs.Opcode, local *verbs.MR, remote oob.RemoteMR, off, size int) []verbs.SendWR {
	cs := chunks(size)
	wrs := make([]verbs.SendWR, len(cs))
	for k, c := range cs {
		wrs[k] = wr(uint64(k), op, local, remote.Addr, remote.RKey, off+c[0], c[1], k == len(cs)-1)
	}
	return wrs
}

// wr is a send WR on e's registration local at offset off for n bytes,
// aimed at the same offset of the peer's registration remote.
func wr(id uint64, op verbs.Opcode, local *verbs.MR, remoteAddr uint64, rkey uint32, off, n int, signaled bool) verbs.SendWR {
	return verbs.SendWR{ID: id, Op: op, Local: local, LocalAddr: local.Addr + uint64(off), Len: uint32(n),
		RemoteAddr: remoteAddr + uint64(off), RKey: rkey, Signaled: signaled}
}

// prepare fills this end's side of x: the pattern where data leaves
// (sender), poison over the transfer and its guard where it lands.
func prepare(e *rc.End, x Xfer, sender bool) error {
	if sender {
		return e.FillPatternAt(x.Off, x.Size, x.Seed)
	}
	return e.FillPoison(x.Off+x.Size+64, rc.Poison)
}

// Write is the RDMA WRITE data check: the client writes the pattern in
// chained WRs, the server compares it (a device-to-host copy for GPU memory,
// after the flush of the NIC's writes).
func Write(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x Xfer) error {
	if err := prepare(e, x, e.Role == "client"); err != nil {
		return err
	}
	if err := e.Sess.Barrier("ready", x.I); err != nil {
		return err
	}
	if e.Role == "client" {
		if err := e.QP.PostSend(chained(verbs.OpWrite, local, remote, x.Off, x.Size)...); err != nil {
			return err
		}
		if _, err := e.SCQ.Wait(1, "RDMA WRITE", e.WaitBudget(int64(x.Size))); err != nil {
			return err
		}
	}
	// The client's completion means the data is placed at the server.
	restore := e.Sess.Within(e.WaitBudget(int64(x.Size)))
	err := e.Sess.Barrier("written", x.I)
	restore()
	if err != nil {
		return err
	}
	var check error
	if e.Role == "server" {
		check = e.CheckBufAt(x.Off, x.Size, x.Seed)
	}
	return e.Settle("write check", e.Role == "server", check)
}

// WriteImm is the RDMA WRITE_WITH_IMM data check: the data and the
// immediate value arrive, and the receive completion is the notification
// (no out-of-band step).
func WriteImm(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x Xfer) error {
	imm := uint32(x.Seed)
	if err := prepare(e, x, e.Role == "client"); err != nil {
		return err
	}
	if e.Role == "server" {
		if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(x.I)}); err != nil {
			return err
		}
	}
	if err := e.Sess.Barrier("ready", x.I); err != nil {
		return err
	}
	if e.Role == "client" {
		w := wr(uint64(x.I), verbs.OpWriteImm, local, remote.Addr, remote.RKey, x.Off, x.Size, true)
		w.Imm = imm
		if err := send(e, w, "RDMA WRITE_WITH_IMM", x.Size); err != nil {
			return err
		}
		return e.Settle("write-imm check", false, nil)
	}
	wc, err := e.RCQ.Wait(1, "RECV_RDMA_WITH_IMM completion", e.WaitBudget(int64(x.Size)))
	if err != nil {
		return err
	}
	return e.Settle("write-imm check", true, writeImmArrived(e, wc[0], imm, x))
}

// send posts w and waits for its completion.
func send(e *rc.End, w verbs.SendWR, what string, size int) error {
	if err := e.QP.PostSend(w); err != nil {
		return err
	}
	_, err := e.SCQ.Wait(1, what, e.WaitBudget(int64(size)))
	return err
}

func writeImmArrived(e *rc.End, w verbs.WC, imm uint32, x Xfer) error {
	switch {
	case w.Opcode != verbs.WCRecvWriteImm:
		return fmt.Errorf("receive completion opcode %d, want RECV_RDMA_WITH_IMM (%d)", w.Opcode, verbs.WCRecvWriteImm)
	case !w.HasImm || w.Imm != imm:
		return fmt.Errorf("immediate value 0x%08x (present %v), want 0x%08x", w.Imm, w.HasImm, imm)
	case int(w.ByteLen) != x.Size:
		return fmt.Errorf("completion byte_len %d, want %d", w.ByteLen, x.Size)
	}
	return e.CheckBufAt(x.Off, x.Size, x.Seed)
}

// Read is the RDMA READ data check: the client fetches the server's
// pattern and compares it.
func Read(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x Xfer) error {
	if err := prepare(e, x, e.Role == "server"); err != nil {
		return err
	}
	if err := e.Sess.Barrier("ready", x.I); err != nil {
		return err
	}
	var check error
	if e.Role == "client" {
		if err := e.QP.PostSend(chained(verbs.OpRead, local, remote, x.Off, x.Size)...); err != nil {
			return err
		}
		if _, err := e.SCQ.Wait(1, "RDMA READ", e.WaitBudget(int64(x.Size))); err != nil {
			return err
		}
		// The NIC wrote the client's buffer: CheckBuf reads it back
		// through a flushed device-to-host copy for GPU memory.
		check = e.CheckBufAt(x.Off, x.Size, x.Seed)
	}
	restore := e.Sess.Within(e.WaitBudget(int64(x.Size)))
	defer restore()
	return e.Settle("read check", e.Role == "client", check)
}

// Send is the SEND/RECV data check: the message arrives intact with the
// right length. A small SEND from host memory goes inline (the provider
// copies it); from GPU memory it never does (harness/verbs decides from
// the MR).
func Send(e *rc.End, local *verbs.MR, remote oob.RemoteMR, x Xfer) error {
	if err := prepare(e, x, e.Role == "client"); err != nil {
		return err
	}
	if e.Role == "server" {
		if err := e.QP.PostRecv(verbs.RecvWR{ID: uint64(x.I), Local: local, LocalAddr: local.Addr + uint64(x.Off), Len: uint32(local.Len - x.Off)}); err != nil {
			return err
		}
	}
	if err := e.Sess.Barrier("ready", x.I); err != nil {
		return err
	}
	if e.Role == "client" {
		if err := send(e, wr(uint64(x.I), verbs.OpSend, local, 0, 0, x.Off, x.Size, true), "SEND", x.Size); err != nil {
			return err
		}
		return e.Settle("send check", false, nil)
	}
	wc, err := e.RCQ.Wait(1, "RECV completion", e.WaitBudget(int64(x.Size)))
	if err != nil {
		return err
	}
	return e.Settle("send check", true, sendArrived(e, wc[0], x))
}

func sendArrived(e *rc.End, w verbs.WC, x Xfer) error {
	switch {
	case w.Opcode != verbs.WCRecv:
		return fmt.Errorf("receive completion opcode %d, want RECV (%d)", w.Opcode, verbs.WCRecv)
	case int(w.ByteLen) != x.Size:
		return fmt.Errorf("completion byte_len %d, want %d", w.ByteLen, x.Size)
	}
	return e.CheckBufAt(x.Off, x.Size, x.Seed)
}
