package rails

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/virt"
)

func TestJudgeVM(t *testing.T) {
	s := sel(t, discover(t, "cloud-vm"))
	require.NotEmpty(t, s.Rails)
	r := s.Rails[0]
	require.NotNil(t, r.NIC)
	require.True(t, r.Path.Class.FartherThan(topo.PIX), "the fixture's rail crosses more than a switch")
	az := virt.Guest{VM: true, Hypervisor: "Microsoft Hyper-V", Cloud: "Azure"}

	v := s.JudgeVM(r, topo.PIX, az, nccltopo.Env{})
	assert.Contains(t, v.Finding.Cause, "in the PCI tree this VM shows, farther than GDR_MAX_PATH=PIX")
	assert.Contains(t, v.Finding.Cause, "NCCL's default NCCL_NET_GDR_LEVEL stops below PHB")
	assert.Contains(t, v.Finding.Remedy, "/opt/microsoft/ndv5-topo.xml", "the cloud's own file is named")
	assert.Empty(t, v.GDRSetting)
	require.NoError(t, v.GDRErr)

	v = s.JudgeVM(r, topo.PIX, virt.Guest{VM: true}, nccltopo.Env{GDRLevel: "SYS"})
	assert.Equal(t, `NCCL_NET_GDR_LEVEL="SYS" in the environment`, v.GDRSetting)
	assert.Contains(t, v.Finding.Cause, "makes NCCL use GPUDirect RDMA on this path anyway")
	assert.Contains(t, v.Finding.Remedy, "the cloud provider publishes one per GPU VM size")

	v = s.JudgeVM(r, topo.PIX, az, nccltopo.Env{GDRLevel: "PIX"})
	assert.Contains(t, v.Finding.Cause, "is nearer than this path, so NCCL will not use GPUDirect RDMA on it")
}

// An Azure guest with eight ConnectX-7 VFs (no physfn links) beside a MANA
// VF and a ConnectX-3 VF: the guest is a VM, so VFs are rails; the other
// two functions are candidates that lose by port rate and link layer.
func TestAzureGuestVFsAreRails(t *testing.T) {
	h := discover(t, "cloud-vm-mana")
	require.True(t, h.Guest.VM, "%+v", h.Guest)
	s := sel(t, h)
	require.Len(t, s.All, 8)
	for i, r := range s.All {
		require.NotNil(t, r.NIC, "rail %d: %s", i, r.Reason)
		assert.Equal(t, fmt.Sprintf("mlx5_ib%d", i), r.NIC.Name, r.Reason)
		assert.True(t, r.NIC.VF)
		assert.Equal(t, "PIX", r.Path.Class.String(), "by the topology file")
		assert.Contains(t, r.Reason, "an SR-IOV virtual function: in a VM, VFs are rails")
	}
	for _, name := range []string{"mana_0", "mlx4_0"} {
		n := s.NIC(name)
		require.NotNil(t, n)
		assert.True(t, n.VF, "%s: its driver's PCI table marks its ID a VF", name)
		assert.True(t, n.Candidate, "%s: %s", name, n.Why)
	}
	assert.Empty(t, s.LeftOutVFs())
}

// The VM rule does not lean on the VF table: the same guest whose extra
// functions read as PFs (a ConnectX-3 PF passed through, a MANA ID the
// table does not list) keeps the ConnectX-7 VFs as rails. On bare metal a
// VF whose PF is not visible leaves the rails only for an ACTIVE candidate
// PF of its own vendor and link layer.
func TestVFRuleByGuestVendorLinkLayer(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "fixtures", "hosts", "cloud-vm-mana"), dir)
	write := func(p, v string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(v+"\n"), 0o644))
	}
	write("sys/bus/pci/devices/c3f1:00:02.0/device", "0x1003") // ConnectX-3 PF
	write("sys/bus/pci/devices/7870:00:00.0/device", "0x00bb") // not in the table
	railsOf := func() (*Selection, []string) {
		t.Helper()
		r, err := hostfs.New(dir)
		require.NoError(t, err)
		s := sel(t, Discover(r))
		var out []string
		for _, r := range s.All {
			if r.NIC == nil {
				out = append(out, "")
				continue
			}
			out = append(out, r.NIC.Name)
		}
		return s, out
	}
	want := []string{"mlx5_ib0", "mlx5_ib1", "mlx5_ib2", "mlx5_ib3", "mlx5_ib4", "mlx5_ib5", "mlx5_ib6", "mlx5_ib7"}
	s, got := railsOf()
	require.True(t, s.Guest.VM)
	assert.False(t, s.NIC("mlx4_0").VF, "reads as a PF")
	assert.False(t, s.NIC("mana_0").VF, "reads as a PF")
	assert.Equal(t, want, got, "in a VM, VFs are rails")

	// Bare metal (no DMI, no hypervisor flag, no VMBus): PFs of another
	// vendor (MANA) or link layer (mlx4_0 is Ethernet, the VFs InfiniBand)
	// leave the VFs alone.
	for _, p := range []string{"sys/class/dmi", "proc/cpuinfo", "sys/bus/vmbus"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, p)))
	}
	s, got = railsOf()
	require.False(t, s.Guest.VM, "%+v", s.Guest)
	assert.Equal(t, want, got)
	// An ACTIVE ConnectX PF on InfiniBand, whose VFs they may be: they leave.
	port := "sys/bus/pci/devices/c3f1:00:02.0/infiniband/mlx4_0/ports/1/"
	write(port+"link_layer", "InfiniBand")
	s, _ = railsOf()
	vf := s.NIC("mlx5_ib0")
	assert.False(t, vf.Candidate)
	assert.Contains(t, vf.Why, "it is an SR-IOV virtual function (no physfn link; a VF by its device ID): physical functions with RDMA devices are visible (mlx4_0: ACTIVE, InfiniBand, of the VF's vendor) on a host that is not a VM")
	assert.Equal(t, "mana_0", s.All[0].NIC.Name, "the ConnectX VFs are out; MANA wins by port rate")
	assert.Contains(t, s.Summary(), "left out: 8 SR-IOV virtual function(s)")
	// ...but not while its port is down.
	write(port+"state", "1: DOWN")
	_, got = railsOf()
	assert.Equal(t, want, got, "a PF whose port is not ACTIVE demotes nothing")
}
