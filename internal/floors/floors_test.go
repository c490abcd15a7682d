package floors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pci"
)

func TestTLPEfficiency(t *testing.T) {
	e, err := TLPEfficiency(256)
	require.NoError(t, err)
	assert.InDelta(t, 256.0/282, e, 1e-12)
	e, err = TLPEfficiency(512)
	require.NoError(t, err)
	assert.InDelta(t, 0.952, e, 0.001)
	for _, bad := range []int{0, 64, 300, 8192, -256} {
		_, err := TLPEfficiency(bad)
		assert.ErrorContains(t, err, "power of two", bad)
	}
}

func TestFindBottleneck(t *testing.T) {
	// 400 Gb/s NDR port, NIC and GPU at gen5 x16 with MPS 256: PCIe carries
	// 63.02 GB/s x 8 x 0.908 = 457.6 Gb/s, so the port limits.
	gen5 := Link{Name: "NIC 0000:3b:00.0", Link: pci.Link{CurGTs: 32, CurWidth: 16}, MaxPayload: 256}
	gpu := Link{Name: "GPU 0000:3c:00.0", Link: pci.Link{CurGTs: 32, CurWidth: 16}}
	b, err := Find(400, false, []Link{gen5, gpu})
	require.NoError(t, err)
	assert.Equal(t, "port", b.Limit)
	assert.Equal(t, 400.0, b.Gbps)
	assert.InDelta(t, 457.6, b.PCIeGb, 0.1)
	assert.Equal(t, "min(port 400 Gb/s, PCIe 457.6 Gb/s at NIC 0000:3b:00.0) = 400.0 Gb/s", b.Derived)

	// The same NIC trained at gen4 x16: 31.51 GB/s x 8 x 0.908 = 228.8 Gb/s.
	gen4 := gen5
	gen4.CurGTs = 16
	b, err = Find(400, false, []Link{gpu, gen4})
	require.NoError(t, err)
	assert.Equal(t, "NIC 0000:3b:00.0", b.Limit)
	assert.InDelta(t, 228.8, b.Gbps, 0.1)

	// No link known (no PCI function): the port alone.
	b, err = Find(200, false, nil)
	require.NoError(t, err)
	assert.Equal(t, 200.0, b.Gbps)
	assert.Equal(t, "min(port 200 Gb/s) = 200.0 Gb/s", b.Derived)

	_, err = Find(2.5, true, nil)
	assert.ErrorIs(t, err, ErrSoftware)
	for _, bad := range []float64{0, -1} {
		_, err = Find(bad, false, nil)
		assert.ErrorContains(t, err, "want a positive rate")
	}
	_, err = Find(400, false, []Link{{Name: "NIC x", Link: pci.Link{CurGTs: 32, CurWidth: 0}}})
	assert.ErrorContains(t, err, "NIC x")
	_, err = Find(400, false, []Link{{Name: "NIC y", Link: pci.Link{CurGTs: 32, CurWidth: 16}, MaxPayload: 100}})
	assert.ErrorContains(t, err, "NIC y: MaxPayload 100")
}

func TestFloors(t *testing.T) {
	b, err := Find(400, false, nil)
	require.NoError(t, err)
	fs := Floors(b, DefaultFractions, []int{2, 1024, 4096, 8192, 16384, 65536, 1048576})
	require.Len(t, fs, 7)
	want := map[int]float64{2: 0, 1024: 0, 4096: 240, 8192: 240, 16384: 320, 65536: 360, 1048576: 360}
	for _, f := range fs {
		assert.InDelta(t, want[f.Size], f.Gbps, 1e-9, "size %d", f.Size)
	}
	assert.Contains(t, fs[0].Why, "no floor below 4096 B")
	assert.Contains(t, fs[5].Why, "90% of min(port 400 Gb/s) = 400.0 Gb/s")
	assert.Contains(t, fs[5].Why, "ngc_multinode_perf")
	assert.Contains(t, fs[2].Why, "provisional")

	// Entries need not be sorted.
	f, ok := FractionFor([]Fraction{{MinSize: 65536, Fraction: 0.9}, {MinSize: 1, Fraction: 0.1}}, 70000)
	require.True(t, ok)
	assert.Equal(t, 0.9, f.Fraction)
	_, ok = FractionFor(nil, 70000)
	assert.False(t, ok)
}

func TestLatencyCeilings(t *testing.T) {
	assert.Equal(t, 2.5, MaxLatP50US)
	assert.Greater(t, MaxLatP99US, MaxLatP50US)
	assert.Equal(t, 10000, P999MinIters)
}

// Two hosts reduce their own paths and exchange one Limit each; the floor
// comes from the slowest of the port and both paths.
func TestFindLimits(t *testing.T) {
	gen5 := Link{Name: "client NIC 0000:3b:00.0", Link: pci.Link{CurGTs: 32, CurWidth: 16}, MaxPayload: 256}
	gen4 := Link{Name: "client GPU 0000:3c:00.0", Link: pci.Link{CurGTs: 16, CurWidth: 16}, MaxPayload: 512}
	l, ok, err := PathLimit([]Link{gen5, gen4})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "client GPU 0000:3c:00.0", l.By)
	assert.InDelta(t, 31.51*8*512/538, l.Gbps, 0.05)
	_, ok, err = PathLimit(nil)
	require.NoError(t, err)
	assert.False(t, ok)
	_, _, err = PathLimit([]Link{{Name: "NIC z", Link: pci.Link{CurGTs: 0, CurWidth: 16}}})
	assert.ErrorContains(t, err, "NIC z")

	peer := Limit{Gbps: 100, By: "server NIC 0000:af:00.0"}
	b, err := FindLimits(400, []Limit{l, peer, {Gbps: 0, By: "unknown"}})
	require.NoError(t, err)
	assert.Equal(t, 100.0, b.Gbps)
	assert.Equal(t, "server NIC 0000:af:00.0", b.Limit)
	assert.Equal(t, "min(port 400 Gb/s, PCIe 100.0 Gb/s at server NIC 0000:af:00.0) = 100.0 Gb/s", b.Derived)
	_, err = FindLimits(0, nil)
	assert.ErrorContains(t, err, "want a positive rate")

}

// LinkOf takes a function's trained link and MaxPayload; an idle GPU is
// taken at the speed it trains to under load, capped by its parent port.
func TestLinkOf(t *testing.T) {
	nic := &pci.Device{BDF: "0000:3b:00.0", Vendor: 0x15b3, Class: 0x020700, Link: pci.Link{CurGTs: 16, MaxGTs: 32, CurWidth: 16, MaxWidth: 16}}
	l := LinkOf(nic, "NIC", nil)
	assert.Equal(t, Link{Name: "NIC 0000:3b:00.0", Link: pci.Link{CurGTs: 16, CurWidth: 16, MaxGTs: 32, MaxWidth: 16}}, l, "a NIC is taken as trained: a slow NIC link is the bottleneck")

	port := &pci.Device{BDF: "0000:3a:00.0", Link: pci.Link{MaxGTs: 16}}
	gpu := &pci.Device{BDF: "0000:3c:00.0", Vendor: 0x10de, Class: 0x030200, Link: pci.Link{CurGTs: 2.5, MaxGTs: 32, CurWidth: 16, MaxWidth: 16}}
	l = LinkOf(gpu, "GPU", port)
	assert.Equal(t, 16.0, l.CurGTs, "the parent port's 16 GT/s caps it")
	assert.Contains(t, l.Name, "idle at 2.5 GT/s")
	l = LinkOf(gpu, "GPU", nil)
	assert.Equal(t, 32.0, l.CurGTs)
	g, err := l.PayloadGbps()
	require.NoError(t, err)
	assert.InDelta(t, 457.6, g, 0.1, "MaxPayload unknown: 256 B assumed")
}
