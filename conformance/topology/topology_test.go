package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/nccltopo"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/topo"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// TOPO-01: inventory and one subtest per (GPU, NIC) pair with its path class.
func TestTOPO01Inventory(t *testing.T) {
	testenv.Req(t, "TOPO-01")
	sel := testenv.Selection(t)
	testenv.Record(t, sel.ScanFindings()...)
	testenv.VirtAttrs(t, sel)
	testenv.ContainerAttrs(t, sel)
	_, selected := testenv.SysfsRails(t)
	gpus := rails.SelectedGPUs(selected)
	nics, err := sel.NeedNICs()
	testenv.Stop(t, err)
	testenv.Attr(t, "gpus", rails.GPUList(gpus))
	testenv.Attr(t, "nics", rails.NICNames(nics))
	var rs []string
	for _, r := range sel.All {
		nic := "none"
		if r.NIC != nil {
			nic = r.NIC.Name
		}
		rs = append(rs, fmt.Sprintf("%d:%s=%s", r.Index, r.GPU.PCI, nic))
	}
	testenv.Attr(t, "rails", strings.Join(rs, " "))
	if vf := sel.LeftOutVFs(); vf != "" {
		testenv.Attr(t, "vfs_left_out", vf)
	}
	if sel.HCA.Set() {
		// The site's NCCL device filter the candidates obey, and where it is set.
		testenv.Attr(t, "nccl_ib_hca", sel.HCA.String())
		testenv.Attr(t, "nccl_ib_hca_excluded", strings.Join(sel.HCAExcludedNICs(), " "))
	}
	t.Logf("rails (GDR_IB_PORT=%d):\n%s", sel.Port, sel.Summary())
	for _, g := range gpus {
		rail := sel.All[g.Index]
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
				nd, err := sel.NICDevice(n)
				testenv.Stop(t, err)
				testenv.Attr(t, "nic_pci", n.PCI)
				testenv.Attr(t, "nic_numa", nd.NUMANode)
				testenv.Attr(t, "nic_chain", strings.Join(nd.Chain, " "))
				p, err := sel.Index.Classify(g.PCI, n.PCI)
				if err != nil {
					testenv.Fail(t, topo.Unclassified(fmt.Sprintf("cannot classify %s <-> %s (%s)", g.PCI, n.Name, n.PCI), err))
				}
				testenv.Attr(t, "path", p.Class.String())
				testenv.Attr(t, "switches", p.Switches)
				if f := sel.NCCL; f != nil {
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
				note := ""
				if p.NUMANote != "" {
					note = " (" + p.NUMANote + ")"
				}
				t.Logf("%s <-> %s (%s): %s, %d switch(es), bridges [%s], NUMA %d/%d%s",
					g.PCI, n.Name, n.PCI, p.Class, p.Switches, strings.Join(p.Bridges, " "), g.NUMA, nd.NUMANode, note)
			})
		}
	}
}

// TOPO-02: each GPU's rail NIC is within GDR_MAX_PATH. When NCCL would load
// a topology file (internal/nccltopo), the rail's class is the file's
// (gdr.path_from names it, gdr.sysfs_path keeps the tree's). In a VM the
// remedies are ones a guest can apply (vmRemedy): the cloud's topology file,
// never moving cards.
func TestTOPO02NearestNIC(t *testing.T) {
	testenv.Req(t, "TOPO-02")
	sel := testenv.Selection(t)
	testenv.VirtAttrs(t, sel)
	_, rs := testenv.SysfsRails(t)
	testenv.Stop(t, sel.NeedPCINICs())
	limit := testenv.Config(t).MaxPath
	testenv.Attr(t, "max_path", limit.String())
	if f := sel.NCCL; f != nil {
		testenv.Attr(t, "nccl_topo_file", f.Path)
		t.Logf("NCCL topology file %s (%s): GPU<->NIC classes it describes are the ones NCCL uses", f.Path, f.From)
	}
	switch err := sel.NCCLErr; {
	case nccltopo.Unusable(err) != nil:
		// NCCL fails to initialise: every NCCL job on this host would.
		testenv.Error(t, *nccltopo.Unusable(err))
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
			if nearer := sel.Nearer(r); len(nearer) > 0 {
				testenv.Attr(t, "nearer_not_candidates", rails.Describe(nearer))
			}
			// Unset GDR_MAX_PATH follows NCCL: P2C for a GPU on NVLink-C2C.
			limit := testenv.Config(t).PathLimit(r.Path)
			if r.NIC != nil && r.HasPath {
				testenv.Attr(t, "nic_numa", r.NIC.NUMA)
				if r.Path.C2C != "" {
					testenv.Attr(t, "gpu_c2c", "yes")
					testenv.Attr(t, "max_path", limit.String())
					testenv.Attr(t, "pcie_path", r.Path.PCIe.String())
					t.Logf("%s reaches its CPU over NVLink-C2C: %s by the PCIe tree, %s as NCCL sees it", r.GPU, r.Path.PCIe, r.Path.Class)
				}
				if r.Path.From != "" {
					testenv.Attr(t, "path_from", r.Path.From)
					testenv.Attr(t, "sysfs_path", r.Path.SysfsClass.String())
					t.Logf("%s <-> %s: %s in the NCCL topology file (%s), %s in the guest's PCI tree", r.GPU, r.NIC.Name, r.Path.Class, r.Path.Via, r.Path.SysfsClass)
				}
				t.Logf("%s <-> %s: %s", r.GPU, r.NIC.Name, r.Reason)
			}
			var vm func() verdict.Finding // the guest's remedies: the cloud's topology file
			if sel.Guest.VM {
				vm = func() verdict.Finding {
					v := sel.JudgeVM(r, limit, sel.Guest, rails.NCCLEnv(testenv.Config(t)))
					if v.GDRErr != nil {
						t.Logf("NCCL_NET_GDR_LEVEL not read: %v", v.GDRErr)
					}
					if v.GDRSetting != "" {
						testenv.Attr(t, "nccl_gdr_level", v.GDRSetting)
					}
					return v.Finding
				}
			}
			if f := sel.JudgeRailPath(r, limit, vm); f != nil {
				testenv.Error(t, *f)
			}
		})
	}
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
	sel, rs := testenv.SysfsRails(t)
	testenv.Stop(t, sel.NeedPCINICs())
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-03")
			testenv.RailAttrs(t, r)
			c, ok := testenv.PathNIC(t, sel, r)
			if !ok {
				testenv.Fail(t, *rails.NoPathNIC(r))
			}
			nic, path := c.NIC, c.Path
			var unreadable, checked, acsCtl, bypass []string
			nicEnd := topo.Endpoint{BDF: nic.PCI}
			if nd := sel.Index.Device(nic.PCI); nd != nil {
				nicEnd.Config = nd.Config
			}
			gpuEnd := topo.Endpoint{BDF: r.GPU.PCI}
			if r.GPU.Dev != nil {
				gpuEnd.Config = r.GPU.Dev.Config
			}
			turn, through := sel.Index.TurnPorts(path)
			if len(through) > 0 {
				testenv.Attr(t, "acs_passed_through", strings.Join(through, " "))
				at := path.LCA
				if at == "" {
					at = "the root complex"
				}
				t.Logf("not judged: %s (the path only passes through; it turns at %s)", strings.Join(through, " "), at)
			}
			for _, b := range turn {
				pt := sel.Index.PortType(b)
				d, needRoot, f := sel.Index.ACSBridge(b, r.GPU.PCI, nic.Name)
				switch {
				case f != nil:
					testenv.Error(t, *f)
					continue
				case needRoot:
					unreadable = append(unreadable, b)
					continue
				}
				checked = append(checked, b)
				if d.Config.ACS == nil {
					continue // no ACS capability: nothing redirects
				}
				acs := d.Config.ACS
				acsCtl = append(acsCtl, b+": "+pci.ACSBits(acs.Ctrl))
				guest := ""
				if sel.Guest.VM {
					guest = sel.Guest.String()
				}
				v := topo.JudgeACS(topo.ACSPort{BDF: b, ACS: acs, NIC: nicEnd, GPU: gpuEnd, Type: pci.PortTypeName(pt), NICName: nic.Name, Guest: guest, NICSwitch: d.IsNICSwitchPort()})
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
				need := sel.Process.NeedConfigSpace()
				testenv.Absent(t, need.Remedy, "ACS of %s not checked: %s: %s gave only its 64-byte header: %s",
					strings.Join(unreadable, ", "), pci.ErrNeedRoot, pci.DevicesDir+"/"+unreadable[0]+"/config", need.Cause)
			}
		})
	}
}

// TOPO-04: links are trained to what both ends support.
func TestTOPO04LinkTraining(t *testing.T) {
	testenv.Req(t, "TOPO-04")
	sel, rs := testenv.SysfsRails(t)
	for _, r := range rs {
		t.Run(r.GPU.PCI, func(t *testing.T) {
			testenv.Req(t, "TOPO-04")
			testenv.RailAttrs(t, r)
			g := r.GPU.Dev
			devs := []*pci.Device{g}
			testenv.Attr(t, "gpu_chain", strings.Join(g.Chain, " "))
			if c, ok := testenv.PathNIC(t, sel, r); ok {
				nd := sel.Index.Device(c.NIC.PCI)
				devs = append(devs, nd)
				if nd != nil {
					testenv.Attr(t, "nic_chain", strings.Join(nd.Chain, " "))
				}
				for _, b := range c.Path.Bridges {
					if d := sel.Index.Device(b); d != nil {
						devs = append(devs, d)
					}
				}
			} else {
				t.Logf("no PCI RDMA NIC for %s: checking the GPU's own link only", r.GPU)
			}
			var links []string
			for _, d := range devs {
				if l := testenv.RecordLink(t, sel.Index.CheckLink(d, g)); l != "" {
					links = append(links, l)
				}
			}
			testenv.Attr(t, "links", strings.Join(links, "; "))
		})
	}
}

// TOPO-05: DMA from the selected rails' GPUs and NICs is not translated by
// the IOMMU.
func TestTOPO05IOMMU(t *testing.T) {
	testenv.Req(t, "TOPO-05")
	cfg := testenv.Config(t)
	sel, rs := testenv.SysfsRails(t)
	cmdline, err := sel.Root.ReadString("/proc/cmdline")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		testenv.NotJudgedf(t, "", "read /proc/cmdline: %v", err)
	}
	params := topo.IOMMUParams(cmdline)
	testenv.Attr(t, "iommu_cmdline", strings.Join(params, " "))
	groups, _ := sel.Root.ReadDir("/sys/kernel/iommu_groups")
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
			add(sel.Index.Device(r.NIC.PCI))
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

// TOPO-06: NVML agrees with sysfs on GPU-to-GPU classes.
func TestTOPO06NVMLTopology(t *testing.T) {
	testenv.Req(t, "TOPO-06")
	sel, _ := testenv.SysfsRails(t) // GPU pairs use every GPU, whatever GDR_GPU selects
	gpus := sel.SysfsGPUs()
	if !sel.Root.IsLive() {
		testenv.Absent(t, reqs.RemedyLiveHost, "NVML describes the running host, and GDR_HOST_ROOT=%s is another tree: not compared", sel.Root.Dir())
	}
	if len(gpus) < 2 {
		testenv.Absent(t, "", "GPU-to-GPU topology needs two GPUs; %s lists one (%s)", pci.DevicesDir, rails.GPUList(gpus))
	}
	// Absent without libnvidia-ml.so.1; any other NVML error fails with its remedy.
	nv := nvml.Open(t)
	for i, a := range gpus {
		for _, b := range gpus[i+1:] {
			t.Run(a.PCI+"-"+b.PCI, func(t *testing.T) {
				testenv.Req(t, "TOPO-06")
				p, err := sel.Index.Classify(a.PCI, b.PCI)
				if err != nil {
					testenv.NotJudgedf(t, "", "classify %s <-> %s: %v", a.PCI, b.PCI, err)
				}
				lvl, err := nv.CommonAncestor(a.PCI, b.PCI)
				if err != nil {
					testenv.Failf(t, nvml.Remedy(err), "%s <-> %s: %v", a.PCI, b.PCI, err)
				}
				testenv.Attr(t, "path", p.Class.String())
				testenv.Attr(t, "nvml_level", int(lvl))
				if f := nvml.JudgeLevel(a.PCI, b.PCI, p.Class, lvl); f != nil {
					testenv.Error(t, *f)
				}
			})
		}
	}
}

// TOPO-07: nvidia-smi topo -m agrees with sysfs.
func TestTOPO07NvidiaSmiTopo(t *testing.T) {
	testenv.Req(t, "TOPO-07")
	sel, _ := testenv.SysfsRails(t)
	gpus := sel.SysfsGPUs()
	// nvidia-smi topo -m on the live host, a tree's recorded output.
	out, src, err := nvdriver.TopoM(sel.Root, min(testenv.Config(t).Timeout, 60*time.Second))
	testenv.Stop(t, err)
	testenv.Attr(t, "source", src)
	m, err := nvdriver.ParseTopoAt(out, src)
	testenv.Stop(t, err)
	testenv.Stop(t, m.CompareGPUs(src, len(gpus), rails.GPUList(gpus)))
	mg := m.GPUs()
	// nvidia-smi numbers GPUs in PCI bus order, as the selection does.
	pciOf := map[string]string{}
	for i, l := range mg {
		pciOf[l] = gpus[i].PCI
	}
	for label, name := range m.NICNames {
		n := sel.NIC(name)
		if n == nil || n.Software {
			testenv.Error(t, nvdriver.NICNotPCI(src, label, name))
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
		c, err := sel.Index.Classify(a, b)
		if err != nil {
			testenv.Error(t, topo.Unclassified(fmt.Sprintf("classify %s (%s) <-> %s (%s)", p.A, a, p.B, b), err))
			continue
		}
		// nvidia-smi prints the PCIe tree's class (NODE on a Grace, where
		// the suite judges the pair as NCCL's P2C).
		if f := p.CompareClass(a, b, c.TreeClass()); f != nil {
			testenv.Error(t, *f)
		}
	}
	testenv.Attr(t, "pairs_compared", compared)
	t.Logf("%s: %d GPUs, %d NICs, %d PCIe pairs compared", src, len(mg), len(m.NICNames), compared)
}
