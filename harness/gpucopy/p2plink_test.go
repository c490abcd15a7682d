package gpucopy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pathclass"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/pcie"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// fakeNVML answers NVLinkBetween with one link state for every pair.
type fakeNVML struct {
	nv  nvml.NVLink
	err error
}

func (f fakeNVML) NVLinkBetween(a, b string) (nvml.NVLink, error) { return f.nv, f.err }

// pciDev is a function at sysfs path p with the given maximum link.
func pciDev(t *testing.T, p string, gts float64, width int) *pci.Device {
	t.Helper()
	root, chain, err := pci.SplitPath(p)
	require.NoError(t, err)
	return &pci.Device{BDF: chain[len(chain)-1], SysPath: p, Root: root, Chain: chain, Class: 0x030200, Vendor: 0x10de, MaxSpeed: gts, MaxWidth: width, NUMANode: 0}
}

// switchHost has two GPUs below one PCIe switch: a Gen4 x16 (0000:03:00.0)
// and a Gen5 x16 (0000:04:00.0).
func switchHost(t *testing.T) *topo.Index {
	const usp = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
	var devs []*pci.Device
	for _, b := range []string{"/sys/devices/pci0000:00/0000:00:01.0", usp, usp + "/0000:02:00.0", usp + "/0000:02:01.0"} {
		d := pciDev(t, b, 0, 0)
		d.Class, d.Vendor = 0x060400, 0x1000
		devs = append(devs, d)
	}
	devs = append(devs, pciDev(t, usp+"/0000:02:00.0/0000:03:00.0", 16, 16), pciDev(t, usp+"/0000:02:01.0/0000:04:00.0", 32, 16))
	return topo.New(devs)
}

func TestNVLinkOf(t *testing.T) {
	_, ok, why := nvlinkOf(nvml.NVLink{}, errors.New("ERROR_NOT_SUPPORTED"))
	assert.False(t, ok)
	assert.Equal(t, "NVML: ERROR_NOT_SUPPORTED", why)

	none := nvml.NVLink{Version: 4}
	_, ok, why = nvlinkOf(none, nil)
	assert.False(t, ok)
	assert.Equal(t, fmt.Sprintf("NVML: no active NVLink link between them (%s)", none), why)

	nv := nvml.NVLink{Active: 18, Direct: 18, Version: 4, P2P: "OK"}
	l, ok, _ := nvlinkOf(nv, nil)
	require.True(t, ok)
	rate, how, err := multigpu.NVLinkRate(18, 4)
	require.NoError(t, err)
	assert.Equal(t, P2PLink{Kind: "NVLink", NV: nv, Rate: rate, How: how}, l)

	// NVML says P2P over NVLink works but counts no link: NVLink without a rate.
	l, ok, _ = nvlinkOf(nvml.NVLink{P2P: "OK"}, nil)
	require.True(t, ok)
	assert.Equal(t, "NVLink", l.Kind)
	assert.Zero(t, l.Rate)
	assert.Contains(t, l.Why, "NVML reports NVLink between them")
}

func TestLinkBetween(t *testing.T) {
	ix := switchHost(t)
	const a, b = "0000:03:00.0", "0000:04:00.0"

	l := linkBetween(nil, errors.New("no libnvidia-ml"), ix, "/sys/bus/pci/devices", a, b, false)
	assert.Equal(t, "PCIe", l.Kind)
	assert.Equal(t, pathclass.PIX, l.Path.Class)
	gen4, err := pcie.GBps(16, 16)
	require.NoError(t, err)
	assert.InDelta(t, gen4, l.Rate, 1e-9, "the slower GPU's link bounds a peer copy")
	assert.Equal(t, fmt.Sprintf("PCIe PIX, the slower GPU link: %s gen4 x16 = %.2f GB/s", a, gen4), l.How)
	assert.Empty(t, l.Why)

	// NVML's NVLink wins over the PCIe path.
	nv := nvml.NVLink{Active: 2, Direct: 2, Version: 4}
	assert.Equal(t, "NVLink", linkBetween(fakeNVML{nv: nv}, nil, ix, "/sys/bus/pci/devices", a, b, false).Kind)

	// Neither: unknown, saying what each source lacked.
	l = linkBetween(fakeNVML{nv: nvml.NVLink{}}, nil, ix, "/sys/bus/pci/devices", "0000:3b:00.0", b, true)
	assert.Equal(t, P2PLink{Why: fmt.Sprintf("NVML: no active NVLink link between them (%s); PCIe: 0000:3b:00.0 or %s is not in sysfs (/sys/bus/pci/devices); the lab's emulated GPU emulates no link", nvml.NVLink{}, b)}, l)
	assert.Equal(t, "unknown", l.KindOrUnknown())
}

func TestP2PLinkAttrs(t *testing.T) {
	assert.Equal(t, []attr{{"p2p_link", "unknown"}, {"p2p_link_note", "why"}}, P2PLink{Why: "why"}.attrs())
	p := P2PLink{Kind: "PCIe", Path: topo.Path{Class: pathclass.PXB, Bridges: []string{"x", "y"}}, Rate: 31.5, How: "how"}
	assert.Equal(t, []attr{{"p2p_link", "PCIe"}, {"p2p_path", "PXB"}, {"p2p_bridges", "x y"}, {"p2p_link_gbyte_s", 31.5}, {"p2p_link_source", "how"}}, p.attrs())
	nv := nvml.NVLink{Direct: 4, Active: 4, Version: 3}
	assert.Equal(t, []attr{{"p2p_link", "NVLink"}, {"nvlink_count", 4}, {"nvlink_version", 3}, {"nvlink_detail", nv.String()}}, P2PLink{Kind: "NVLink", NV: nv}.attrs())
}
