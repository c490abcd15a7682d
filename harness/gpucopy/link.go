//go:build gpu

package gpucopy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// ExpectedLink reads the GPU's PCIe link and what it should train to: the
// lower of the GPU's own maximum and its upstream port's (topo.ExpectedLink,
// the rule TOPO-04 applies), so a Gen5 GPU in a Gen4 slot is judged at Gen4.
// A GPU without link registers (a virtual bus, the lab's emulated GPU) ends
// the test as absent.
func ExpectedLink(t *testing.T, dev cuda.Device) (pci.Link, topo.Expected) {
	t.Helper()
	l, err := pci.ReadLink(testenv.Root(t), dev.PCI)
	if pci.IsNotExist(err) {
		testenv.Absent(t, "", "no PCIe link registers for GPU %s: %v", dev.PCI, err)
	}
	if err != nil {
		testenv.Failf(t, "check the GPU's PCI function in sysfs (lspci -vvv -s "+dev.PCI+")", "%v", err)
	}
	testenv.Attr(t, "link", l.String())
	want, err := testenv.Selection(t).Index.ExpectedLink(dev.PCI)
	if err != nil {
		testenv.Failf(t, "the link does not report a valid maximum: check lspci -vvv -s "+dev.PCI, "GPU %s: %v", dev.PCI, err)
	}
	recordExpected(t, dev.PCI, l, want)
	rate, err := pci.GBps(want.Speed, want.Width)
	if err != nil {
		testenv.Failf(t, "the link does not report a valid maximum: check lspci -vvv -s "+dev.PCI, "GPU %s: %v", dev.PCI, err)
	}
	testenv.Attr(t, "link_gbyte_s", rate)
	return l, want
}

// recordExpected writes what the link should train to and, where the
// upstream port limits it, by what.
func recordExpected(t *testing.T, gpu string, l pci.Link, want topo.Expected) {
	t.Helper()
	testenv.Attr(t, "link_expected", fmt.Sprintf("%g GT/s x%d", want.Speed, want.Width))
	if want.Limited {
		testenv.Attr(t, "link_limited_by", fmt.Sprintf("%s (max %g GT/s x%d)", want.Partner, want.PartnerSpeed, want.PartnerWidth))
		t.Logf("GPU %s (max %g GT/s x%d) sits below %s (max %g GT/s x%d): judged at %g GT/s x%d",
			gpu, l.MaxGTs, l.MaxWidth, want.Partner, want.PartnerSpeed, want.PartnerWidth, want.Speed, want.Width)
	}
}

// BusyChunk is the copy size of LinkUnderLoad: short copies so the loop
// stops promptly.
const BusyChunk = 64 << 20

// LinkUnderLoad keeps dev copying host to device while it samples the
// GPU's link and returns the fastest state seen with the number of copies
// made meanwhile. The link retrains to full speed within microseconds of
// traffic; 20 samples over ~1 s see it.
func LinkUnderLoad(t *testing.T, dev cuda.Device) (busy pci.Link, copies int) {
	t.Helper()
	c := cuda.Primary(t, dev)
	m := cuda.Alloc(t, c, BusyChunk)
	h := cuda.HostAlloc(t, c, BusyChunk)
	stop := make(chan struct{})
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.CopyUntil(cuda.HtoD, m, h, BusyChunk, stop, 5*time.Second)
		done <- result{n, err}
	}()
	busy, sampleErr := sampleLink(testenv.Root(t), dev.PCI)
	close(stop)
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: copy loop did not stop within 10 s", dev.PCI)
	}
	if r.err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: copy while sampling the link: %v", dev.PCI, r.err)
	}
	if sampleErr != nil {
		testenv.Failf(t, "check the GPU's PCI function in sysfs", "GPU %s: reading the link during the copy: %v", dev.PCI, sampleErr)
	}
	if r.n == 0 {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: no copy completed while sampling the link", dev.PCI)
	}
	return busy, r.n
}

// sampleLink reads the link 20 times over about a second, after 100 ms for
// the copies to start, and keeps the fastest state.
func sampleLink(root *hostfs.Root, bdf string) (pci.Link, error) {
	var busy pci.Link
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 20; i++ {
		cur, err := pci.ReadCurrent(root, bdf)
		if err != nil {
			return busy, err
		}
		if cur.CurGTs > busy.CurGTs || (cur.CurGTs == busy.CurGTs && cur.CurWidth > busy.CurWidth) {
			busy = cur
		}
		time.Sleep(50 * time.Millisecond)
	}
	return busy, nil
}

// Untrained says how the link under load falls short of want, one cause per
// line; nil when it trained to want.
func Untrained(busy pci.Link, want topo.Expected) error {
	var errs []error
	if busy.CurGTs < want.Speed {
		errs = append(errs, fmt.Errorf("link stays at %g GT/s (%s) while the GPU copies, below the %g GT/s (%s) that it and its upstream port support",
			busy.CurGTs, pci.Generation(busy.CurGTs), want.Speed, pci.Generation(want.Speed)))
	}
	if busy.CurWidth < want.Width {
		errs = append(errs, fmt.Errorf("link trained to x%d of x%d lanes", busy.CurWidth, want.Width))
	}
	return errors.Join(errs...)
}

// UntrainedRemedy is what a GPU link that does not train under load needs.
const UntrainedRemedy = "reseat the GPU or its riser, check the slot's BIOS link-speed setting (Auto/GenN), and look for AER errors in dmesg"

// JudgeUnderLoad is GPU-11's rule on the link of the GPU at gpu, read
// while it copies (busy), against want: Untrained's causes on one line
// with UntrainedRemedy; nil when it trained to want.
func JudgeUnderLoad(gpu string, busy pci.Link, want topo.Expected) *verdict.Finding {
	err := Untrained(busy, want)
	if err == nil {
		return nil
	}
	return verdict.Failf(UntrainedRemedy, "GPU %s: %s", gpu, OneLine(err))
}

// PeerDataRemedy is the remedy for peer copied data that is not intact
// (GPU-14/15).
const PeerDataRemedy = "check dmesg for Xid errors and NVLink/PCIe error counters (nvidia-smi nvlink -e; AER in dmesg); reset the GPUs"

// OneLine joins a multi-line error's lines with "; ", for a failure message.
func OneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
