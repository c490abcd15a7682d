//go:build gpu

package gpucopy

import (
	"fmt"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pcie"
	"github.com/gdrconf/gdrconf/internal/topo"
)

const (
	// Size is the size of each timed copy: large enough that per-call
	// overhead is below 1% at 60 GB/s.
	Size = 256 << 20
	// Reps is how many timed copies (or peer batches) follow the warm-up.
	Reps = 5
)

// BufSize is the size of each timed copy: Size on a GPU; on the lab's
// emulated GPU, whose copies are CPU memcpy and whose rates are not judged,
// less, so that the unit tests that run these checks on it stay short.
func BufSize(dev cuda.Device) int {
	if dev.Emulated {
		return 16 << 20
	}
	return Size
}

// DirKey is a direction as gdr.copy_dir reports it.
func DirKey(dir cuda.Direction) string {
	return map[cuda.Direction]string{cuda.HtoD: "h2d", cuda.DtoH: "d2h"}[dir]
}

// MeanGBps is the rate over all spans, each of which moved bytes.
func MeanGBps(bytes int, spans []multigpu.Span) float64 {
	var total time.Duration
	for _, s := range spans {
		total += s.Duration()
	}
	return cuda.GBps(bytes*len(spans), total)
}

// BestGBps is the rate of the fastest span.
func BestGBps(bytes int, spans []multigpu.Span) float64 {
	var best float64
	for _, s := range spans {
		best = max(best, cuda.GBps(bytes, s.Duration()))
	}
	return best
}

// Measure times Reps pinned copies of Size bytes after one warm-up and
// returns the best and mean rates in GB/s.
func Measure(t testing.TB, c *cuda.Context, dir cuda.Direction, dev *cuda.Mem, host *cuda.Pinned) (best, mean float64) {
	t.Helper()
	var ds []time.Duration
	err := cuda.OnGPUCPUs(t, c.Dev, func() error {
		if _, err := c.Copy(dir, dev, host, Size, 1); err != nil { // warm-up
			return err
		}
		var err error
		ds, err = c.Copy(dir, dev, host, Size, Reps)
		return err
	})
	if err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: %v", c.Dev.PCI, err)
	}
	return bestMean(Size, ds)
}

// bestMean is the fastest and the mean rate of copies of bytes each.
func bestMean(bytes int, ds []time.Duration) (best, mean float64) {
	var total time.Duration
	fastest := ds[0]
	for _, d := range ds {
		total += d
		fastest = min(fastest, d)
	}
	return cuda.GBps(bytes, fastest), cuda.GBps(bytes*len(ds), total)
}

// Solo is one GPU's pinned copies alone, held against its link (GPU-09/10).
type Solo struct {
	PCI        string
	Dir        cuda.Direction
	Best, Mean float64   // GB/s
	Link       topo.Link // what the link should train to
	Rate       float64   // the link's theoretical GB/s
	Min        float64   // GDR_MIN_COPY_FRACTION
}

// MeasureSolo allocates Size bytes on dev and pinned on the host and times
// copies in direction dir against want, the link dev should train to.
func MeasureSolo(t *testing.T, dev cuda.Device, dir cuda.Direction, want topo.Link, frac float64) Solo {
	t.Helper()
	rate, _ := pcie.GBps(want.Speed, want.Width)
	c := cuda.Primary(t, dev)
	m := cuda.Alloc(t, c, Size)
	h := cuda.HostAlloc(t, c, Size)
	best, mean := Measure(t, c, dir, m, h)
	return Solo{PCI: dev.PCI, Dir: dir, Best: best, Mean: mean, Link: want, Rate: rate, Min: frac}
}

// Record writes the rates and the floor as attributes.
func (s Solo) Record(t testing.TB) {
	t.Helper()
	testenv.Attr(t, "copy_dir", DirKey(s.Dir))
	testenv.Attr(t, "copy_gbyte_s", s.Best)
	testenv.Attr(t, "copy_gbyte_s_mean", s.Mean)
	testenv.Attr(t, "copy_fraction", s.Best/s.Rate)
	testenv.Attr(t, "min_copy_fraction", s.Min)
	testenv.Attr(t, "min_copy_gbyte_s", s.Min*s.Rate)
}

// Summary is the log line of the measurement.
func (s Solo) Summary() string {
	return fmt.Sprintf("GPU %s %s pinned %s: best %.2f GB/s, mean %.2f GB/s = %.0f%% of %.2f GB/s (%s x%d)",
		s.PCI, s.Dir, cuda.Size(Size), s.Best, s.Mean, 100*s.Best/s.Rate, s.Rate, pcie.Generation(s.Link.Speed), s.Link.Width)
}

// Shortfall says how the best rate falls below the floor; nil when it does not.
func (s Solo) Shortfall() error {
	if s.Best < s.Min*s.Rate {
		return fmt.Errorf("GPU %s: pinned %s copies reach %.2f GB/s, %.0f%% of the %.2f GB/s a %s x%d link carries, below GDR_MIN_COPY_FRACTION=%.2f (%.2f GB/s)",
			s.PCI, s.Dir, s.Best, 100*s.Best/s.Rate, s.Rate, pcie.Generation(s.Link.Speed), s.Link.Width, s.Min, s.Min*s.Rate)
	}
	return nil
}
