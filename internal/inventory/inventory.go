// Package inventory records what a host is made of, so a failure can name
// the part to replace and a vendor can check it is theirs: per GPU its UUID,
// serial, board part number, VBIOS and InfoROM; per NIC its board id (PSID),
// firmware, node GUID, part number and serial (PCI VPD); the host's DMI
// product, serial and BIOS; and the versions of the software between them
// (kernel, NVIDIA driver, RDMA modules, rdma-core, MLNX_OFED).
//
// It reads through the host root only, with no cgo and no host tools, so
// the report binary (CGO_ENABLED=0) collects it on every host. The values
// only NVML knows (GPU serial, board part number, InfoROM) come from the
// GPU-16 test's attributes and are merged in by the report (Host.MergeGPU).
// A value that was not read is absent, never "unknown" or zero; Notes say
// what could not be read and why (root-only files).
package inventory

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/dmi"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// Host is one host's inventory (host.json "inventory").
type Host struct {
	DMI      *dmi.Info `json:"dmi,omitempty"`
	GPUs     []GPU     `json:"gpus,omitempty"`
	NICs     []NIC     `json:"nics,omitempty"`
	Software Software  `json:"software"`
	// Notes name what could not be read and why ("PCI VPD of 0000:3c:00.0:
	// not readable (the kernel lets only root read it)").
	Notes []string `json:"notes,omitempty"`
}

// GPU is one GPU's identity. Source says where the values came from:
// "procfs" (/proc/driver/nvidia/gpus), "nvml" (GPU-16), or both.
type GPU struct {
	BDF         string `json:"bdf"`
	Model       string `json:"model,omitempty"`
	UUID        string `json:"uuid,omitempty"`
	Serial      string `json:"serial,omitempty"`
	PartNumber  string `json:"board_part_number,omitempty"`
	VBIOS       string `json:"vbios,omitempty"`
	InfoROM     string `json:"inforom_image,omitempty"`
	InfoROMOEM  string `json:"inforom_oem,omitempty"`
	GSPFirmware string `json:"gsp_firmware,omitempty"`
	ModuleID    string `json:"module_id,omitempty"` // HGX baseboard position (NVML module id), 1-based
	// NVLinkDomain is the multi-node NVLink domain NVML's fabric info
	// names ("<cluster UUID>/<clique>", GB200/GB300 NVL72); absent on
	// GPUs in none.
	NVLinkDomain string `json:"nvlink_domain,omitempty"`
	Source       string `json:"source,omitempty"`
}

// NIC is one RDMA device's identity.
type NIC struct {
	Name       string `json:"name"`
	PCI        string `json:"pci,omitempty"`
	Driver     string `json:"driver,omitempty"`
	Software   bool   `json:"software,omitempty"`
	HCAType    string `json:"hca_type,omitempty"`
	BoardID    string `json:"board_id,omitempty"` // PSID on NVIDIA/Mellanox cards
	Firmware   string `json:"firmware,omitempty"`
	NodeGUID   string `json:"node_guid,omitempty"`
	PartNumber string `json:"part_number,omitempty"` // VPD PN
	Serial     string `json:"serial,omitempty"`      // VPD SN
	EC         string `json:"ec,omitempty"`          // VPD EC: engineering change level (board revision)
	Product    string `json:"product,omitempty"`     // VPD identifier string
}

// Software is the versions of what runs between the tests and the parts.
type Software struct {
	Kernel       string `json:"kernel,omitempty"`
	NvidiaDriver string `json:"nvidia_driver,omitempty"`
	NvidiaModule string `json:"nvidia_module,omitempty"` // open or proprietary
	// Modules maps a loaded module to its version ("version" file, which
	// MLNX_OFED and the NVIDIA modules set) or, for in-tree modules that
	// carry none, "srcversion <hash>", which still tells two builds apart.
	Modules map[string]string `json:"modules,omitempty"`
	// Libibverbs is the version in the library's file name
	// (libibverbs.so.1.14.44.0); RDMACore the rdma-core release it names
	// (44.0): rdma-core builds every library as <soname>.<abi>.<release>.
	Libibverbs string `json:"libibverbs,omitempty"`
	RDMACore   string `json:"rdma_core,omitempty"`
	// RDMACorePackage and OFED come from INST-09 (dpkg/rpm, ofed_info -s).
	RDMACorePackage string `json:"rdma_core_package,omitempty"`
	OFED            string `json:"ofed,omitempty"`
}

// Modules are the kernel modules whose versions the inventory records: the
// GPU driver and its peer-memory bridge, the RDMA core, and the NIC drivers
// GPUDirect setups use.
var Modules = []string{
	"nvidia", "nvidia_peermem", "nv_peer_mem", "ib_core", "ib_uverbs", "rdma_ucm",
	"mlx5_core", "mlx5_ib", "mlx_compat", "rdma_rxe", "siw", "bnxt_re", "irdma", "efa", "mana_ib",
}

// LibDirs are where libibverbs.so.1 is looked for.
var LibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib64", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"}

// Collect reads the inventory through root. It never fails: what cannot be
// read is absent and named in Notes.
func Collect(root *hostfs.Root) Host {
	var h Host
	note := func(format string, a ...any) { h.Notes = append(h.Notes, fmt.Sprintf(format, a...)) }
	if d, err := dmi.Read(root); err != nil {
		note("DMI (%s): %v", dmi.Dir, err)
		h.DMI = &d
	} else if !d.Empty() {
		h.DMI = &d
	}
	if h.DMI != nil && len(h.DMI.Unreadable) > 0 {
		note("DMI %s: not readable (root only)", strings.Join(h.DMI.Unreadable, ", "))
	}
	gpus, err := nvdriver.ReadGPUs(root)
	if err != nil {
		note("NVIDIA GPU information (%s): %v", nvdriver.GPUsDir, err)
	}
	for _, g := range gpus {
		h.GPUs = append(h.GPUs, GPU{BDF: g.BDF, Model: g.Model, UUID: g.UUID, VBIOS: g.VBIOS, GSPFirmware: g.Firmware, Source: "procfs"})
	}
	devs, err := rdmadev.Scan(root)
	if err != nil {
		note("RDMA devices (%s): %v", rdmadev.ClassDir, err)
	}
	vpds := map[string]*pci.VPD{}
	for _, d := range devs {
		n := NIC{Name: d.Name, PCI: d.PCI, Driver: d.Driver, Software: d.Software, HCAType: d.HCAType,
			BoardID: d.BoardID, Firmware: d.FWVersion, NodeGUID: d.NodeGUID}
		if d.PCI != "" {
			v, ok := vpds[d.PCI]
			if !ok {
				var err error
				v, err = vpdWithin(root, d.PCI, VPDTimeout)
				switch {
				case errors.Is(err, pci.ErrNoVPD):
				case err != nil:
					note("PCI VPD of %s (%s): %v", d.PCI, d.Name, err)
				}
				if v != nil && !v.ChecksumOK && err == nil {
					note("PCI VPD of %s (%s): checksum (RV) does not sum to zero: the card's VPD is damaged", d.PCI, d.Name)
				}
				vpds[d.PCI] = v
			}
			if v != nil {
				n.PartNumber, n.Serial, n.EC, n.Product = v.PartNumber(), v.Serial(), v.EC(), v.Name
			}
		}
		h.NICs = append(h.NICs, n)
	}
	sort.Slice(h.NICs, func(i, j int) bool { return h.NICs[i].Name < h.NICs[j].Name })
	h.Software = software(root, note)
	return h
}

func software(root *hostfs.Root, note func(string, ...any)) Software {
	var s Software
	if v, err := root.ReadString(kmod.ReleaseFile); err == nil {
		s.Kernel = v
	}
	if b, err := root.ReadFile(nvdriver.VersionFile); err == nil {
		if info, err := nvdriver.ParseVersionFile(b); err == nil {
			s.NvidiaDriver, s.NvidiaModule = info.Version, info.Flavour()
		} else {
			note("%s: %v", nvdriver.VersionFile, err)
		}
	}
	if km, err := kmod.New(root); err != nil {
		note("kernel modules: %v", err)
	} else {
		for _, m := range Modules {
			st, err := km.Lookup(m)
			if err != nil || !st.Loaded() {
				continue
			}
			v := st.Version
			if v == "" && st.SrcVersion != "" {
				v = "srcversion " + st.SrcVersion
			}
			if v == "" {
				v = "loaded" // built in or without version files: present, version not published
			}
			if s.Modules == nil {
				s.Modules = map[string]string{}
			}
			s.Modules[m] = v
		}
	}
	s.Libibverbs, s.RDMACore = libibverbs(root)
	return s
}

// VPDTimeout bounds one function's VPD read: the kernel reads VPD through
// config space a few bytes at a time with a wait per step, and some devices
// answer slowly or never; the inventory must not hold the report up.
const VPDTimeout = 5 * time.Second

// readVPD is pci.ReadVPD; tests replace it.
var readVPD = pci.ReadVPD

// vpdWithin reads bdf's VPD, giving up after d (the read goes on in the
// background; its result is dropped).
func vpdWithin(root *hostfs.Root, bdf string, d time.Duration) (*pci.VPD, error) {
	type res struct {
		v   *pci.VPD
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := readVPD(root, bdf)
		ch <- res{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(d):
		return nil, fmt.Errorf("VPD read did not finish within %v", d)
	}
}

var releaseRE = regexp.MustCompile(`^\d+\.\d+$`)

var libVersion = regexp.MustCompile(`^libibverbs\.so\.(1\.\d+\.(\d+\.\d+|[0-9A-Za-z.]+))$`)

// libibverbs finds the file libibverbs.so.1 resolves to and the versions in
// its name: "1.14.44.0" and rdma-core "44.0" on Debian 12's rdma-core 44.
// A name whose release part is not <major>.<minor> (vendor builds) gives
// the file version and no rdma-core release.
func libibverbs(root *hostfs.Root) (file, release string) {
	for _, d := range LibDirs {
		p := d + "/libibverbs.so.1"
		if !root.Exists(p) {
			continue
		}
		real, err := root.Resolve(p)
		if err != nil {
			continue
		}
		m := libVersion.FindStringSubmatch(path.Base(real))
		if m == nil {
			continue
		}
		file = m[1]
		if rel := m[2]; releaseRE.MatchString(rel) {
			release = rel
		}
		return file, release
	}
	return "", ""
}

// MergeGPU adds what NVML said about the GPU at bdf (GPU-16's attributes)
// to the inventory, adding the GPU when procfs did not list it.
func (h *Host) MergeGPU(g GPU) {
	for i := range h.GPUs {
		if h.GPUs[i].BDF != g.BDF {
			continue
		}
		e := &h.GPUs[i]
		for _, f := range []struct {
			dst *string
			v   string
		}{
			{&e.Model, g.Model}, {&e.UUID, g.UUID}, {&e.Serial, g.Serial}, {&e.PartNumber, g.PartNumber},
			{&e.VBIOS, g.VBIOS}, {&e.InfoROM, g.InfoROM}, {&e.InfoROMOEM, g.InfoROMOEM}, {&e.ModuleID, g.ModuleID},
			{&e.NVLinkDomain, g.NVLinkDomain},
		} {
			if *f.dst == "" {
				*f.dst = f.v
			}
		}
		if !strings.Contains(e.Source, "nvml") {
			e.Source = strings.TrimPrefix(e.Source+"+nvml", "+")
		}
		return
	}
	g.Source = "nvml"
	h.GPUs = append(h.GPUs, g)
	sort.Slice(h.GPUs, func(i, j int) bool { return h.GPUs[i].BDF < h.GPUs[j].BDF })
}

// Empty reports an inventory with nothing in it.
func (h *Host) Empty() bool {
	return h.DMI == nil && len(h.GPUs) == 0 && len(h.NICs) == 0 && h.Software.Kernel == "" &&
		h.Software.NvidiaDriver == "" && len(h.Software.Modules) == 0 && h.Software.Libibverbs == ""
}
