package mlxconfig

import (
	"fmt"
	"strings"
)

// Check is one setting judged (or only reported) against the value NVIDIA
// documents for GPUDirect RDMA on this kind of device and host.
type Check struct {
	Param string
	// Value is the effective value (Param.Effective); "" when the query
	// did not list the parameter.
	Value   string
	Want    string // the documented value, in the tool's spelling
	Judged  bool   // false: reported only (no documented value, or none that applies)
	Met     bool   // Judged and the value is the documented one
	Source  string // where the documented value comes from
	Why     string // what the setting does for GPUDirect, and what a wrong value costs
	Pending string // a value set but not in force yet ("next boot: True(1)")
}

// Sources of the documented values (read; see docs/checks.md).
const (
	srcGDS = "NVIDIA GPUDirect Storage Troubleshooting Guide, cheat sheet (mlxconfig set ADVANCED_PCI_SETTINGS=1, MAX_ACC_OUT_READ=44 on ConnectX-6, 0 on ConnectX-7)"
	srcOCI = "oracle/oci-dr-hpc-v2 level-1 checks (ADVANCED_PCI_SETTINGS True; MAX_ACC_OUT_READ 0, 44 or 128 on H100 shapes)"
	srcNOp = "NVIDIA nic-configuration-operator (gpuDirectOptimized on bare metal sets ATS_ENABLED=0; MAX_ACC_OUT_READ=0 is auto mode)"
	srcVM  = "NVIDIA AI Enterprise VM deployment guide, ATS and ACS appendix (ATS_ENABLED True(1) with passthrough GPUs and NICs)"
)

// family is the device generation the documented values are given for.
func family(devType string) string {
	t := strings.ToLower(devType)
	switch {
	case strings.HasPrefix(t, "connectx6"):
		return "ConnectX-6"
	case strings.HasPrefix(t, "connectx7"):
		return "ConnectX-7"
	}
	return ""
}

// Judge checks q's settings for a host that is a VM (GPUs and NICs passed
// through) or bare metal.
func Judge(q *Query, vm bool) []Check {
	get := func(name string) (Param, bool) { p, ok := q.Params[name]; return p, ok }
	pend := func(p Param) string {
		if p.Pending() {
			return "next boot: " + p.Next
		}
		return ""
	}
	var out []Check
	fam := family(q.DeviceType)

	adv, advOK := get("ADVANCED_PCI_SETTINGS")
	advOn := false
	if advOK {
		n, ok := Number(adv.Effective())
		advOn = ok && n == 1
		out = append(out, Check{Param: adv.Name, Value: adv.Effective(), Want: "True(1)", Judged: true, Met: advOn,
			Source: srcGDS + "; " + srcOCI, Pending: pend(adv),
			Why: "exposes the PCIe read tuning (MAX_ACC_OUT_READ); while False the device default applies and GPU-memory reads by the NIC can fall short of the link"})
	}

	mar, marOK := get("MAX_ACC_OUT_READ")
	c := Check{Param: "MAX_ACC_OUT_READ", Value: mar.Effective(), Pending: pend(mar),
		Why: "bytes of PCIe reads the NIC keeps outstanding (KiB units): too few and RDMA READ/SEND from GPU memory cannot fill the link"}
	switch {
	case !marOK && advOK && !advOn:
		// mstflint hides it while its dependency (ADVANCED_PCI_SETTINGS)
		// is off (filterByDependency), so absence is not "unsupported".
		c.Judged, c.Want, c.Source = fam != "", wantMAR(fam), srcGDS
		c.Why = "hidden while ADVANCED_PCI_SETTINGS is False(0): the device default applies; " + c.Why
	case !marOK:
		c.Why = "not offered by this firmware; " + c.Why
	case fam == "ConnectX-6":
		n, ok := Number(mar.Effective())
		c.Judged, c.Met, c.Want, c.Source = true, ok && n == 44, "44", srcGDS
	case fam == "ConnectX-7":
		n, ok := Number(mar.Effective())
		c.Judged, c.Met, c.Want, c.Source = true, ok && (n == 0 || n == 44 || n == 128), "0 (auto; 44 or 128 also accepted)", srcGDS+"; "+srcNOp+"; "+srcOCI
	default:
		c.Why = "no documented value for " + orUnknown(q.DeviceType) + "; " + c.Why
	}
	if marOK || c.Judged {
		out = append(out, c)
	}

	if p, ok := get("PCI_WR_ORDERING"); ok {
		// Reported only: force_relax orders every MKey relaxed; per_mkey
		// leaves it to each registration, and NCCL asks for relaxed
		// ordering on its own (IBV_ACCESS_RELAXED_ORDERING,
		// NCCL_IB_PCI_RELAXED_ORDERING), so per_mkey is no defect for it.
		out = append(out, Check{Param: p.Name, Value: p.Effective(), Want: "force_relax(1) for applications that do not ask for relaxed ordering per registration",
			Source: srcGDS, Pending: pend(p),
			Why: "PCIe relaxed ordering of the NIC's writes; reported, not judged: per_mkey(0) lets each registration choose, as NCCL does"})
	}

	if p, ok := get("ATS_ENABLED"); ok {
		n, isNum := Number(p.Effective())
		c := Check{Param: p.Name, Value: p.Effective(), Judged: isNum, Pending: pend(p)}
		if vm {
			c.Want, c.Met, c.Source = "True(1)", n == 1, srcVM
			c.Why = "in a VM the NIC must translate addresses itself (ATS) for peer-to-peer to the passed-through GPU to stay off the host's IOMMU"
		} else {
			c.Want, c.Met, c.Source = "False(0)", n == 0, srcNOp+"; "+srcVM
			c.Why = "NVIDIA's bare-metal GPUDirect profile leaves ATS off: it matters only where an IOMMU translates the NIC's addresses (VMs)"
		}
		out = append(out, c)
	}
	return out
}

func wantMAR(fam string) string {
	switch fam {
	case "ConnectX-6":
		return "44"
	case "ConnectX-7":
		return "0 (auto; 44 or 128 also accepted)"
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "this device type"
	}
	return s
}

// String is "ADVANCED_PCI_SETTINGS False(0), documented True(1)".
func (c Check) String() string {
	v := c.Value
	if v == "" {
		v = "absent from the query"
	}
	s := fmt.Sprintf("%s %s", c.Param, v)
	if c.Want != "" {
		s += ", documented " + c.Want
	}
	if c.Pending != "" {
		s += " (" + c.Pending + ")"
	}
	return s
}
