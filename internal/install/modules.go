package install

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// moduleEvidence names sysfs/dev paths that exist only while a module's
// code runs; they show built-in modules that have no /sys/module entry (a
// built-in module without parameters has none).
var moduleEvidence = map[string][]string{
	"ib_core":   {"/sys/class/infiniband"},
	"ib_uverbs": {"/sys/class/infiniband_verbs/abi_version"},
	"rdma_ucm":  {"/sys/class/misc/rdma_cm", "/dev/infiniband/rdma_cm"},
}

// ibDriverFor maps a NIC's PCI driver to the module that registers its
// RDMA device.
var ibDriverFor = map[string]string{
	"mlx5_core": "mlx5_ib", "mlx4_core": "mlx4_ib", "bnxt_en": "bnxt_re", "ice": "irdma",
	"qede": "qedr", "efa": "efa",
}

// ModuleState is a module's status plus the sysfs evidence that settles
// it: present is true when it is loaded or its code visibly runs.
func ModuleState(root *hostfs.Root, km *kmod.Host, name string) (present bool, state string, err error) {
	st, err := km.Lookup(name)
	if err != nil {
		return false, "", verdict.NotJudgedf("", "kernel module %s: %v", name, err)
	}
	if st.Loaded() {
		return true, st.String(), nil
	}
	for _, p := range moduleEvidence[name] {
		if root.Exists(p) {
			return true, fmt.Sprintf("present (%s exists; built in or loaded)", p), nil
		}
	}
	return false, st.String(), nil
}

// RDMANICs are PCI functions that should carry an RDMA device: InfiniBand
// controllers (class 0x0207) and NVIDIA/Mellanox (0x15b3) network
// functions. No PCI directory is no NICs; a malformed attribute is not
// judged.
func RDMANICs(root *hostfs.Root) ([]*pci.Device, error) {
	devs, err := pci.Scan(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, verdict.NotJudgedf("", "PCI devices: %v", err)
	}
	var out []*pci.Device
	for _, d := range devs {
		if d.Class>>8 == 0x0207 || d.Vendor == 0x15b3 && d.Class>>16 == 0x02 {
			out = append(out, d)
		}
	}
	return out, nil
}

// slot is the PCI address without its function: 0000:3b:00.
func slot(addr string) string {
	if i := strings.LastIndexByte(addr, '.'); i > 0 {
		return addr[:i]
	}
	return addr
}

// Modules is INST-10: the RDMA kernel modules are loaded, and every
// RDMA-capable NIC has its RDMA driver. classExists says whether
// /sys/class/infiniband exists.
func Modules(root *hostfs.Root, km *kmod.Host, devs []*rdmadev.Device, classExists bool) Judged {
	var j Judged
	nics, err := RDMANICs(root)
	if err != nil {
		j.add(verdict.Of(err))
		return j
	}
	state := func(m string) (bool, string, bool) {
		ok, s, err := ModuleState(root, km, m)
		if err != nil {
			j.add(verdict.Of(err))
			return false, "", false
		}
		return ok, s, true
	}
	coreOK, coreState, read := state("ib_core")
	if !read {
		return j
	}
	if len(devs) == 0 && len(nics) == 0 && !coreOK {
		j.add(verdict.Absentf(reqs.RemedyNoRDMAStack, "no RDMA device (%s %s), no InfiniBand or NVIDIA/Mellanox NIC in %s, and ib_core %s (looked in %s)",
			root.Host("/sys/class/infiniband"), emptyOrMissing(classExists), root.Host(pci.DevicesDir), coreState, km.Sources()))
		return j
	}
	for _, m := range []string{"ib_core", "ib_uverbs", "rdma_ucm"} {
		ok, st, read := state(m)
		switch {
		case !read:
			return j
		case !ok:
			f := verdict.Failf("modprobe "+m+" (persist it in /etc/modules-load.d/rdma.conf; MLNX_OFED: /etc/init.d/openibd restart)",
				"kernel module %s is not loaded (status %q; looked in %s and %s)", m, st, km.Sources(), strings.Join(moduleEvidence[m], ", "))
			j.add(f)
		default:
			j.info("%s: %s", m, st)
		}
	}
	covered := map[string]bool{}
	for _, d := range devs {
		if d.PCI != "" {
			covered[d.PCI] = true
			covered[slot(d.PCI)] = true
		}
		if d.DriverInferred {
			j.info("RDMA device %s: software device, driver %s (inferred from its name), parent %q", d.Name, d.Driver, d.Parent)
		} else {
			j.info("RDMA device %s: driver %q, PCI %s", d.Name, d.Driver, d.PCI)
		}
		if d.PCI == "" {
			// Software devices: their module is what made the device
			// exist, but say so when the module list disagrees.
			if ok, st, read := state(d.Driver); !read {
				return j
			} else if !ok {
				j.info("software RDMA device %s: module %s %s", d.Name, d.Driver, st)
			}
		}
	}
	// A NIC whose PCI driver is bound but that has no RDMA device lacks
	// its RDMA driver (mlx5_core bound, mlx5_ib not loaded). Functions of
	// one card share an RDMA device under bonding/multiport, hence the
	// slot match.
	for _, n := range nics {
		if covered[n.BDF] || covered[slot(n.BDF)] {
			continue
		}
		if f := judgeUncovered(n, func(m string) string { _, s, _ := ModuleState(root, km, m); return s }); f != nil {
			j.add(f)
		} else {
			j.info("NIC %s is bound to vfio-pci (passed through): no RDMA device expected here", n.BDF)
		}
	}
	return j
}

// judgeUncovered judges a RDMA-capable NIC with no RDMA device; state
// reads a module's state for the message. nil: passed through (vfio-pci).
func judgeUncovered(n *pci.Device, state func(string) string) *verdict.Finding {
	var f *verdict.Finding
	switch ib, ok := ibDriverFor[n.Driver]; {
	case n.Driver == "":
		f = verdict.Failf("modprobe mlx5_core (or the NIC vendor's driver); check dmesg for probe errors",
			"RDMA-capable NIC %s (vendor 0x%04x, class 0x%06x) has no driver bound", n.BDF, n.Vendor, n.Class)
	case n.Driver == "vfio-pci":
		return nil
	case ok:
		f = verdict.Failf("modprobe "+ib+" (MLNX_OFED: /etc/init.d/openibd restart)",
			"NIC %s (driver %s) has no RDMA device in /sys/class/infiniband: its RDMA driver %s is not loaded (%s)", n.BDF, n.Driver, ib, state(ib))
	default:
		f = verdict.Failf("load the RDMA driver for "+n.Driver+" and check dmesg",
			"NIC %s (driver %s) has no RDMA device in /sys/class/infiniband", n.BDF, n.Driver)
	}
	f.Device = n.BDF
	return f
}
