package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/inventory"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Part is the part a failure points at, with the evidence and how sure the
// suite is: what an RMA or a ticket to the fabric team needs. Kinds:
// gpu, nic, cable/optic, nic firmware settings, pcie link (the device's
// slot, riser or retimer), pcie switch, nvlink, host configuration (BIOS,
// kernel command line), host software (drivers, libraries), network path
// (switch ports and cables between two hosts), host (something all its
// rails share).
type Part struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`               // "GPU 0000:19:00.0", "mlx5_1 (0000:14:00.0)"
	Identity   string `json:"identity,omitempty"` // serial, part number, firmware, from the inventory
	Why        string `json:"why"`
	Confidence string `json:"confidence"` // high, medium, low
}

// String is "cable/optic of mlx5_1 (Mellanox FX-Q28SR4-0100 serial X), high: <why>".
func (p *Part) String() string {
	s := p.Kind + ": " + p.Name
	if p.Identity != "" {
		s += " (" + p.Identity + ")"
	}
	return s + "; " + p.Confidence + " confidence: " + p.Why
}

// gpuSideRatio: PP-09's GPU/host bandwidth ratio below which a slow rail
// is put on the GPU side; at or above it host memory is as slow, so the
// NIC side. No source gives a number: 0.8 is the PP-10 fraction the suite
// already uses for "keeps its rate".
const gpuSideRatio = 0.8

// Confidence words.
const (
	confHigh, confMedium, confLow = "high", "medium", "low"
)

// attribute names the part behind every failed case of h and each failed
// requirement (its first failed case's part). The rules use only evidence
// the run holds: the requirement, the device the case names, the
// inventory, and the host's other results (GPU-11 beside a slow copy,
// TOPO-10 or HLTH-01 beside a slow rail, PP-09's host-vs-GPU comparison).
func (h *HostResult) attribute() {
	ix := evidenceOf(h)
	for _, rq := range h.Reqs {
		for _, c := range rq.cases {
			if c.Status() == Fail && c.Counted {
				c.Part = ix.partOf(rq.ID, c)
				if rq.Part == nil {
					rq.Part = c.Part
				}
			}
		}
	}
}

// evidence is what the rules look up across a host's results.
type evidence struct {
	inv       *inventory.Host
	failedOn  map[string]map[string]bool // requirement -> device (gpu bdf or nic name) -> failed
	failedReq map[string]bool
	hlth      map[string]*Case   // nic -> its failed HLTH-01 case
	pp09      map[string]float64 // nic -> PP-09's GPU/host bandwidth ratio (gdr.bw_ratio_gpu_host), when recorded
}

func evidenceOf(h *HostResult) *evidence {
	e := &evidence{inv: h.Identity.Inventory, failedOn: map[string]map[string]bool{}, failedReq: map[string]bool{},
		hlth: map[string]*Case{}, pp09: map[string]float64{}}
	for _, rq := range h.Reqs {
		for _, c := range rq.cases {
			a := c.Attrs
			if c.Status() == Fail {
				e.failedReq[rq.ID] = true
				for _, d := range []string{a["gdr.gpu"], a["gdr.nic"]} {
					if d != "" {
						if e.failedOn[rq.ID] == nil {
							e.failedOn[rq.ID] = map[string]bool{}
						}
						e.failedOn[rq.ID][d] = true
					}
				}
				if rq.ID == "HLTH-01" && a["gdr.nic"] != "" {
					e.hlth[a["gdr.nic"]] = c
				}
			}
			if rq.ID == "PP-09" && a["gdr.nic"] != "" {
				if r, err := strconv.ParseFloat(c.Own["gdr.bw_ratio_gpu_host"], 64); err == nil && r > 0 {
					e.pp09[a["gdr.nic"]] = r
				}
			}
		}
	}
	return e
}

func (e *evidence) gpuIdentity(bdf string) string {
	if e.inv == nil {
		return ""
	}
	for _, g := range e.inv.GPUs {
		if g.BDF == bdf {
			return joinNonEmpty(g.Model, prefixed("serial ", g.Serial), prefixed("part ", g.PartNumber), prefixed("VBIOS ", g.VBIOS))
		}
	}
	return ""
}

func (e *evidence) nicIdentity(name string) string {
	if e.inv == nil {
		return ""
	}
	for _, n := range e.inv.NICs {
		if n.Name == name {
			return joinNonEmpty(n.HCAType, prefixed("PSID ", n.BoardID), prefixed("firmware ", n.Firmware), prefixed("part ", n.PartNumber), prefixed("serial ", n.Serial))
		}
	}
	return ""
}

// counterParts says whether a failed HLTH case's counters point at the
// link (cable/optic) or at PCIe (AER): the part its finding names
// (internal/counters PartOf). Recordings made before gdr.part_kind name
// the counter in the cause, and only theirs is read for it.
func counterParts(c *Case) (link, aer bool) {
	if c.legacy() {
		return linkCounters.MatchString(c.Finding.Cause), aerCounters.MatchString(c.Finding.Cause)
	}
	return c.Finding.Part == counters.PartLink, c.Finding.Part == counters.PartPCIe
}

func linkCause(c *Case) bool { link, _ := counterParts(c); return link }

var linkCounters = regexp.MustCompile(`symbol_error|link_downed|link_error_recovery|port_rcv_errors|local_link_integrity|excessive_buffer_overrun|phy`)
var aerCounters = regexp.MustCompile(`AER|aer_|correctable|fatal`)

// partOf is the rule table. Where the engine named the device at fault or
// the kind of part (the finding's gdr.device, gdr.part_kind), that is
// used; the rules read the cause's words only for recordings without them.
func (e *evidence) partOf(req string, c *Case) *Part {
	a := c.Attrs
	gpu, nic := a["gdr.gpu"], a["gdr.nic"]
	f := c.Finding
	cause := f.Cause
	// What is absent under GDR_STRICT=1, and what the suite could not
	// judge, point at no part: naming one would send a board back for a
	// missing package or a suite error.
	if !Judged(c.Outcome) || f.Kind() == verdict.Absent {
		return nil
	}
	gpuPart := func(kind, why, conf string) *Part {
		return &Part{Kind: kind, Name: "GPU " + gpu, Identity: e.gpuIdentity(gpu), Why: why, Confidence: conf}
	}
	nicPart := func(kind, why, conf string) *Part {
		name := nic
		if pcie := a["gdr.nic_pci"]; pcie != "" {
			name += " (" + pcie + ")"
		}
		return &Part{Kind: kind, Name: name, Identity: e.nicIdentity(nic), Why: why, Confidence: conf}
	}
	area, _, _ := strings.Cut(req, "-")
	switch {
	case area == "INST":
		return &Part{Kind: "host software", Name: "the driver and library installation", Why: "an install step failed: " + clipWords(cause, 160), Confidence: confHigh}
	case area == "MREG":
		return &Part{Kind: "host software", Name: "the GPU peer-memory path (nvidia_peermem or dma-buf)", Why: "GPU memory did not register with the NIC: " + clipWords(cause, 160), Confidence: confMedium}
	case req == "TOPO-09" && nic != "":
		return nicPart("nic firmware settings", "its firmware configuration differs from NVIDIA's documented GPUDirect values (set with mstconfig, no part to replace)", confHigh)
	case req == "TOPO-10" && nic != "":
		p := nicPart("cable/optic", "the transceiver or link is out of its limits: "+clipWords(cause, 200), confHigh)
		if o := a["gdr.optic"]; o != "" {
			p.Name, p.Identity = "the cable/optic in "+p.Name, o
		}
		return p
	case req == "TOPO-04":
		onGPU := gpu != "" && f.Device == gpu
		if f.Device == "" { // recorded before gdr.device
			onGPU = gpu != "" && strings.Contains(cause, gpu)
		}
		switch {
		case onGPU:
			return gpuPart("pcie link", "its PCIe link trained below its maximum: the GPU, its slot, riser or retimer", confMedium)
		case nic != "":
			return nicPart("pcie link", "a link on the rail trained below its maximum: the device named, its slot, riser or retimer", confMedium)
		}
		return &Part{Kind: "pcie link", Name: "the link named in the failure", Why: clipWords(cause, 200), Confidence: confMedium}
	case req == "TOPO-03", req == "TOPO-05", req == "TOPO-08":
		return &Part{Kind: "host configuration", Name: "BIOS and kernel PCIe settings", Why: "a setting (ACS, IOMMU, MaxPayload) is wrong for peer-to-peer: " + clipWords(cause, 160), Confidence: confHigh}
	case req == "TOPO-01", req == "TOPO-02":
		return &Part{Kind: "host configuration", Name: "GPU and NIC placement", Why: "the GPU's nearest NIC is too far in the PCIe tree (slot placement or a VM's flat topology)", Confidence: confMedium}
	case req == "TOPO-06", req == "TOPO-07":
		return &Part{Kind: "host software", Name: "the NVIDIA driver's topology view", Why: "the driver's tools disagree with sysfs", Confidence: confLow}
	case req == "GPU-16" && gpu != "":
		return gpuPart("gpu", "its InfoROM does not validate (nvmlDeviceValidateInforom)", confHigh)
	case (req == "GPU-09" || req == "GPU-10") && gpu != "":
		if e.failedOn["GPU-11"][gpu] {
			return gpuPart("pcie link", "copies are slow and GPU-11 saw its link below maximum under load: the slot, riser, retimer or the GPU", confHigh)
		}
		return gpuPart("gpu", "copies between host and this GPU are slow while its link trains at full speed (GPU-11 passed or did not run): the GPU, or host memory/NUMA placement", confMedium)
	case req == "GPU-11" && gpu != "":
		return gpuPart("pcie link", "the link stays below maximum while the GPU copies", confHigh)
	case req == "GPU-12" || req == "GPU-13":
		return &Part{Kind: "pcie switch", Name: "the PCIe switch or root port the slow GPUs share", Why: "GPUs slow only when copying together: " + clipWords(cause, 200), Confidence: confMedium}
	case req == "GPU-14" || req == "GPU-15":
		return &Part{Kind: "nvlink", Name: "the GPU-to-GPU path (NVLink/NVSwitch or PCIe)", Why: clipWords(cause, 200), Confidence: confMedium}
	case area == "GPU" && gpu != "":
		return gpuPart("gpu", "the GPU or its driver does not offer what GPUDirect needs: "+clipWords(cause, 160), confMedium)
	case req == "HLTH-01" && nic != "":
		link, aer := counterParts(c)
		if link {
			return nicPart("cable/optic", "link-level error counters rose during traffic ("+clipWords(cause, 160)+"): the cable, optic or switch port before the NIC", confMedium)
		}
		if aer {
			return nicPart("pcie link", "PCIe AER errors rose during traffic: the NIC's slot or the GPU's, or a bridge between", confMedium)
		}
		return nicPart("network path", "transport counters rose (retransmissions, sequence errors): packets were lost or late between the hosts", confLow)
	case req == "HLTH-02" && gpu != "":
		return gpuPart("pcie link", "PCIe AER errors rose during the copies: "+clipWords(cause, 160), confMedium)
	case area == "PP" && nic != "":
		switch {
		case e.failedOn["TOPO-10"][nic]:
			return nicPart("cable/optic", "the rail is slow and TOPO-10 found its transceiver or link out of limits", confHigh)
		case e.hlth[nic] != nil && linkCause(e.hlth[nic]):
			return nicPart("cable/optic", "the rail is slow and its link-level error counters rose (HLTH-01)", confMedium)
		}
		if r, ok := e.pp09[nic]; ok {
			if r < gpuSideRatio && gpu != "" {
				return gpuPart("gpu", fmt.Sprintf("GPU memory through %s reaches %.2f of host memory's rate through it (PP-09): the GPU side of the path (the GPU, or its PCIe path to the NIC)", nic, r), confMedium)
			}
			if r >= gpuSideRatio {
				return nicPart("nic", fmt.Sprintf("host memory through the same NIC is as slow (PP-09: GPU memory at %.2f of host memory's rate): the NIC, its cable or its switch port, not the GPU", r), confMedium)
			}
		}
		return nicPart("nic", "this rail fell short on this host; the NIC, its cable or its switch port (a cluster run names which by re-pairing)", confLow)
	}
	return nil
}

func joinNonEmpty(s ...string) string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

func prefixed(p, v string) string {
	if v == "" {
		return ""
	}
	return p + v
}

func clipWords(s string, n int) string { return clip(s, n) }

// clusterPart names the part behind an isolation finding: a rail bad with
// every partner is that host's NIC or its cable; a host bad on every rail
// is what its rails share; a link is the path between two hosts.
func (r *Report) clusterPart(f ClusterFinding) *Part {
	hostOf := func(name string) *HostResult {
		var h *HostResult
		for _, x := range r.Hosts {
			if x.Identity.Host == name && !x.Earlier {
				h = x
			}
		}
		return h
	}
	h := hostOf(f.Host)
	host := onNode(f.Host, h)
	switch f.Part {
	case PartHost:
		return &Part{Kind: "host", Name: "host " + host, Identity: hostIdentity(h),
			Why: "slow on every rail with every partner: what the rails share (CPU and memory, PCIe root complex, the host's software), not one NIC", Confidence: confMedium}
	case PartLink:
		return &Part{Kind: "network path", Name: fmt.Sprintf("the path between %s and %s on rail %d", host, onNode(f.Peer, hostOf(f.Peer)), f.Rail),
			Why: "slow only with each other: both hosts are fast with other partners on this rail, so the switch ports or cables between them", Confidence: confMedium}
	}
	nic := railNIC(h, f.Rail)
	p := &Part{Kind: "nic", Name: fmt.Sprintf("%s rail %d", host, f.Rail), Confidence: confMedium,
		Why: "slow with every partner on this rail while its other rails are fast: this host's NIC of the rail, its cable/optic or its switch port"}
	if nic != "" && h != nil {
		p.Name = fmt.Sprintf("%s rail %d (%s)", host, f.Rail, nic)
		p.Identity = evidenceOf(h).nicIdentity(nic)
	}
	if f.Verdict != isolate.Bad {
		p.Confidence = confLow
	}
	return p
}

// onNode is a host's name as the part names it: where the job named the
// host by its task (a Kubernetes pod), the machine's own name goes with
// it, since that is the one to pull: "gdrconf-2 (node vm4)".
func onNode(name string, h *HostResult) string {
	if h != nil && h.Identity.Node != "" && h.Identity.Node != name {
		return name + " (node " + h.Identity.Node + ")"
	}
	return name
}

// Named is the host as the hosts tables show it: its name in the report,
// with its node where the job renamed it, so the row a person reads first
// already says which machine it is.
func (h *HostResult) Named() string { return onNode(h.Identity.Host, h) }

func hostIdentity(h *HostResult) string {
	if h == nil || h.Identity.Inventory == nil || h.Identity.Inventory.DMI == nil {
		return ""
	}
	d := h.Identity.Inventory.DMI
	return joinNonEmpty(strings.TrimSpace(d.SysVendor+" "+d.Product), prefixed("serial ", d.ProductSerial))
}

// railNIC is the NIC a host's pingpong tests used for rail r (gdr.rail and
// gdr.nic of its cases).
func railNIC(h *HostResult, rail int) string {
	if h == nil {
		return ""
	}
	want := fmt.Sprint(rail)
	for _, c := range h.cases {
		if c.Attrs["gdr.rail"] == want && c.Attrs["gdr.nic"] != "" {
			return c.Attrs["gdr.nic"]
		}
	}
	return ""
}
