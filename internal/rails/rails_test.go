package rails

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/topo"
)

type railExpect struct {
	Rail    int    `json:"rail"`
	GPU     string `json:"gpu"`
	NIC     string `json:"nic"`
	Path    string `json:"path"`
	Bridges int    `json:"bridges"`
}

func discover(t *testing.T, tree string) *Host {
	t.Helper()
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", tree))
	require.NoError(t, err)
	h := Discover(r)
	require.NoError(t, h.PCIErr, tree)
	require.NoError(t, h.NICErr, tree)
	return h
}

func sel(t *testing.T, h *Host, kv ...string) *Selection {
	t.Helper()
	s, err := h.Select(cfg(t, kv...))
	require.NoError(t, err)
	return s
}

func cfg(t *testing.T, kv ...string) config.Config {
	t.Helper()
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	c, err := config.Parse(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	require.NoError(t, err)
	return c
}

func asExpect(r *Rail) railExpect {
	e := railExpect{Rail: r.Index}
	if r.GPU != nil {
		e.GPU = r.GPU.PCI
	}
	if r.NIC != nil {
		e.NIC = r.NIC.Name
	}
	if r.HasPath {
		e.Path, e.Bridges = r.Path.Class.String(), r.Bridges()
	}
	return e
}

// Every tree under fixtures/hosts: the rails and primary its expect.json
// names (written by hand from the layout) are what the selection makes.
func TestFixtureRails(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/hosts/*/expect.json")
	require.NoError(t, err)
	dirs, err := filepath.Glob("../../fixtures/hosts/*")
	require.NoError(t, err)
	require.Len(t, files, len(dirs), "every tree has an expect.json")
	require.GreaterOrEqual(t, len(files), 20)
	for _, f := range files {
		tree := filepath.Base(filepath.Dir(f))
		t.Run(tree, func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var want struct {
				Rails   []railExpect `json:"rails"`
				Primary *railExpect  `json:"primary"`
			}
			require.NoError(t, json.Unmarshal(b, &want))
			require.NotNil(t, want.Rails, "%s: expect.json has no rails", tree)
			s := sel(t, discover(t, tree))
			var got []railExpect
			for _, r := range s.All {
				got = append(got, asExpect(r))
				assert.NotEmpty(t, r.Reason, "%s rail %d", tree, r.Index)
			}
			if len(want.Rails) > 0 || len(got) > 0 { // a host without a GPU has none: [] and nil alike
				assert.Equal(t, want.Rails, got, "%s: rails\n%s", tree, s.Summary())
			}
			assert.Equal(t, s.All, s.Rails, "no selector: every rail")
			if want.Primary == nil {
				assert.Nil(t, s.Primary)
			} else if assert.NotNil(t, s.Primary, tree) {
				assert.Equal(t, *want.Primary, asExpect(s.Primary), "%s: primary (%s)", tree, s.PrimaryWhy)
			}
			// The same host read again selects the same way.
			again := sel(t, discover(t, tree))
			assert.Equal(t, s.Summary(), again.Summary())
		})
	}
}

func TestDGX(t *testing.T) {
	h := discover(t, "dgx")
	require.Len(t, h.GPUs, 8)
	s := sel(t, h)
	assert.Equal(t, "nearest ACTIVE RDMA NIC to GPU 5 (PIX, 3 bridges)", s.All[5].Reason)
	assert.Equal(t, 1, s.All[5].Switches())
	assert.Equal(t, "rail5", s.All[5].Name())
	assert.Equal(t, "56-111,168-223", s.All[5].NIC.LocalCPUs.String())
	assert.Equal(t, 1, s.All[5].NIC.NUMA)
	assert.Equal(t, 1, s.All[5].GPU.NUMA)
	for _, n := range []string{"mlx5_4", "mlx5_8"} {
		for _, r := range s.All {
			assert.NotEqual(t, n, r.NIC.Name, "storage NIC %s serves no rail", n)
		}
	}
	// GDR_GPU: index, or address in any case, with or without domain.
	for _, v := range []string{"5", "0000:a9:00.0", "0000:A9:00.0", "a9:00.0", "A9:00.0"} {
		s := sel(t, h, "GDR_GPU", v)
		require.Len(t, s.Rails, 1, v)
		assert.Equal(t, "0000:a9:00.0", s.Primary.GPU.PCI, v)
		assert.Equal(t, "mlx5_3", s.Primary.NIC.Name, v)
		assert.Equal(t, 5, s.Primary.Index, v)
		assert.Contains(t, s.PrimaryWhy, "GDR_GPU")
	}
	for v, want := range map[string]string{
		"9":            "GDR_GPU=9: there are 8 GPUs (0000:18:00.0, 0000:29:00.0, 0000:3a:00.0, 0000:4b:00.0, 0000:98:00.0, 0000:a9:00.0, 0000:ba:00.0, 0000:cb:00.0); want an index below 8",
		"0000:aa:00.0": "GDR_GPU=0000:aa:00.0: 0000:aa:00.0 is not an NVIDIA GPU (0000:aa:00.0 [15b3:101b], class 0x020700); there are 8 GPUs",
		"0000:ee:00.0": "GDR_GPU=0000:ee:00.0 names no GPU; there are 8 GPUs (0000:18:00.0",
	} {
		_, err := h.Select(cfg(t, "GDR_GPU", v))
		assert.ErrorContains(t, err, want, v)
	}
	// GDR_RDMA_DEVICE forces the NIC of every rail; Primary is its nearest GPU.
	s = sel(t, h, "GDR_RDMA_DEVICE", "mlx5_3")
	for _, r := range s.All {
		assert.Equal(t, "mlx5_3", r.NIC.Name)
		assert.True(t, r.Forced)
		assert.Contains(t, r.Reason, "GDR_RDMA_DEVICE=mlx5_3")
	}
	assert.Equal(t, 5, s.Primary.Index)
	assert.Equal(t, topo.PIX, s.Primary.Class())
	assert.Contains(t, s.PrimaryWhy, "nearest GDR_RDMA_DEVICE=mlx5_3 (PIX, 3 bridges)")
	s = sel(t, h, "GDR_RDMA_DEVICE", "mlx5_4") // storage NIC: NODE from GPUs 0-3, SYS from 4-7
	assert.Equal(t, 0, s.Primary.Index)
	assert.Equal(t, topo.NODE, s.Primary.Class())
	assert.Equal(t, topo.SYS, s.All[4].Class())
	s = sel(t, h, "GDR_RDMA_DEVICE", "mlx5_3", "GDR_GPU", "0")
	assert.Equal(t, 0, s.Primary.Index)
	assert.Equal(t, "mlx5_3", s.Primary.NIC.Name)
	assert.Equal(t, topo.SYS, s.Primary.Class())
	_, err := h.Select(cfg(t, "GDR_RDMA_DEVICE", "mlx5_99"))
	assert.ErrorContains(t, err, "GDR_RDMA_DEVICE=mlx5_99: no such RDMA device in /sys/class/infiniband; there are 10 (mlx5_0, mlx5_1,")
	// GDR_RAILS filters; Primary is the first kept.
	s = sel(t, h, "GDR_RAILS", "6,2")
	require.Len(t, s.Rails, 2)
	assert.Equal(t, 2, s.Rails[0].Index)
	assert.Equal(t, 6, s.Rails[1].Index)
	assert.Equal(t, 2, s.Primary.Index)
	assert.Len(t, s.All, 8)
	s = sel(t, h, "GDR_RAILS", "6,2", "GDR_RDMA_DEVICE", "mlx5_1") // mlx5_1 is GPU 6's NIC
	assert.Equal(t, 6, s.Primary.Index)
	s = sel(t, h, "GDR_RAILS", "0,3", "GDR_GPU", "3")
	require.Len(t, s.Rails, 1)
	assert.Equal(t, 3, s.Primary.Index)
	_, err = h.Select(cfg(t, "GDR_RAILS", "1,8"))
	assert.ErrorContains(t, err, "GDR_RAILS=1,8: rail 8 does not exist; there are 8 rails (0-7)")
	_, err = h.Select(cfg(t, "GDR_RAILS", "0,1", "GDR_GPU", "3"))
	assert.ErrorContains(t, err, "GDR_GPU=3 is rail 3, which GDR_RAILS=0,1 leaves out")
}

// The tie-break never follows names or listing order: renaming the two
// functions of the dual-port NIC keeps GPU 0 on the lower PCI function.
func TestTieBreakByPCIAddress(t *testing.T) {
	h := discover(t, "dual-port")
	s := sel(t, h)
	assert.Equal(t, "0000:05:00.0", s.All[0].NIC.PCI)
	assert.Equal(t, "0000:05:00.1", s.All[1].NIC.PCI)
	assert.Contains(t, s.All[1].Reason, "mlx5_0 as near, taken by GPU 0")
	h.Devices[0].Name, h.Devices[1].Name = "mlx5_1", "mlx5_0"
	s = sel(t, h)
	assert.Equal(t, "0000:05:00.0", s.All[0].NIC.PCI)
	assert.Equal(t, "mlx5_1", s.All[0].NIC.Name)
	assert.Equal(t, "0000:05:00.1", s.All[1].NIC.PCI)
}

func TestNotCandidates(t *testing.T) {
	s := sel(t, discover(t, "nic-port-down"))
	down := s.NIC("mlx5_0")
	require.NotNil(t, down)
	assert.False(t, down.Candidate)
	assert.Equal(t, "its port 1 is DOWN", down.Why)
	assert.Equal(t, UnfitPortDown, down.Unfit)
	assert.Equal(t, "1: DOWN", down.RawPortState)
	near := s.Nearer(s.All[0])
	require.Len(t, near, 1)
	assert.Equal(t, "mlx5_0 (PIX, 3 bridges): its port 1 is DOWN", Describe(near))
	assert.Contains(t, s.All[0].Reason, "nearer but not candidates: mlx5_0 (PIX, 3 bridges): its port 1 is DOWN")
	// Ranked lists candidates and the rest, nearest first.
	rk := s.Ranked(s.All[0].GPU)
	assert.Equal(t, "mlx5_0", rk[0].NIC.Name)
	assert.Equal(t, "mlx5_1", rk[1].NIC.Name)
	// GDR_RDMA_DEVICE may force a NIC that is not a candidate: it is used, and said.
	f := sel(t, discover(t, "nic-port-down"), "GDR_RDMA_DEVICE", "mlx5_0")
	assert.Equal(t, "mlx5_0", f.Primary.NIC.Name)
	assert.Contains(t, f.Primary.Reason, "not a rail candidate: its port 1 is DOWN")

	// A port that does not exist, and a device user space cannot open.
	h := discover(t, "pix")
	s = sel(t, h, "GDR_IB_PORT", "2")
	assert.Nil(t, s.All[0].NIC)
	assert.Equal(t, "it has no port 2 (GDR_IB_PORT; ports: 1)", s.NIC("mlx5_0").Why)
	assert.Equal(t, UnfitNoPort, s.NIC("mlx5_0").Unfit)
	assert.Contains(t, s.NoCandidate(), "mlx5_1: it has no port 2")
	assert.Contains(t, s.PrimaryWhy, "GPU only")
	h.Devices[0].Uverbs = ""
	s = sel(t, h)
	assert.Contains(t, s.NIC("mlx5_0").Why, "no user-space verbs node names it")
	assert.Equal(t, UnfitNoUverbs, s.NIC("mlx5_0").Unfit)
	assert.Equal(t, Fit, s.NIC("mlx5_1").Unfit)
	assert.Equal(t, "mlx5_1", s.All[0].NIC.Name, "GPU 0 falls back to the other NIC")
	assert.Equal(t, "mlx5_1", s.All[1].NIC.Name)
	assert.Equal(t, topo.PHB, s.All[0].Class())
}

// A host with NICs and no GPU: Primary is NIC-only, the first hardware
// candidate by PCI address (not by name), else the first software one.
func TestNICOnly(t *testing.T) {
	h := discover(t, "dgx")
	h.GPUs = nil
	s := sel(t, h)
	assert.Empty(t, s.All)
	require.NotNil(t, s.Primary)
	assert.Nil(t, s.Primary.GPU)
	assert.Equal(t, -1, s.Primary.Index)
	assert.Equal(t, "rail0", s.Primary.Name(), "a NIC-only host's one rail meets the peer's rail 0")
	assert.Equal(t, "mlx5_5", s.Primary.NIC.Name, "0000:19:00.0 is the lowest NIC address")
	assert.Contains(t, s.PrimaryWhy, "by PCI address")
	s = sel(t, h, "GDR_RDMA_DEVICE", "mlx5_8")
	assert.Equal(t, "mlx5_8", s.Primary.NIC.Name)
	_, err := h.Select(cfg(t, "GDR_GPU", "0"))
	assert.ErrorContains(t, err, "GDR_GPU=0: there are no GPUs")
	_, err = h.Select(cfg(t, "GDR_RAILS", "0"))
	assert.ErrorContains(t, err, "GDR_RAILS=0: there are no rails")

	h = discover(t, "rxe")
	h.GPUs = nil
	s = sel(t, h)
	assert.Equal(t, "rxe0", s.Primary.NIC.Name)
	assert.Contains(t, s.PrimaryWhy, "software")

	h = discover(t, "port-down")
	h.GPUs = nil
	s = sel(t, h)
	assert.Nil(t, s.Primary)
	assert.Contains(t, s.PrimaryWhy, "mlx5_0: its port 1 is DOWN")
	h = discover(t, "h200-1")
	s = sel(t, h)
	assert.Contains(t, s.NoCandidate(), "no RDMA device: /sys/class/infiniband is empty")
	_, err = h.Select(cfg(t, "GDR_RDMA_DEVICE", "mlx5_0"))
	assert.ErrorContains(t, err, "GDR_RDMA_DEVICE=mlx5_0: there is no RDMA device (/sys/class/infiniband is empty)")
}

// GPUs only the driver sees come after the sysfs ones and pair by the rule
// without a path.
func TestDriverGPUs(t *testing.T) {
	h := discover(t, "rxe")
	require.NoError(t, h.AddDriverGPUs([]string{"00000000:00:06.0", "0000:C1:00.0", "0000:41:00.0"}))
	require.Len(t, h.GPUs, 3, "the sysfs GPU reported again is not added twice")
	assert.Equal(t, "0000:00:06.0", h.GPUs[0].PCI)
	assert.False(t, h.GPUs[0].DriverOnly)
	assert.Equal(t, "0000:41:00.0", h.GPUs[1].PCI)
	assert.Equal(t, "0000:c1:00.0", h.GPUs[2].PCI)
	assert.True(t, h.GPUs[2].DriverOnly)
	assert.Equal(t, 2, h.GPUs[2].Index)
	s := sel(t, h)
	require.Len(t, s.All, 3)
	for _, r := range s.All {
		assert.Equal(t, "rxe0", r.NIC.Name)
		assert.False(t, r.HasPath)
	}
	assert.Contains(t, s.All[1].Reason, "seen by the driver only")
	assert.ErrorContains(t, h.AddDriverGPUs([]string{"gpu0"}), `"gpu0"`)
	assert.Len(t, h.GPUs, 3)

	// On the DGX host a driver-only GPU takes a NIC no GPU has taken, by
	// PCI address: the storage NIC on socket 0.
	h = discover(t, "dgx")
	require.NoError(t, h.AddDriverGPUs([]string{"0000:fe:00.0"}))
	s = sel(t, h)
	assert.Equal(t, "mlx5_4", s.All[8].NIC.Name)
	assert.Equal(t, "mlx5_5", s.All[0].NIC.Name, "sysfs GPUs keep their rails")
}

func TestStrings(t *testing.T) {
	s := sel(t, discover(t, "dgx"), "GDR_GPU", "5")
	assert.Equal(t, "rail 5: GPU 5 (0000:a9:00.0) <-> mlx5_3 (0000:aa:00.0) PIX", s.Primary.String())
	assert.Len(t, strings.Split(s.Summary(), "\n"), 8)
	r := sel(t, discover(t, "rxe"))
	assert.Equal(t, "rail 0: GPU 0 (0000:00:06.0) <-> rxe0 (software, on eth0)", r.Primary.String())
	assert.Contains(t, r.Primary.Reason, "software RDMA device on eth0")
	g := sel(t, discover(t, "h200-1"))
	assert.Equal(t, "rail 0: GPU 0 (0000:00:06.0) without NIC", g.Primary.String())
}

func TestPathDevices(t *testing.T) {
	h := discover(t, "dgx")
	s := sel(t, h)
	r := s.All[5]
	devs, missing := h.PathDevices(r)
	assert.Empty(t, missing)
	require.Len(t, devs, 2+r.Bridges())
	assert.Equal(t, PathDevice{Role: "GPU", Dev: h.Index.Device("0000:a9:00.0")}, devs[0])
	assert.Equal(t, "NIC", devs[len(devs)-1].Role)
	assert.Equal(t, r.NIC.PCI, devs[len(devs)-1].Dev.BDF)
	for i, b := range r.Path.Bridges {
		assert.Equal(t, "bridge", devs[1+i].Role)
		assert.Equal(t, b, devs[1+i].Dev.BDF)
	}

	// NIC only (no GPU on the rail): the NIC and every port above it.
	nicOnly := &Rail{Index: -1, NIC: r.NIC}
	devs, missing = h.PathDevices(nicOnly)
	assert.Empty(t, missing)
	nic := h.Index.Device(r.NIC.PCI)
	require.Len(t, devs, len(nic.Chain))
	assert.Equal(t, "NIC", devs[0].Role)
	assert.Equal(t, nic.Chain[0], devs[len(devs)-1].Dev.BDF, "ends at the root port")

	_, missing = h.UpstreamDevices("NIC", "0000:ee:00.0")
	assert.Equal(t, []string{"NIC 0000:ee:00.0"}, missing)
	devs, missing = h.PathDevices(nil)
	assert.Empty(t, devs)
	assert.Empty(t, missing)
	devs, _ = h.PathDevices(&Rail{GPU: &GPU{PCI: "0000:00:99.0", DriverOnly: true}})
	assert.Empty(t, devs, "a driver-only GPU has no PCI path")
}

// copyTree copies a fixture tree (files, folders, symbolic links as links).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, hostfstest.Copy(src, dst))
}

// The cluster lab's VM: no GPU in sysfs, two emulated GPUs the CUDA driver
// reports (FAKE_CUDA_DEVICES=2, buses 3b and 4b) and two software NICs,
// rxe0 on eth0 and rxe1 on eth1. Two rails form, one NIC each, in name
// order: rail 1 must not fall back to rxe0 (the lab degrades rxe1's link).
func TestTwoSoftwareRails(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "fixtures", "hosts", "rxe"), dir)
	virt := filepath.Join(dir, "sys", "devices", "virtual")
	copyTree(t, filepath.Join(virt, "infiniband", "rxe0"), filepath.Join(virt, "infiniband", "rxe1"))
	require.NoError(t, os.WriteFile(filepath.Join(virt, "infiniband", "rxe1", "parent"), []byte("eth1\n"), 0o644))
	copyTree(t, filepath.Join(virt, "infiniband_verbs", "uverbs0"), filepath.Join(virt, "infiniband_verbs", "uverbs1"))
	require.NoError(t, os.WriteFile(filepath.Join(virt, "infiniband_verbs", "uverbs1", "ibdev"), []byte("rxe1\n"), 0o644))
	require.NoError(t, os.Symlink("../../devices/virtual/infiniband/rxe1", filepath.Join(dir, "sys", "class", "infiniband", "rxe1")))
	require.NoError(t, os.Symlink("../../devices/virtual/infiniband_verbs/uverbs1", filepath.Join(dir, "sys", "class", "infiniband_verbs", "uverbs1")))
	// ...and its device node, without which libibverbs would not list rxe1.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev", "infiniband", "uverbs1"), nil, 0o644))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "sys", "bus", "pci", "devices", "0000:00:06.0")))
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	h := Discover(r)
	require.NoError(t, h.NICErr)
	require.Empty(t, h.GPUs, "the VM has no GPU in sysfs")
	require.NoError(t, h.AddDriverGPUs([]string{"0000:3B:00.0", "0000:4B:00.0"}))
	s := sel(t, h)
	require.Len(t, s.All, 2, s.Summary())
	assert.Equal(t, railExpect{Rail: 0, GPU: "0000:3b:00.0", NIC: "rxe0"}, asExpect(s.All[0]))
	assert.Equal(t, railExpect{Rail: 1, GPU: "0000:4b:00.0", NIC: "rxe1"}, asExpect(s.All[1]))
	assert.Equal(t, s.All, s.Rails, "GDR_RAILS unset: every rail")
	s = sel(t, h, "GDR_RAILS", "1")
	require.Len(t, s.Rails, 1)
	assert.Equal(t, "rxe1", s.Rails[0].NIC.Name)
}

// NCCL_IB_HCA filters the candidates as NCCL filters its devices: an
// excluded NIC says by what and from where, the rails move to the NICs NCCL
// uses, GDR_RDMA_DEVICE switches the filter off, and a filter that leaves
// no NIC is an error naming it.
func TestNCCLIBHCAFilters(t *testing.T) {
	h := discover(t, "dgx")
	s := sel(t, h, "NCCL_IB_HCA", "^mlx5_3")
	n := s.NIC("mlx5_3")
	require.NotNil(t, n)
	assert.False(t, n.Candidate)
	assert.True(t, n.HCAExcluded)
	assert.Contains(t, n.Why, "excluded by NCCL_IB_HCA=^mlx5_3 (from the environment): NCCL leaves out the devices it lists (matched by name prefix), and it lists mlx5_3 port 1")
	assert.Contains(t, n.Remedy, "set GDR_RDMA_DEVICE=mlx5_3 to test it anyway")
	assert.NotEqual(t, "mlx5_3", s.All[5].NIC.Name, "GPU 5's nearest NIC is excluded")
	assert.Contains(t, s.All[5].Reason, "nearer but not candidates: mlx5_3 (PIX, 3 bridges): excluded by NCCL_IB_HCA=^mlx5_3")
	assert.Contains(t, s.Summary(), "NCCL_IB_HCA=^mlx5_3 (from the environment): excluded mlx5_3")
	for i, want := range []string{"mlx5_5", "mlx5_2", "mlx5_7", "mlx5_0"} {
		assert.Equal(t, want, s.All[i].NIC.Name, "rail %d is unchanged", i)
	}

	// A keep-list with ports: prefix "mlx5_1" keeps mlx5_1 (not mlx5_10:
	// there is none); port 2 of mlx5_5 is not port 1 (GDR_IB_PORT).
	s = sel(t, h, "NCCL_IB_HCA", "mlx5_1,mlx5_5:2")
	assert.True(t, s.NIC("mlx5_1").Candidate)
	assert.Contains(t, s.NIC("mlx5_5").Why, "NCCL uses only the devices and ports it lists (matched by name prefix), and mlx5_5 port 1 (GDR_IB_PORT) is not among them")
	for _, r := range s.All {
		assert.Equal(t, "mlx5_1", r.NIC.Name, "the only NIC NCCL uses")
	}

	// GDR_RDMA_DEVICE chooses: NCCL_IB_HCA is not read.
	s = sel(t, h, "NCCL_IB_HCA", "^mlx5_3", "GDR_RDMA_DEVICE", "mlx5_3")
	assert.True(t, s.NIC("mlx5_3").Candidate)
	assert.False(t, s.HCA.Set())

	// Nothing left: an error naming the setting and what exists.
	_, err := h.Select(cfg(t, "NCCL_IB_HCA", "=mlx5_ib"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NCCL_IB_HCA==mlx5_ib (from the environment) excludes every RDMA device here at port 1 (GDR_IB_PORT): mlx5_0, mlx5_1")
	assert.Contains(t, err.Error(), "fall back to sockets")

	// An excluded PF does not make its VF leave the rails: NCCL uses the VF.
	s = sel(t, discover(t, "sriov"), "NCCL_IB_HCA", "=mlx5_4")
	assert.True(t, s.NIC("mlx5_4").Candidate, s.NIC("mlx5_4").Why)
	assert.Equal(t, "mlx5_4", s.All[0].NIC.Name)
}
