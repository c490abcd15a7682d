package topo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/pci/cfgbuild"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// port parses a constructed switch port's config space with ACS control
// ctrl (acs false: no ACS capability); endpoint one of an endpoint with or
// without an ATS capability and its Enable bit (size 64: as an
// unprivileged read sees it).
func port(t *testing.T, acs bool, ctrl uint16) *pci.ACS {
	t.Helper()
	c, err := pci.ParseConfig(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x1000, Device: 0xc010, Class: 0x060400, Bridge: true, PortType: pci.TypeDownstream,
		ACS: acs, ACSCap: 0x7f, ACSCtrl: ctrl}))
	require.NoError(t, err)
	return c.ACS
}

func endpoint(t *testing.T, bdf string, ats, enabled bool, size int) Endpoint {
	t.Helper()
	var ctrl uint16
	if enabled {
		ctrl = pci.ATSCtrlEnable
	}
	c, err := pci.ParseConfig(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, PortType: pci.TypeEndpoint,
		ATS: ats, ATSCap: 0x20, ATSCtrl: ctrl, Size: size}))
	if size == 64 {
		require.ErrorIs(t, err, pci.ErrNeedRoot) // an unprivileged read: the header only
	} else {
		require.NoError(t, err)
	}
	return Endpoint{BDF: bdf, Config: c}
}

// The kernel's IOMMU default (SV RR CR UF) with Direct Translated P2P, as
// pci=config_acs= sets it, and ATS on at the NIC: the NIC's translated
// requests pass RR, so the port passes with the bypass as a fact; CR and
// UF stay on and are said. The same port without DT, or with ATS off (or
// absent, or unreadable) at the NIC, or with Translation Blocking, still
// redirects, and the verdict says why DT does not help and what would.
func TestJudgeACS(t *testing.T) {
	const iommu = pci.ACSSV | pci.ACSRR | pci.ACSCR | pci.ACSUF
	nicOn := endpoint(t, "0000:04:00.0", true, true, 0)
	gpu := endpoint(t, "0000:03:00.0", false, false, 0)

	v := JudgeACS(ACSPort{BDF: "0000:02:01.0", ACS: port(t, true, iommu|pci.ACSDT), NIC: nicOn, GPU: gpu})
	assert.Zero(t, v.Redirect, "DT + ATS at the NIC: nothing redirects its translated requests")
	assert.Equal(t, uint16(pci.ACSRR), v.Bypassed)
	for _, w := range []string{"0000:02:01.0: Direct Translated P2P (DT) with ATS enabled on NIC 0000:04:00.0", "regardless of RR (PCIe", "PCIe r7.0 6.12.3",
		"GPU 0000:03:00.0's ATS is absent", "still on: CR,UF", "Relaxed Ordering", "GDR_MR=dmabuf"} {
		assert.Contains(t, v.Bypass, w)
	}
	assert.Nil(t, v.Finding)

	// Egress Control is bypassed too; a port with only RR and EC keeps
	// nothing on.
	v = JudgeACS(ACSPort{BDF: "p", ACS: port(t, true, pci.ACSRR|pci.ACSEC|pci.ACSDT), NIC: nicOn, GPU: endpoint(t, "g", true, true, 0)})
	assert.Zero(t, v.Redirect)
	assert.Equal(t, uint16(pci.ACSRR|pci.ACSEC), v.Bypassed)
	assert.Contains(t, v.Bypass, "regardless of RR,EC (PCIe")
	assert.Contains(t, v.Bypass, "GPU g's ATS is enabled")
	assert.NotContains(t, v.Bypass, "still on")

	// Without DT: today's rule.
	v = JudgeACS(ACSPort{BDF: "p", ACS: port(t, true, iommu), NIC: nicOn, GPU: gpu})
	assert.Equal(t, uint16(pci.ACSRR|pci.ACSCR|pci.ACSUF), v.Redirect)
	assert.Empty(t, v.Bypass)
	require.NotNil(t, v.Finding)
	assert.NotContains(t, v.Finding.Cause, "Direct Translated")
	assert.True(t, strings.HasPrefix(v.Finding.Remedy, "setpci -s p ECAP_ACS+0x6.w=0000"), v.Finding.Remedy)
	assert.Equal(t, "p", v.Finding.Device)

	// DT but ATS off at the NIC: untranslated requests are redirected.
	nicOff := endpoint(t, "0000:04:00.0", true, false, 0)
	v = JudgeACS(ACSPort{BDF: "0000:02:01.0", ACS: port(t, true, iommu|pci.ACSDT), NIC: nicOff, GPU: gpu})
	assert.Equal(t, uint16(pci.ACSRR|pci.ACSCR|pci.ACSUF), v.Redirect)
	assert.Contains(t, v.Finding.Cause, "ATS is disabled on NIC 0000:04:00.0")
	assert.Contains(t, v.Finding.Remedy, "set ATS_ENABLED=true")
	assert.Empty(t, v.Bypass)
	v = JudgeACS(ACSPort{BDF: "p", ACS: port(t, true, iommu|pci.ACSDT), NIC: endpoint(t, "n", false, false, 0), GPU: gpu})
	assert.Contains(t, v.Finding.Cause, "ATS is absent on NIC n")
	assert.NotZero(t, v.Redirect)
	v = JudgeACS(ACSPort{BDF: "p", ACS: port(t, true, iommu|pci.ACSDT), NIC: endpoint(t, "n", true, true, 64), GPU: gpu})
	assert.Contains(t, v.Finding.Cause, "ATS is unknown on NIC n")
	assert.Contains(t, v.Finding.Remedy, "as root")
	v = JudgeACS(ACSPort{BDF: "p", ACS: port(t, true, iommu|pci.ACSDT), NIC: Endpoint{BDF: "n"}, GPU: gpu})
	assert.Contains(t, v.Finding.Cause, "ATS is unknown on NIC n")

	// Translation Blocking voids DT.
	v = JudgeACS(ACSPort{BDF: "p", ACS: port(t, true, iommu|pci.ACSDT|pci.ACSTB), NIC: nicOn, GPU: gpu})
	assert.NotZero(t, v.Redirect)
	assert.Contains(t, v.Finding.Cause, "Translation Blocking (TB)")
	assert.Contains(t, v.Finding.Remedy, "clear ACS Translation Blocking on p")

	// Nothing enabled, or no ACS capability: nothing to say, DT or not.
	for _, a := range []*pci.ACS{port(t, true, 0), port(t, true, pci.ACSDT|pci.ACSSV), port(t, false, 0), nil} {
		assert.Equal(t, ACSJudged{}, JudgeACS(ACSPort{BDF: "p", ACS: a, NIC: nicOff, GPU: gpu}))
	}
}

// The redirect's finding names the port, the path's ends and the controls,
// and its remedy: setpci on bare metal, the hypervisor's operator in a VM,
// and with DT set, what would make DT work first.
func TestJudgeACSFinding(t *testing.T) {
	const iommu = pci.ACSSV | pci.ACSRR | pci.ACSCR | pci.ACSUF
	gpu := endpoint(t, "0000:03:00.0", false, false, 0)
	p := ACSPort{BDF: "0000:02:01.0", ACS: port(t, true, iommu), NIC: endpoint(t, "0000:04:00.0", true, true, 0), GPU: gpu,
		Type: "switch downstream port", NICName: "mlx5_0"}
	f := JudgeACS(p).Finding
	require.NotNil(t, f)
	assert.Equal(t, "switch downstream port 0000:02:01.0 between GPU 0000:03:00.0 and NIC mlx5_0 has ACS RR,CR,UF enabled (control 0x001d: "+
		pci.ACSBits(p.ACS.Ctrl)+"): peer-to-peer traffic is redirected to the root complex", f.Cause)
	assert.Equal(t, "setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000 (as root; lasts until reboot), and disable ACS for the switch in the BIOS or with a boot-time script for a lasting fix", f.Remedy)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "host configuration", f.Part)

	p.Guest = "KVM guest"
	f = JudgeACS(p).Finding
	assert.True(t, strings.HasPrefix(f.Remedy, "this host is a KVM guest: the switch port is the hypervisor's"), f.Remedy)

	p.ACS = port(t, true, iommu|pci.ACSDT)
	p.NIC = endpoint(t, "0000:04:00.0", true, false, 0)
	f = JudgeACS(p).Finding
	assert.Contains(t, f.Cause, "; Direct Translated P2P (DT) is set on 0000:02:01.0, but ATS is disabled on NIC 0000:04:00.0")
	assert.True(t, strings.HasPrefix(f.Remedy, "enable ATS on NIC 0000:04:00.0"), f.Remedy)
	assert.Contains(t, f.Remedy, "; or turn ACS redirect off instead: this host is a KVM guest")
}

// A port of the switch inside a ConnectX-8 (or BlueField-3): the BIOS has
// no setting for it, so the remedy names setpci and pci=config_acs=, never
// the BIOS; in a VM the hypervisor's operator still owns it.
func TestACSNICSwitchRemedy(t *testing.T) {
	p := ACSPort{BDF: "0000:16:01.0", ACS: port(t, true, pci.ACSSV|pci.ACSRR|pci.ACSCR|pci.ACSUF), NICSwitch: true,
		NIC: endpoint(t, "0000:17:00.0", true, false, 0), GPU: Endpoint{BDF: "0000:1a:00.0"}, Type: "downstream port", NICName: "mlx5_0"}
	v := JudgeACS(p)
	require.NotNil(t, v.Finding)
	assert.Contains(t, v.Finding.Remedy, "0000:16:01.0 is a port of the PCIe switch built into the NIC")
	assert.Contains(t, v.Finding.Remedy, "setpci -s 0000:16:01.0 ECAP_ACS+0x6.w=0000")
	assert.Contains(t, v.Finding.Remedy, "pci=config_acs=x0000xx@0000:16:01.0")
	assert.NotContains(t, v.Finding.Remedy, "BIOS or")
	assert.NotContains(t, strings.ReplaceAll(v.Finding.Remedy, "the host BIOS does not configure", ""), "BIOS")

	p.NICSwitch = false
	assert.Contains(t, JudgeACS(p).Finding.Remedy, "disable ACS for the switch in the BIOS")

	p.NICSwitch, p.Guest = true, "VM (QEMU)"
	assert.Contains(t, JudgeACS(p).Finding.Remedy, "the switch port is the hypervisor's")
}
