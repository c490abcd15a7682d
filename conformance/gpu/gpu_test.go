//go:build gpu

package gpu

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/gpucopy"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
)

const (
	// bar1MinFree: every registered GPU buffer is mapped through BAR1;
	// with less free than this the pingpong and memreg buffers do not fit.
	bar1MinFree = 64 << 20
	// bar1Warn: data-center GPUs expose 16 GiB or more; under 1 GiB (a
	// consumer card's 256 MiB) limits how much memory can be registered.
	bar1Warn = 1 << 30
)

func TestGPU01Driver(t *testing.T) {
	testenv.Req(t, "GPU-01")
	d := cuda.Open(t)
	testenv.Attr(t, "cuda_driver", cuda.VersionString(d.Version()))
	devs := cuda.GPUs(t, d)
	var list []string
	for _, dev := range devs {
		list = append(list, fmt.Sprintf("%d=%s %s", dev.Ordinal, dev.PCI, dev.Name))
	}
	testenv.Attr(t, "gpus", strings.Join(list, ", "))
	if emu, desc := d.Emulated(); emu {
		// The lab's stand-in driver: every result here is emulated.
		testenv.Attr(t, "mem", "gpu-emulated")
		testenv.Attr(t, "emulated", desc)
		t.Logf("libcuda.so.1 is the lab's emulated GPU (%s): these results are no hardware evidence", desc)
	}
	t.Logf("CUDA driver %s (%d); GPUs: %s", cuda.VersionString(d.Version()), d.Version(), strings.Join(list, ", "))
	if f := cuda.DriverTooOld(d.Version()); f != nil {
		testenv.Fail(t, *f)
	}
	// A context and a tiny allocation prove the driver works, not only loads.
	for _, dev := range devs {
		c := cuda.Primary(t, dev)
		m := cuda.Alloc(t, c, 4096)
		want := []byte("gdr")
		if err := m.Fill(want); err != nil {
			testenv.Failf(t, cuda.InitRemedy(err), "GPU %s: %v", dev.PCI, err)
		}
		got := make([]byte, len(want))
		if err := m.ReadBack(got); err != nil {
			testenv.Failf(t, cuda.InitRemedy(err), "GPU %s: %v", dev.PCI, err)
		}
		if f := cuda.ReadBackMismatch(dev.PCI, want, got); f != nil {
			testenv.Fail(t, *f)
		}
	}
}

func TestGPU02ComputeCapability(t *testing.T) {
	testenv.Req(t, "GPU-02")
	cuda.EachGPU(t, "GPU-02", func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		maj, min, err := dev.ComputeCapability()
		if err != nil {
			testenv.Fail(t, *cuda.CCUnread(err))
		}
		testenv.Attr(t, "cc", fmt.Sprintf("%d.%d", maj, min))
		if f := cuda.JudgeCC(dev, maj, min); f != nil {
			testenv.Fail(t, *f)
		}
	})
}

func TestGPU03GPUDirectRDMA(t *testing.T) {
	testenv.Req(t, "GPU-03")
	cuda.EachGPU(t, "GPU-03", func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		cuda.CheckAttr(t, dev, cuda.AttrGPUDirectRDMASupported, "gdr_supported", 1)
	})
}

func TestGPU04DmabufCapable(t *testing.T) {
	testenv.Req(t, "GPU-04")
	cuda.EachGPU(t, "GPU-04", func(t *testing.T, d *cuda.Driver, dev cuda.Device) {
		testenv.Attr(t, "cuda_driver", cuda.VersionString(d.Version()))
		if f := cuda.JudgeDmabufDriver(d); f != nil {
			testenv.Fail(t, *f)
		}
		cuda.CheckAttr(t, dev, cuda.AttrDMABufSupported, "dmabuf_supported", 1)
	})
}

func TestGPU05VMM(t *testing.T) {
	testenv.Req(t, "GPU-05")
	cuda.EachGPU(t, "GPU-05", func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		cuda.CheckAttr(t, dev, cuda.AttrGPUDirectRDMAWithVMM, "gdr_vmm_supported", 1)
	})
}

func TestGPU06WritesOrdering(t *testing.T) {
	testenv.Req(t, "GPU-06")
	cuda.EachGPU(t, "GPU-06", func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		order := cuda.CheckAttr(t, dev, cuda.AttrGPUDirectRDMAWritesOrder, "writes_ordering_value", -1)
		flush := cuda.CheckAttr(t, dev, cuda.AttrGPUDirectRDMAFlushOptions, "flush_options", -1)
		testenv.Attr(t, "writes_ordering", cuda.WritesOrderingName(order))
		var opts []string
		if flush&cuda.FlushHost != 0 {
			opts = append(opts, "HOST")
		}
		if flush&cuda.FlushMemOps != 0 {
			opts = append(opts, "MEMOPS")
		}
		testenv.Attr(t, "flush_options_names", strings.Join(opts, ","))
		t.Logf("GPU %s: writes ordering %s, flush options %v", dev.PCI, cuda.WritesOrderingName(order), opts)
		if f := cuda.JudgeWritesOrdering(dev, order, flush); f != nil {
			testenv.Fail(t, *f)
		}
	})
}

func TestGPU07BAR1(t *testing.T) {
	testenv.Req(t, "GPU-07")
	cuda.EachGPU(t, "GPU-07", func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		h := nvml.Open(t)
		devs, err := h.Devices()
		if err != nil {
			testenv.Failf(t, nvml.Remedy(err), "%v", err)
		}
		var nd *nvml.Device
		var seen []string
		for i := range devs {
			seen = append(seen, devs[i].BusID)
			if devs[i].BusID == dev.PCI {
				nd = &devs[i]
			}
		}
		if nd == nil {
			testenv.Fail(t, *cuda.NVMLLacksGPU(dev.PCI, seen))
		}
		if nd.BAR1Total == 0 {
			testenv.Absent(t, "", "NVML does not report BAR1 for GPU %s (vGPU or MIG); looked with nvmlDeviceGetBAR1MemoryInfo", dev.PCI)
		}
		testenv.Attr(t, "bar1_total_mib", nd.BAR1Total>>20)
		testenv.Attr(t, "bar1_free_mib", nd.BAR1Free>>20)
		t.Logf("GPU %s: BAR1 %d MiB, %d MiB free", dev.PCI, nd.BAR1Total>>20, nd.BAR1Free>>20)
		if nd.BAR1Total < bar1Warn {
			msg := fmt.Sprintf("BAR1 is %d MiB: GPU memory registered for RDMA at any one time is limited to that; data-center GPUs expose 16 GiB or more (enable large BAR / Resizable BAR in the BIOS)", nd.BAR1Total>>20)
			testenv.Attr(t, "bar1_warning", msg)
			t.Log("warning: " + msg)
		}
		if f := cuda.JudgeBAR1Free(dev.PCI, nd.BAR1Free, bar1MinFree); f != nil {
			testenv.Fail(t, *f)
		}
	})
}

func TestGPU08DmabufExport(t *testing.T) {
	testenv.Req(t, "GPU-08")
	cuda.EachGPU(t, "GPU-08", func(t *testing.T, d *cuda.Driver, dev cuda.Device) {
		sup, err := dev.Attr(cuda.AttrDMABufSupported)
		if err != nil || sup != 1 || !d.HasDmabufExport() {
			// GPU-04 fails for this; exporting would only repeat it.
			testenv.Fail(t, *cuda.NoDmabufExport(dev.PCI, sup, d.Version()))
		}
		c := cuda.Primary(t, dev)
		m := cuda.Alloc(t, c, 2<<20)
		fd, off, _, err := m.DmabufFD()
		if err != nil {
			testenv.Attr(t, "dmabuf_export", "fail")
			testenv.Fail(t, *cuda.DmabufExportFailed(dev.PCI, err))
		}
		t.Cleanup(func() { _ = unix.Close(fd) })
		info, err := cuda.InspectFD(fd)
		if err != nil {
			testenv.Fail(t, *cuda.FDUnread(dev.PCI, fd, err))
		}
		testenv.Attr(t, "dmabuf_fd_link", info.Link)
		testenv.Attr(t, "dmabuf_fs_magic", fmt.Sprintf("%#x", info.FSType))
		if info.Exporter != "" {
			testenv.Attr(t, "dmabuf_exporter", info.Exporter)
		}
		t.Logf("GPU %s: 2 MiB exported as fd %d (offset %d): %+v", dev.PCI, fd, off, info)
		if f := cuda.JudgeDmabufFD(dev.PCI, fd, info, m.Span()); f != nil {
			testenv.Attr(t, "dmabuf_export", "fail")
			testenv.Fail(t, *f)
		}
		testenv.Attr(t, "dmabuf_export", "ok")
	})
}

// copyCheck times pinned copies in direction dir on each GPU under test
// and fails a GPU whose best rate is below GDR_MIN_COPY_FRACTION of what its
// link carries.
func copyCheck(t *testing.T, id string, dir cuda.Direction) {
	testenv.Req(t, id)
	cuda.EachGPU(t, id, func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		copies(t, dev)
		frac := testenv.Config(t).MinCopyFraction
		_, want := gpucopy.ExpectedLink(t, dev)
		s := gpucopy.MeasureSolo(t, dev, dir, want, frac)
		s.Record(t)
		t.Log(s.Summary())
		if f := s.Finding(); f != nil {
			testenv.Fail(t, *f)
		}
	})
}

func TestGPU09HtoDBandwidth(t *testing.T) { copyCheck(t, "GPU-09", cuda.HtoD) }

func TestGPU10DtoHBandwidth(t *testing.T) { copyCheck(t, "GPU-10", cuda.DtoH) }

func TestGPU11LinkUnderLoad(t *testing.T) {
	testenv.Req(t, "GPU-11")
	cuda.EachGPU(t, "GPU-11", func(t *testing.T, _ *cuda.Driver, dev cuda.Device) {
		copies(t, dev)
		idle, want := gpucopy.ExpectedLink(t, dev)
		testenv.Attr(t, "link_idle", fmt.Sprintf("%g GT/s x%d", idle.CurGTs, idle.CurWidth))
		if idle.CurGTs < want.Speed {
			t.Logf("GPU %s idle at %g GT/s of %g GT/s (power management); re-reading under load", dev.PCI, idle.CurGTs, want.Speed)
		}
		busy, n := gpucopy.LinkUnderLoad(t, dev)
		testenv.Attr(t, "link_busy", fmt.Sprintf("%g GT/s x%d", busy.CurGTs, busy.CurWidth))
		testenv.Attr(t, "link_busy_copies", n)
		t.Logf("GPU %s: idle %g GT/s x%d, busy %g GT/s x%d, expected %g GT/s x%d (%d copies of %s during sampling)",
			dev.PCI, idle.CurGTs, idle.CurWidth, busy.CurGTs, busy.CurWidth, want.Speed, want.Width, n, cuda.Size(gpucopy.BusyChunk))
		if f := gpucopy.JudgeUnderLoad(dev.PCI, busy, want); f != nil {
			testenv.Fail(t, *f)
		}
	})
}
