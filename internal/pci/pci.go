// Package pci reads PCI functions from a host's sysfs (through a hostfs.Root):
// identity, class, link speed and width, NUMA node and local CPUs, driver, IOMMU group, the
// sysfs path from the host bridge down (for path classification) and the
// configuration space with its capability lists (for ACS and link checks).
// It is the one place for sysfs's PCI paths (DevicesDir), for a link's state
// and theoretical rate (Link, GBps; ReadCurrent polls it under load) and
// for reading PCI addresses as drivers and users write them (NormalizeAddr).
//
// Malformed sysfs content (empty files, garbage numbers, dangling links,
// truncated config space, capability-list loops) is an error naming the file
// and the value; nothing here panics on bad input.
package pci

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// DevicesDir is where the kernel lists every PCI function.
const DevicesDir = "/sys/bus/pci/devices"

// ClassBridgePCI is the class code (base<<8|sub) of a PCI-to-PCI bridge,
// which is what PCIe root ports and switch ports present as.
const ClassBridgePCI = 0x0604

// Device is one PCI function.
type Device struct {
	BDF     string // dddd:bb:dd.f, lowercase
	SysPath string // resolved host path, /sys/devices/pci0000:00/.../<BDF>
	// Root is the host bridge directory the device hangs under
	// (/sys/devices/pci0000:00); different Roots are different root complexes.
	Root string
	// Chain is the PCI functions from the first one below Root down to this
	// device, this device last: [root port, switch ports..., device].
	Chain []string

	Vendor uint16
	Device uint16
	Class  uint32 // 0xBBSSPP as in the sysfs class file

	// Link is the link state; 0 means the attribute is absent or "Unknown".
	Link

	NUMANode int // -1: unknown
	// LocalCPUs is local_cpulist: the CPUs nearest the function. Empty when
	// the file is absent or empty. Where numa_node is -1 it still tells
	// sockets apart (internal/topo uses it so).
	LocalCPUs  cpulist.Set
	Driver     string // "" when unbound
	IOMMUGroup string // "" when the device is in no IOMMU group
	IOMMUType  string // the group's type file: DMA, DMA-FQ, identity, blocked, ... ("" if absent)

	Config    *Config // nil if config could not be read or parsed at all
	ConfigErr error   // why Config is missing or incomplete (ErrNeedRoot for 64-byte reads)

	// SR-IOV. PhysFn is the physical function of a virtual function (the
	// target of its `physfn` link), "" for every other function. VirtFns
	// are a physical function's enabled VFs (its `virtfnN` links, by N).
	// The kernel makes both links when it adds a VF (drivers/pci/iov.c,
	// pci_iov_sysfs_link).
	PhysFn  string
	VirtFns []string
}

// IsVF reports an SR-IOV virtual function: one with a physfn link, or (in a
// VM, where a passed-through VF has no physfn link) one whose device ID its
// driver lists as a VF (vfIDs). A VF's Link Status reads 0 and its
// Max_Payload_Size, Relaxed Ordering, Extended Tag and No Snoop enables are
// reserved: the PF's govern (PCIe SR-IOV specification, PCI Express
// Capability changes for VFs; lspci shows such a VF as "Width x0", 128 B).
// The ID table cannot know every vendor's VFs: a guest's VF it does not
// list reads as a PF here, which is why the rails decide "in a VM, VFs are
// rails" from internal/virt, not from this alone.
func (d *Device) IsVF() bool {
	return d.PhysFn != "" || vfIDs[[2]uint16{d.Vendor, d.Device}]
}

const (
	vendorMellanox  = 0x15b3
	vendorMicrosoft = 0x1414
)

// vfIDs are the vendor and device IDs their drivers' PCI tables mark as
// virtual functions:
//   - mlx5_core_pci_table (drivers/net/ethernet/mellanox/mlx5/core/main.c,
//     MLX5_PCI_DEV_IS_VF): Connect-IB, ConnectX-4, -4 Lx, -5, -5 Ex, -6 VFs,
//     the ConnectX mlx5Gen VF (ConnectX-6 Dx and later, ConnectX-7
//     included) and the BlueField ConnectX-5 VF;
//   - mlx4_pci_table (drivers/net/ethernet/mellanox/mlx4/main.c,
//     MLX4_PCI_DEV_IS_VF): the ConnectX-2 and ConnectX-3 VFs (Azure's older
//     accelerated networking hands guests a ConnectX-3 VF);
//   - mana_id_table (drivers/net/ethernet/microsoft/mana/gdma_main.c;
//     include/net/mana/gdma.h MANA_VF_DEVICE_ID): the Microsoft Azure
//     Network Adapter's VF, which a guest's mana_ib makes an RDMA device.
var vfIDs = map[[2]uint16]bool{
	{vendorMellanox, 0x1012}: true, {vendorMellanox, 0x1014}: true, {vendorMellanox, 0x1016}: true,
	{vendorMellanox, 0x1018}: true, {vendorMellanox, 0x101a}: true, {vendorMellanox, 0x101c}: true,
	{vendorMellanox, 0x101e}: true, {vendorMellanox, 0xa2d3}: true,
	{vendorMellanox, 0x1002}: true, {vendorMellanox, 0x1004}: true,
	{vendorMicrosoft, 0x00ba}: true,
}

// IsBlueFieldNIC reports a BlueField-3 network function (15b3:a2dc,
// pci.ids "MT43244 BlueField-3 integrated ConnectX-7 network controller";
// rdma-core kernel-boot/rdma_topo pci_device_types calls it bf3_nic, apart
// from the ConnectX NICs, cx_nic). Its role (DPU north-south, storage, or
// a SuperNIC carrying east-west traffic) is not in its ID: internal/rails
// decides what that means for the rails.
func (d *Device) IsBlueFieldNIC() bool { return d.Vendor == vendorMellanox && d.Device == 0xa2dc }

// nicSwitchIDs are the ports of switches built into NVIDIA NICs:
// ConnectX-8's (15b3:1979 and 15b3:197c, rdma_topo's cx_switch; 15b3:197d,
// pci.ids "CX8 PCIe Bridge") and BlueField-3's (15b3:197b, rdma_topo's
// bf3_switch, pci.ids "BlueField-3 SoC PCIe Bridge").
var nicSwitchIDs = map[uint16]bool{0x1979: true, 0x197b: true, 0x197c: true, 0x197d: true}

// IsNICSwitchPort reports a port of a switch inside a ConnectX-8 or
// BlueField-3: the NIC's firmware and the kernel set its ACS, not the host
// BIOS (rdma_topo writes it with setpci or pci=config_acs=).
func (d *Device) IsNICSwitchPort() bool {
	return d.Vendor == vendorMellanox && nicSwitchIDs[d.Device]
}

// IsBridge reports whether the function is a PCI-to-PCI bridge (root port or switch port).
func (d *Device) IsBridge() bool { return d.Class>>8 == ClassBridgePCI }

// IsGPU reports an NVIDIA display-class function (vendor 0x10de, class 0x03xxxx).
func (d *Device) IsGPU() bool { return d.Vendor == 0x10de && d.Class>>16 == 0x03 }

// Parent is the BDF of the function above this one, or "" on the root bus.
func (d *Device) Parent() string {
	if len(d.Chain) < 2 {
		return ""
	}
	return d.Chain[len(d.Chain)-2]
}

// PortType is the PCIe device/port type from config space, or -1 if unknown.
func (d *Device) PortType() int {
	if d.Config == nil || d.Config.PCIe == nil {
		return -1
	}
	return d.Config.PCIe.PortType
}

var bdfRE = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)

// IsBDF reports whether s is a lowercase sysfs PCI address (dddd:bb:dd.f).
func IsBDF(s string) bool { return bdfRE.MatchString(s) }

var hostBridgeRE = regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`)

// SplitPath splits a resolved sysfs device path into its host bridge
// directory and the chain of PCI functions below it. Non-PCI components
// between the host bridge and the device are an error: the path is not a
// PCI device path.
func SplitPath(p string) (root string, chain []string, err error) {
	parts := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	hb := -1
	for i, c := range parts {
		if hostBridgeRE.MatchString(c) {
			hb = i
		}
		if IsBDF(c) {
			break
		}
	}
	if hb < 0 {
		return "", nil, fmt.Errorf("sysfs path %q has no host bridge component (pciDDDD:BB)", p)
	}
	root = "/" + strings.Join(parts[:hb+1], "/")
	for _, c := range parts[hb+1:] {
		if !IsBDF(c) {
			return "", nil, fmt.Errorf("sysfs path %q: %q below the host bridge is not a PCI address", p, c)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return "", nil, fmt.Errorf("sysfs path %q names no PCI function below %s", p, root)
	}
	return root, chain, nil
}

// ParseHex reads a sysfs hex attribute ("0x10de") of at most bits bits.
func ParseHex(s string, bits int) (uint64, error) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "0x") && !strings.HasPrefix(t, "0X") {
		return 0, fmt.Errorf("%s is not a 0x-prefixed hex number", clip.Quote(s))
	}
	v, err := strconv.ParseUint(t[2:], 16, bits)
	if err != nil {
		return 0, fmt.Errorf("%s is not a %d-bit hex number", clip.Quote(s), bits)
	}
	return v, nil
}

// ParseNUMA reads numa_node: a node number, or -1 for unknown.
func ParseNUMA(s string) (int, error) {
	t := strings.TrimSpace(s)
	n, err := strconv.Atoi(t)
	if err != nil || n < -1 || n > 4095 {
		return 0, fmt.Errorf("numa_node %s: want -1 or a node number", clip.Quote(s))
	}
	return n, nil
}

// Scan reads every function in /sys/bus/pci/devices. Devices that cannot be
// read are left out and listed in the returned *ScanError, so one broken
// entry does not hide the rest. A missing directory is an error that
// satisfies errors.Is(err, fs.ErrNotExist); a *ScanError never does, even
// when an entry's own error is a missing file (a dangling link), so "no
// sysfs" and "a broken entry" stay apart.
func Scan(r *hostfs.Root) ([]*Device, error) {
	names, err := r.ReadDir(DevicesDir)
	if err != nil {
		return nil, err
	}
	var devs []*Device
	se := &ScanError{}
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // not a kernel entry (e.g. a fixture's .gitkeep)
		}
		d, err := Load(r, n)
		if err != nil {
			var ee *EntryError
			if !errors.As(err, &ee) {
				ee = &EntryError{BDF: n, Err: err}
			}
			se.Entries = append(se.Entries, ee)
			continue
		}
		devs = append(devs, d)
	}
	if len(se.Entries) > 0 {
		return devs, se
	}
	return devs, nil
}

// ScanError lists the PCI functions Scan could not read.
type ScanError struct {
	Entries []*EntryError
}

func (e *ScanError) Error() string {
	s := make([]string, len(e.Entries))
	for i, x := range e.Entries {
		s[i] = x.Error()
	}
	return strings.Join(s, "\n")
}

// EntryError is one PCI function that could not be read, with the identity
// attributes that could be.
type EntryError struct {
	BDF               string
	Vendor            uint16
	Class             uint32
	VendorOK, ClassOK bool // whether Vendor and Class were read
	Err               error
}

func (e *EntryError) Error() string { return e.Err.Error() }
func (e *EntryError) Unwrap() error { return e.Err }

// MaybeGPU reports whether the unreadable function could be an NVIDIA GPU
// (IsGPU): its vendor and class say so, or could not be read. A GPU whose
// vendor file is corrupt must fail the checks that need GPUs, not make them
// skip for "no NVIDIA GPU".
func (e *EntryError) MaybeGPU() bool {
	return (!e.VendorOK || e.Vendor == 0x10de) && (!e.ClassOK || e.Class>>16 == 0x03)
}

// UnreadableGPUs returns the functions in Scan's error that could be NVIDIA
// GPUs, nil if there are none (or err is not a *ScanError).
func UnreadableGPUs(err error) []*EntryError {
	var se *ScanError
	if !errors.As(err, &se) {
		return nil
	}
	var out []*EntryError
	for _, e := range se.Entries {
		if e.MaybeGPU() {
			out = append(out, e)
		}
	}
	return out
}

// Load reads one function by its address.
func Load(r *hostfs.Root, bdf string) (*Device, error) {
	fail := func(err error) (*Device, error) { return nil, &EntryError{BDF: bdf, Err: err} }
	a, err := NormalizeAddr(bdf)
	if err != nil || a != bdf {
		return fail(fmt.Errorf("%s/%s: not a PCI address (want dddd:bb:dd.f)", DevicesDir, clip.Quote(bdf)))
	}
	link := DevicesDir + "/" + bdf
	real, err := r.Resolve(link)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", link, err))
	}
	if fi, err := r.Stat(link); err != nil {
		return fail(fmt.Errorf("%s -> %s: dangling link: %w", link, real, err))
	} else if !fi.IsDir() {
		return fail(fmt.Errorf("%s -> %s: not a directory", link, real))
	}
	d := &Device{BDF: bdf, SysPath: real, NUMANode: -1}
	if d.Root, d.Chain, err = SplitPath(real); err != nil {
		return fail(fmt.Errorf("%s: %w", link, err))
	}
	if last := d.Chain[len(d.Chain)-1]; last != bdf {
		return fail(fmt.Errorf("%s resolves to %s, which names %s", link, real, last))
	}
	attr := func(name string) string { return real + "/" + name }
	read := func(name string) (string, bool, error) {
		s, err := r.ReadString(attr(name))
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		return s, true, nil
	}
	var errs []error
	hexAttr := func(name string, bits int, required bool) (uint64, bool) {
		s, ok, err := read(name)
		if err != nil {
			errs = append(errs, err)
			return 0, false
		}
		if !ok {
			if required {
				errs = append(errs, fmt.Errorf("%s: missing", attr(name)))
			}
			return 0, false
		}
		v, err := ParseHex(s, bits)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", attr(name), err))
			return 0, false
		}
		return v, true
	}
	vendor, vendorOK := hexAttr("vendor", 16, true)
	device, _ := hexAttr("device", 16, true)
	class, classOK := hexAttr("class", 24, true)
	d.Vendor, d.Device, d.Class = uint16(vendor), uint16(device), uint32(class)

	for _, name := range []string{curSpeedFile, maxSpeedFile, curWidthFile, maxWidthFile} {
		s, ok, err := read(name)
		if err != nil {
			errs = append(errs, err)
		} else if !ok {
			continue
		} else if err := d.Link.set(name, s); err != nil && !errors.Is(err, ErrUnknown) {
			errs = append(errs, fmt.Errorf("%s: %w", attr(name), err))
		}
	}

	if s, ok, err := read("numa_node"); err != nil {
		errs = append(errs, err)
	} else if ok {
		if d.NUMANode, err = ParseNUMA(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", attr("numa_node"), err))
			d.NUMANode = -1
		}
	}
	if s, ok, err := read("local_cpulist"); err != nil {
		errs = append(errs, err)
	} else if ok {
		if d.LocalCPUs, err = cpulist.Parse(s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", attr("local_cpulist"), err))
		}
	}
	if t, err := r.ReadLink(attr("driver")); err == nil {
		d.Driver = path.Base(t)
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := readSRIOV(r, real, d); err != nil {
		errs = append(errs, err)
	}
	if _, err := r.Lstat(attr("iommu_group")); err == nil {
		t, err := r.ReadLink(attr("iommu_group"))
		if err != nil {
			errs = append(errs, err)
		} else {
			d.IOMMUGroup = path.Base(t)
			g, err := r.Resolve(attr("iommu_group"))
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", attr("iommu_group"), err))
			case !r.Exists(g):
				errs = append(errs, fmt.Errorf("%s -> %s: dangling link", attr("iommu_group"), t))
			default:
				if typ, err := r.ReadString(g + "/type"); err == nil {
					if typ == "" {
						errs = append(errs, fmt.Errorf("%s/type: empty", g))
					}
					d.IOMMUType = typ
				} else if !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	if b, err := r.ReadFile(attr("config")); err != nil {
		d.ConfigErr = err
	} else {
		if d.IsVF() && len(b) >= 4 && binary.LittleEndian.Uint32(b) == 0xffffffff {
			// A VF's Vendor ID and Device ID registers read all ones
			// (SR-IOV); sysfs has the PF's vendor and the VF Device ID of
			// the PF's SR-IOV capability. Parse with those.
			b = slices.Clone(b)
			binary.LittleEndian.PutUint16(b[0:], d.Vendor)
			binary.LittleEndian.PutUint16(b[2:], d.Device)
		}
		d.Config, d.ConfigErr = ParseConfig(b)
		if d.ConfigErr != nil {
			d.ConfigErr = fmt.Errorf("%s: %w", attr("config"), d.ConfigErr)
		}
		if d.Config != nil && d.ConfigErr == nil && (d.Config.VendorID != d.Vendor || d.Config.DeviceID != d.Device) {
			d.ConfigErr = fmt.Errorf("%s: config space says %04x:%04x but sysfs says %04x:%04x",
				attr("config"), d.Config.VendorID, d.Config.DeviceID, d.Vendor, d.Device)
		}
	}
	if len(errs) > 0 {
		return nil, &EntryError{BDF: bdf, Vendor: d.Vendor, Class: d.Class, VendorOK: vendorOK, ClassOK: classOK, Err: errors.Join(errs...)}
	}
	return d, nil
}

// String is "0000:3b:00.0 [10de:2335]".
func (d *Device) String() string {
	return fmt.Sprintf("%s [%04x:%04x]", d.BDF, d.Vendor, d.Device)
}

// LinkString is "32 GT/s x16 (max 32 GT/s x16)".
func (d *Device) LinkString() string {
	return fmt.Sprintf("%s x%d (max %s x%d)", speedStr(d.CurGTs), d.CurWidth, speedStr(d.MaxGTs), d.MaxWidth)
}

func speedStr(v float64) string {
	if v == 0 {
		return "unknown speed"
	}
	return strconv.FormatFloat(v, 'g', -1, 64) + " GT/s"
}

// readSRIOV reads the physfn and virtfnN links of the function at dir.
func readSRIOV(r *hostfs.Root, dir string, d *Device) error {
	var errs []error
	target := func(name string) (string, error) {
		l, err := r.ReadLink(dir + "/" + name)
		if err != nil {
			return "", err
		}
		if b := path.Base(l); IsBDF(b) {
			return b, nil
		}
		return "", fmt.Errorf("%s/%s -> %s: not a PCI function", dir, name, clip.Quote(l))
	}
	if _, err := r.Lstat(dir + "/physfn"); err == nil {
		if d.PhysFn, err = target("physfn"); err != nil {
			errs = append(errs, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	names, err := r.ReadDir(dir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	type vf struct {
		n   int
		bdf string
	}
	var vfs []vf
	for _, n := range names {
		num, ok := strings.CutPrefix(n, "virtfn")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 {
			errs = append(errs, fmt.Errorf("%s/%s: not a virtfn<N> link", dir, clip.Quote(n)))
			continue
		}
		b, err := target(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		vfs = append(vfs, vf{i, b})
	}
	sort.Slice(vfs, func(i, j int) bool { return vfs[i].n < vfs[j].n })
	for _, v := range vfs {
		d.VirtFns = append(d.VirtFns, v.bdf)
	}
	return errors.Join(errs...)
}
