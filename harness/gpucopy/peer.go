//go:build gpu

package gpucopy

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pci"
)

const (
	// PeerBatch copies are queued per timed peer operation: 8 x 256 MiB
	// takes about 5 ms at NVLink 4 rates, long against the host's part.
	PeerBatch = 8
	// guard bytes after a destination stay poison unless a copy overruns.
	guard  = 4096
	poison = 0xa5
)

// LinkOf finds the link between GPUs a and b: NVLink when NVML (h, nil when
// it failed with nvErr) counts active links between them or says they talk
// over NVLink, else PCIe when sysfs has both, with its path class; else
// unknown, saying what was missing.
func LinkOf(t *testing.T, h *nvml.Handle, nvErr error, a, b cuda.Device) P2PLink {
	t.Helper()
	var nv nvlinker
	if h != nil {
		nv = h
	}
	return linkBetween(nv, nvErr, testenv.Selection(t).Index, testenv.Root(t).Host(pci.DevicesDir), a.PCI, b.PCI, a.Emulated)
}

// PeerAccess asks cuDeviceCanAccessPeer both ways and records the answer.
func PeerAccess(t *testing.T, a, b cuda.Device) (ab, ba bool) {
	t.Helper()
	var err error
	if ab, err = a.CanAccessPeer(b); err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "%v", err)
	}
	if ba, err = b.CanAccessPeer(a); err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "%v", err)
	}
	yes := map[bool]string{true: "yes", false: "no"}
	testenv.Attr(t, "peer_access", fmt.Sprintf("%s->%s %s, %s->%s %s", a.PCI, b.PCI, yes[ab], b.PCI, a.PCI, yes[ba]))
	return ab, ba
}

// EnablePeers retains both primary contexts and enables peer access both
// ways for t (disabled again at its end where t enabled it).
func EnablePeers(t *testing.T, a, b cuda.Device) (*cuda.Context, *cuda.Context) {
	t.Helper()
	ca, cb := cuda.Primary(t, a), cuda.Primary(t, b)
	now := []bool{cuda.EnablePeer(t, ca, cb), cuda.EnablePeer(t, cb, ca)}
	state := map[bool]string{true: "enabled by the suite", false: "already enabled"}
	testenv.Attr(t, "peer_access_enabled", fmt.Sprintf("%s->%s %s, %s->%s %s", a.PCI, b.PCI, state[now[0]], b.PCI, a.PCI, state[now[1]]))
	return ca, cb
}

// PeerBuffers is a source on one GPU filled with a pattern and a poisoned
// destination on the other, with a guard after the copied bytes.
type PeerBuffers struct {
	src, dst *cuda.Mem
	want     []byte
	N        int
	dir      string // "<source GPU> -> <destination GPU>"
}

// NewPeerBuffers allocates n bytes on from, filled with seed's pattern, and
// n plus a guard on to, poisoned.
func NewPeerBuffers(t *testing.T, from, to *cuda.Context, n int, seed uint64) PeerBuffers {
	t.Helper()
	p := PeerBuffers{src: cuda.Alloc(t, from, n), dst: cuda.Alloc(t, to, n+guard), want: make([]byte, n), N: n,
		dir: fmt.Sprintf("%s -> %s", from.Dev.PCI, to.Dev.PCI)}
	membuf.Pattern(p.want, seed)
	if err := p.src.Fill(p.want); err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: %v", from.Dev.PCI, err)
	}
	if err := to.Memset(p.dst.Addr(), poison, n+guard); err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: %v", to.Dev.PCI, err)
	}
	return p
}

// CopyOnce copies the source to the destination once.
func (p PeerBuffers) CopyOnce() error {
	_, err := cuda.PeerCopyLoop(p.dst, p.src, p.N, 1, cuda.Loop{Reps: 1})
	return err
}

// Verify reads the destination back (a device-to-host copy) and compares it
// with the source's pattern; the guard after it must still be poison.
func (p PeerBuffers) Verify() error {
	got := make([]byte, p.N+64)
	if err := p.dst.ReadBack(got); err != nil {
		return err
	}
	if err := membuf.CompareCopy(got[:p.N], p.want, poison, "cuMemcpyPeer completed but no byte reached the peer's memory"); err != nil {
		return err
	}
	return membuf.Guard(got, p.N, poison)
}

// Dir is "<source GPU> -> <destination GPU>".
func (p PeerBuffers) Dir() string { return p.dir }

// VerifyAll verifies every direction, joining what went wrong, each error
// prefixed with its direction.
func VerifyAll(ps []PeerBuffers) error {
	var errs []error
	for _, p := range ps {
		if err := p.Verify(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Dir(), err))
		}
	}
	return errors.Join(errs...)
}

// PeerRates times the copy of p: a warm-up, then Reps batches of
// PeerBatch copies, on the source GPU's CPUs.
func PeerRates(t *testing.T, p PeerBuffers) (best, mean float64) {
	t.Helper()
	var spans []multigpu.Span
	_, err := numa.OnCPUs(cuda.LocalCPUs(t, p.src.Context().Dev), func() error {
		if _, err := cuda.PeerCopyLoop(p.dst, p.src, p.N, 1, cuda.Loop{Reps: 1}); err != nil {
			return err
		}
		var err error
		spans, err = cuda.PeerCopyLoop(p.dst, p.src, p.N, PeerBatch, cuda.Loop{Reps: Reps})
		return err
	})
	if err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "%s: %v", p.Dir(), err)
	}
	return BestGBps(PeerBatch*p.N, spans), MeanGBps(PeerBatch*p.N, spans)
}

// Bidirectional runs both copies at once, for ten times op (one batch's
// time) and at least half a second, and returns each direction's rate and
// their sum over the window in which both ran.
func Bidirectional(t *testing.T, ps []PeerBuffers, op time.Duration) (multigpu.Window, error) {
	t.Helper()
	window := max(500*time.Millisecond, 10*op)
	lanes := make([][]multigpu.Span, len(ps))
	local := make([]cpulist.Set, len(ps))
	for i, p := range ps {
		local[i] = cuda.LocalCPUs(t, p.src.Context().Dev)
	}
	err := multigpu.AtOnce(len(ps), window, armWithin, stopWithin, func(i int, arm func(), stop <-chan struct{}) error {
		p := ps[i]
		_, err := numa.OnCPUs(local[i], func() error {
			if _, err := cuda.PeerCopyLoop(p.dst, p.src, p.N, 1, cuda.Loop{Reps: 1}); err != nil {
				return err
			}
			arm()
			var err error
			lanes[i], err = cuda.PeerCopyLoop(p.dst, p.src, p.N, PeerBatch, cuda.Loop{Stop: stop, Limit: window + stopWithin})
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", p.Dir(), err)
		}
		return nil
	})
	if err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "both directions at once: %v", err)
	}
	return multigpu.Overlap(lanes, int64(PeerBatch*ps[0].N), 2)
}

// PeerRun is what GPU-15 measured for a pair: each direction alone (Best,
// Mean in GB/s, forward first), then both at once (Bidir, or BidirErr when
// no rate came of it).
type PeerRun struct {
	Bufs       []PeerBuffers
	Best, Mean []float64
	Bidir      multigpu.Window
	BidirErr   error
}

// MeasurePeers times each direction of ps alone, then both at once,
// recording the rates as it goes.
func MeasurePeers(t *testing.T, ps []PeerBuffers) PeerRun {
	t.Helper()
	r := PeerRun{Bufs: ps, Best: make([]float64, len(ps)), Mean: make([]float64, len(ps))}
	for i, p := range ps {
		r.Best[i], r.Mean[i] = PeerRates(t, p)
	}
	n := ps[0].N
	testenv.Attr(t, "size_bytes", n)
	testenv.Attr(t, "batch_count", PeerBatch)
	testenv.Attr(t, "p2p_gbyte_s", r.Best[0])
	testenv.Attr(t, "p2p_gbyte_s_mean", r.Mean[0])
	testenv.Attr(t, "p2p_gbyte_s_reverse", r.Best[1])
	testenv.Attr(t, "p2p_gbyte_s_reverse_mean", r.Mean[1])
	r.Bidir, r.BidirErr = Bidirectional(t, ps, r.batchTime())
	if r.BidirErr != nil {
		testenv.Attr(t, "p2p_bidir_note", r.BidirErr.Error())
		t.Logf("bidirectional rate not reported: %v", r.BidirErr)
	} else {
		testenv.Attr(t, "p2p_bidir_gbyte_s", r.Bidir.Aggregate())
		testenv.Attr(t, "p2p_bidir_gbyte_s_forward", r.Bidir.Lanes[0].GBps)
		testenv.Attr(t, "p2p_bidir_gbyte_s_reverse", r.Bidir.Lanes[1].GBps)
	}
	return r
}

// batchTime is how long one batch takes in the slower direction.
func (r PeerRun) batchTime() time.Duration {
	return time.Duration(float64(PeerBatch*r.Bufs[0].N) / (min(r.Mean[0], r.Mean[1]) * 1e9) * float64(time.Second))
}

// Summary is the run's log line; link is what the rates are held against.
func (r PeerRun) Summary(link P2PLink) string {
	bidir := "not measured"
	if r.BidirErr == nil && len(r.Bidir.Lanes) == 2 {
		bidir = fmt.Sprintf("%.2f GB/s (%.2f + %.2f)", r.Bidir.Aggregate(), r.Bidir.Lanes[0].GBps, r.Bidir.Lanes[1].GBps)
	}
	return fmt.Sprintf("%s: best %.2f GB/s (mean %.2f); %s: best %.2f GB/s (mean %.2f); both at once %s; %s x %d per timed batch; link %s: %s%s",
		r.Bufs[0].Dir(), r.Best[0], r.Mean[0], r.Bufs[1].Dir(), r.Best[1], r.Mean[1], bidir, cuda.Size(r.Bufs[0].N), PeerBatch, link.KindOrUnknown(), link.How, link.Why)
}

// Slow lists the directions whose best rate is below floor, each with its
// fraction of the link's rate, sorted.
func (r PeerRun) Slow(floor, rate float64) []string {
	var slow []string
	for i, p := range r.Bufs {
		if r.Best[i] < floor {
			slow = append(slow, fmt.Sprintf("%s reaches %.2f GB/s (%.2f of it)", p.Dir(), r.Best[i], r.Best[i]/rate))
		}
	}
	sort.Strings(slow)
	return slow
}
