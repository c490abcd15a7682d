//go:build gpu

package gpucopy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// GPU-09/10: a best rate under the floor is a finding naming the measured
// and threshold attributes.
func TestSoloFinding(t *testing.T) {
	s := Solo{PCI: "0000:3b:00.0", Dir: cuda.HtoD, Best: 50, Mean: 45, Link: topo.Expected{Speed: 32, Width: 16}, Rate: 63, Min: 0.7}
	assert.Nil(t, s.Finding(), "50 >= 0.7*63")
	s.Best = 40
	f := s.Finding()
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Contains(t, f.Cause, "GPU 0000:3b:00.0: pinned ")
	assert.Equal(t, "gdr.copy_fraction", f.Measured)
	assert.Equal(t, "gdr.min_copy_fraction", f.Threshold)
	assert.Contains(t, f.Remedy, "check the GPU link (GPU-11")
}

// GPU-12/13: a GPU under frac of its solo rate fails; the emulated GPU is
// absent whatever its fraction.
func TestConcurrentJudge(t *testing.T) {
	g := &HostCopier{Dev: cuda.Device{PCI: "0000:3b:00.0"}, Solo: 20, Lane: multigpu.Lane{GBps: 18}}
	r := &Concurrent{Dir: cuda.HtoD, Copiers: []*HostCopier{g, {}}, Fraction: map[string]float64{"0000:3b:00.0": 0.9}}
	assert.Nil(t, r.Judge(g, "GPU 0", 0.8, "none"))
	r.Fraction["0000:3b:00.0"] = 0.5
	f := r.Judge(g, "GPU 0", 0.8, "none")
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Contains(t, f.Cause, "GPU 0: pinned ")
	assert.Equal(t, "gdr.concurrent_fraction", f.Measured)
	g.Dev.Emulated = true
	f = r.Judge(g, "GPU 0", 0.8, "none")
	require.NotNil(t, f)
	assert.Equal(t, verdict.Absent, f.Kind())
	assert.Contains(t, f.Cause, "0.50 of its solo rate with 2 GPUs copying at once is reported, not judged")
}

// GPU-14: no peer access across sockets (PCIe SYS) is absent, anywhere
// else a failure with CUDA's peer remedy.
func TestNoPeerAccess(t *testing.T) {
	a, b := cuda.Device{PCI: "0000:3b:00.0"}, cuda.Device{PCI: "0000:86:00.0"}
	f := NoPeerAccess(a, b, "GPU 0", "GPU 1", false, true, P2PLink{Kind: "PCIe", Path: topo.Path{Class: topo.SYS}}, "NOT_SUPPORTED")
	assert.Equal(t, verdict.Absent, f.Kind())
	assert.Contains(t, f.Cause, "GPU 0 and GPU 1 cannot reach each other's memory (cuDeviceCanAccessPeer 0000:3b:00.0->0000:86:00.0 false, 0000:86:00.0->0000:3b:00.0 true; NVML P2P read status NOT_SUPPORTED): they sit on different CPU sockets (SYS)")
	for _, l := range []P2PLink{{Kind: "PCIe", Path: topo.Path{Class: topo.PHB}}, {Kind: "NVLink"}, {}} {
		f = NoPeerAccess(a, b, "GPU 0", "GPU 1", false, false, l, "OK")
		assert.Equal(t, verdict.FellShort, f.Kind(), l.Kind)
		assert.Equal(t, cuda.PeerRemedy(&cuda.Error{Code: cuda.ErrPeerAccessUnsupported}), f.Remedy)
	}
	assert.Equal(t, "NVML not available", P2PStatus(nil, a.PCI, b.PCI))
}

func TestP2PFloor(t *testing.T) {
	cfg := config.Config{MinP2PNVLinkFraction: 0.6, MinP2PPCIeFraction: 0.5}
	frac, name, remedy := P2PFloor(cfg, "NVLink")
	assert.Equal(t, 0.6, frac)
	assert.Equal(t, "GDR_MIN_P2P_NVLINK_FRACTION", name)
	assert.Contains(t, remedy, "nvidia-smi nvlink -s")
	frac, name, remedy = P2PFloor(cfg, "PCIe")
	assert.Equal(t, 0.5, frac)
	assert.Equal(t, "GDR_MIN_P2P_PCIE_FRACTION", name)
	assert.Contains(t, remedy, "ACS on the switch ports")
	frac, name, remedy = P2PFloor(cfg, "")
	assert.Zero(t, frac)
	assert.Empty(t, name+remedy)
}
