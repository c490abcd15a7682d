package rails

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// gb200Copy is a writable copy of the gb200-tray tree with edit applied.
func gb200Copy(t *testing.T, edit func(dir string)) *Host {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "fixtures", "hosts", "gb200-tray"), dir)
	edit(dir)
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	h := Discover(r)
	require.NoError(t, h.NICErr)
	return h
}

// On a GB200 tray the BlueField-3 functions (north-south) are no rail
// candidates beside the ConnectX-7s, and say why and how to test one.
func TestBlueFieldIsNoRailBesideConnectX(t *testing.T) {
	s := sel(t, discover(t, "gb200-tray"))
	for _, name := range []string{"mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7"} {
		n := s.NIC(name)
		require.NotNil(t, n, name)
		assert.True(t, n.BlueField, name)
		assert.Equal(t, UnfitBlueField, n.Unfit, name)
		assert.False(t, n.Candidate, name)
		assert.Contains(t, n.Why, "it is a BlueField-3 network function (15b3:a2dc)", name)
		assert.Contains(t, n.Why, "not a rail while ConnectX NICs are candidates (mlx5_0, mlx5_1, mlx5_4, mlx5_5)", name)
		assert.Contains(t, n.Why, "set GDR_RDMA_DEVICE="+name+" to test it", name)
	}
	assert.False(t, s.NIC("mlx5_0").BlueField)
	assert.Contains(t, s.Summary(), "left out: 4 BlueField-3 network function(s), not rails while ConnectX NICs are candidates: mlx5_2 (0006:03:00.0), mlx5_3 (0006:03:00.1), mlx5_6 (0016:03:00.0), mlx5_7 (0016:03:00.1)")

	// Named on purpose, one is used, and the reason says it is no candidate.
	f := sel(t, discover(t, "gb200-tray"), "GDR_RDMA_DEVICE", "mlx5_2")
	assert.Equal(t, "mlx5_2", f.All[0].NIC.Name)
	assert.Contains(t, f.All[0].Reason, "not a rail candidate: it is a BlueField-3 network function")
}

// With the ConnectX-7s at 200 Gb/s the BlueField-3's 400 GbE port wins
// every tie-break (rule 2: port rate) at the same distance: without the
// rule it would take rail 0.
func TestBlueFieldLeftOutWhereTieBreakPicksIt(t *testing.T) {
	h := gb200Copy(t, func(dir string) {
		for _, n := range []string{"mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "sys", "class", "infiniband", n, "ports", "1", "rate"), []byte("200 Gb/sec (4X HDR)\n"), 0o644))
		}
	})
	s := sel(t, h)
	rk := s.Ranked(s.All[0].GPU)
	assert.Equal(t, "mlx5_2", rk[0].NIC.Name, "the tie-break alone ranks the BlueField-3 first")
	for i, want := range []string{"mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"} {
		assert.Equal(t, want, s.All[i].NIC.Name, "rail %d: %s", i, s.All[i].Reason)
	}
}

// A host whose only NICs are BlueField-3 functions keeps them as rails: the
// converged card (bluefield tree), and the tray with its ConnectX-7s gone
// from /sys/class/infiniband or excluded from NCCL by the site.
func TestOnlyBlueFieldStillRails(t *testing.T) {
	s := sel(t, discover(t, "bluefield"))
	assert.Equal(t, "mlx5_0", s.All[0].NIC.Name)
	assert.True(t, s.NIC("mlx5_0").BlueField)
	assert.True(t, s.NIC("mlx5_0").Candidate)
	assert.Empty(t, s.LeftOutBlueField())

	h := gb200Copy(t, func(dir string) {
		for _, n := range []string{"mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"} {
			require.NoError(t, os.Remove(filepath.Join(dir, "sys", "class", "infiniband", n)))
		}
	})
	s = sel(t, h)
	// Each Grace's 400 GbE port (P1) wins by port rate for both its GPUs.
	for i, want := range []string{"mlx5_2", "mlx5_2", "mlx5_6", "mlx5_6"} {
		assert.Equal(t, want, s.All[i].NIC.Name, "rail %d: %s", i, s.All[i].Reason)
	}

	// NCCL_IB_HCA excluding the ConnectX-7s leaves the BlueField-3s in.
	s = sel(t, discover(t, "gb200-tray"), "NCCL_IB_HCA", "^mlx5_0,mlx5_1,mlx5_4,mlx5_5")
	assert.Equal(t, "mlx5_2", s.All[0].NIC.Name, s.All[0].Reason)
	assert.True(t, s.NIC("mlx5_2").Candidate)
}

// An NCCL_IB_HCA include list is the site naming NCCL's devices: a
// BlueField-3 it lists competes by the ordinary rules.
func TestBlueFieldNamedByNCCLIBHCA(t *testing.T) {
	s := sel(t, discover(t, "gb200-tray"), "NCCL_IB_HCA", "=mlx5_0,mlx5_2")
	bf := s.NIC("mlx5_2")
	assert.True(t, bf.Candidate, bf.Why)
	assert.False(t, s.NIC("mlx5_1").Candidate)
	// Equally near at 400 Gb/s: InfiniBand before Ethernet (rule 2).
	assert.Equal(t, "mlx5_0", s.All[0].NIC.Name)
	assert.Contains(t, s.All[0].Reason, "preferred by port rate and link layer (400 Gb/s InfiniBand) over the as near mlx5_2 (400 Gb/s Ethernet)")
}
