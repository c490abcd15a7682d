//go:build gpu

package gpucopy

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pci"
)

const (
	// concurrentMinOps: a GPU's concurrent rate needs at least this many
	// copies wholly inside the window in which all GPUs copied.
	concurrentMinOps = 3
	// armWithin bounds a warm-up copy; stopWithin the end of a copy loop
	// after it is told to stop (one copy of 2 GiB at PCIe Gen3 is 0.2 s).
	armWithin  = time.Minute
	stopWithin = time.Minute
)

// HostCopier is one GPU's side of the concurrent copy check.
type HostCopier struct {
	Dev    cuda.Device
	c      *cuda.Context
	m      *cuda.Mem
	h      *cuda.Pinned
	Pinned string        // where the pinned buffer went (gdr.pinned_numa)
	local  cpulist.Set   // the GPU's local CPUs, where its copies run
	CPUs   string        // where its copies ran (gdr.copy_cpus)
	Solo   float64       // GB/s alone
	op     time.Duration // one solo copy, mean
	Lane   multigpu.Lane // what it did while all copied
}

// NewHostCopiers allocates n bytes on each GPU and pinned near it.
func NewHostCopiers(tb testing.TB, devs []cuda.Device, n int) []*HostCopier {
	tb.Helper()
	var out []*HostCopier
	for _, dev := range devs {
		c := cuda.Primary(tb, dev)
		m := cuda.Alloc(tb, c, n)
		h, place := cuda.HostAllocNear(tb, c, n)
		out = append(out, &HostCopier{Dev: dev, c: c, m: m, h: h, Pinned: place, local: cuda.LocalCPUs(tb, dev)})
	}
	return out
}

// Concurrently runs every copier's loop at once, each on its GPU's CPUs,
// after a warm-up copy each: for window, or for l's bounds when window is 0.
// It returns each GPU's spans.
func Concurrently(cs []*HostCopier, dir cuda.Direction, n int, window time.Duration, l cuda.Loop) ([][]multigpu.Span, error) {
	lanes := make([][]multigpu.Span, len(cs))
	err := multigpu.AtOnce(len(cs), window, armWithin, stopWithin, func(i int, arm func(), stop <-chan struct{}) error {
		g := cs[i]
		placed, err := numa.OnCPUs(g.local, func() error {
			if _, err := g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: 1}); err != nil {
				return err
			}
			arm()
			ll := l
			if window > 0 {
				ll = cuda.Loop{Stop: stop, Limit: window + stopWithin}
			}
			var err error
			lanes[i], err = g.c.CopyLoop(dir, g.m, g.h, n, ll)
			return err
		})
		g.CPUs = placed
		if err != nil {
			return fmt.Errorf("GPU %s: %w", g.Dev.PCI, err)
		}
		return nil
	})
	return lanes, err
}

// MeasureSolos times each GPU's copies alone, one GPU after another, as
// GPU-09/10 do: the rate each is compared with.
func MeasureSolos(cs []*HostCopier, dir cuda.Direction, n int) error {
	for _, g := range cs {
		var spans []multigpu.Span
		placed, err := numa.OnCPUs(g.local, func() error {
			if _, err := g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: 1}); err != nil { // warm-up
				return err
			}
			var err error
			spans, err = g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: Reps})
			return err
		})
		if err != nil {
			return fmt.Errorf("GPU %s alone: %w", g.Dev.PCI, err)
		}
		g.CPUs = placed
		g.Solo = MeanGBps(n, spans)
		var total time.Duration
		for _, s := range spans {
			total += s.Duration()
		}
		g.op = total / time.Duration(len(spans))
	}
	return nil
}

// window is long enough for many copies of the slowest GPU inside it.
func window(cs []*HostCopier) time.Duration {
	w := time.Second
	for _, g := range cs {
		w = max(w, 20*g.op)
	}
	return w
}

// Concurrent is what GPU-12/13 measured: every GPU's copies alone, then all
// at once, and each one's rate together as a fraction of its rate alone.
type Concurrent struct {
	Dir      cuda.Direction
	N        int // bytes per copy
	Copiers  []*HostCopier
	Window   multigpu.Window
	SoloSum  float64
	Fraction map[string]float64 // by PCI address: together / alone
}

// MeasureConcurrent times each GPU's copies of n bytes alone, then every
// GPU's at once, and finds the window in which all of them copied.
func MeasureConcurrent(t *testing.T, devs []cuda.Device, dir cuda.Direction, n int) *Concurrent {
	t.Helper()
	cs := NewHostCopiers(t, devs, n)
	if err := MeasureSolos(cs, dir, n); err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "%v", err)
	}
	lanes, err := Concurrently(cs, dir, n, window(cs), cuda.Loop{})
	if err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "%s copies on %d GPUs at once: %v", dir, len(cs), err)
	}
	w, err := multigpu.Overlap(lanes, int64(n), concurrentMinOps)
	if err != nil {
		testenv.Failf(t, "check dmesg for Xid errors; a GPU far slower than the others stretches its copies past the window", "%s copies on %d GPUs at once: %v", dir, len(cs), err)
	}
	return newConcurrent(dir, n, cs, w)
}

// newConcurrent gives each copier its lane of w and its fraction.
func newConcurrent(dir cuda.Direction, n int, cs []*HostCopier, w multigpu.Window) *Concurrent {
	r := &Concurrent{Dir: dir, N: n, Copiers: cs, Window: w, Fraction: map[string]float64{}}
	for i, g := range cs {
		g.Lane = w.Lanes[i]
		r.SoloSum += g.Solo
		r.Fraction[g.Dev.PCI] = g.Lane.GBps / g.Solo
	}
	return r
}

// Record writes the run's attributes (the aggregate, the window, the floor).
func (r *Concurrent) Record(t testing.TB, frac float64) {
	t.Helper()
	testenv.Attr(t, "copy_dir", DirKey(r.Dir))
	testenv.Attr(t, "copy_gbyte_s_aggregate", r.Window.Aggregate())
	testenv.Attr(t, "copy_gbyte_s_solo_sum", r.SoloSum)
	testenv.Attr(t, "window_ms", float64(r.Window.Length())/float64(time.Millisecond))
	testenv.Attr(t, "size_bytes", r.N)
	testenv.Attr(t, "min_concurrent_fraction", frac)
}

// Summary is the run's log: the aggregate, then each GPU alone and together.
func (r *Concurrent) Summary() string {
	var lines []string
	for _, g := range r.Copiers {
		lines = append(lines, fmt.Sprintf("  %s: alone %.2f GB/s, together %.2f GB/s (%.2f; %d copies)", g.Dev.PCI, g.Solo, g.Lane.GBps, r.Fraction[g.Dev.PCI], g.Lane.Ops))
	}
	return fmt.Sprintf("pinned %s %s copies on %d GPUs at once for %v: aggregate %.2f GB/s (the solo rates add up to %.2f)\n%s",
		r.Dir, cuda.Size(r.N), len(r.Copiers), r.Window.Length().Round(time.Millisecond), r.Window.Aggregate(), r.SoloSum, strings.Join(lines, "\n"))
}

// RecordGPU writes g's attributes in its subtest and returns who g shares
// an uplink with (gdr.shares_upstream).
func (r *Concurrent) RecordGPU(t *testing.T, g *HostCopier, frac float64) string {
	t.Helper()
	testenv.Attr(t, "gpu_name", g.Dev.Name)
	testenv.Attr(t, "mem", g.Dev.MemLabel())
	testenv.Attr(t, "pinned_numa", g.Pinned)
	cuda.CopyCPUsAttr(t, g.CPUs)
	testenv.Attr(t, "copy_dir", DirKey(r.Dir))
	testenv.Attr(t, "copy_gbyte_s_solo", g.Solo)
	testenv.Attr(t, "copy_gbyte_s", g.Lane.GBps)
	testenv.Attr(t, "copy_count", g.Lane.Ops)
	testenv.Attr(t, "concurrent_fraction", r.Fraction[g.Dev.PCI])
	testenv.Attr(t, "min_concurrent_fraction", frac)
	share := r.Sharers(t, g.Dev)
	testenv.Attr(t, "shares_upstream", share)
	return share
}

// Shortfall says how g's rate together falls below frac of its rate alone
// (name is how the GPU is called, share who it shares an uplink with); nil
// when it does not.
func (r *Concurrent) Shortfall(g *HostCopier, name string, frac float64, share string) error {
	if r.Fraction[g.Dev.PCI] < frac {
		return fmt.Errorf("%s: pinned %s copies reach %.2f GB/s while all %d selected GPUs copy at once, %.2f of the %.2f GB/s it reaches alone, below GDR_MIN_CONCURRENT_FRACTION=%.2f; %s",
			name, r.Dir, g.Lane.GBps, len(r.Copiers), r.Fraction[g.Dev.PCI], g.Solo, frac, share)
	}
	return nil
}

// Sharers says which other selected GPUs share an upstream bridge with dev
// (topo.SharedUpstream), with how each of them fared: "switch upstream port
// 0000:01:00.0 with GPU 1 (0000:07:00.0) at 0.49 of its solo rate".
func (r *Concurrent) Sharers(t *testing.T, dev cuda.Device) string {
	t.Helper()
	ix := testenv.Selection(t).Index
	if ix.Device(dev.PCI) == nil {
		return "the GPU is not in sysfs (" + testenv.Root(t).Host(pci.DevicesDir) + "), so no PCIe tree names the GPUs it shares an uplink with"
	}
	var others []string
	for _, g := range r.Copiers {
		if g.Dev.PCI != dev.PCI && ix.Device(g.Dev.PCI) != nil {
			others = append(others, g.Dev.PCI)
		}
	}
	shared, err := ix.SharedUpstream(dev.PCI, others)
	if err != nil {
		return "the PCIe tree does not say: " + err.Error()
	}
	return sharing(shared, func(peer string) string {
		for _, g := range r.Copiers {
			if g.Dev.PCI == peer {
				return fmt.Sprintf("%s at %.2f of its solo rate", cuda.GPUName(t, g.Dev), r.Fraction[peer])
			}
		}
		return peer
	})
}

// Busy keeps g's copy engines busy until stop (the soak's GPU load): n-byte
// copies between its GPU buffer and its pinned buffer, a batch HtoD then a
// batch DtoH in turn, on the GPU's local CPUs; every copy that completes
// adds n to moved, so a sampler reads the rate as moved's rise over its
// interval. A batch is short (8 copies: well under a second on any GPU),
// so stop is seen within one.
func (g *HostCopier) Busy(n int, stop <-chan struct{}, moved *atomic.Int64) error {
	placed, err := numa.OnCPUs(g.local, func() error {
		for dir := cuda.HtoD; ; {
			select {
			case <-stop:
				return nil
			default:
			}
			spans, err := g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: 8, Stop: stop})
			moved.Add(int64(len(spans)) * int64(n))
			if err != nil {
				return fmt.Errorf("GPU %s: %w", g.Dev.PCI, err)
			}
			if dir == cuda.HtoD {
				dir = cuda.DtoH
			} else {
				dir = cuda.HtoD
			}
		}
	})
	g.CPUs = placed
	return err
}
