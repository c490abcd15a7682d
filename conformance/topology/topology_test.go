package topology

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/nvsmi"
	"github.com/gdrconf/gdrconf/internal/pathclass"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// TOPO-01: inventory and one subtest per (GPU, NIC) pair with its path class.
func TestTOPO01Inventory(t *testing.T) {
	testenv.Req(t, "TOPO-01")
	h := loadHost(t)
	h.scanErrors(t)
	gpus := h.needGPUs(t)
	nics := h.needNICs(t)
	testenv.Attr(t, "gpus", bdfs(gpus))
	testenv.Attr(t, "nics", nicNames(nics))
	for _, g := range gpus {
		for _, n := range nics {
			t.Run(g.BDF+"-"+n.Name, func(t *testing.T) {
				testenv.Req(t, "TOPO-01")
				testenv.Attr(t, "gpu", g.BDF)
				testenv.Attr(t, "nic", n.Name)
				testenv.Attr(t, "gpu_numa", g.NUMANode)
				if n.Software {
					// rxe/siw: no PCI device, so no path class and no NUMA node.
					testenv.Attr(t, "nic_kind", "software")
					testenv.Attr(t, "nic_parent", n.Parent)
					testenv.Attr(t, "nic_numa", -1)
					t.Logf("%s is a software RDMA device on netdev %s: no PCIe path to %s", n.Name, n.Parent, g.BDF)
					return
				}
				nd := h.ix.Device(n.PCI)
				if nd == nil {
					testenv.Failf(t, "check the driver of "+n.Name+" and "+pci.DevicesDir,
						"%s/%s/device points to PCI function %s, which is not in %s", "/sys/class/infiniband", n.Name, n.PCI, pci.DevicesDir)
				}
				testenv.Attr(t, "nic_pci", n.PCI)
				testenv.Attr(t, "nic_numa", nd.NUMANode)
				p, err := h.ix.Classify(g.BDF, n.PCI)
				if err != nil {
					testenv.Failf(t, "check "+pci.DevicesDir, "cannot classify %s <-> %s (%s): %v", g.BDF, n.Name, n.PCI, err)
				}
				testenv.Attr(t, "path", p.Class.String())
				testenv.Attr(t, "switches", p.Switches)
				t.Logf("%s <-> %s (%s): %s, %d switch(es), bridges [%s], NUMA %d/%d",
					g.BDF, n.Name, n.PCI, p.Class, p.Switches, strings.Join(p.Bridges, " "), g.NUMANode, nd.NUMANode)
			})
		}
	}
}

// TOPO-02: each GPU's nearest NIC is within GDR_MAX_PATH.
func TestTOPO02NearestNIC(t *testing.T) {
	testenv.Req(t, "TOPO-02")
	h := loadHost(t)
	gpus := h.needGPUs(t)
	nics := h.needPCINICs(t)
	limit := testenv.Config(t).MaxPath
	testenv.Attr(t, "max_path", limit.String())
	for _, g := range gpus {
		t.Run(g.BDF, func(t *testing.T) {
			testenv.Req(t, "TOPO-02")
			c := h.nearest(t, g, nics)
			testenv.Attr(t, "gpu", g.BDF)
			testenv.Attr(t, "nic", c.NIC)
			testenv.Attr(t, "path", c.Path.Class.String())
			testenv.Attr(t, "gpu_numa", c.Path.NUMAA)
			testenv.Attr(t, "nic_numa", c.Path.NUMAB)
			if c.Path.Class.FartherThan(limit) {
				testenv.Errorf(t, fmt.Sprintf("put the GPU and an RDMA NIC under one PCIe switch (PIX/PXB), use a NIC on the GPU's own switch or socket, or set GDR_MAX_PATH=%s if this topology is intended", c.Path.Class),
					"GPU %s (NUMA node %d): nearest RDMA NIC %s (%s, NUMA node %d) is %s, farther than GDR_MAX_PATH=%s; GPUDirect RDMA through the %s is slow or unsupported",
					g.BDF, c.Path.NUMAA, c.NIC, c.PCI, c.Path.NUMAB, c.Path.Class, limit, through(c.Path.Class))
			}
		})
	}
}

func through(c pathclass.Class) string {
	switch c {
	case pathclass.PHB:
		return "CPU's host bridge"
	case pathclass.NODE:
		return "interconnect between host bridges"
	case pathclass.SYS:
		return "inter-socket link"
	}
	return "PCIe fabric"
}

// TOPO-03: ACS redirect is off on the switch ports between each GPU and its
// nearest NIC. Root ports are not checked: traffic between root ports goes
// through the root complex whatever their ACS says, so only switch ports
// decide whether P2P stays below the switch.
func TestTOPO03ACS(t *testing.T) {
	testenv.Req(t, "TOPO-03")
	h := loadHost(t)
	gpus := h.needGPUs(t)
	nics := h.needPCINICs(t)
	for _, g := range gpus {
		t.Run(g.BDF, func(t *testing.T) {
			testenv.Req(t, "TOPO-03")
			c := h.nearest(t, g, nics)
			testenv.Attr(t, "gpu", g.BDF)
			testenv.Attr(t, "nic", c.NIC)
			testenv.Attr(t, "path", c.Path.Class.String())
			var unreadable, checked []string
			for _, b := range c.Path.Bridges {
				pt := h.ix.PortType(b)
				if pt != pci.TypeUpstream && pt != pci.TypeDownstream {
					continue
				}
				d := h.ix.Device(b)
				switch {
				case d == nil:
					testenv.Errorf(t, "check "+pci.DevicesDir, "bridge %s on the path %s <-> %s is not in %s", b, g.BDF, c.NIC, pci.DevicesDir)
					continue
				case errors.Is(d.ConfigErr, pci.ErrNeedRoot):
					unreadable = append(unreadable, b)
					continue
				case d.Config == nil || d.ConfigErr != nil:
					testenv.Errorf(t, "check the bridge with lspci -vvv -s "+b, "bridge %s: config space unusable: %v", b, d.ConfigErr)
					continue
				}
				checked = append(checked, b)
				if d.Config.ACS == nil {
					continue // no ACS capability: nothing redirects
				}
				acs := d.Config.ACS
				testenv.Attr(t, "acs_"+b, pci.ACSBits(acs.Ctrl))
				if bl := acs.Blocking(); bl != 0 {
					testenv.Errorf(t,
						fmt.Sprintf("setpci -s %s ECAP_ACS+0x6.w=0000 (as root; lasts until reboot), and disable ACS for the switch in the BIOS or with a boot-time script for a lasting fix", b),
						"%s %s between GPU %s and NIC %s has ACS %s enabled (control 0x%04x: %s): peer-to-peer traffic is redirected to the root complex",
						pci.PortTypeName(pt), b, g.BDF, c.NIC, pci.EnabledNames(bl), acs.Ctrl, pci.ACSBits(acs.Ctrl))
				}
			}
			testenv.Attr(t, "acs_checked", strings.Join(checked, " "))
			if len(unreadable) > 0 {
				testenv.Absent(t, "ACS of %s not checked: %s: %s is readable only as root (run the suite as root)",
					strings.Join(unreadable, ", "), pci.ErrNeedRoot, pci.DevicesDir+"/"+unreadable[0]+"/config")
			}
		})
	}
}

// linkPartner is the other end of the link whose state d's sysfs link files
// describe: the port above for endpoints and upstream ports, the function
// below (on this path) for root and downstream ports.
func linkPartner(ix *topo.Index, d *pci.Device, chains ...[]string) *pci.Device {
	switch ix.PortType(d.BDF) {
	case pci.TypeRootPort, pci.TypeDownstream:
		for _, ch := range chains {
			for i, b := range ch {
				if b == d.BDF && i+1 < len(ch) {
					return ix.Device(ch[i+1])
				}
			}
		}
		return nil
	}
	return ix.Device(d.Parent())
}

// TOPO-04: links are trained to what both ends support.
func TestTOPO04LinkTraining(t *testing.T) {
	testenv.Req(t, "TOPO-04")
	h := loadHost(t)
	gpus := h.needGPUs(t)
	var nics map[string]string
	if len(h.pciNICs) > 0 {
		nics = h.needPCINICs(t)
	}
	for _, g := range gpus {
		t.Run(g.BDF, func(t *testing.T) {
			testenv.Req(t, "TOPO-04")
			testenv.Attr(t, "gpu", g.BDF)
			devs := []*pci.Device{g}
			chains := [][]string{g.Chain}
			if len(nics) > 0 {
				c := h.nearest(t, g, nics)
				testenv.Attr(t, "nic", c.NIC)
				n := h.ix.Device(c.PCI)
				chains = append(chains, n.Chain)
				devs = append(devs, n)
				for _, b := range c.Path.Bridges {
					if d := h.ix.Device(b); d != nil {
						devs = append(devs, d)
					}
				}
			} else {
				t.Logf("no PCI RDMA NIC: checking the GPU's own link only")
			}
			for _, d := range devs {
				checkLink(t, h.ix, d, g, chains)
			}
		})
	}
}

func checkLink(t *testing.T, ix *topo.Index, d, gpu *pci.Device, chains [][]string) {
	t.Helper()
	if d.MaxSpeed == 0 || d.MaxWidth == 0 {
		t.Logf("%s: no link speed/width in sysfs (virtual or integrated function): not checked", d.BDF)
		return
	}
	wantS, wantW := d.MaxSpeed, d.MaxWidth
	limited := ""
	p := linkPartner(ix, d, chains...)
	if p != nil && p.MaxSpeed > 0 && p.MaxWidth > 0 {
		if p.MaxSpeed < wantS {
			wantS, limited = p.MaxSpeed, fmt.Sprintf(" (link partner %s supports %g GT/s x%d)", p.BDF, p.MaxSpeed, p.MaxWidth)
		}
		if p.MaxWidth < wantW {
			wantW, limited = p.MaxWidth, fmt.Sprintf(" (link partner %s supports %g GT/s x%d)", p.BDF, p.MaxSpeed, p.MaxWidth)
		}
	}
	role := "bridge"
	switch {
	case d == gpu:
		role = "GPU"
	case !d.IsBridge():
		role = "NIC"
	}
	testenv.Attr(t, "link_"+d.BDF, d.LinkString())
	gpuLink := d == gpu || p == gpu
	if d.CurWidth < wantW {
		testenv.Errorf(t, "reseat the card or check the slot/riser and its lane configuration in the BIOS; compare LnkCap and LnkSta in lspci -vv -s "+d.BDF,
			"%s %s link trained to x%d, below its max x%d%s (speed %s)", role, d.BDF, d.CurWidth, wantW, limited, d.LinkString())
	}
	if d.CurSpeed < wantS {
		if gpuLink {
			// Idle GPUs drop link speed to save power; the gpu package
			// re-reads it under load. Report only.
			testenv.Attr(t, "gpu_link_speed_below_max", fmt.Sprintf("%s at %g GT/s of %g GT/s (normal when idle)", d.BDF, d.CurSpeed, wantS))
			t.Logf("%s %s runs at %g GT/s of %g GT/s: GPUs lower link speed when idle; not a failure here (the gpu tests re-check under load)", role, d.BDF, d.CurSpeed, wantS)
		} else {
			testenv.Errorf(t, "check the slot's PCIe generation setting in the BIOS, the riser/retimer and the card's firmware; compare LnkCap and LnkSta in lspci -vv -s "+d.BDF,
				"%s %s link trained to %g GT/s, below its max %g GT/s%s (%s)", role, d.BDF, d.CurSpeed, wantS, limited, d.LinkString())
		}
	}
}

// iommuCmdline extracts the IOMMU-related kernel parameters.
func iommuCmdline(cmdline string) []string {
	var out []string
	for _, f := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(f, "=")
		switch k {
		case "iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict":
			out = append(out, f)
		}
	}
	return out
}

// TOPO-05: DMA from GPUs and NICs is not translated by the IOMMU.
func TestTOPO05IOMMU(t *testing.T) {
	testenv.Req(t, "TOPO-05")
	h := loadHost(t)
	cfg := testenv.Config(t)
	gpus := h.needGPUs(t)
	cmdline, err := h.root.ReadString("/proc/cmdline")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read /proc/cmdline: %v", err)
	}
	params := iommuCmdline(cmdline)
	testenv.Attr(t, "iommu_cmdline", strings.Join(params, " "))
	passthroughCmdline := false
	for _, p := range params {
		if p == "iommu=pt" || p == "iommu.passthrough=1" {
			passthroughCmdline = true
		}
	}
	groups, _ := h.root.ReadDir("/sys/kernel/iommu_groups")
	n := 0
	for _, g := range groups {
		if !strings.HasPrefix(g, ".") {
			n++
		}
	}
	testenv.Attr(t, "iommu_groups", n)
	devs := append([]*pci.Device(nil), gpus...)
	for _, nic := range h.nics {
		if !nic.Software {
			if d := h.ix.Device(nic.PCI); d != nil {
				devs = append(devs, d)
			}
		}
	}
	for _, d := range devs {
		t.Run(d.BDF, func(t *testing.T) {
			testenv.Req(t, "TOPO-05")
			testenv.Attr(t, "pci", d.BDF)
			mode := d.IOMMUType
			switch {
			case d.IOMMUGroup == "":
				mode = "none (no IOMMU group)"
			case mode == "" && passthroughCmdline:
				mode = "identity (inferred: no group type file, " + strings.Join(params, " ") + ")"
			case mode == "":
				mode = "DMA (inferred: IOMMU group " + d.IOMMUGroup + " without a type file and no iommu=pt)"
			}
			testenv.Attr(t, "iommu_mode", mode)
			if !strings.HasPrefix(mode, "DMA") {
				return
			}
			msg := fmt.Sprintf("%s is in IOMMU group %s with translated DMA (%s; kernel parameters: %s): peer-to-peer DMA between the GPU and the NIC goes through IOMMU translation or is blocked",
				d.String(), d.IOMMUGroup, mode, orNone(params))
			if cfg.AllowIOMMU {
				t.Logf("%s; allowed by GDR_ALLOW_IOMMU=1", msg)
				return
			}
			testenv.Errorf(t, "boot with iommu=pt (keeping intel_iommu=on or amd_iommu=on if other devices need the IOMMU), or disable the IOMMU in the BIOS; set GDR_ALLOW_IOMMU=1 if translated DMA is intended", "%s", msg)
		})
	}
}

// nvmlClass maps NVML's topology levels to path classes.
func nvmlClass(l gonvml.GpuTopologyLevel) (pathclass.Class, bool) {
	switch l {
	case gonvml.TOPOLOGY_INTERNAL, gonvml.TOPOLOGY_SINGLE:
		return pathclass.PIX, true
	case gonvml.TOPOLOGY_MULTIPLE:
		return pathclass.PXB, true
	case gonvml.TOPOLOGY_HOSTBRIDGE:
		return pathclass.PHB, true
	case gonvml.TOPOLOGY_NODE:
		return pathclass.NODE, true
	case gonvml.TOPOLOGY_SYSTEM:
		return pathclass.SYS, true
	}
	return pathclass.Unknown, false
}

// TOPO-06: NVML agrees with sysfs on GPU-to-GPU classes.
func TestTOPO06NVMLTopology(t *testing.T) {
	testenv.Req(t, "TOPO-06")
	h := loadHost(t)
	h.needGPUs(t) // GPU pairs use every GPU, whatever GDR_GPU selects
	if !h.root.IsLive() {
		testenv.Absent(t, "NVML describes the running host, and GDR_HOST_ROOT=%s is another tree: not compared", h.root.Dir())
	}
	if len(h.gpus) < 2 {
		testenv.Absent(t, "GPU-to-GPU topology needs two GPUs; %s lists one (%s)", pci.DevicesDir, bdfs(h.gpus))
	}
	// Absent without libnvidia-ml.so.1; any other NVML error fails with its remedy.
	nv := nvml.Open(t)
	for i, a := range h.gpus {
		for _, b := range h.gpus[i+1:] {
			t.Run(a.BDF+"-"+b.BDF, func(t *testing.T) {
				testenv.Req(t, "TOPO-06")
				p, err := h.ix.Classify(a.BDF, b.BDF)
				if err != nil {
					t.Fatalf("classify %s <-> %s: %v", a.BDF, b.BDF, err)
				}
				lvl, err := nv.CommonAncestor(a.BDF, b.BDF)
				if err != nil {
					testenv.Failf(t, nvml.Remedy(err), "%s <-> %s: %v", a.BDF, b.BDF, err)
				}
				nc, ok := nvmlClass(lvl)
				testenv.Attr(t, "path", p.Class.String())
				testenv.Attr(t, "nvml_level", int(lvl))
				if !ok {
					testenv.Errorf(t, "upgrade the NVIDIA driver or report the level", "NVML topology level %d for %s <-> %s is not one this suite knows", int(lvl), a.BDF, b.BDF)
					return
				}
				if nc != p.Class {
					testenv.Errorf(t, "compare lspci -tv with nvidia-smi topo -m; a hypervisor may hide switches from the guest, or sysfs and the driver disagree about the tree",
						"GPU %s <-> GPU %s: sysfs path says %s, NVML GetTopologyCommonAncestor says %s (level %d)", a.BDF, b.BDF, p.Class, nc, int(lvl))
				}
			})
		}
	}
}

// topoOutput runs `nvidia-smi topo -m` on the live host, or reads the
// recorded output (cmd/nvidia-smi_topo_-m.txt) of a recorded tree.
func topoOutput(t *testing.T, h *host) (string, string) {
	t.Helper()
	if !h.root.IsLive() {
		const rec = "/cmd/nvidia-smi_topo_-m.txt"
		b, err := h.root.ReadFile(rec)
		if err != nil {
			testenv.Absent(t, "GDR_HOST_ROOT=%s is not the running host and holds no recorded %s; nvidia-smi is run only against the live host", h.root.Dir(), rec)
		}
		return string(b), h.root.Host(rec)
	}
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		testenv.Absent(t, "nvidia-smi not found in PATH (%v); it ships with the NVIDIA driver utilities", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(testenv.Config(t).Timeout, 60*time.Second))
	defer cancel()
	out, err := exec.CommandContext(ctx, smi, "topo", "-m").CombinedOutput()
	if err != nil {
		testenv.Failf(t, "check that the NVIDIA driver is loaded and nvidia-smi works", "%s topo -m: %v: %s", smi, err, strings.TrimSpace(string(out)))
	}
	return string(out), smi + " topo -m"
}

// TOPO-07: nvidia-smi topo -m agrees with sysfs.
func TestTOPO07NvidiaSmiTopo(t *testing.T) {
	testenv.Req(t, "TOPO-07")
	h := loadHost(t)
	h.needGPUs(t)
	out, src := topoOutput(t, h)
	testenv.Attr(t, "source", src)
	m, err := nvsmi.Parse(out)
	if err != nil {
		testenv.Failf(t, "run nvidia-smi topo -m by hand and check the driver", "%s: %v", src, err)
	}
	mg := m.GPUs()
	if len(mg) != len(h.gpus) {
		testenv.Failf(t, "check for GPUs the driver does not bind (dmesg NVRM) or GPUs hidden with CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES",
			"%s lists %d GPUs, %s lists %d (%s)", src, len(mg), pci.DevicesDir, len(h.gpus), bdfs(h.gpus))
	}
	// nvidia-smi numbers GPUs in PCI bus order, as h.gpus is sorted.
	pciOf := map[string]string{}
	for i, l := range mg {
		pciOf[l] = h.gpus[i].BDF
	}
	for label, name := range m.NICNames {
		bdf, ok := h.pciNICs[name]
		if !ok {
			testenv.Errorf(t, "check the RDMA driver", "%s lists NIC %s (%s), which %s does not have as a PCI RDMA device", src, label, name, "/sys/class/infiniband")
			continue
		}
		pciOf[label] = bdf
	}
	compared := 0
	for _, p := range m.Pairs() {
		lk, err := nvsmi.ParseLink(p.Link)
		if err != nil || lk.Self || lk.NVLinks > 0 {
			continue // NVLink pairs have no PCIe class to compare
		}
		a, b := pciOf[p.A], pciOf[p.B]
		if a == "" || b == "" {
			continue
		}
		compared++
		c, err := h.ix.Classify(a, b)
		if err != nil {
			testenv.Errorf(t, "check "+pci.DevicesDir, "classify %s (%s) <-> %s (%s): %v", p.A, a, p.B, b, err)
			continue
		}
		if c.Class != lk.Class {
			testenv.Errorf(t, "compare lspci -tv with nvidia-smi topo -m; a hypervisor may hide PCIe switches from the guest",
				"%s (%s) <-> %s (%s): sysfs path says %s, nvidia-smi topo -m says %s", p.A, a, p.B, b, c.Class, p.Link)
		}
	}
	testenv.Attr(t, "pairs_compared", compared)
	t.Logf("%s: %d GPUs, %d NICs, %d PCIe pairs compared", src, len(mg), len(m.NICNames), compared)
}
