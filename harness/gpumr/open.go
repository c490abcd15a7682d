//go:build gpu && rdma

package gpumr

import (
	"fmt"
	"testing"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
)

// NIC is the NIC under test, opened for t.
type NIC struct {
	Name string
	Ctx  *verbs.Context
	PD   *verbs.PD
}

// GPU is the GPU under test with its primary context.
type GPU struct {
	Drv *cuda.Driver
	Dev cuda.Device
	Ctx *cuda.Context
}

// OpenNIC opens the primary rail's NIC (testenv.Selection: GDR_RDMA_DEVICE,
// else the NIC of GDR_GPU's rail, else rail 0's) with a protection domain,
// or ends the test as absent naming where the suite looked.
func OpenNIC(t *testing.T) *NIC {
	t.Helper()
	r, skip, fail := rc.Probe(t)
	switch {
	case skip != "":
		testenv.Absent(t, "%s", skip)
	case fail != "":
		testenv.Failf(t, "see the cause above", "%s", fail)
	}
	n := &NIC{Name: r.NIC.Name}
	ctx, err := verbs.Open(n.Name)
	if err != nil {
		testenv.Failf(t, "check ib_uverbs is loaded and /dev/infiniband/uverbs* is accessible", "%v", err)
	}
	CloseAtEnd(t, n.Name, ctx)
	pd, err := ctx.AllocPD()
	if err != nil {
		testenv.Failf(t, "check dmesg for the NIC driver's errors", "%s: %v", n.Name, err)
	}
	CloseAtEnd(t, n.Name, pd)
	n.Ctx, n.PD = ctx, pd
	return n
}

// CloseAtEnd closes c when t ends; an error closing it fails t.
func CloseAtEnd(t *testing.T, nic string, c interface{ Close() error }) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			testenv.Error(t, testenv.Failure{Cause: fmt.Sprintf("%s: %v", nic, err)})
		}
	})
}

// OpenGPU opens the primary rail's GPU with its primary context.
func OpenGPU(t *testing.T) *GPU {
	t.Helper()
	d := cuda.Open(t)
	_, dev := cuda.Rail(t, d)
	return &GPU{Drv: d, Dev: dev, Ctx: cuda.Primary(t, dev)}
}

// RequireDevice is the negative control every GPU registration runs first:
// the buffer must be cuMemAlloc device memory, so a registration that only
// works on managed or host memory can never pass as GPUDirect RDMA.
func RequireDevice(t *testing.T, g *GPU, m *cuda.Mem) {
	t.Helper()
	mt, err := g.Ctx.PointerType(m.Addr())
	if err != nil {
		testenv.Failf(t, "upgrade the NVIDIA driver", "GPU %s: %v", g.Dev.PCI, err)
	}
	testenv.Attr(t, "mem_type", string(mt))
	if mt != cuda.MemDevice {
		testenv.Failf(t, "suite bug or broken driver: the buffer must come from cuMemAlloc",
			"GPU %s: buffer at %#x is %s memory, not device memory", g.Dev.PCI, m.Addr(), mt)
	}
}
