//go:build gpu

package gpucopy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// The arithmetic and the texts of the copy checks, without a GPU; the
// device paths run on the emulated GPU in lab/emugpu's tests.

func spans(ds ...time.Duration) []multigpu.Span {
	var out []multigpu.Span
	at := time.Unix(0, 0)
	for _, d := range ds {
		out = append(out, multigpu.Span{Start: at, End: at.Add(d)})
		at = at.Add(d)
	}
	return out
}

func TestRates(t *testing.T) {
	best, mean := bestMean(1e9, []time.Duration{time.Second, 2 * time.Second})
	assert.InDelta(t, 1.0, best, 1e-9)
	assert.InDelta(t, 2.0/3, mean, 1e-9)
	s := spans(time.Second, 4*time.Second)
	assert.InDelta(t, 1.0, BestGBps(1e9, s), 1e-9)
	assert.InDelta(t, 0.4, MeanGBps(1e9, s), 1e-9)
	assert.Zero(t, MeanGBps(1e9, nil))

	assert.Equal(t, "h2d", DirKey(cuda.HtoD))
	assert.Equal(t, "d2h", DirKey(cuda.DtoH))
	assert.Equal(t, Size, BufSize(cuda.Device{}))
	assert.Equal(t, 16<<20, BufSize(cuda.Device{Emulated: true}))
}

func TestSoloVerdict(t *testing.T) {
	gen4, err := pci.GBps(16, 16)
	require.NoError(t, err)
	s := Solo{PCI: "0000:3b:00.0", Dir: cuda.HtoD, Best: 10, Mean: 9, Link: topo.Expected{Speed: 16, Width: 16}, Rate: gen4, Min: 0.6}
	assert.Equal(t, "GPU 0000:3b:00.0 HtoD pinned 256 MiB: best 10.00 GB/s, mean 9.00 GB/s = 32% of 31.51 GB/s (gen4 x16)", s.Summary())
	assert.EqualError(t, s.Shortfall(), "GPU 0000:3b:00.0: pinned HtoD copies reach 10.00 GB/s, 32% of the 31.51 GB/s a gen4 x16 link carries, below GDR_MIN_COPY_FRACTION=0.60 (18.90 GB/s)")
	s.Best = 0.6 * gen4
	assert.NoError(t, s.Shortfall(), "the floor itself passes")
}

func TestUntrained(t *testing.T) {
	want := topo.Expected{Speed: 16, Width: 16}
	assert.NoError(t, Untrained(pci.Link{CurGTs: 16, CurWidth: 16}, want))
	err := Untrained(pci.Link{CurGTs: 8, CurWidth: 8}, want)
	require.Error(t, err)
	assert.Equal(t, "link stays at 8 GT/s (gen3) while the GPU copies, below the 16 GT/s (gen4) that it and its upstream port support; link trained to x8 of x16 lanes", OneLine(err))
	assert.EqualError(t, Untrained(pci.Link{CurGTs: 16, CurWidth: 4}, want), "link trained to x4 of x16 lanes")
}

func TestConcurrentArithmetic(t *testing.T) {
	a := &HostCopier{Dev: cuda.Device{PCI: "0000:3b:00.0"}, Solo: 20, op: 10 * time.Millisecond}
	b := &HostCopier{Dev: cuda.Device{PCI: "0000:4b:00.0"}, Solo: 25, op: 100 * time.Millisecond}
	assert.Equal(t, time.Second, window([]*HostCopier{a}), "at least a second")
	assert.Equal(t, 2*time.Second, window([]*HostCopier{a, b}), "20 copies of the slowest")

	start := time.Unix(0, 0)
	w := multigpu.Window{Start: start, End: start.Add(1500 * time.Millisecond), Lanes: []multigpu.Lane{{Ops: 30, GBps: 10}, {Ops: 12, GBps: 20}}}
	r := newConcurrent(cuda.DtoH, 16<<20, []*HostCopier{a, b}, w)
	assert.InDelta(t, 45.0, r.SoloSum, 1e-9)
	assert.InDelta(t, 0.5, r.Fraction[a.Dev.PCI], 1e-9)
	assert.InDelta(t, 0.8, r.Fraction[b.Dev.PCI], 1e-9)
	assert.Equal(t, w.Lanes[1], b.Lane)
	assert.Equal(t, "pinned DtoH 16 MiB copies on 2 GPUs at once for 1.5s: aggregate 30.00 GB/s (the solo rates add up to 45.00)\n"+
		"  0000:3b:00.0: alone 20.00 GB/s, together 10.00 GB/s (0.50; 30 copies)\n"+
		"  0000:4b:00.0: alone 25.00 GB/s, together 20.00 GB/s (0.80; 12 copies)", r.Summary())

	assert.NoError(t, r.Shortfall(b, "GPU 1 (0000:4b:00.0)", 0.7, "share"))
	assert.EqualError(t, r.Shortfall(a, "GPU 0 (0000:3b:00.0)", 0.7, "it shares PCI bridge x with GPU 1"),
		"GPU 0 (0000:3b:00.0): pinned DtoH copies reach 10.00 GB/s while all 2 selected GPUs copy at once, 0.50 of the 20.00 GB/s it reaches alone, below GDR_MIN_CONCURRENT_FRACTION=0.70; it shares PCI bridge x with GPU 1")
}

func TestPeerRun(t *testing.T) {
	r := PeerRun{
		Bufs: []PeerBuffers{{N: 16 << 20, dir: "a -> b"}, {N: 16 << 20, dir: "b -> a"}},
		Best: []float64{40, 20}, Mean: []float64{38, 19},
	}
	n := float64(PeerBatch * 16 << 20)
	assert.Equal(t, time.Duration(n/19e9*float64(time.Second)), r.batchTime(), "the slower direction's batch")
	assert.Empty(t, r.Slow(10, 50))
	assert.Equal(t, []string{"a -> b reaches 40.00 GB/s (0.80 of it)", "b -> a reaches 20.00 GB/s (0.40 of it)"}, r.Slow(45, 50))

	r.BidirErr = errors.New("too few copies")
	link := P2PLink{Kind: "PCIe", How: "PCIe PIX"}
	assert.Equal(t, "a -> b: best 40.00 GB/s (mean 38.00); b -> a: best 20.00 GB/s (mean 19.00); both at once not measured; 16 MiB x 8 per timed batch; link PCIe: PCIe PIX", r.Summary(link))
	r.BidirErr = nil
	r.Bidir = multigpu.Window{Lanes: []multigpu.Lane{{GBps: 30}, {GBps: 15}}}
	assert.Contains(t, r.Summary(P2PLink{Why: "no link"}), "both at once 45.00 GB/s (30.00 + 15.00); 16 MiB x 8 per timed batch; link unknown: no link")
}

// GPU-11's finding carries the causes on one line and the remedy.
func TestJudgeUnderLoad(t *testing.T) {
	want := topo.Expected{Speed: 16, Width: 16}
	assert.Nil(t, JudgeUnderLoad("0000:3b:00.0", pci.Link{CurGTs: 16, CurWidth: 16}, want))
	f := JudgeUnderLoad("0000:3b:00.0", pci.Link{CurGTs: 16, CurWidth: 4}, want)
	require.NotNil(t, f)
	assert.Equal(t, "GPU 0000:3b:00.0: link trained to x4 of x16 lanes", f.Cause)
	assert.Equal(t, UntrainedRemedy, f.Remedy)
}
