// Package virt says whether the host is a virtual machine (a guest) and
// which signs said so, read through hostfs (GDR_HOST_ROOT):
//
//   - DMI (/sys/class/dmi/id): sys_vendor, product_name, product_version,
//     board_vendor, bios_vendor, chassis_vendor matched against the vendor
//     strings hypervisors and clouds write (the table below follows systemd's
//     src/basic/virt.c detect_vm_dmi_vendor; Microsoft counts only with
//     product_name "Virtual Machine" or product_version "Hyper-V", because
//     Microsoft also makes laptops);
//   - the CPUID hypervisor bit, which the kernel shows as the "hypervisor"
//     flag in /proc/cpuinfo (x86 only);
//   - /sys/hypervisor/type (Xen, and some other paravirtual guests);
//   - /sys/bus/vmbus/devices (Hyper-V and Azure: VMBus is the guest's bus).
//
// Any one sign makes a guest. A file that is absent is no sign; the signs
// that were found are listed as "file: value" so that a report says why.
package virt

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gdrconf/gdrconf/internal/dmi"
	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Where the signs are read.
const (
	DMIDir        = dmi.Dir
	CPUInfo       = "/proc/cpuinfo"
	HypervisorDir = "/sys/hypervisor/type"
	VMBusDir      = "/sys/bus/vmbus/devices"
	maxCPUInfo    = 16 << 20
)

// Guest is what Detect found.
type Guest struct {
	// VM: at least one sign says this is a guest.
	VM bool
	// Hypervisor names the hypervisor or cloud when a sign tells it
	// ("Microsoft Hyper-V (Azure)", "KVM", "Amazon EC2"); "" when only the
	// CPUID flag said so.
	Hypervisor string
	// Signs are the evidence, "file: value", in the order read.
	Signs []string
	// Cloud names the cloud when DMI tells it ("Azure", "Google Cloud",
	// "AWS", "Oracle Cloud"); "" otherwise.
	Cloud string
}

// String is "VM (Microsoft Hyper-V (Azure): sys_vendor ..., ...)" or "bare metal".
func (g Guest) String() string {
	if !g.VM {
		return "not a VM (no DMI, CPUID or sysfs sign of a hypervisor)"
	}
	h := g.Hypervisor
	if h == "" {
		h = "unknown hypervisor"
	}
	return "VM (" + h + "; signs: " + strings.Join(g.Signs, "; ") + ")"
}

// dmiVendor is one DMI match: the value starts with prefix (case-sensitive,
// as systemd matches), in any of the files.
type dmiVendor struct {
	prefix, hypervisor, cloud string
}

// dmiVendors follows systemd's detect_vm_dmi_vendor table (src/basic/virt.c),
// with the clouds that run GPU VMs named.
var dmiVendors = []dmiVendor{
	{"KVM", "KVM", ""},
	{"OpenStack", "KVM (OpenStack)", ""},
	{"KubeVirt", "KVM (KubeVirt)", ""},
	{"Amazon EC2", "Amazon EC2 (Nitro)", "AWS"},
	{"QEMU", "QEMU", ""},
	{"VMware", "VMware", ""},
	{"VMW", "VMware", ""},
	{"innotek GmbH", "Oracle VirtualBox", ""},
	{"VirtualBox", "Oracle VirtualBox", ""},
	{"Xen", "Xen", ""},
	{"Bochs", "Bochs", ""},
	{"Parallels", "Parallels", ""},
	{"BHYVE", "bhyve", ""},
	{"Google Compute Engine", "KVM (Google Compute Engine)", "Google Cloud"},
	{"Google", "KVM (Google Compute Engine)", "Google Cloud"},
	{"OracleCloud", "KVM (Oracle Cloud)", "Oracle Cloud"},
	{"Apple Virtualization", "Apple Virtualization", ""},
}

var dmiFiles = []string{"product_name", "sys_vendor", "board_vendor", "bios_vendor", "chassis_vendor"}

// Detect reads the signs. Unreadable files other than absent ones are
// returned as an error with the signs that could be read.
func Detect(r *hostfs.Root) (Guest, error) {
	var g Guest
	var errs []error
	read := func(p string) string {
		s, err := r.ReadString(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return ""
		}
		return strings.TrimSpace(s)
	}
	sign := func(s, hyp, cloud string) {
		g.VM = true
		g.Signs = append(g.Signs, s)
		if g.Hypervisor == "" {
			g.Hypervisor = hyp
		}
		if g.Cloud == "" {
			g.Cloud = cloud
		}
	}
	dmi := map[string]string{}
	for _, f := range append(dmiFiles, "product_version") {
		dmi[f] = read(DMIDir + "/" + f)
	}
	// Microsoft: only Hyper-V's own product strings (systemd matches
	// product_version "Hyper-V"; Azure writes product_name "Virtual Machine").
	if dmi["sys_vendor"] == "Microsoft Corporation" && (dmi["product_name"] == "Virtual Machine" || strings.HasPrefix(dmi["product_version"], "Hyper-V")) {
		cloud := ""
		// Azure's VMs carry this chassis asset tag (Azure's documentation
		// and cloud-init's DataSourceAzure use it to detect Azure).
		if read(DMIDir+"/chassis_asset_tag") == "7783-7084-3265-9085-8269-3286-77" {
			cloud = "Azure"
		}
		hyp := "Microsoft Hyper-V"
		if cloud != "" {
			hyp += " (Azure)"
		}
		sign(DMIDir+"/sys_vendor: "+dmi["sys_vendor"]+", product_name: "+dmi["product_name"], hyp, cloud)
	}
	for _, f := range dmiFiles {
		v := dmi[f]
		if v == "" {
			continue
		}
		for _, m := range dmiVendors {
			if strings.HasPrefix(v, m.prefix) {
				sign(DMIDir+"/"+f+": "+v, m.hypervisor, m.cloud)
				break
			}
		}
	}
	// /proc/cpuinfo grows with the CPU count (about 1.5 KiB per CPU on
	// current x86): beyond hostfs.MaxFile on large hosts.
	if b, err := r.ReadFileMax(CPUInfo, maxCPUInfo); err == nil {
		if cpuinfoHypervisor(string(b)) {
			sign(CPUInfo+": flag hypervisor (CPUID leaf 1 ECX bit 31)", "", "")
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if t := read(HypervisorDir); t != "" {
		sign(HypervisorDir+": "+t, t, "")
	}
	if ents, err := r.ReadDir(VMBusDir); err == nil {
		n := 0
		for _, e := range ents {
			if !strings.HasPrefix(e, ".") {
				n++
			}
		}
		if n > 0 {
			sign(VMBusDir+": "+plural(n, "VMBus device"), "Microsoft Hyper-V", "")
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return g, errors.Join(errs...)
}

// cpuinfoHypervisor says whether any "flags" line lists "hypervisor".
func cpuinfoHypervisor(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "flags" {
			continue
		}
		for _, f := range strings.Fields(v) {
			if f == "hypervisor" {
				return true
			}
		}
	}
	return false
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
