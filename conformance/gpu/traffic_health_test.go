//go:build gpu

package gpu

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/health"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// This file's name sorts after every other test file of the package, and go
// test runs tests in file order: HLTH-02 runs after the copy tests it
// judges (their names are in gdr.tests_judged).

// traffic is the counters window of the copy tests (harness/health).
var traffic = health.New()

// copies records that t copies on the GPUs devs: the counters of each one's
// rail (its NIC's ports, AER of the GPU, the NIC and the bridges; a GPU
// without a NIC: the GPU and the ports above it) are judged by HLTH-02.
func copies(t *testing.T, devs ...cuda.Device) {
	t.Helper()
	for _, d := range devs {
		if r := rails.RailOf(testenv.Selection(t).All, d.PCI); r != nil {
			traffic.Around(t, r)
		}
	}
}

// HLTH-02: no PCIe AER error counter of a GPU, its NIC or the bridges
// between rose while the copy tests ran, nor an error counter of the rail
// NIC's port; the kernel log lines of the run reported.
func TestHLTH02CopyCounters(t *testing.T) {
	testenv.Req(t, "HLTH-02")
	traffic.Judge(t, "HLTH-02", "the copy tests (GPU-09..GPU-13, GPU-15)")
}
