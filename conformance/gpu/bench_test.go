//go:build gpu

package gpu

import (
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/pcie"
)

// BenchmarkCopy reports pinned 256 MiB host<->device copy bandwidth per GPU
// and direction, next to the theoretical rate of the GPU's PCIe link
// (make bench). Metrics: GB/s (this run), link_GB/s, %link.
func BenchmarkCopy(b *testing.B) {
	d := cuda.Open(b)
	root := testenv.Root(b)
	for _, dev := range cuda.GPUs(b, d) {
		var rate float64
		l, err := pcie.ReadLink(root, dev.PCI)
		if err == nil {
			rate, err = l.MaxGBps()
		}
		if err != nil {
			b.Logf("GPU %s: no link rate to compare with: %v", dev.PCI, err)
		}
		for _, dir := range []cuda.Direction{cuda.HtoD, cuda.DtoH} {
			b.Run(dev.PCI+"/"+string(dir), func(b *testing.B) {
				c := cuda.Primary(b, dev)
				m := cuda.Alloc(b, c, copySize)
				h := cuda.HostAlloc(b, c, copySize)
				if _, err := c.Copy(dir, m, h, copySize, 1); err != nil { // warm-up
					b.Fatal(err)
				}
				b.SetBytes(copySize)
				b.ResetTimer()
				ds, err := c.Copy(dir, m, h, copySize, b.N)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				var total time.Duration
				for _, d := range ds {
					total += d
				}
				gbps := cuda.GBps(copySize*len(ds), total)
				b.ReportMetric(gbps, "GB/s")
				if rate > 0 {
					b.ReportMetric(rate, "link_GB/s")
					b.ReportMetric(100*gbps/rate, "%link")
					b.Logf("GPU %s %s pinned %s x%d: %.2f GB/s; link %s x%d = %.2f GB/s theoretical (%.1f%%)",
						dev.PCI, dir, cuda.Size(copySize), len(ds), gbps, pcie.Generation(l.MaxGTs), l.MaxWidth, rate, 100*gbps/rate)
				} else {
					b.Logf("GPU %s %s pinned %s x%d: %.2f GB/s", dev.PCI, dir, cuda.Size(copySize), len(ds), gbps)
				}
			})
		}
	}
}
