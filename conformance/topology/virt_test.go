package topology

import (
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// virtAttrs records whether the host is a VM (gdr.virt: the hypervisor, or
// "none") and the signs that said so (gdr.virt_signs).
func (h *host) virtAttrs(t *testing.T) {
	t.Helper()
	if h.guestErr != nil {
		t.Logf("VM detection: %v", h.guestErr)
	}
	if !h.guest.VM {
		testenv.Attr(t, "virt", "none")
		return
	}
	hyp := h.guest.Hypervisor
	if hyp == "" {
		hyp = "unknown hypervisor"
	}
	testenv.Attr(t, "virt", hyp)
	testenv.Attr(t, "virt_signs", strings.Join(h.guest.Signs, "; "))
}

// vmVerdict is TOPO-02's message and remedy for a rail farther than limit
// in a VM (rails.VMVerdict), with the NCCL_NET_GDR_LEVEL it judged by.
func (h *host) vmVerdict(t *testing.T, r *rails.Rail, limit topo.Class) (msg, remedy string) {
	t.Helper()
	v := h.sel.VMVerdict(r, limit, h.guest, rails.NCCLEnv(testenv.Config(t)))
	if v.GDRErr != nil {
		t.Logf("NCCL_NET_GDR_LEVEL not read: %v", v.GDRErr)
	}
	if v.GDRSetting != "" {
		testenv.Attr(t, "nccl_gdr_level", v.GDRSetting)
	}
	return v.Msg, v.Remedy
}
