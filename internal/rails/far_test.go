package rails

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// TOPO-02's rule: a rail within GDR_MAX_PATH passes; a farther one fails
// with the path's class, what it crosses and a remedy that moves cards or
// raises the limit; a nearer NIC that is not a candidate comes first in
// the remedy; unknown NUMA nodes ask the firmware first.
func TestJudgeRailPathFar(t *testing.T) {
	s := sel(t, discover(t, "phb"))
	r := s.Rails[0]
	require.Equal(t, topo.PHB, r.Path.Class)
	assert.Nil(t, s.JudgeRailPath(r, topo.PHB, nil), "PHB is within GDR_MAX_PATH=PHB")
	f := s.JudgeRailPath(r, topo.PXB, nil)
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Contains(t, f.Cause, "rail NIC mlx5_0")
	assert.Contains(t, f.Cause, "is PHB, farther than GDR_MAX_PATH=PXB (")
	assert.Contains(t, f.Cause, "; GPUDirect RDMA through the CPU's host bridge is slow or unsupported")
	assert.Equal(t, "put the GPU and an RDMA NIC under one PCIe switch (PIX/PXB), use a NIC on the GPU's own switch or socket, or set GDR_MAX_PATH=PHB if this topology is intended", f.Remedy)

	s = sel(t, discover(t, "nic-port-down"))
	r = s.Rails[0]
	f = s.JudgeRailPath(r, topo.PXB, nil)
	require.NotNil(t, f)
	assert.Contains(t, f.Remedy, "make the nearer NIC usable (bring the port up:")

	s = sel(t, discover(t, "numa-unknown"))
	var far *verdict.Finding
	for _, r := range s.Rails {
		if r.Path.NUMAUnknown && r.Path.Class.FartherThan(topo.PXB) {
			far = s.JudgeRailPath(r, topo.PXB, nil)
			break
		}
	}
	require.NotNil(t, far, "numa-unknown has a rail whose NUMA nodes are unknown")
	assert.Contains(t, far.Cause, "; SYS because the NUMA nodes are unknown: ")
	assert.Contains(t, far.Remedy, "have the firmware report NUMA proximity (BIOS/ACPI SRAT and _PXM: numa_node is -1), or ")
}

// In a VM the finding is JudgeVM's, asked for only when the rail is far.
func TestJudgeRailPathVM(t *testing.T) {
	s := sel(t, discover(t, "phb"))
	r := s.Rails[0]
	asked := 0
	vm := func() verdict.Finding { asked++; return verdict.Finding{Cause: "vm cause", Remedy: "vm remedy"} }
	assert.Nil(t, s.JudgeRailPath(r, topo.SYS, vm))
	assert.Zero(t, asked, "a rail within the limit needs no VM finding")
	f := s.JudgeRailPath(r, topo.PXB, vm)
	require.NotNil(t, f)
	assert.Equal(t, 1, asked)
	assert.Equal(t, "vm cause", f.Cause)
	assert.Equal(t, "vm remedy", f.Remedy)

	// The VM's finding keeps what the rail adds: nearer NICs, unknown NUMA.
	s = sel(t, discover(t, "nic-port-down"))
	f = s.JudgeRailPath(s.Rails[0], topo.PXB, vm)
	require.NotNil(t, f)
	assert.Contains(t, f.Remedy, "make the nearer NIC usable (bring the port up:")
	assert.Contains(t, f.Remedy, "), or vm remedy")
	s = sel(t, discover(t, "numa-unknown"))
	for _, r := range s.Rails {
		if r.Path.NUMAUnknown && r.Path.Class.FartherThan(topo.PXB) {
			f = s.JudgeRailPath(r, topo.PXB, vm)
			require.NotNil(t, f)
			assert.Contains(t, f.Cause, "vm cause; SYS because the NUMA nodes are unknown: ")
			return
		}
	}
	t.Fatal("numa-unknown has a far rail whose NUMA nodes are unknown")
}

// A rail without a NIC with a PCIe path is absent when no hardware NIC has
// one, and fails naming the nearest non-candidate and what makes it one.
func TestJudgeRailPathNoRail(t *testing.T) {
	s := sel(t, discover(t, "port-down"))
	r := s.Rails[0]
	require.Nil(t, r.NIC)
	f := s.JudgeRailPath(r, topo.SYS, nil)
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Contains(t, f.Cause, "has no rail: no RDMA NIC is a candidate; nearest: mlx5_0 (PIX, 3 bridges): its port 1 is DOWN")
	assert.Contains(t, f.Remedy, "bring the port up")

	s = sel(t, discover(t, "rxe"))
	r = s.Rails[0]
	f = s.JudgeRailPath(r, topo.SYS, nil)
	require.NotNil(t, f)
	assert.Equal(t, verdict.Absent, f.Kind())
	assert.Contains(t, f.Cause, ": no hardware RDMA NIC with a PCIe path to it (")
}

func TestPortRemedy(t *testing.T) {
	for unfit, want := range map[Unfit]string{
		UnfitNoPort:   "set GDR_IB_PORT to a port the NIC has",
		UnfitNoUverbs: "modprobe ib_uverbs (INST-10/INST-11 say more)",
		UnfitPortDown: "bring the port up: check the cable/transceiver and the switch port; InfiniBand ports in INIT need a subnet manager (opensm); RoCE needs the netdev up (INST-12 says more)",
		UnfitNodeType: "check the NIC's driver and dmesg",
		UnfitVF:       "check the NIC's driver and dmesg",
	} {
		assert.Equal(t, want, (&NIC{Unfit: unfit}).PortRemedy(), "%d", unfit)
	}
	assert.Equal(t, "own", (&NIC{Unfit: UnfitPortDown, Remedy: "own"}).PortRemedy(), "the NIC's own remedy first")
	// The remedy follows the reason, not the words: a Why that mentions
	// a port decides nothing.
	assert.Equal(t, "check the NIC's driver and dmesg", (&NIC{Unfit: UnfitNoPCI, Why: "its port 1 is DOWN"}).PortRemedy())
}

// On a GH200 the rail is P2C: within NCCL's level, and under a stricter
// GDR_MAX_PATH the remedy names the GPU's own Grace, never a PCIe switch
// move (the GPU is soldered to its Grace).
func TestJudgeRailPathC2C(t *testing.T) {
	s := sel(t, discover(t, "gh200"))
	r := s.Rails[0]
	require.Equal(t, topo.P2C, r.Path.Class)
	assert.Equal(t, "0009:01:00.0", r.Path.C2C)
	assert.Equal(t, topo.NODE, r.Path.TreeClass())
	assert.Nil(t, s.JudgeRailPath(r, topo.P2C, nil))
	f := s.JudgeRailPath(r, topo.PXB, nil)
	require.NotNil(t, f)
	assert.Contains(t, f.Cause, "is P2C, farther than GDR_MAX_PATH=PXB (")
	assert.Contains(t, f.Cause, "NCCL uses GPUDirect RDMA over P2C by default (NCCL_NET_GDR_C2C); the GDR_MAX_PATH set for this run excludes it")
	assert.Contains(t, f.Remedy, "use a NIC on the GPU's own Grace CPU")
	assert.NotContains(t, f.Remedy, "PCIe switch")
}
