package pci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci/cfgbuild"
)

func fixture(t *testing.T, name string) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", name))
	require.NoError(t, err)
	return r
}

func TestParseSpeed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{"32.0 GT/s PCIe", 32, false},
		{"64.0 GT/s PCIe", 64, false}, // gen6: drivers/pci/probe.c pci_speed_string
		{"8.0 GT/s", 8, false},
		{"2.5 GT/s PCIe\n", 2.5, false},
		{"5 GT/s", 5, false},
		{"Unknown", 0, false},
		{"Unknown speed", 0, false},
		{"", 0, true},
		{"fast", 0, true},
		{"32.0 Gb/s", 0, true},
		{"-8 GT/s", 0, true},
		{"NaN GT/s", 0, true},
	} {
		got, err := ParseSpeed(tc.in)
		if tc.bad {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		assert.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestParseAttrs(t *testing.T) {
	v, err := ParseHex("0x10de\n", 16)
	require.NoError(t, err)
	assert.EqualValues(t, 0x10de, v)
	v, err = ParseHex("0x030200", 24)
	require.NoError(t, err)
	assert.EqualValues(t, 0x030200, v)
	for _, bad := range []string{"", "10de", "0x", "0xzz", "0x1000000"} {
		_, err := ParseHex(bad, 24)
		assert.Error(t, err, "%q", bad)
	}
	for in, want := range map[string]int{"-1": -1, "0\n": 0, "3": 3} {
		n, err := ParseNUMA(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, n)
	}
	for _, bad := range []string{"", "x", "-2", "1.5", "99999"} {
		_, err := ParseNUMA(bad)
		assert.Error(t, err, "%q", bad)
	}
	w, err := ParseWidth("16\n")
	require.NoError(t, err)
	assert.Equal(t, 16, w)
	for _, bad := range []string{"", "x16", "-1", "64"} {
		_, err := ParseWidth(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestSplitPath(t *testing.T) {
	for _, tc := range []struct {
		in, root string
		chain    []string
		bad      bool
	}{
		{in: "/sys/devices/pci0000:00/0000:00:06.0", root: "/sys/devices/pci0000:00", chain: []string{"0000:00:06.0"}},
		{in: "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:08.0/0000:83:00.1",
			root: "/sys/devices/pci0000:80", chain: []string{"0000:80:01.0", "0000:81:00.0", "0000:82:08.0", "0000:83:00.1"}},
		// Hyper-V style: the host bridge sits below non-PCI components.
		{in: "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/abc/pci7870:00/7870:00:00.0",
			root: "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/abc/pci7870:00", chain: []string{"7870:00:00.0"}},
		{in: "/sys/devices/virtual/infiniband/rxe0", bad: true},
		{in: "/sys/devices/pci0000:00", bad: true},
		{in: "/sys/devices/pci0000:00/0000:00:01.0/virtio0", bad: true},
	} {
		root, chain, err := SplitPath(tc.in)
		if tc.bad {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.root, root)
		assert.Equal(t, tc.chain, chain)
	}
}

func TestParseConfigBuilt(t *testing.T) {
	img := cfgbuild.Build(cfgbuild.Spec{Vendor: 0x1000, Device: 0xc010, Class: 0x060400, Bridge: true,
		PortType: TypeDownstream, MaxSpeedEnc: 5, MaxWidth: 16, CurSpeedEnc: 4, CurWidth: 8,
		ACS: true, ACSCap: 0x5f, ACSCtrl: ACSSV | ACSRR | ACSCR | ACSUF})
	c, err := ParseConfig(img)
	require.NoError(t, err)
	assert.EqualValues(t, 0x1000, c.VendorID)
	assert.EqualValues(t, 0x060400, c.ClassCode)
	assert.EqualValues(t, 1, c.HeaderType)
	require.NotNil(t, c.PCIe)
	assert.Equal(t, TypeDownstream, c.PCIe.PortType)
	assert.Equal(t, 32.0, c.PCIe.LinkCapGTs)
	assert.Equal(t, 16, c.PCIe.LinkCapW)
	assert.Equal(t, 16.0, c.PCIe.LinkStaGTs)
	assert.Equal(t, 8, c.PCIe.LinkStaW)
	require.NotNil(t, c.ACS)
	assert.Equal(t, 0x148, c.ACS.Offset)
	assert.Equal(t, 0x14e, c.ACS.CtrlOffset())
	assert.EqualValues(t, ACSRR|ACSCR|ACSUF, c.ACS.Blocking())
	assert.Equal(t, "SV+ TB- RR+ CR+ UF+ EC- DT-", ACSBits(c.ACS.Ctrl))
	assert.Equal(t, "RR,CR,UF", EnabledNames(c.ACS.Blocking()))
	assert.Len(t, c.ExtCaps, 2)
	assert.True(t, c.Extended())

	// Without ACS: the list ends after AER.
	c, err = ParseConfig(cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x2335, Class: 0x030200}))
	require.NoError(t, err)
	assert.Nil(t, c.ACS)
	assert.Len(t, c.ExtCaps, 1)
}

// The H200's config space as recorded on the GPU machine (root read, 4096 bytes):
// PM -> MSI -> PCIe (at 0x60) -> MSI-X; extended list starts with a null
// capability (id 0) and goes on to LTR etc.
func TestParseConfigRecordedH200(t *testing.T) {
	b, err := os.ReadFile("../../fixtures/hosts/h200-1/sys/devices/pci0000:00/0000:00:06.0/config")
	require.NoError(t, err)
	c, err := ParseConfig(b)
	require.NoError(t, err)
	assert.EqualValues(t, 0x10de, c.VendorID)
	assert.EqualValues(t, 0x2335, c.DeviceID)
	require.NotNil(t, c.PCIe)
	assert.Equal(t, 0x60, c.PCIe.Offset)
	assert.Equal(t, TypeEndpoint, c.PCIe.PortType)
	assert.Equal(t, 32.0, c.PCIe.LinkCapGTs)
	assert.Equal(t, 16, c.PCIe.LinkCapW)
	assert.Equal(t, 16, c.PCIe.LinkStaW)
	assert.Nil(t, c.ACS)
	require.NotEmpty(t, c.ExtCaps)
	assert.EqualValues(t, 0, c.ExtCaps[0].ID)
}

func TestParseConfigMalformed(t *testing.T) {
	good := cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x2335, Class: 0x030200, ACS: true})
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for name, tc := range map[string]struct {
		img  []byte
		want string
	}{
		"empty":            {nil, "truncated: 0 bytes"},
		"truncated":        {good[:40], "truncated: 40 bytes"},
		"absent":           {mut(func(b []byte) { b[0], b[1] = 0xff, 0xff }), "vendor 0xffff"},
		"cap into header":  {mut(func(b []byte) { b[0x34] = 0x10 }), "capability pointer 0x10 out of range"},
		"cap loop":         {mut(func(b []byte) { b[0x61] = 0x40 }), "loops back to offset 0x40"},
		"pcie at end":      {mut(func(b []byte) { b[0x34] = 0xf8; b[0xf8] = 0x10; b[0xf9] = 0 }), "runs past the end"},
		"ext loop":         {mut(func(b []byte) { b[0x14b] = 0x10 }), "loops back to offset 0x100"},
		"ext out of range": {mut(func(b []byte) { b[0x102], b[0x103] = 0x00, 0x08 }), "extended capability pointer 0x80 out of range"},
	} {
		_, err := ParseConfig(tc.img)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	// 64 bytes: header only, ErrNeedRoot.
	c, err := ParseConfig(good[:64])
	require.ErrorIs(t, err, ErrNeedRoot)
	assert.Contains(t, err.Error(), "extended config not readable (need root)")
	require.NotNil(t, c)
	assert.EqualValues(t, 0x10de, c.VendorID)
	assert.Nil(t, c.PCIe)
	// 256 bytes: standard list only, no error.
	c, err = ParseConfig(good[:256])
	require.NoError(t, err)
	assert.NotNil(t, c.PCIe)
	assert.Nil(t, c.ACS)
	assert.False(t, c.Extended())
}

func TestScanConstructed(t *testing.T) {
	devs, err := Scan(fixture(t, "downtrained"))
	require.NoError(t, err)
	by := map[string]*Device{}
	for _, d := range devs {
		by[d.BDF] = d
	}
	require.Len(t, by, 6)
	g := by["0000:03:00.0"]
	require.NotNil(t, g)
	assert.True(t, g.IsGPU())
	assert.False(t, g.IsBridge())
	assert.Equal(t, "/sys/devices/pci0000:00", g.Root)
	assert.Equal(t, []string{"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}, g.Chain)
	assert.Equal(t, "0000:02:00.0", g.Parent())
	assert.Equal(t, 2.5, g.CurGTs)
	assert.Equal(t, 32.0, g.MaxGTs)
	assert.Equal(t, 0, g.NUMANode)
	assert.Equal(t, "nvidia", g.Driver)
	assert.Equal(t, "identity", g.IOMMUType)
	assert.NotEmpty(t, g.IOMMUGroup)
	n := by["0000:04:00.0"]
	assert.Equal(t, 8, n.CurWidth)
	assert.Equal(t, 16, n.MaxWidth)
	assert.Equal(t, "16 GT/s x8 (max 16 GT/s x16)", n.LinkString())
	dp := by["0000:02:00.0"]
	assert.True(t, dp.IsBridge())
	assert.Equal(t, TypeDownstream, dp.PortType())
	require.NotNil(t, dp.Config.ACS)
	assert.NoError(t, dp.ConfigErr)
}

func TestScanNoRoot(t *testing.T) {
	devs, err := Scan(fixture(t, "noroot"))
	require.NoError(t, err)
	for _, d := range devs {
		assert.ErrorIs(t, d.ConfigErr, ErrNeedRoot, d.BDF)
		assert.Equal(t, -1, d.PortType())
	}
}

func TestScanRecordedH200(t *testing.T) {
	devs, err := Scan(fixture(t, "h200-1"))
	require.NoError(t, err)
	var gpus []*Device
	for _, d := range devs {
		if d.IsGPU() {
			gpus = append(gpus, d)
		}
	}
	require.Len(t, gpus, 1)
	g := gpus[0]
	assert.Equal(t, "0000:00:06.0", g.BDF)
	assert.Equal(t, []string{"0000:00:06.0"}, g.Chain)
	assert.Equal(t, -1, g.NUMANode)
	assert.Equal(t, 32.0, g.MaxGTs)
	assert.Equal(t, 16, g.CurWidth)
	assert.Equal(t, "", g.IOMMUGroup)
	assert.NoError(t, g.ConfigErr)
}

// writeTree builds a minimal one-device tree and lets f break it.
func writeTree(t *testing.T, f func(dev string)) *hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	dev := filepath.Join(dir, "sys/devices/pci0000:00/0000:00:06.0")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sys/bus/pci/devices"), 0o755))
	require.NoError(t, os.Symlink("../../../devices/pci0000:00/0000:00:06.0", filepath.Join(dir, "sys/bus/pci/devices/0000:00:06.0")))
	for name, v := range map[string]string{"vendor": "0x10de\n", "device": "0x2335\n", "class": "0x030200\n",
		"numa_node": "-1\n", "current_link_speed": "32.0 GT/s PCIe\n", "max_link_speed": "32.0 GT/s PCIe\n",
		"current_link_width": "16\n", "max_link_width": "16\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dev, "config"),
		cfgbuild.Build(cfgbuild.Spec{Vendor: 0x10de, Device: 0x2335, Class: 0x030200}), 0o644))
	f(dev)
	r, err := hostfs.New(dir)
	require.NoError(t, err)
	return r
}

func TestLoadMalformed(t *testing.T) {
	write := func(name, v string) func(string) {
		return func(dev string) { require.NoError(t, os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644)) }
	}
	for name, tc := range map[string]struct {
		f    func(string)
		want []string
	}{
		"empty vendor":    {write("vendor", ""), []string{"vendor", `""`}},
		"garbage class":   {write("class", "0xGPU\n"), []string{"class", "0xGPU"}},
		"missing device":  {func(dev string) { os.Remove(filepath.Join(dev, "device")) }, []string{"device: missing"}},
		"garbage numa":    {write("numa_node", "banana\n"), []string{"numa_node", "banana"}},
		"garbage speed":   {write("max_link_speed", "fast\n"), []string{"max_link_speed", "fast"}},
		"garbage cpulist": {write("local_cpulist", "0-x\n"), []string{"local_cpulist", "0-x"}},
		"garbage width":   {write("current_link_width", "x16\n"), []string{"current_link_width", "x16"}},
		"dangling device": {func(dev string) { os.RemoveAll(dev) }, []string{"0000:00:06.0", "dangling"}},
		"dangling group": {func(dev string) {
			require.NoError(t, os.Symlink("../../../kernel/iommu_groups/7", filepath.Join(dev, "iommu_group")))
		}, []string{"iommu_group", "dangling"}},
		"empty group type": {func(dev string) {
			g := filepath.Join(dev, "../../../kernel/iommu_groups/7")
			require.NoError(t, os.MkdirAll(g, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(g, "type"), nil, 0o644))
			require.NoError(t, os.Symlink("../../../kernel/iommu_groups/7", filepath.Join(dev, "iommu_group")))
		}, []string{"type: empty"}},
	} {
		r := writeTree(t, tc.f)
		_, err := Load(r, "0000:00:06.0")
		require.Error(t, err, name)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, name)
		}
		devs, err := Scan(r)
		assert.Error(t, err, name)
		assert.Empty(t, devs, name)
	}
	// Truncated config is not a load error: it is reported on the device.
	r := writeTree(t, write("config", "\x10\xde"))
	d, err := Load(r, "0000:00:06.0")
	require.NoError(t, err)
	assert.Nil(t, d.Config)
	assert.ErrorContains(t, d.ConfigErr, "config space truncated: 2 bytes")
	assert.ErrorContains(t, d.ConfigErr, "/config")
	// local_cpulist is read when present.
	r = writeTree(t, write("local_cpulist", "0-27,56-83\n"))
	d, err = Load(r, "0000:00:06.0")
	require.NoError(t, err)
	assert.Equal(t, "0-27,56-83", d.LocalCPUs.String())
	// A driver link may dangle (the driver directory is not recorded); its name is what counts.
	r = writeTree(t, func(dev string) {
		require.NoError(t, os.Symlink("../../../bus/pci/drivers/nvidia", filepath.Join(dev, "driver")))
	})
	d, err = Load(r, "0000:00:06.0")
	require.NoError(t, err)
	assert.Equal(t, "nvidia", d.Driver)
	// No /sys/bus/pci at all.
	empty, err := hostfs.New(t.TempDir())
	require.NoError(t, err)
	_, err = Scan(empty)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

// A function that cannot be read says whether it could be a GPU, so a GPU
// with a corrupt vendor file fails the GPU checks instead of vanishing; a
// broken entry is never mistaken for a missing /sys/bus/pci.
func TestScanErrorSaysMaybeGPU(t *testing.T) {
	write := func(name, v string) func(string) {
		return func(dev string) { require.NoError(t, os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644)) }
	}
	for name, tc := range map[string]struct {
		f     func(string)
		maybe bool
		want  string
	}{
		"corrupt GPU vendor":   {write("vendor", "\x00\xffgarbage"), true, `/vendor: "\x00\xffgarbage" is not a 0x-prefixed hex number`},
		"empty GPU vendor":     {write("vendor", ""), true, "/vendor: \"\" is not"},
		"huge GPU vendor":      {write("vendor", strings.Repeat("A", 1<<20)), true, "above the read limit of 65536 bytes"},
		"corrupt GPU class":    {write("class", "0xzz"), true, "/class"},
		"GPU, bad width":       {write("max_link_width", "x16"), true, "max_link_width"},
		"NIC vendor, bad link": {func(dev string) { write("vendor", "0x15b3")(dev); write("max_link_width", "?")(dev) }, false, "max_link_width"},
		"network class":        {func(dev string) { write("class", "0x020000")(dev); write("vendor", "0xnvidia")(dev) }, false, "/vendor"},
		"dangling entry":       {func(dev string) { os.RemoveAll(dev) }, true, "dangling"},
		"symlink loop":         {func(dev string) { os.RemoveAll(dev); require.NoError(t, os.Symlink("0000:00:06.0", dev)) }, true, "symbolic links (a loop?)"},
	} {
		t.Run(name, func(t *testing.T) {
			r := writeTree(t, tc.f)
			devs, err := Scan(r)
			assert.Empty(t, devs)
			require.Error(t, err)
			assert.False(t, errors.Is(err, fs.ErrNotExist), "a broken entry is not a missing directory")
			var se *ScanError
			require.ErrorAs(t, err, &se)
			require.Len(t, se.Entries, 1)
			assert.Equal(t, "0000:00:06.0", se.Entries[0].BDF)
			assert.Equal(t, tc.maybe, se.Entries[0].MaybeGPU())
			assert.Equal(t, tc.maybe, len(UnreadableGPUs(err)) == 1)
			assert.Contains(t, err.Error(), tc.want)
			assert.Less(t, len(err.Error()), 500, "bounded message: %s", err)
		})
	}
	assert.Nil(t, UnreadableGPUs(nil))
	assert.Nil(t, UnreadableGPUs(fs.ErrNotExist))
}

// SR-IOV links: a VF names its PF through physfn, a PF its VFs through
// virtfnN (ordered by N, not by name); malformed links are errors naming
// the link, and a VF's all-ones ID registers are not a config mismatch.
func TestSRIOVLinks(t *testing.T) {
	link := func(name, target string) func(string) {
		return func(dev string) { require.NoError(t, os.Symlink(target, filepath.Join(dev, name))) }
	}
	vfConfig := func(dev string) {
		require.NoError(t, os.WriteFile(filepath.Join(dev, "config"),
			cfgbuild.Build(cfgbuild.Spec{Vendor: 0xffff, Device: 0xffff, Class: 0x030200}), 0o644))
	}
	r := writeTree(t, func(dev string) { link("physfn", "../0000:00:05.0")(dev); vfConfig(dev) })
	d, err := Load(r, "0000:00:06.0")
	require.NoError(t, err)
	assert.Equal(t, "0000:00:05.0", d.PhysFn)
	assert.True(t, d.IsVF())
	assert.NoError(t, d.ConfigErr, "a VF's Vendor/Device ID registers read 0xffff")
	assert.NotNil(t, d.Config)

	// The same all-ones IDs on a function that is not a VF are a mismatch.
	r = writeTree(t, vfConfig)
	d, err = Load(r, "0000:00:06.0")
	require.NoError(t, err)
	assert.False(t, d.IsVF())
	assert.ErrorContains(t, d.ConfigErr, "config space reads vendor 0xffff")

	r = writeTree(t, func(dev string) {
		for i, vf := range []string{"0000:00:06.1", "0000:00:06.2", "0000:00:06.3"} {
			link(fmt.Sprintf("virtfn%d", []int{0, 10, 2}[i]), "../"+vf)(dev)
		}
	})
	d, err = Load(r, "0000:00:06.0")
	require.NoError(t, err)
	assert.Equal(t, []string{"0000:00:06.1", "0000:00:06.3", "0000:00:06.2"}, d.VirtFns, "virtfn0, virtfn2, virtfn10")
	assert.False(t, d.IsVF())

	for name, tc := range map[string]struct {
		f    func(string)
		want string
	}{
		"physfn not a function": {link("physfn", "../banana"), `physfn -> "../banana": not a PCI function`},
		"virtfn not numbered":   {link("virtfnX", "../0000:00:06.1"), `"virtfnX": not a virtfn<N> link`},
		"virtfn not a function": {link("virtfn0", "../../pci0000:00"), `virtfn0 -> "../../pci0000:00": not a PCI function`},
	} {
		_, err := Load(writeTree(t, tc.f), "0000:00:06.0")
		assert.ErrorContains(t, err, tc.want, name)
	}
}

// In a VM a passed-through VF has no physfn link: its driver's VF device
// IDs (mlx5_core, mlx4_core, mana) tell it apart; the PF IDs and other
// vendors' do not.
func TestVFByDeviceID(t *testing.T) {
	for _, tc := range []struct {
		vendor, device uint16
		vf             bool
	}{
		{0x15b3, 0x101e, true},  // ConnectX Family mlx5Gen VF (ConnectX-6 Dx, -7)
		{0x15b3, 0x101c, true},  // ConnectX-6 VF
		{0x15b3, 0x1021, false}, // ConnectX-7 PF
		{0x15b3, 0x101b, false}, // ConnectX-6 PF
		{0x15b3, 0x1004, true},  // ConnectX-3 VF (mlx4_core)
		{0x15b3, 0x1003, false}, // ConnectX-3 PF
		{0x1414, 0x00ba, true},  // MANA VF
		{0x1414, 0x00b9, false}, // MANA PF
		{0x10de, 0x101e, false}, // another vendor's ID
	} {
		d := &Device{Vendor: tc.vendor, Device: tc.device}
		assert.Equal(t, tc.vf, d.IsVF(), "%04x:%04x", tc.vendor, tc.device)
	}
}

// BlueField-3's network functions and the built-in switches of ConnectX-8
// and BlueField-3 are told apart by ID (rdma-core kernel-boot/rdma_topo
// pci_device_types: bf3_nic, cx_switch, bf3_switch).
func TestNVIDIANetworkingIDs(t *testing.T) {
	for _, tc := range []struct {
		vendor, device uint16
		bf, cxSwitch   bool
	}{
		{0x15b3, 0xa2dc, true, false},  // BlueField-3 integrated ConnectX-7
		{0x15b3, 0x1021, false, false}, // ConnectX-7
		{0x15b3, 0x1023, false, false}, // ConnectX-8
		{0x15b3, 0x197c, false, true},  // ConnectX-8 switch port
		{0x15b3, 0x1979, false, true},
		{0x15b3, 0x197d, false, true},
		{0x15b3, 0x197b, false, true}, // BlueField-3 switch port
		{0x10de, 0xa2dc, false, false},
		{0x1000, 0xc010, false, false}, // Broadcom PEX switch port
	} {
		d := &Device{Vendor: tc.vendor, Device: tc.device}
		assert.Equal(t, tc.bf, d.IsBlueFieldNIC(), "%04x:%04x", tc.vendor, tc.device)
		assert.Equal(t, tc.cxSwitch, d.IsNICSwitchPort(), "%04x:%04x", tc.vendor, tc.device)
	}
}
