package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// TOPO-01: inventory and one subtest per (GPU, NIC) pair with its path class.
func TestTOPO01Inventory(t *testing.T) {
	testenv.Req(t, "TOPO-01")
	h := loadHost(t)
	h.scanErrors(t)
	h.virtAttrs(t)
	h.containerAttrs(t)
	gpus := h.selectedGPUs(t)
	nics := h.needNICs(t)
	testenv.Attr(t, "gpus", gpuList(gpus))
	testenv.Attr(t, "nics", nicNames(nics))
	var rs []string
	for _, r := range h.sel.All {
		nic := "none"
		if r.NIC != nil {
			nic = r.NIC.Name
		}
		rs = append(rs, fmt.Sprintf("%d:%s=%s", r.Index, r.GPU.PCI, nic))
	}
	testenv.Attr(t, "rails", strings.Join(rs, " "))
	if vf := h.sel.LeftOutVFs(); vf != "" {
		testenv.Attr(t, "vfs_left_out", vf)
	}
	if h.sel.HCA.Set() {
		// The site's NCCL device filter the candidates obey, and where it is set.
		testenv.Attr(t, "nccl_ib_hca", h.sel.HCA.String())
		testenv.Attr(t, "nccl_ib_hca_excluded", strings.Join(h.sel.HCAExcludedNICs(), " "))
	}
	t.Logf("rails (GDR_IB_PORT=%d):\n%s", h.sel.Port, h.sel.Summary())
	for _, g := range gpus {
		rail := h.sel.All[g.Index]
		for _, n := range nics {
			t.Run(g.PCI+"-"+n.Name, func(t *testing.T) {
				testenv.Req(t, "TOPO-01")
				testenv.Attr(t, "gpu", g.PCI)
				testenv.Attr(t, "gpu_index", g.Index)
				testenv.Attr(t, "nic", n.Name)
				testenv.Attr(t, "gpu_numa", g.NUMA)
				if g.Dev != nil {
					testenv.Attr(t, "gpu_chain", strings.Join(g.Dev.Chain, " ")) // the report's PCIe tree
				}
				testenv.Attr(t, "is_rail", rail.NIC == n)
				if n.Candidate {
					testenv.Attr(t, "nic_candidate", "yes")
				} else {
					testenv.Attr(t, "nic_candidate", "no: "+n.Why)
				}
				if n.Software {
					// rxe/siw: no PCI device, so no path class and no NUMA node.
					testenv.Attr(t, "nic_kind", "software")
					testenv.Attr(t, "nic_parent", n.Parent)
					testenv.Attr(t, "nic_numa", -1)
					t.Logf("%s is a software RDMA device on netdev %s: no PCIe path to %s", n.Name, n.Parent, g.PCI)
					return
				}
				nd := h.ix.Device(n.PCI)
				if nd == nil {
					testenv.Failf(t, "check the driver of "+n.Name+" and "+pci.DevicesDir,
						"%s/%s/device points to PCI function %s, which is not in %s", rdmadev.ClassDir, n.Name, n.PCI, pci.DevicesDir)
				}
				testenv.Attr(t, "nic_pci", n.PCI)
				testenv.Attr(t, "nic_numa", nd.NUMANode)
				testenv.Attr(t, "nic_chain", strings.Join(nd.Chain, " "))
				p, err := h.ix.Classify(g.PCI, n.PCI)
				if err != nil {
					testenv.Failf(t, "check "+pci.DevicesDir, "cannot classify %s <-> %s (%s): %v", g.PCI, n.Name, n.PCI, err)
				}
				testenv.Attr(t, "path", p.Class.String())
				testenv.Attr(t, "switches", p.Switches)
				if f := h.sel.NCCL; f != nil {
					if fp, ok := f.Classify(g.PCI, n.PCI, n.Name); ok {
						testenv.Attr(t, "nccl_path", fp.Class.String()) // what NCCL uses (TOPO-02 judges it)
						t.Logf("%s <-> %s: %s in the NCCL topology file %s (%s)", g.PCI, n.Name, fp.Class, f.Path, fp.Via)
					}
				}
				if p.NUMAUnknown {
					testenv.Attr(t, "numa_unknown", true)
				}
				if p.NUMANote != "" {
					testenv.Attr(t, "numa_note", p.NUMANote)
				}
				t.Logf("%s <-> %s (%s): %s, %d switch(es), bridges [%s], NUMA %d/%d%s",
					g.PCI, n.Name, n.PCI, p.Class, p.Switches, strings.Join(p.Bridges, " "), g.NUMA, nd.NUMANode, note(p.NUMANote))
			})
		}
	}
}

func note(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// portRemedy is what to do about a NIC that is not a rail candidate.
func portRemedy(n *rails.NIC) string {
	switch {
	case n.Remedy != "":
		return n.Remedy
	case strings.Contains(n.Why, "no port"):
		return "set GDR_IB_PORT to a port the NIC has"
	case strings.Contains(n.Why, "verbs node"):
		return "modprobe ib_uverbs (INST-10/INST-11 say more)"
	case strings.Contains(n.Why, "its port"):
		return "bring the port up: check the cable/transceiver and the switch port; InfiniBand ports in INIT need a subnet manager (opensm); RoCE needs the netdev up (INST-12 says more)"
	}
	return "check the NIC's driver and dmesg"
}

// TOPO-02: each GPU's rail NIC is within GDR_MAX_PATH. When NCCL would load
// a topology file (internal/nccltopo), the rail's class is the file's
// (gdr.path_from names it, gdr.sysfs_path keeps the tree's). In a VM the
// remedies are ones a guest can apply (vmRemedy): the cloud's topology file,
// never moving cards.
func TestTOPO02NearestNIC(t *testing.T) {
	testenv.Req(t, "TOPO-02")
	h := loadHost(t)
	h.virtAttrs(t)
	rs := h.needRails(t)
	h.needPCINICs(t)
	limit := testenv.Config(t).MaxPath
	testenv.Attr(t, "max_path", limit.String())
	if f := h.sel.NCCL; f != nil {
		testenv.Attr(t, "nccl_topo_file", f.Path)
		t.Logf("NCCL topology file %s (%s): GPU<->NIC classes it describes are the ones NCCL uses", f.Path, f.From)
	}
	switch err := h.sel.NCCLErr; {
	case errors.Is(err, nccltopo.ErrUnusable):
		// NCCL fails to initialise: every NCCL job on this host would.
		testenv.Errorf(t, "fix the file or the setting that names it (NCCL_TOPO_FILE, NCCL_CONF_FILE, $HOME/.nccl.conf, /etc/nccl.conf); in a VM use the cloud's topology file for this VM size",
			"%v", err)
	case err != nil:
		// NCCL goes on with the host's tree, which the rails below judge.
		testenv.Attr(t, "nccl_topo_error", err.Error())
		t.Logf("%v", err)
	}
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-02")
			testenv.RailAttrs(t, r)
			testenv.Attr(t, "gpu_numa", r.GPU.NUMA)
			nearer := h.sel.Nearer(r)
			if len(nearer) > 0 {
				testenv.Attr(t, "nearer_not_candidates", rails.Describe(nearer))
			}
			if r.NIC == nil || !r.HasPath {
				if len(nearer) == 0 {
					testenv.Absent(t, reqs.RemedyHardwareNIC, "%s: no hardware RDMA NIC with a PCIe path to it (%s)", r.GPU, r.Reason)
				}
				testenv.Errorf(t, portRemedy(nearer[0].NIC),
					"GPU %d %s (NUMA node %d) has no rail: no RDMA NIC is a candidate; nearest: %s", r.GPU.Index, r.GPU.PCI, r.GPU.NUMA, rails.Describe(nearer))
				return
			}
			testenv.Attr(t, "nic_numa", r.NIC.NUMA)
			if r.Path.From != "" {
				testenv.Attr(t, "path_from", r.Path.From)
				testenv.Attr(t, "sysfs_path", r.Path.SysfsClass.String())
				t.Logf("%s <-> %s: %s in the NCCL topology file (%s), %s in the guest's PCI tree", r.GPU, r.NIC.Name, r.Path.Class, r.Path.Via, r.Path.SysfsClass)
			}
			t.Logf("%s <-> %s: %s", r.GPU, r.NIC.Name, r.Reason)
			if !r.Path.Class.FartherThan(limit) {
				return
			}
			var why []string // the rail reason already names nearer NICs that are not candidates
			if r.Path.NUMAUnknown {
				why = append(why, "SYS because the NUMA nodes are unknown: "+r.Path.NUMANote)
			}
			if h.guest.VM {
				f := h.vmFinding(t, r, limit)
				if len(nearer) > 0 {
					f.Remedy = "make the nearer NIC usable (" + portRemedy(nearer[0].NIC) + "), or " + f.Remedy
				}
				f.Cause += semi(why)
				testenv.Error(t, f)
				return
			}
			remedy := fmt.Sprintf("put the GPU and an RDMA NIC under one PCIe switch (PIX/PXB), use a NIC on the GPU's own switch or socket, or set GDR_MAX_PATH=%s if this topology is intended", r.Path.Class)
			if len(nearer) > 0 {
				remedy = "make the nearer NIC usable (" + portRemedy(nearer[0].NIC) + "), or " + remedy
			}
			if r.Path.NUMAUnknown {
				remedy = "have the firmware report NUMA proximity (BIOS/ACPI SRAT and _PXM: numa_node is -1), or " + remedy
			}
			testenv.Errorf(t, remedy,
				"GPU %d %s (NUMA node %d): rail NIC %s (%s, NUMA node %d) is %s%s, farther than GDR_MAX_PATH=%s (%s)%s; GPUDirect RDMA through the %s is slow or unsupported",
				r.GPU.Index, r.GPU.PCI, r.GPU.NUMA, r.NIC.Name, r.NIC.PCI, r.NIC.NUMA, r.Path.Class, fromFile(r), limit, r.Reason, semi(why), through(r.Path.Class))
		})
	}
}

func fromFile(r *rails.Rail) string {
	if r.Path.From == "" {
		return ""
	}
	return fmt.Sprintf(" in the NCCL topology file %s (%s)", r.Path.From, r.Path.Via)
}

func semi(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return "; " + strings.Join(s, "; ")
}

func through(c topo.Class) string {
	switch c {
	case topo.PHB:
		return "CPU's host bridge"
	case topo.NODE:
		return "interconnect between host bridges"
	case topo.SYS:
		return "inter-socket link"
	}
	return "PCIe fabric"
}

// TOPO-03: ACS redirect is off on the switch ports where the path between
// each GPU and its rail NIC turns (topo.TurnPorts): the common ancestor and
// its ports on the path. Root ports are not checked: traffic between root
// ports goes through the root complex whatever their ACS says. Ports the path
// only passes through (a DPU's internal switch in front of its NIC
// functions, a second switch in front of a GPU) route by address and cannot
// redirect it; they are listed as gdr.acs_passed_through. A port with ACS
// Direct Translated P2P lets the NIC's translated requests past its
// redirect when the NIC has ATS enabled (topo.JudgeACS); the bypass is
// recorded as gdr.acs_direct_translated.
func TestTOPO03ACS(t *testing.T) {
	testenv.Req(t, "TOPO-03")
	h := loadHost(t)
	rs := h.needRails(t)
	h.needPCINICs(t)
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-03")
			testenv.RailAttrs(t, r)
			nic, path, ok := h.pathNIC(t, r)
			if !ok {
				testenv.Absent(t, reqs.RemedyHardwareNIC, "%s: no hardware RDMA NIC with a PCIe path to it (%s)", r.GPU, r.Reason)
			}
			var unreadable, checked, acsCtl, bypass []string
			nicEnd := topo.Endpoint{BDF: nic.PCI}
			if nd := h.ix.Device(nic.PCI); nd != nil {
				nicEnd.Config = nd.Config
			}
			gpuEnd := topo.Endpoint{BDF: r.GPU.PCI}
			if r.GPU.Dev != nil {
				gpuEnd.Config = r.GPU.Dev.Config
			}
			turn, through := h.ix.TurnPorts(path)
			if len(through) > 0 {
				testenv.Attr(t, "acs_passed_through", strings.Join(through, " "))
				t.Logf("not judged: %s (the path only passes through; it turns at %s)", strings.Join(through, " "), orRootComplex(path.LCA))
			}
			for _, b := range turn {
				pt := h.ix.PortType(b)
				d := h.ix.Device(b)
				switch {
				case d == nil:
					testenv.Errorf(t, "check "+pci.DevicesDir, "bridge %s on the path %s <-> %s is not in %s", b, r.GPU.PCI, nic.Name, pci.DevicesDir)
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
				acsCtl = append(acsCtl, b+": "+pci.ACSBits(acs.Ctrl))
				guest := ""
				if h.guest.VM {
					guest = h.guest.String()
				}
				v := topo.JudgeACS(topo.ACSPort{BDF: b, ACS: acs, NIC: nicEnd, GPU: gpuEnd, Type: pci.PortTypeName(pt), NICName: nic.Name, Guest: guest})
				if v.Bypass != "" {
					bypass = append(bypass, v.Bypass)
				}
				if v.Finding != nil {
					testenv.Error(t, *v.Finding)
				}
			}
			testenv.Attr(t, "acs_checked", strings.Join(checked, " "))
			testenv.Attr(t, "acs", strings.Join(acsCtl, "; "))
			if len(bypass) > 0 {
				testenv.Attr(t, "acs_direct_translated", strings.Join(bypass, " | "))
				t.Logf("ACS Direct Translated P2P: %s", strings.Join(bypass, " | "))
			}
			if len(unreadable) > 0 {
				need := h.needSysAdmin()
				testenv.Absent(t, need.Remedy, "ACS of %s not checked: %s: %s gave only its 64-byte header: %s",
					strings.Join(unreadable, ", "), pci.ErrNeedRoot, pci.DevicesDir+"/"+unreadable[0]+"/config", need.Cause)
			}
		})
	}
}

func orRootComplex(lca string) string {
	if lca == "" {
		return "the root complex"
	}
	return lca
}

// TOPO-04: links are trained to what both ends support.
func TestTOPO04LinkTraining(t *testing.T) {
	testenv.Req(t, "TOPO-04")
	h := loadHost(t)
	rs := h.needRails(t)
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-04")
			testenv.RailAttrs(t, r)
			g := r.GPU.Dev
			devs := []*pci.Device{g}
			testenv.Attr(t, "gpu_chain", strings.Join(g.Chain, " "))
			if nic, path, ok := h.pathNIC(t, r); ok {
				nd := h.ix.Device(nic.PCI)
				devs = append(devs, nd)
				if nd != nil {
					testenv.Attr(t, "nic_chain", strings.Join(nd.Chain, " "))
				}
				for _, b := range path.Bridges {
					if d := h.ix.Device(b); d != nil {
						devs = append(devs, d)
					}
				}
			} else {
				t.Logf("no PCI RDMA NIC for %s: checking the GPU's own link only", r.GPU)
			}
			var links []string
			for _, d := range devs {
				if l := checkLink(t, h.ix, d, g); l != "" {
					links = append(links, l)
				}
			}
			testenv.Attr(t, "links", strings.Join(links, "; "))
		})
	}
}

// checkLink checks d's link and returns "<BDF> <role> <link state>" for
// the gdr.links attribute (one value for all devices: no address in a key).
func checkLink(t *testing.T, ix *topo.Index, d, gpu *pci.Device) string {
	t.Helper()
	c := ix.CheckLink(d, gpu)
	if c.VF != "" {
		testenv.Attr(t, "vf_link", c.VF)
		t.Logf("%s", c.VFLog)
	}
	if c.NotChecked != "" {
		t.Logf("%s", c.NotChecked)
	}
	testenv.Record(t, c.Failures...)
	if c.IdleGPU != "" {
		testenv.Attr(t, "gpu_link_speed_below_max", c.IdleGPU)
		t.Logf("%s", c.IdleLog)
	}
	return c.Summary
}

// TOPO-05: DMA from the selected rails' GPUs and NICs is not translated by
// the IOMMU.
func TestTOPO05IOMMU(t *testing.T) {
	testenv.Req(t, "TOPO-05")
	h := loadHost(t)
	cfg := testenv.Config(t)
	rs := h.needRails(t)
	cmdline, err := h.root.ReadString("/proc/cmdline")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		testenv.NotJudgedf(t, "", "read /proc/cmdline: %v", err)
	}
	params := topo.IOMMUParams(cmdline)
	testenv.Attr(t, "iommu_cmdline", strings.Join(params, " "))
	groups, _ := h.root.ReadDir("/sys/kernel/iommu_groups")
	n := 0
	for _, g := range groups {
		if !strings.HasPrefix(g, ".") {
			n++
		}
	}
	testenv.Attr(t, "iommu_groups", n)
	var devs []*pci.Device
	seen := map[string]bool{}
	add := func(d *pci.Device) {
		if d != nil && !seen[d.BDF] {
			seen[d.BDF] = true
			devs = append(devs, d)
		}
	}
	for _, r := range rs {
		add(r.GPU.Dev)
	}
	for _, r := range rs {
		if r.NIC != nil && !r.NIC.Software {
			add(h.ix.Device(r.NIC.PCI))
		}
	}
	for _, d := range devs {
		t.Run(d.BDF, func(t *testing.T) {
			testenv.Req(t, "TOPO-05")
			testenv.Attr(t, "pci", d.BDF)
			j := topo.JudgeIOMMU(d, params, cfg.AllowIOMMU)
			testenv.Attr(t, "iommu_mode", j.Mode)
			if j.Finding != nil {
				testenv.Record(t, *j.Finding)
			}
		})
	}
}

// nvmlClass maps NVML's topology levels to path classes.
func nvmlClass(l gonvml.GpuTopologyLevel) (topo.Class, bool) {
	switch l {
	case gonvml.TOPOLOGY_INTERNAL, gonvml.TOPOLOGY_SINGLE:
		return topo.PIX, true
	case gonvml.TOPOLOGY_MULTIPLE:
		return topo.PXB, true
	case gonvml.TOPOLOGY_HOSTBRIDGE:
		return topo.PHB, true
	case gonvml.TOPOLOGY_NODE:
		return topo.NODE, true
	case gonvml.TOPOLOGY_SYSTEM:
		return topo.SYS, true
	}
	return topo.Unknown, false
}

// TOPO-06: NVML agrees with sysfs on GPU-to-GPU classes.
func TestTOPO06NVMLTopology(t *testing.T) {
	testenv.Req(t, "TOPO-06")
	h := loadHost(t)
	h.needRails(t) // GPU pairs use every GPU, whatever GDR_GPU selects
	if !h.root.IsLive() {
		testenv.Absent(t, reqs.RemedyLiveHost, "NVML describes the running host, and GDR_HOST_ROOT=%s is another tree: not compared", h.root.Dir())
	}
	if len(h.gpus) < 2 {
		testenv.Absent(t, "", "GPU-to-GPU topology needs two GPUs; %s lists one (%s)", pci.DevicesDir, gpuList(h.gpus))
	}
	// Absent without libnvidia-ml.so.1; any other NVML error fails with its remedy.
	nv := nvml.Open(t)
	for i, a := range h.gpus {
		for _, b := range h.gpus[i+1:] {
			t.Run(a.PCI+"-"+b.PCI, func(t *testing.T) {
				testenv.Req(t, "TOPO-06")
				p, err := h.ix.Classify(a.PCI, b.PCI)
				if err != nil {
					testenv.NotJudgedf(t, "", "classify %s <-> %s: %v", a.PCI, b.PCI, err)
				}
				lvl, err := nv.CommonAncestor(a.PCI, b.PCI)
				if err != nil {
					testenv.Failf(t, nvml.Remedy(err), "%s <-> %s: %v", a.PCI, b.PCI, err)
				}
				nc, ok := nvmlClass(lvl)
				testenv.Attr(t, "path", p.Class.String())
				testenv.Attr(t, "nvml_level", int(lvl))
				if !ok {
					testenv.Errorf(t, "upgrade the NVIDIA driver or report the level", "NVML topology level %d for %s <-> %s is not one this suite knows", int(lvl), a.PCI, b.PCI)
					return
				}
				if nc != p.Class {
					testenv.Errorf(t, "compare lspci -tv with nvidia-smi topo -m; a hypervisor may hide switches from the guest, or sysfs and the driver disagree about the tree",
						"GPU %s <-> GPU %s: sysfs path says %s, NVML GetTopologyCommonAncestor says %s (level %d)", a.PCI, b.PCI, p.Class, nc, int(lvl))
				}
			})
		}
	}
}

// topoOutput runs `nvidia-smi topo -m` on the live host, or reads the
// recorded output of a recorded tree (nvdriver.TopoM).
func topoOutput(t *testing.T, h *host) (string, string) {
	t.Helper()
	out, src, err := nvdriver.TopoM(h.root, min(testenv.Config(t).Timeout, 60*time.Second))
	testenv.Stop(t, err)
	return out, src
}

// TOPO-07: nvidia-smi topo -m agrees with sysfs.
func TestTOPO07NvidiaSmiTopo(t *testing.T) {
	testenv.Req(t, "TOPO-07")
	h := loadHost(t)
	h.needRails(t)
	out, src := topoOutput(t, h)
	testenv.Attr(t, "source", src)
	m, err := nvdriver.ParseTopo(out)
	if err != nil {
		testenv.Failf(t, "run nvidia-smi topo -m by hand and check the driver", "%s: %v", src, err)
	}
	mg := m.GPUs()
	if len(mg) != len(h.gpus) {
		testenv.Failf(t, "check for GPUs the driver does not bind (dmesg NVRM) or GPUs hidden with CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES",
			"%s lists %d GPUs, %s lists %d (%s)", src, len(mg), pci.DevicesDir, len(h.gpus), gpuList(h.gpus))
	}
	// nvidia-smi numbers GPUs in PCI bus order, as the selection does.
	pciOf := map[string]string{}
	for i, l := range mg {
		pciOf[l] = h.gpus[i].PCI
	}
	for label, name := range m.NICNames {
		n := h.sel.NIC(name)
		if n == nil || n.Software {
			testenv.Errorf(t, "check the RDMA driver", "%s lists NIC %s (%s), which %s does not have as a PCI RDMA device", src, label, name, rdmadev.ClassDir)
			continue
		}
		pciOf[label] = n.PCI
	}
	compared := 0
	for _, p := range m.Pairs() {
		lk, err := nvdriver.ParseTopoLink(p.Link)
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
