// Selection: GDR_GPU, GDR_RDMA_DEVICE and GDR_RAILS, and the Primary rail.

package rails

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// Selection is the resolved GPU/NIC choice of a run.
type Selection struct {
	*Host
	Port int     // GDR_IB_PORT
	NICs []*NIC  // every RDMA device at Port, by name
	All  []*Rail // one rail per GPU, index = GPU index
	// Rails are the rails selected by GDR_GPU and GDR_RAILS (All when
	// neither is set).
	Rails []*Rail
	// Primary is the rail single-rail tests use (see the package comment);
	// nil only when there is no GPU and no candidate NIC.
	Primary *Rail
	// PrimaryWhy says how Primary was chosen.
	PrimaryWhy string
	// Forced is the NIC GDR_RDMA_DEVICE names, nil when unset.
	Forced *NIC
	// HCA is NCCL_IB_HCA as the candidates obey it (unset while
	// GDR_RDMA_DEVICE is set: config reads it only then).
	HCA config.HCAFilter
}

// Select applies the rail rule and the selectors of cfg (GDR_GPU,
// GDR_RDMA_DEVICE, GDR_RAILS, GDR_IB_PORT).
func (h *Host) Select(cfg config.Config) (*Selection, error) {
	h.loadNCCL(cfg)
	s := &Selection{Host: h, Port: cfg.IBPort, HCA: cfg.IBHCA}
	if s.Port < 1 {
		s.Port = 1
	}
	for _, d := range h.Devices {
		s.NICs = append(s.NICs, s.nicView(d))
	}
	s.markVFs()
	s.markBlueField()
	var errs []error
	if err := s.hcaLeavesNone(); err != nil {
		errs = append(errs, err)
	}
	if cfg.RDMADevice != "" {
		if s.Forced = s.NIC(cfg.RDMADevice); s.Forced == nil {
			errs = append(errs, fmt.Errorf("GDR_RDMA_DEVICE=%s: %s", cfg.RDMADevice, s.nicsThere()))
		}
	}
	gpuSel, err := s.resolveGPU(cfg.GPU)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.buildRails()
	if err := s.filter(cfg, gpuSel); err != nil {
		return nil, err
	}
	s.choosePrimary(gpuSel)
	return s, nil
}

// NIC returns the RDMA device called name, or nil.
func (s *Selection) NIC(name string) *NIC {
	for _, n := range s.NICs {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// GPU returns GPU i, or nil.
func (s *Selection) GPU(i int) *GPU {
	if i < 0 || i >= len(s.GPUs) {
		return nil
	}
	return s.GPUs[i]
}

func (s *Selection) gpusThere() string {
	if len(s.GPUs) == 0 {
		return fmt.Sprintf("there are no GPUs (no NVIDIA display-class function in %s)", pci.DevicesDir)
	}
	var a []string
	for _, g := range s.GPUs {
		a = append(a, g.PCI)
	}
	return fmt.Sprintf("there are %d GPUs (%s)", len(a), strings.Join(a, ", "))
}

// resolveGPU reads GDR_GPU: -1 when unset.
func (s *Selection) resolveGPU(v string) (int, error) {
	if v == "" {
		return -1, nil
	}
	if i, err := strconv.Atoi(v); err == nil {
		if i < 0 || i >= len(s.GPUs) {
			return -1, fmt.Errorf("GDR_GPU=%s: %s; want an index below %d (PCI bus order) or one of those addresses", v, s.gpusThere(), len(s.GPUs))
		}
		return i, nil
	}
	a, err := pci.NormalizeAddr(v)
	if err != nil {
		return -1, fmt.Errorf("GDR_GPU=%s: %v; %s", v, err, s.gpusThere())
	}
	if g := s.gpuByPCI(a); g != nil {
		return g.Index, nil
	}
	if d := s.Index.Device(a); d != nil {
		return -1, fmt.Errorf("GDR_GPU=%s: %s is not an NVIDIA GPU (%s, class 0x%06x); %s", v, a, d, d.Class, s.gpusThere())
	}
	return -1, fmt.Errorf("GDR_GPU=%s names no GPU; %s", v, s.gpusThere())
}

// filter applies GDR_GPU and GDR_RAILS.
func (s *Selection) filter(cfg config.Config, gpuSel int) error {
	keep := map[int]bool{}
	if cfg.Rails != nil {
		for _, i := range cfg.Rails {
			if i >= len(s.All) {
				if len(s.All) == 0 {
					return fmt.Errorf("GDR_RAILS=%s: there are no rails: %s", railList(cfg.Rails), s.gpusThere())
				}
				return fmt.Errorf("GDR_RAILS=%s: rail %d does not exist; there are %d rails (0-%d), one per GPU", railList(cfg.Rails), i, len(s.All), len(s.All)-1)
			}
			keep[i] = true
		}
	}
	for _, r := range s.All {
		if gpuSel >= 0 && r.Index != gpuSel {
			continue
		}
		if cfg.Rails != nil && !keep[r.Index] {
			continue
		}
		s.Rails = append(s.Rails, r)
	}
	if gpuSel >= 0 && len(s.Rails) == 0 {
		return fmt.Errorf("GDR_GPU=%s is rail %d, which GDR_RAILS=%s leaves out", cfg.GPU, gpuSel, railList(cfg.Rails))
	}
	return nil
}

func railList(r []int) string {
	s := make([]string, len(r))
	for i, v := range r {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (s *Selection) choosePrimary(gpuSel int) {
	switch {
	case gpuSel >= 0:
		s.Primary, s.PrimaryWhy = s.All[gpuSel], fmt.Sprintf("GDR_GPU selects GPU %d", gpuSel)
	case s.Forced != nil && len(s.Rails) > 0:
		best := s.Rails[0]
		bc := Choice{Path: best.Path, HasPath: best.HasPath}
		for _, r := range s.Rails[1:] {
			if nearer(Choice{Path: r.Path, HasPath: r.HasPath}, bc) < 0 {
				best, bc = r, Choice{Path: r.Path, HasPath: r.HasPath}
			}
		}
		s.Primary = best
		s.PrimaryWhy = fmt.Sprintf("GPU %d is the selected GPU nearest GDR_RDMA_DEVICE=%s%s", best.GPU.Index, s.Forced.Name, pathNote(bc))
	case len(s.Rails) > 0:
		s.Primary, s.PrimaryWhy = s.Rails[0], fmt.Sprintf("rail %d, the first selected", s.Rails[0].Index)
		if s.Primary.NIC == nil {
			s.PrimaryWhy += " (GPU only: " + s.NoCandidate() + ")"
		}
	case s.Forced != nil:
		s.Primary = &Rail{Index: -1, NIC: s.Forced, Forced: true, Reason: "GDR_RDMA_DEVICE=" + s.Forced.Name}
		if !s.Forced.Candidate {
			s.Primary.Reason += "; not a rail candidate: " + s.Forced.Why
		}
		s.PrimaryWhy = "no GPU: the NIC GDR_RDMA_DEVICE names"
	default:
		var cs []Choice
		for _, n := range s.Candidates() {
			cs = append(cs, Choice{NIC: n})
		}
		if len(cs) == 0 {
			s.PrimaryWhy = "no GPU and " + s.NoCandidate()
			return
		}
		slices.SortStableFunc(cs, tieBreak)
		n := cs[0].NIC
		kind := "hardware RDMA NIC by PCI address"
		if n.Software {
			kind = "software RDMA device by name (no hardware NIC is a candidate)"
		}
		s.Primary = &Rail{Index: -1, NIC: n, Reason: "no GPU: the first candidate " + kind}
		s.PrimaryWhy = s.Primary.Reason
	}
}

// Summary is one line per rail of All, for logs.
func (s *Selection) Summary() string {
	if len(s.All) == 0 {
		if s.Primary != nil {
			return s.Primary.String() + ": " + s.Primary.Reason
		}
		return "no GPU; " + s.NoCandidate()
	}
	var out []string
	for _, r := range s.All {
		out = append(out, r.String()+": "+r.Reason)
	}
	if vf := s.LeftOutVFs(); vf != "" {
		out = append(out, vf)
	}
	if bf := s.LeftOutBlueField(); bf != "" {
		out = append(out, bf)
	}
	if s.HCA.Set() {
		out = append(out, fmt.Sprintf("%s: excluded %s", s.HCA, orNone(s.HCAExcludedNICs())))
	}
	return strings.Join(out, "\n")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
