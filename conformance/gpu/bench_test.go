//go:build gpu

package gpu

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpucopy"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// BenchmarkCopy reports pinned 256 MiB host<->device copy bandwidth per GPU
// and direction, next to the theoretical rate of the GPU's PCIe link
// (make bench). Metrics: GB/s (this run), link_GB/s, %link.
func BenchmarkCopy(b *testing.B) {
	d := cuda.Open(b)
	root := testenv.Root(b)
	for _, dev := range cuda.GPUs(b, d) {
		var rate float64
		l, err := pci.ReadLink(root, dev.PCI)
		if err == nil {
			rate, err = l.MaxGBps()
		}
		if err != nil {
			b.Logf("GPU %s: no link rate to compare with: %v", dev.PCI, err)
		}
		for _, dir := range []cuda.Direction{cuda.HtoD, cuda.DtoH} {
			b.Run(dev.PCI+"/"+string(dir), func(b *testing.B) {
				c := cuda.Primary(b, dev)
				m := cuda.Alloc(b, c, gpucopy.Size)
				h := cuda.HostAlloc(b, c, gpucopy.Size)
				if _, err := c.Copy(dir, m, h, gpucopy.Size, 1); err != nil { // warm-up
					b.Fatal(err)
				}
				b.SetBytes(gpucopy.Size)
				b.ResetTimer()
				ds, err := c.Copy(dir, m, h, gpucopy.Size, b.N)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				var total time.Duration
				for _, d := range ds {
					total += d
				}
				gbps := cuda.GBps(gpucopy.Size*len(ds), total)
				b.ReportMetric(gbps, "GB/s")
				if rate > 0 {
					b.ReportMetric(rate, "link_GB/s")
					b.ReportMetric(100*gbps/rate, "%link")
					b.Logf("GPU %s %s pinned %s x%d: %.2f GB/s; link %s x%d = %.2f GB/s theoretical (%.1f%%)",
						dev.PCI, dir, cuda.Size(gpucopy.Size), len(ds), gbps, pci.Generation(l.MaxGTs), l.MaxWidth, rate, 100*gbps/rate)
				} else {
					b.Logf("GPU %s %s pinned %s x%d: %.2f GB/s", dev.PCI, dir, cuda.Size(gpucopy.Size), len(ds), gbps)
				}
			})
		}
	}
}

// BenchmarkConcurrentCopy reports pinned host<->device copy bandwidth with
// every GPU copying at once (GPU-12/13's measurement): each GPU copies b.N
// times 256 MiB, all starting together. Metrics: aggregate_GB/s (every
// GPU's rate added up), min_GB/s (the slowest GPU's), and per GPU its own
// GB/s in the log.
func BenchmarkConcurrentCopy(b *testing.B) {
	d := cuda.Open(b)
	devs := cuda.GPUs(b, d)
	if len(devs) < 2 {
		testenv.Absent(b, "", "concurrent copies need two or more GPUs; the selection has %s", devs[0].PCI)
	}
	n := gpucopy.BufSize(devs[0])
	cs := gpucopy.NewHostCopiers(b, devs, n)
	for _, dir := range []cuda.Direction{cuda.HtoD, cuda.DtoH} {
		b.Run(string(dir), func(b *testing.B) {
			b.SetBytes(int64(n * len(cs)))
			b.ResetTimer()
			lanes, err := gpucopy.Concurrently(cs, dir, n, 0, cuda.Loop{Reps: b.N})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			var agg float64
			low := -1.0
			var per []string
			for i, l := range lanes {
				r := gpucopy.MeanGBps(n, l)
				agg += r
				if low < 0 || r < low {
					low = r
				}
				per = append(per, fmt.Sprintf("%s %.2f", cs[i].Dev.PCI, r))
			}
			b.ReportMetric(agg, "aggregate_GB/s")
			b.ReportMetric(low, "min_GB/s")
			b.Logf("%s pinned %s x%d on %d GPUs at once: aggregate %.2f GB/s; per GPU (GB/s): %s",
				dir, cuda.Size(n), b.N, len(cs), agg, strings.Join(per, ", "))
		})
	}
}

// BenchmarkPeerCopy reports cuMemcpyPeer bandwidth for every ordered GPU
// pair with peer access enabled (GPU-15's measurement): b.N batches of 8
// copies of 256 MiB. Metric: GB/s.
func BenchmarkPeerCopy(b *testing.B) {
	d := cuda.Open(b)
	devs := cuda.GPUs(b, d)
	if len(devs) < 2 {
		testenv.Absent(b, "", "peer copies need two or more GPUs; the selection has %s", devs[0].PCI)
	}
	n := gpucopy.BufSize(devs[0])
	for _, src := range devs {
		for _, dst := range devs {
			if src.PCI == dst.PCI {
				continue
			}
			b.Run(src.PCI+"_to_"+dst.PCI, func(b *testing.B) {
				if ok, err := src.CanAccessPeer(dst); err != nil || !ok {
					testenv.Absent(b, "", "no peer access %s -> %s (cuDeviceCanAccessPeer %v, %v)", src.PCI, dst.PCI, ok, err)
				}
				cs, cd := cuda.Primary(b, src), cuda.Primary(b, dst)
				cuda.EnablePeer(b, cs, cd)
				cuda.EnablePeer(b, cd, cs)
				from, to := cuda.Alloc(b, cs, n), cuda.Alloc(b, cd, n)
				if _, err := cuda.PeerCopyLoop(to, from, n, 1, cuda.Loop{Reps: 1}); err != nil { // warm-up
					b.Fatal(err)
				}
				b.SetBytes(int64(gpucopy.PeerBatch * n))
				b.ResetTimer()
				spans, err := cuda.PeerCopyLoop(to, from, n, gpucopy.PeerBatch, cuda.Loop{Reps: b.N})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				r := gpucopy.MeanGBps(gpucopy.PeerBatch*n, spans)
				b.ReportMetric(r, "GB/s")
				b.Logf("%s -> %s: %s x %d x %d: %.2f GB/s", src.PCI, dst.PCI, cuda.Size(n), gpucopy.PeerBatch, b.N, r)
			})
		}
	}
}
