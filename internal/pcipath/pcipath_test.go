package pcipath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/pci/cfgbuild"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

type fn struct {
	bdf           string
	mps, mpss     int
	mrrs          int
	ro, ext       bool
	tenReq, tenCp bool
	ats           bool
	size          int
	role          Role
}

func dev(t *testing.T, f fn) Member {
	t.Helper()
	var cap2 uint32
	var ctl2 uint16
	if f.tenCp {
		cap2 |= pci.DevCap2TenBitComp
	}
	if f.tenReq {
		cap2 |= pci.DevCap2TenBitReq
		ctl2 |= pci.DevCtl2TenBitReq
	}
	class := uint32(0x060400)
	switch f.role {
	case GPU:
		class = 0x030200
	case NIC:
		class = 0x020700
	}
	img := cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 1, Class: class, Bridge: f.role == Bridge,
		DevCap: cfgbuild.DevCap(f.mpss, true), DevCtl: cfgbuild.DevCtl(f.mps, f.mrrs, f.ro, f.ext, false),
		DevCap2: cap2, DevCtl2: ctl2, ATS: f.ats, Size: f.size})
	d := &pci.Device{BDF: f.bdf, Vendor: 0x10de, Device: 1, Class: class}
	d.Config, d.ConfigErr = pci.ParseConfig(img)
	if f.size == 0 {
		require.NoError(t, d.ConfigErr)
	}
	return Member{Dev: d, Role: f.role}
}

// healthy is a GPU and a NIC on one switch, everything at 256 B, like the
// constructed pix tree.
func healthy() []fn {
	return []fn{
		{bdf: "0000:03:00.0", role: GPU, mps: 256, mpss: 256, mrrs: 4096, ro: true, ext: true, tenReq: true, tenCp: true},
		{bdf: "0000:02:00.0", role: Bridge, mps: 256, mpss: 2048, mrrs: 512, ro: true, ext: true},
		{bdf: "0000:01:00.0", role: Bridge, mps: 256, mpss: 2048, mrrs: 512, ro: true, ext: true},
		{bdf: "0000:02:01.0", role: Bridge, mps: 256, mpss: 2048, mrrs: 512, ro: true, ext: true},
		{bdf: "0000:04:00.0", role: NIC, mps: 256, mpss: 512, mrrs: 4096, ro: true, ext: true, tenCp: true, ats: true},
	}
}

func path(t *testing.T, fs []fn) Path {
	var p Path
	for _, f := range fs {
		p = append(p, dev(t, f))
	}
	return p
}

func TestHealthyPath(t *testing.T) {
	r := Check(path(t, healthy()))
	assert.Equal(t, Report, r.Worst(), "%v", r.Findings)
	require.Len(t, r.Settings, 5)
	assert.Equal(t, 4096, r.Settings["0000:04:00.0"].MaxReadRequest)
	require.Len(t, r.Findings, 1)
	assert.Equal(t, RuleATS.ID, r.Findings[0].Rule)
	assert.Contains(t, r.Findings[0].Cause, "NIC 0000:04:00.0 has ATS, disabled")
}

// pci=pcie_bus_perf: the NIC's side of the switch got 512 B, the GPU's 256 B.
func TestMPSMismatchFails(t *testing.T) {
	fs := healthy()
	fs[3].mps, fs[2].mps, fs[4].mps = 512, 512, 512
	r := Check(path(t, fs))
	assert.Equal(t, Fail, r.Worst())
	fails := r.Of(Fail)
	require.Len(t, fails, 1, "%v", r.Findings)
	f := fails[0]
	assert.Equal(t, RuleMPSPath.ID, f.Rule)
	assert.Equal(t, "0000:04:00.0", f.Device)
	for _, want := range []string{"NIC 0000:04:00.0 sends TLPs of up to 512 B", "GPU 0000:03:00.0 (256 B)", "bridge 0000:02:00.0 (256 B)", "Malformed TLP"} {
		assert.Contains(t, f.Cause, want)
	}
	assert.NotContains(t, f.Cause, "0000:01:00.0", "the upstream port at 512 B accepts it")
	assert.Contains(t, f.Remedy, "pci=pcie_bus_safe")
	assert.Equal(t, "0000:04:00.0", f.Device)
	assert.Equal(t, Fail, f.Level)
	assert.Contains(t, f.Source, "2.2.2")
}

func TestMPSAboveSupported(t *testing.T) {
	fs := healthy()
	fs[0].mps = 512 // GPU supports 256
	r := Check(path(t, fs))
	var rules []string
	for _, f := range r.Of(Fail) {
		rules = append(rules, f.Rule+" "+f.Device)
	}
	assert.ElementsMatch(t, []string{"mps-supported 0000:03:00.0", "mps-path 0000:03:00.0"}, rules)
}

func TestWarnings(t *testing.T) {
	fs := healthy()
	fs[4].ro = false     // NIC without Relaxed Ordering
	fs[0].ext = false    // GPU with Extended Tags off
	fs[4].tenReq = true  // NIC uses 10-bit tags...
	fs[0].tenCp = false  // ...but the GPU cannot complete them
	fs[0].tenReq = false // (and the GPU does not use them)
	r := Check(path(t, fs))
	assert.Equal(t, Warn, r.Worst())
	got := map[string]string{}
	for _, f := range r.Of(Warn) {
		got[f.Rule] = f.Device + ": " + f.Cause + " / " + f.Remedy
	}
	assert.Len(t, got, 3)
	assert.Contains(t, got["relaxed-ordering"], "0000:04:00.0")
	assert.Contains(t, got["relaxed-ordering"], "setpci -s 0000:04:00.0 CAP_EXP+8.w=0010:0010")
	assert.Contains(t, got["ext-tag"], "GPU 0000:03:00.0 supports Extended Tags but has them disabled")
	assert.Contains(t, got["10bit-tag"], "NIC 0000:04:00.0 has 10-Bit Tag Requester enabled but GPU 0000:03:00.0 does not support 10-Bit Tag Completer")

	// The GPU's own Relaxed Ordering is reported, never judged.
	fs = healthy()
	fs[0].ro = false
	assert.Equal(t, Report, Check(path(t, fs)).Worst())
}

func TestReservedReadRequest(t *testing.T) {
	p := path(t, healthy())
	p[4].Dev.Config.PCIe.DevCtl |= 7 << 12
	r := Check(p)
	fails := r.Of(Fail)
	require.Len(t, fails, 1)
	assert.Equal(t, RuleMRRS.ID, fails[0].Rule)
	assert.Contains(t, fails[0].Cause, "reserved encoding")
}

func TestUnreadable(t *testing.T) {
	fs := healthy()
	for i := range fs {
		fs[i].size = 64
	}
	r := Check(path(t, fs))
	assert.Equal(t, Report, r.Worst(), "nothing judged")
	assert.Len(t, r.Unread(), 5)
	assert.Equal(t, verdict.Absent, r.Unread()[0].Kind(), "unread settings: absent, not judged")
	assert.Contains(t, r.Findings[0].Cause, "the kernel returns more only to CAP_SYS_ADMIN")
	assert.Contains(t, r.HeaderOnly, r.Findings[0].Device)
	assert.Empty(t, r.Settings)

	// A device with no config at all.
	p := Path{{Dev: &pci.Device{BDF: "0000:05:00.0"}, Role: NIC}}
	r = Check(p)
	require.Len(t, r.Findings, 1)
	assert.Contains(t, r.Findings[0].Cause, "no PCI Express capability")
}

// A GPU-only host (no NIC): the GPU against the ports above it.
func TestGPUOnly(t *testing.T) {
	fs := healthy()[:3]
	fs[1].mps = 128
	r := Check(path(t, fs))
	fails := r.Of(Fail)
	require.Len(t, fails, 1)
	assert.Contains(t, fails[0].Cause, "GPU 0000:03:00.0 sends TLPs of up to 256 B (MaxPayload), more than bridge 0000:02:00.0 (128 B)")
}

// A virtual function's Device Control reads 0 (128 B, RO/ExtTag off): the
// same registers on a PF fail the path, on a VF they are reported as not
// reported by a virtual function and judged nowhere.
func TestVirtualFunctionNotJudged(t *testing.T) {
	fs := healthy()
	fs[4].mps, fs[4].mrrs, fs[4].ro, fs[4].ext = 128, 128, false, false
	pf := Check(path(t, fs))
	require.Equal(t, Fail, pf.Worst(), "the VF's registers on a PF: %v", pf.Findings)

	p := path(t, fs)
	p[4].Dev.PhysFn = "0000:04:00.0"
	p[4].Dev.BDF = "0000:04:00.1"
	r := Check(p)
	assert.Equal(t, Report, r.Worst(), "%v", r.Findings)
	assert.NotContains(t, r.Settings, "0000:04:00.1", "a VF's reserved fields are no settings")
	var vf []verdict.Finding
	for _, f := range r.Findings {
		if f.Rule == RuleVF.ID {
			vf = append(vf, f)
		}
	}
	require.Len(t, vf, 1, "%v", r.Findings)
	assert.Equal(t, "0000:04:00.1", vf[0].Device)
	assert.Contains(t, vf[0].Cause, "NIC 0000:04:00.1 is an SR-IOV virtual function of 0000:04:00.0")
	assert.Contains(t, vf[0].Cause, "not reported by a virtual function")
	assert.Contains(t, RuleVF.Source, "pci_configure_mps")
}
