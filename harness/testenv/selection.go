package testenv

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/internal/rails"
)

// gpuSource is a driver that enumerates GPUs by PCI address.
type gpuSource struct {
	name string
	list func() ([]string, error)
}

var (
	srcMu      sync.Mutex
	gpuSources []gpuSource
	selBuilt   bool
	lateSource []string

	selOnce sync.Once
	sel     *rails.Selection
	selErr  error
)

// RegisterGPUSource adds a driver that lists GPUs by PCI address (the CUDA
// harness registers the CUDA driver from an init function). Sources are
// called once, when the selection is first built, and only when the host
// root is the running host: a driver describes this machine, not a recorded
// tree. GPUs they list that sysfs does not (the lab's emulated GPU) join the
// selection after the sysfs GPUs; a source's error is kept in
// Selection.SourceErr, not fatal. Registering after the selection was built
// is a suite bug and fails the next Selection call.
func RegisterGPUSource(name string, list func() ([]string, error)) {
	srcMu.Lock()
	defer srcMu.Unlock()
	if selBuilt {
		lateSource = append(lateSource, name)
		return
	}
	gpuSources = append(gpuSources, gpuSource{name, list})
}

// Selection returns the run's GPU/NIC selection (internal/rails), built once
// per test binary from the host root and the configuration. A bad GDR_GPU,
// GDR_RDMA_DEVICE or GDR_RAILS fails the test, naming the variable, the
// value and what exists.
func Selection(t testing.TB) *rails.Selection {
	t.Helper()
	cfg := Config(t)
	root := Root(t)
	selOnce.Do(func() {
		srcMu.Lock()
		selBuilt = true
		srcs := append([]gpuSource(nil), gpuSources...)
		srcMu.Unlock()
		h := rails.Discover(root)
		if root.IsLive() {
			var errs []error
			for _, s := range srcs {
				addrs, err := s.list()
				if err == nil {
					err = h.AddDriverGPUs(addrs)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
				}
			}
			h.SourceErr = errors.Join(errs...)
		}
		sel, selErr = h.Select(cfg)
	})
	srcMu.Lock()
	late := lateSource
	srcMu.Unlock()
	if len(late) > 0 {
		NotJudgedf(t, "", "suite bug: GPU source(s) %v registered after the GPU/NIC selection was built; register from an init function", late)
	}
	if selErr != nil {
		NotJudgedf(t, "", "GPU/NIC selection: %v", selErr)
	}
	return sel
}

// RailAttrs records the facts of rail r as JUnit properties: gdr.rail (the
// rail index), gdr.gpu (PCI address), gdr.gpu_index, gdr.nic (RDMA device),
// gdr.nic_pci, gdr.port, gdr.path (PIX..SYS; absent without a PCIe path),
// gdr.bridges, gdr.switches, gdr.numa_unknown (only when set) and
// gdr.rail_reason. A nil rail records nothing.
func RailAttrs(t testing.TB, r *rails.Rail) {
	t.Helper()
	if r == nil {
		return
	}
	if r.GPU != nil {
		Attr(t, "rail", r.Index)
		Attr(t, "gpu", r.GPU.PCI)
		Attr(t, "gpu_index", r.GPU.Index)
		if r.GPU.DriverOnly {
			Attr(t, "gpu_source", "driver only (not in sysfs)")
		}
	}
	if r.NIC != nil {
		Attr(t, "nic", r.NIC.Name)
		if r.NIC.PCI != "" {
			Attr(t, "nic_pci", r.NIC.PCI)
		} else {
			Attr(t, "nic_kind", "software")
		}
		Attr(t, "port", r.NIC.Port)
	}
	if r.HasPath {
		Attr(t, "path", r.Path.Class.String())
		Attr(t, "bridges", r.Bridges())
		Attr(t, "switches", r.Switches())
		if r.Path.NUMAUnknown {
			Attr(t, "numa_unknown", true)
		}
	}
	Attr(t, "rail_reason", r.Reason)
}
