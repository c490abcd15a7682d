//go:build gpu

package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpucopy"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
)

// Multi-GPU checks (GPU-12..15): what only shows with several GPUs busy.
// GPUs behind one PCIe switch uplink each pass a solo copy test and slow
// each other down when they copy at once (GPU-12/13); GPU<->GPU peer copies
// are what NCCL uses inside a node (GPU-14/15). harness/gpucopy measures.

// peerDataSize is what GPU-14 moves each way to prove the data path.
const peerDataSize = 4 << 20

// ---- GPU-12/13: every GPU copying at once ----

// concurrentCheck times pinned copies in direction dir on every selected
// GPU alone, then on all at once, and fails a GPU that reaches less than
// GDR_MIN_CONCURRENT_FRACTION of its rate alone.
func concurrentCheck(t *testing.T, id string, dir cuda.Direction) {
	testenv.Req(t, id)
	devs := cuda.Multi(t, id)
	copies(t, devs...)
	frac := testenv.Config(t).MinConcurrentFraction
	r := gpucopy.MeasureConcurrent(t, devs, dir, gpucopy.BufSize(devs[0]))
	r.Record(t, frac)
	t.Log(r.Summary())
	for _, g := range r.Copiers {
		t.Run(g.Dev.PCI, func(t *testing.T) { concurrentVerdict(t, id, r, g, frac) })
	}
}

// concurrentVerdict judges one GPU of a concurrent run in its subtest.
func concurrentVerdict(t *testing.T, id string, r *gpucopy.Concurrent, g *gpucopy.HostCopier, frac float64) {
	testenv.Req(t, id)
	testenv.GPURailAttrs(t, g.Dev.PCI)
	share := r.RecordGPU(t, g, frac)
	if f := r.Judge(g, cuda.GPUName(t, g.Dev), frac, share); f != nil {
		testenv.Fail(t, *f)
	}
}

func TestGPU12ConcurrentHtoD(t *testing.T) { concurrentCheck(t, "GPU-12", cuda.HtoD) }

func TestGPU13ConcurrentDtoH(t *testing.T) { concurrentCheck(t, "GPU-13", cuda.DtoH) }

// ---- GPU-14/15: GPU<->GPU peer to peer ----

func TestGPU14PeerAccess(t *testing.T) {
	testenv.Req(t, "GPU-14")
	gpucopy.EachPair(t, "GPU-14", func(t *testing.T, a, b cuda.Device, link gpucopy.P2PLink, h *nvml.Handle) {
		ab, ba := gpucopy.PeerAccess(t, a, b)
		if !ab || !ba {
			status := gpucopy.P2PStatus(h, a.PCI, b.PCI)
			testenv.Attr(t, "p2p_status", status)
			testenv.Fail(t, *gpucopy.NoPeerAccess(a, b, cuda.GPUName(t, a), cuda.GPUName(t, b), ab, ba, link, status))
		}
		ca, cb := gpucopy.EnablePeers(t, a, b)
		ps := []gpucopy.PeerBuffers{gpucopy.NewPeerBuffers(t, ca, cb, peerDataSize, 0x1400+1), gpucopy.NewPeerBuffers(t, cb, ca, peerDataSize, 0x1400+2)}
		var errs []error
		for _, p := range ps {
			if err := p.CopyOnce(); err != nil {
				testenv.Failf(t, cuda.PeerRemedy(err), "%s: %v", p.Dir(), err)
			}
			if err := p.Verify(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Dir(), err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			testenv.Failf(t, gpucopy.PeerDataRemedy, "%s of peer copied data: %v", cuda.Size(peerDataSize), gpucopy.OneLine(err))
		}
		testenv.Attr(t, "p2p_data", "intact both ways")
		t.Logf("%s <-> %s: peer access both ways, %s copied intact each way; link %s %s", a.PCI, b.PCI, cuda.Size(peerDataSize), link.KindOrUnknown(), link.How+link.Why)
	})
}

func TestGPU15PeerBandwidth(t *testing.T) {
	testenv.Req(t, "GPU-15")
	cfg := testenv.Config(t)
	gpucopy.EachPair(t, "GPU-15", func(t *testing.T, a, b cuda.Device, link gpucopy.P2PLink, h *nvml.Handle) {
		ab, ba := gpucopy.PeerAccess(t, a, b)
		if !ab || !ba {
			testenv.Absent(t, "", "%s and %s have no peer access (cuDeviceCanAccessPeer %v/%v): GPU-14 judges that; a copy without it would time host staging, not the link", a.PCI, b.PCI, ab, ba)
		}
		ca, cb := gpucopy.EnablePeers(t, a, b)
		copies(t, a, b)
		n := gpucopy.BufSize(a)
		r := gpucopy.MeasurePeers(t, []gpucopy.PeerBuffers{gpucopy.NewPeerBuffers(t, ca, cb, n, 0x1500+1), gpucopy.NewPeerBuffers(t, cb, ca, n, 0x1500+2)})
		// The data of the last timed copies, read back through the host.
		if err := gpucopy.VerifyAll(r.Bufs); err != nil {
			testenv.Failf(t, gpucopy.PeerDataRemedy, "after the timed copies: %v", gpucopy.OneLine(err))
		}
		testenv.Attr(t, "p2p_data", "intact both ways")
		t.Log(r.Summary(link))

		frac, name, remedy := gpucopy.P2PFloor(cfg, link.Kind)
		if a.Emulated {
			testenv.Absent(t, "", "%s is the lab's emulated GPU: its peer copies are CPU memcpy, and neither NVLink nor a PCIe path is emulated; the rates are reported, not judged", a.PCI)
		}
		if link.Rate == 0 {
			testenv.Absent(t, "", "no floor for %s <-> %s: the link's theoretical rate is unknown (%s)", a.PCI, b.PCI, link.Why)
		}
		floor := frac * link.Rate
		testenv.Attr(t, "min_p2p_fraction", frac)
		testenv.Attr(t, "min_p2p_gbyte_s", floor)
		testenv.Attr(t, "p2p_fraction", min(r.Best[0], r.Best[1])/link.Rate)
		if slow := r.Slow(floor, link.Rate); len(slow) > 0 {
			testenv.Failf(t, remedy, "%s <-> %s over %s (%s): %s, below %s=%.2f (%.2f GB/s)",
				cuda.GPUName(t, a), cuda.GPUName(t, b), link.Kind, link.How, strings.Join(slow, "; "), name, frac, floor)
		}
	})
}
