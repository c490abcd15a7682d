//go:build gpu && rdma

package gpumr

import (
	"fmt"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// moveSize is each buffer of MoveData; xfer what moves each way, leaving
// room for the guard behind it.
const (
	moveSize = 1 << 20
	xfer     = moveSize - 4096
)

// MoveData proves a registration path carries data, not just registers:
// two RC QPs on the NIC in this process, each on a GPU buffer from
// allocator a registered through path; an RDMA WRITE from one GPU buffer
// into the other (the NIC reads GPU memory, then writes GPU memory) and an
// RDMA READ back, each checked through a flushed device-to-host copy
// (gdr.data_moved).
func MoveData(t *testing.T, g *GPU, n *NIC, path config.MRPath, a cuda.Allocator) {
	t.Helper()
	alloc := func(t testing.TB, size int, _ *rails.Rail) membuf.Buffer { return cuda.AllocBy(t, g.Ctx, a, size) }
	ends := rc.Connect(t, rc.Options{Dev: n.Name, BufSize: moveSize, Alloc: alloc, Loopback: true, MR: path})
	srv, cli := ends[0], ends[1]
	err := step(cli, "RDMA WRITE GPU->NIC->GPU", cli, srv, verbs.OpWrite, membuf.IterSeed(cli.Seed, moveSize, 1))
	if err == nil {
		err = step(cli, "RDMA READ GPU<-NIC<-GPU", srv, cli, verbs.OpRead, membuf.IterSeed(cli.Seed, moveSize, 2))
	}
	rc.Report(t, ends)
	if err != nil {
		testenv.Failf(t, "the registration works but data does not arrive intact: check dmesg for the NIC driver and NVRM (Xid) messages, the PCIe path (TOPO-02/03: ACS, IOMMU) and the GPU's writes ordering (GPU-06)",
			"GPU %s via %s (%s MR on %s memory): %v", g.Dev.PCI, n.Name, cli.MR().Path, a, err)
	}
	testenv.Attr(t, "data_moved", fmt.Sprintf("WRITE and READ of %d bytes each way through %s MRs on %s memory, verified", xfer, cli.MR().Path, a))
}

// step fills fill's buffer with seed's pattern and poisons target's, posts
// op from cli's buffer against its peer's, waits for the completion, and
// checks what arrived in target.
func step(cli *rc.End, what string, fill, target *rc.End, op verbs.Opcode, seed uint64) error {
	if err := fill.FillPattern(xfer, seed); err != nil {
		return err
	}
	if err := target.FillPoison(moveSize, rc.Poison); err != nil {
		return err
	}
	local, remote := cli.MR(), cli.Remote()
	w := verbs.SendWR{ID: 1, Op: op, Local: local, LocalAddr: local.Addr, Len: xfer, RemoteAddr: remote.Addr, RKey: remote.RKey, Signaled: true}
	if err := cli.QP.PostSend(w); err != nil {
		return err
	}
	if _, err := cli.SCQ.Wait(1, what, cli.WaitBudget(xfer)); err != nil {
		return err
	}
	if err := target.CheckBuf(xfer, seed); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
