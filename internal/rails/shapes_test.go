package rails

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// SR-IOV on: VFs sort between the two PFs of one switch, yet each GPU
// gets a PF; the VFs are no candidates and are named in the reason and the
// summary.
func TestSRIOVVFsAreNoRails(t *testing.T) {
	s := sel(t, discover(t, "sriov"))
	require.Len(t, s.All, 4)
	for i, want := range []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"} {
		require.NotNil(t, s.All[i].NIC, "rail %d", i)
		assert.Equal(t, want, s.All[i].NIC.Name, "rail %d: %s", i, s.All[i].Reason)
		assert.False(t, s.All[i].NIC.VF)
	}
	vf := s.NIC("mlx5_4")
	require.NotNil(t, vf)
	assert.Equal(t, "0000:45:00.1", vf.PCI)
	assert.True(t, vf.VF)
	assert.Equal(t, "0000:45:00.0", vf.PhysFn)
	assert.False(t, vf.Candidate)
	assert.Contains(t, vf.Why, "it is an SR-IOV virtual function (its PF 0000:45:00.0 is mlx5_0)")
	assert.Equal(t, UnfitVF, vf.Unfit)
	assert.Contains(t, vf.Why, "set GDR_RDMA_DEVICE=mlx5_4 to test the VF")
	assert.Contains(t, s.All[1].Reason, "as near but SR-IOV virtual functions, left out while their PFs are visible: mlx5_4, mlx5_5, mlx5_6, mlx5_7")
	assert.Contains(t, s.Summary(), "left out: 8 SR-IOV virtual function(s)")
	assert.Contains(t, s.Summary(), "mlx5_4 (0000:45:00.1, VF of 0000:45:00.0)")

	// Without the rule GPU 1 would take a VF: the tie-break alone ranks
	// VF 0000:45:00.1 above the second PF 0000:46:00.0.
	rk := s.Ranked(s.All[1].GPU)
	assert.Equal(t, []string{"mlx5_0", "mlx5_4", "mlx5_5", "mlx5_1"}, []string{rk[0].NIC.Name, rk[1].NIC.Name, rk[2].NIC.Name, rk[3].NIC.Name})

	// GDR_RDMA_DEVICE may name a VF: it is used, and said.
	f := sel(t, discover(t, "sriov"), "GDR_RDMA_DEVICE", "mlx5_4")
	assert.Equal(t, "mlx5_4", f.Primary.NIC.Name)
	assert.Contains(t, f.Primary.Reason, "not a rail candidate: it is an SR-IOV virtual function")
}

// A VM sees only VFs (no PF has an RDMA device here): VFs are rails.
func TestVFsAreRailsWithoutPF(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "fixtures", "hosts", "sriov"), dir)
	for _, pf := range []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"} {
		require.NoError(t, os.Remove(filepath.Join(dir, "sys", "class", "infiniband", pf)))
	}
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	h := Discover(r)
	require.NoError(t, h.NICErr)
	s := sel(t, h)
	for _, n := range s.NICs {
		assert.True(t, n.VF, n.Name)
		assert.True(t, n.Candidate, "%s: %s", n.Name, n.Why)
	}
	// Rule 3 spreads the GPUs of one switch over its PFs' ports: mlx5_5
	// (0000:45:00.2) shares mlx5_4's PF, so GPU 1 takes mlx5_6, a VF of the
	// second PF.
	assert.Equal(t, "mlx5_4", s.All[0].NIC.Name)
	assert.Equal(t, "mlx5_6", s.All[1].NIC.Name, s.Summary())
	assert.Contains(t, s.All[1].Reason, "mlx5_4 as near, taken by GPU 0; mlx5_5 as near, shares the PF of mlx5_4, taken by GPU 0")
	assert.Empty(t, s.LeftOutVFs())
}

// A storage Ethernet NIC at a lower address on the GPU's switch loses to
// the compute NIC: by port rate (200 vs 400) on socket 0, by link layer
// (Ethernet vs InfiniBand at 400) on socket 1.
func TestStorageNICLosesTieBreak(t *testing.T) {
	s := sel(t, discover(t, "storage-nic"))
	require.Len(t, s.All, 2)
	assert.Equal(t, "mlx5_0", s.All[0].NIC.Name)
	assert.Contains(t, s.All[0].Reason, "preferred by port rate and link layer (400 Gb/s InfiniBand) over the as near mlx5_1 (200 Gb/s Ethernet)")
	assert.Equal(t, "mlx5_2", s.All[1].NIC.Name)
	assert.Contains(t, s.All[1].Reason, "over the as near mlx5_3 (400 Gb/s Ethernet)")
	st := s.NIC("mlx5_1")
	require.True(t, st.Candidate, "a storage NIC stays a candidate: it can carry a test when asked")
	assert.Less(t, st.PCI, s.All[0].NIC.PCI, "the storage NIC has the lower address")

	// Rule 3 (not taken) applies only among equally preferred NICs: a
	// second GPU on socket 0's switch would share the compute NIC, not
	// take the storage NIC.
	h := discover(t, "storage-nic")
	h.GPUs[1].Dev, h.GPUs[1].PCI = h.GPUs[0].Dev, "0000:1b:00.0"
	s = sel(t, h)
	assert.Equal(t, "mlx5_0", s.All[1].NIC.Name, s.Summary())
	assert.Contains(t, s.All[1].Reason, "over the as near mlx5_1")
}

func TestPrefer(t *testing.T) {
	c := func(rate float64, ll string, soft bool) Choice {
		return Choice{NIC: &NIC{RateGbps: rate, LinkLayer: ll, Software: soft}}
	}
	for _, tc := range []struct {
		a, b Choice
		want int // sign
	}{
		{c(400, "InfiniBand", false), c(200, "InfiniBand", false), -1},
		{c(200, "InfiniBand", false), c(400, "Ethernet", false), 1},
		{c(400, "InfiniBand", false), c(400, "Ethernet", false), -1},
		{c(400, "Ethernet", false), c(400, "Ethernet", false), 0},
		{c(0, "InfiniBand", false), c(100, "Ethernet", false), 1}, // no rate file: last
		{c(400, "", false), c(400, "Ethernet", false), 1},
		{c(2.5, "Ethernet", true), c(400, "InfiniBand", false), 0}, // software: rates are fictional
	} {
		got := prefer(tc.a, tc.b)
		switch {
		case tc.want < 0:
			assert.Negative(t, got, "%+v vs %+v", tc.a.NIC, tc.b.NIC)
		case tc.want > 0:
			assert.Positive(t, got, "%+v vs %+v", tc.a.NIC, tc.b.NIC)
		default:
			assert.Zero(t, got, "%+v vs %+v", tc.a.NIC, tc.b.NIC)
		}
	}
}

// RoCE LAG: one RDMA device over both PFs is one NIC; both GPUs' rails use
// it and say so.
func TestBondIsOneRail(t *testing.T) {
	h := discover(t, "bond")
	require.Len(t, h.Devices, 1)
	b := h.Devices[0].Bond
	require.NotNil(t, b)
	assert.Equal(t, "bond0", b.Master)
	assert.Equal(t, []string{"ens5f0np0", "ens5f1np1"}, b.Slaves)
	assert.Equal(t, []string{"0000:05:00.0", "0000:05:00.1"}, b.PCI)
	assert.Equal(t, []string{"0000:05:00.0", "0000:05:00.1"}, h.Devices[0].Functions())
	s := sel(t, h)
	for _, r := range s.All {
		assert.Equal(t, "mlx5_bond_0", r.NIC.Name)
		assert.Contains(t, r.Reason, "bonded device: one RDMA device over PCI functions 0000:05:00.0, 0000:05:00.1 (bond master bond0)")
	}
	// Not bonded: no Bond, one function.
	d := discover(t, "dual-port").Devices[0]
	assert.Nil(t, d.Bond)
	assert.Equal(t, []string{"0000:05:00.0"}, d.Functions())
}

// A VF rail's path devices end with the VF and its PF: floors count the
// PF's link (the VF's reads x0) and health watches the PF's AER counters.
func TestPathDevicesVFAddsPF(t *testing.T) {
	h := discover(t, "sriov")
	s := sel(t, h, "GDR_RDMA_DEVICE", "mlx5_4", "GDR_GPU", "0")
	devs, missing := h.PathDevices(s.Primary)
	require.Empty(t, missing)
	var got []string
	for _, d := range devs {
		got = append(got, d.Role+" "+d.Dev.BDF)
	}
	assert.Equal(t, []string{"GPU 0000:43:00.0", "bridge 0000:42:00.0", "bridge 0000:41:00.0", "bridge 0000:42:02.0",
		"NIC 0000:45:00.1", "NIC PF 0000:45:00.0"}, got)
	// A PF rail has no extra entry.
	devs, _ = h.PathDevices(sel(t, h).All[0])
	assert.Equal(t, "NIC", devs[len(devs)-1].Role)
}

// A pod that sees two PFs and a VF in its node's sysfs but was given only
// the VF's device node: libibverbs lists the VF alone (rdma-core
// try_access_device), so the PFs are no candidates, the VF is not left out
// for a PF this process cannot open, and the rail is the VF.
func TestPodWithOneVFNode(t *testing.T) {
	s := sel(t, discover(t, "pod-vf"))
	require.Len(t, s.All, 1)
	require.NotNil(t, s.All[0].NIC, s.Summary())
	assert.Equal(t, "mlx5_2", s.All[0].NIC.Name, s.Summary())
	assert.True(t, s.All[0].NIC.VF)
	for i, pf := range []string{"mlx5_0", "mlx5_1"} {
		n := s.NIC(pf)
		require.NotNil(t, n)
		assert.False(t, n.Candidate, pf)
		assert.Contains(t, n.Why, fmt.Sprintf("its verbs device node %s does not exist where this process opens it", filepath.Join(s.Root.Dir(), "dev", "infiniband", fmt.Sprintf("uverbs%d", i))))
		assert.Contains(t, n.Why, "rdma-core libibverbs/init.c try_access_device")
		assert.Contains(t, n.Why, "resources.limits")
		assert.Contains(t, n.Why, fmt.Sprintf("--device /dev/infiniband/uverbs%d", i))
		assert.Equal(t, n.Remedy, nodeRemedy(n.Dev))
	}
	assert.Empty(t, s.LeftOutVFs())

	// GDR_RDMA_DEVICE may still name a PF: used, and said.
	f := sel(t, discover(t, "pod-vf"), "GDR_RDMA_DEVICE", "mlx5_0")
	assert.Contains(t, f.Primary.Reason, "not a rail candidate: its verbs device node")
}
