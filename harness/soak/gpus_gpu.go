//go:build gpu

package soak

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpucopy"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	model "github.com/gdrconf/gdrconf/internal/soak"
)

// startGPUs keeps the selected GPUs' copy engines busy (gpucopy.Busy:
// pinned HtoD and DtoH copies in turn, each GPU on its local CPUs) and
// reads NVML per sample where libnvidia-ml.so.1 opens. A GPU CUDA does
// not see is not soaked; no GPU at all is said in the reason, and the
// rails soak alone.
func startGPUs(t *testing.T, s *model.Series) (*load, string) {
	d, err := cuda.Load()
	if err != nil {
		return nil, fmt.Sprintf("no CUDA driver: %s does not open (%v)", cuda.Library, err)
	}
	all, err := d.Devices()
	if err != nil || len(all) == 0 {
		return nil, fmt.Sprintf("the CUDA driver lists no GPU (%v)", err)
	}
	want := map[string]bool{}
	for _, r := range testenv.Selection(t).Rails {
		if r.GPU != nil {
			want[r.GPU.PCI] = true
		}
	}
	var devs []cuda.Device
	for _, dev := range all {
		if len(want) == 0 || want[dev.PCI] {
			devs = append(devs, dev)
		}
	}
	if len(devs) == 0 {
		return nil, "no selected GPU is one CUDA sees (GDR_GPU, GDR_RAILS, CUDA_VISIBLE_DEVICES)"
	}
	n := gpucopy.BufSize(devs[0])
	cs := gpucopy.NewHostCopiers(t, devs, n)
	names := make([]string, len(devs))
	for i, dev := range devs {
		names[i] = "GPU " + dev.PCI
		s.GPUs = append(s.GPUs, model.GPU{Index: i, PCI: dev.PCI, Name: cuda.GPUName(t, dev)})
		if dev.Emulated {
			s.Emulated = true
		}
	}
	l := newLoad(names)
	if h, err := nvml.TryOpen(t); err == nil {
		said := map[int]bool{}
		l.telemetry = func(i int) GPUReading {
			tm, err := h.Telemetry(devs[i].PCI)
			if err != nil && !said[i] {
				said[i] = true
				t.Logf("soak: GPU %s: NVML: %v (the values read are kept; the others are absent)", devs[i].PCI, err)
			}
			return GPUReading{SMClockMHz: tm.SMClockMHz, MemClockMHz: tm.MemClockMHz, TempC: tm.TempC, PowerW: tm.PowerW, Throttle: tm.ClockEvents}
		}
	} else {
		t.Logf("soak: no NVML readings (clocks, temperature, power, throttle reasons absent; SOAK-05 not judged): %s", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	for i, c := range cs {
		l.start(i, func(stop <-chan struct{}, moved *atomic.Int64) error { return c.Busy(n, stop, moved) })
	}
	return l, ""
}
