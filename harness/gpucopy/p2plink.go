package gpucopy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// P2PLink is how two GPUs are joined, as far as the suite can tell.
type P2PLink struct {
	Kind string // "NVLink", "PCIe" or "" (unknown)
	NV   nvml.NVLink
	Path topo.Path
	// Rate is the theoretical rate per direction (0 when unknown), How says
	// how it came about, Why what is missing when it is unknown.
	Rate float64
	How  string
	Why  string
}

// KindOrUnknown is Kind, "unknown" when unknown.
func (l P2PLink) KindOrUnknown() string {
	if l.Kind == "" {
		return "unknown"
	}
	return l.Kind
}

// nvlinker is what LinkBetween asks NVML (*nvml.Handle).
type nvlinker interface {
	NVLinkBetween(a, b string) (nvml.NVLink, error)
}

// linkBetween finds the link between GPUs a and b: NVLink when NVML (nv,
// nil when NVML failed with nvErr) counts active links between them or says
// they talk over NVLink, else PCIe when ix has both, with its path class;
// else unknown, saying what was missing. devicesDir is where sysfs was
// read; emulated says a is the lab's emulated GPU.
func linkBetween(nv nvlinker, nvErr error, ix *topo.Index, devicesDir, a, b string, emulated bool) P2PLink {
	var missing []string
	if nv != nil {
		l, ok, why := nvlinkOf(nv.NVLinkBetween(a, b))
		if ok {
			return l
		}
		missing = append(missing, why)
	} else {
		missing = append(missing, "NVML: "+nvErr.Error())
	}
	if ix.Device(a) == nil || ix.Device(b) == nil {
		missing = append(missing, fmt.Sprintf("PCIe: %s or %s is not in sysfs (%s)", a, b, devicesDir))
		if emulated {
			missing = append(missing, "the lab's emulated GPU emulates no link")
		}
		return P2PLink{Why: strings.Join(missing, "; ")}
	}
	p, err := ix.Classify(a, b)
	if err != nil {
		return P2PLink{Why: strings.Join(append(missing, "PCIe: "+err.Error()), "; ")}
	}
	return pcieLink(ix, p, a, b)
}

// nvlinkOf is the NVLink NVML reports, ok when there is one; else what
// NVML said.
func nvlinkOf(nv nvml.NVLink, err error) (l P2PLink, ok bool, why string) {
	switch {
	case err != nil:
		return l, false, "NVML: " + err.Error()
	case nv.Links() > 0 || nv.P2P == "OK":
		l.Kind, l.NV = "NVLink", nv
		r, how, err := multigpu.NVLinkRate(nv.Links(), nv.Version)
		if err != nil {
			l.Why = fmt.Sprintf("NVML reports NVLink between them (%s) but no rate follows: %v", nv, err)
		} else {
			l.Rate, l.How = r, how
		}
		return l, true, ""
	}
	return l, false, fmt.Sprintf("NVML: no active NVLink link between them (%s)", nv)
}

// pcieLink is the PCIe path p between a and b, at the rate of the slower of
// the two GPUs' links: a peer copy crosses both.
func pcieLink(ix *topo.Index, p topo.Path, a, b string) P2PLink {
	l := P2PLink{Kind: "PCIe", Path: p}
	var slow string
	for _, d := range []string{a, b} {
		want, err := ix.ExpectedLink(d)
		if err != nil {
			l.Why = fmt.Sprintf("PCIe %s, but %v", p.Class, err)
			return l
		}
		r, err := pci.GBps(want.Speed, want.Width)
		if err != nil {
			l.Why = fmt.Sprintf("PCIe %s, but GPU %s: %v", p.Class, d, err)
			return l
		}
		if l.Rate == 0 || r < l.Rate {
			l.Rate = r
			slow = fmt.Sprintf("%s %s x%d = %.2f GB/s", d, pci.Generation(want.Speed), want.Width, r)
		}
	}
	l.How = fmt.Sprintf("PCIe %s, the slower GPU link: %s", p.Class, slow)
	return l
}

// attr is one attribute to record: key and value.
type attr struct {
	Key   string
	Value any
}

// attrList is attributes in the order they are recorded; its attr method
// takes literal keys, which the attribute-key rule (internal/attrkey) checks.
type attrList []attr

func (a *attrList) attr(k string, v any) { *a = append(*a, attr{k, v}) }

// Record writes the link's facts as attributes.
func (l P2PLink) Record(t testing.TB) {
	t.Helper()
	for _, a := range l.attrs() {
		testenv.Attr(t, a.Key, a.Value)
	}
}

// attrs are the link's facts as attributes, in the order they are recorded.
func (l P2PLink) attrs() []attr {
	var out attrList
	out.attr("p2p_link", l.KindOrUnknown())
	switch l.Kind {
	case "NVLink":
		out.attr("nvlink_count", l.NV.Links())
		out.attr("nvlink_version", l.NV.Version)
		out.attr("nvlink_detail", l.NV.String())
	case "PCIe":
		out.attr("p2p_path", l.Path.Class.String())
		out.attr("p2p_bridges", strings.Join(l.Path.Bridges, " "))
	}
	if l.Rate > 0 {
		out.attr("p2p_link_gbyte_s", l.Rate)
		out.attr("p2p_link_source", l.How)
	}
	if l.Why != "" {
		out.attr("p2p_link_note", l.Why)
	}
	return out
}
