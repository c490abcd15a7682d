// The values a selection hands out: GPU, NIC and Rail.

package rails

import (
	"fmt"
	"strconv"

	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// GPU is one GPU.
type GPU struct {
	Index int    // position in PCI bus order (nvidia-smi, CUDA_DEVICE_ORDER=PCI_BUS_ID)
	PCI   string // dddd:bb:dd.f, lowercase
	NUMA  int    // numa_node; -1 unknown
	// Dev is the PCI function; nil for a GPU only the driver sees.
	Dev *pci.Device
	// DriverOnly: seen by the CUDA driver, not in sysfs (the lab's
	// emulated GPU). Such a GPU has no PCIe path.
	DriverOnly bool
}

func (g *GPU) String() string { return fmt.Sprintf("GPU %d (%s)", g.Index, g.PCI) }

// NIC is one RDMA device, seen at the port the suite uses.
type NIC struct {
	Name     string
	PCI      string // "" for software devices
	Software bool
	Parent   string // software devices: the netdev
	Port     int    // GDR_IB_PORT
	// PortState is the port's state name ("ACTIVE", "DOWN"), RawPortState
	// the file as written ("1: DOWN"); both "" when the port is missing.
	PortState    string
	RawPortState string
	LinkLayer    string
	RateGbps     float64 // sysfs rate; fictional on software devices
	NUMA         int     // the PCI function's numa_node; -1 unknown or software
	// LocalCPUs is the PCI function's local_cpulist (where to poll its
	// completion queue); empty for software devices.
	LocalCPUs cpulist.Set
	// Candidate: the NIC can serve a rail. Why says why not when it cannot,
	// Unfit is that reason as a value (what code decides on), and Remedy,
	// where the suite knows one, what makes it a candidate.
	Candidate bool
	Why       string
	Unfit     Unfit
	Remedy    string
	Dev       *rdmadev.Device
	// VF: the NIC's PCI function is an SR-IOV virtual function; PhysFn is
	// its PF where sysfs links it ("" in a VM); see markVFs.
	VF     bool
	PhysFn string
	// vfLeftOut: markVFs took this VF out of the candidates.
	vfLeftOut bool
	// BlueField: the NIC is a BlueField-3 network function; bfLeftOut:
	// markBlueField took it out of the candidates.
	BlueField bool
	bfLeftOut bool
	// HCAExcluded: NCCL_IB_HCA keeps NCCL off this device at Port.
	HCAExcluded bool
}

// Unfit is why a NIC is not a rail candidate, set with NIC.Why (which says
// it in words for the log); Fit for a candidate.
type Unfit int

const (
	Fit            Unfit = iota
	UnfitHCA             // NCCL_IB_HCA leaves it out at GDR_IB_PORT
	UnfitNoPort          // it has no port GDR_IB_PORT
	UnfitPortDown        // the port is not ACTIVE
	UnfitNoUverbs        // no user-space verbs node (ib_uverbs) names it
	UnfitNoNode          // its /dev/infiniband node is missing where this process runs
	UnfitNodeType        // not a channel adapter (a switch, a router)
	UnfitNoPCI           // its PCI function is not in sysfs
	UnfitVF              // an SR-IOV VF left out for a PF
	UnfitBlueField       // a BlueField-3 function left out beside ConnectX candidates
)

func (n *NIC) String() string {
	if n.Software {
		return n.Name + " (software, on " + n.Parent + ")"
	}
	return n.Name + " (" + n.PCI + ")"
}

// Rail is a GPU and the NIC that serves it.
type Rail struct {
	// Index is the rail's number, which is its GPU's index; -1 for a
	// NIC-only Primary on a host without GPUs.
	Index int
	GPU   *GPU // nil for a NIC-only Primary
	NIC   *NIC // nil when no NIC is a candidate (GPU only)
	// Path is the PCIe path GPU <-> NIC; HasPath is false for software
	// NICs, driver-only GPUs and GPU-only rails (Path.Class is Unknown).
	Path    topo.Path
	HasPath bool
	Forced  bool   // the NIC was set by GDR_RDMA_DEVICE
	Reason  string // one line: why this NIC
}

// Class is the path class, topo.Unknown without a PCIe path.
func (r *Rail) Class() topo.Class { return r.Path.Class }

// Name is the rail's subtest and report name: "rail<N>" (rail 0 for a
// NIC-only Primary on a host without GPUs). Rail i on one host meets rail
// i on the peer (rail-aligned fabrics), so the name is what both agree on.
func (r *Rail) Name() string { return "rail" + strconv.Itoa(max(r.Index, 0)) }

// Bridges counts the PCI bridges between GPU and NIC.
func (r *Rail) Bridges() int { return len(r.Path.Bridges) }

// Switches counts the PCIe switches between GPU and NIC.
func (r *Rail) Switches() int { return r.Path.Switches }

func (r *Rail) String() string {
	var s string
	switch {
	case r.GPU == nil && r.NIC == nil:
		return "no GPU and no NIC"
	case r.GPU == nil:
		s = "NIC only: "
	default:
		s = fmt.Sprintf("rail %d: %s", r.Index, r.GPU)
	}
	switch {
	case r.NIC == nil:
		s += " without NIC"
	case r.GPU == nil:
		s += r.NIC.String()
	default:
		s += " <-> " + r.NIC.String()
	}
	if r.HasPath {
		s += " " + r.Path.Class.String()
	}
	return s
}
