// Candidacy: which RDMA NICs can serve a rail at GDR_IB_PORT, and why not.

package rails

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// nicView is d at the suite's port, with its candidacy.
func (s *Selection) nicView(d *rdmadev.Device) *NIC {
	n := &NIC{Name: d.Name, PCI: d.PCI, Software: d.Software, Parent: d.Parent, Port: s.Port, NUMA: -1, Dev: d}
	if d.PCI != "" {
		if pd := s.Index.Device(d.PCI); pd != nil {
			n.NUMA, n.LocalCPUs = pd.NUMANode, pd.LocalCPUs
		}
	}
	p := d.Port(s.Port)
	if p != nil {
		n.PortState, n.RawPortState, n.LinkLayer, n.RateGbps = p.State, p.RawState, p.LinkLayer, p.RateGbps
	}
	nt := d.NodeTypeName()
	n.HCAExcluded = !s.HCA.Allows(d.Name, s.Port)
	switch {
	case n.HCAExcluded:
		n.Remedy = fmt.Sprintf("set GDR_RDMA_DEVICE=%s to test it anyway, or change NCCL_IB_HCA where it is set (%s)", d.Name, s.HCA.From)
		n.Unfit = UnfitHCA
		n.Why = fmt.Sprintf("excluded by %s: %s; %s", s.HCA, s.hcaWhy(d.Name), n.Remedy)
	case p == nil:
		n.Unfit = UnfitNoPort
		n.Why = fmt.Sprintf("it has no port %d (GDR_IB_PORT; ports: %s)", s.Port, portList(d))
	case !p.Active():
		n.Unfit = UnfitPortDown
		n.Why = fmt.Sprintf("its port %d is %s", s.Port, orRaw(p))
	case d.Uverbs == "":
		n.Unfit = UnfitNoUverbs
		n.Why = fmt.Sprintf("no user-space verbs node names it (%s/uverbs*/ibdev): libibverbs cannot open it (ib_uverbs not loaded?)", rdmadev.VerbsClassDir)
	case d.NodeState == rdmadev.NodeMissing:
		n.Unfit, n.Remedy = UnfitNoNode, nodeRemedy(d)
		n.Why = fmt.Sprintf("its verbs device node %s does not exist where this process opens it, so libibverbs leaves it out of its device list and cannot open it (rdma-core libibverbs/init.c try_access_device); %s", d.Node, n.Remedy)
	case nt != "" && nt != "CA" && nt != "RNIC":
		n.Unfit = UnfitNodeType
		n.Why = fmt.Sprintf("its node type %q is not a channel adapter (CA or RNIC)", d.NodeType)
	case !d.Software && s.Index.Device(d.PCI) == nil:
		n.Unfit = UnfitNoPCI
		n.Why = fmt.Sprintf("its PCI function %s is not in %s", d.PCI, pci.DevicesDir)
	default:
		n.Candidate = true
	}
	return n
}

// hcaWhy says why NCCL_IB_HCA keeps NCCL off device dev at the port.
func (s *Selection) hcaWhy(dev string) string {
	match := "by name prefix"
	if s.HCA.Exact {
		match = "by exact name"
	}
	if s.HCA.Exclude {
		return fmt.Sprintf("NCCL leaves out the devices it lists (matched %s), and it lists %s port %d", match, dev, s.Port)
	}
	return fmt.Sprintf("NCCL uses only the devices and ports it lists (matched %s), and %s port %d (GDR_IB_PORT) is not among them", match, dev, s.Port)
}

// hcaLeavesNone is an error when NCCL_IB_HCA excludes every RDMA device
// there is: NCCL would find no InfiniBand or RoCE device (and fall back to
// sockets), so the setting, not the hardware, is what to fix.
func (s *Selection) hcaLeavesNone() error {
	if !s.HCA.Set() || len(s.NICs) == 0 {
		return nil
	}
	var names []string
	for _, n := range s.NICs {
		if !n.HCAExcluded {
			return nil
		}
		names = append(names, n.Name)
	}
	return fmt.Errorf("%s excludes every RDMA device here at port %d (GDR_IB_PORT): %s; NCCL would find no InfiniBand or RoCE device and fall back to sockets: fix NCCL_IB_HCA, or set GDR_RDMA_DEVICE to choose a NIC", s.HCA, s.Port, strings.Join(names, ", "))
}

// HCAExcludedNICs lists the NICs NCCL_IB_HCA excludes (none when unset).
func (s *Selection) HCAExcludedNICs() []string {
	var out []string
	for _, n := range s.NICs {
		if n.HCAExcluded {
			out = append(out, n.Name)
		}
	}
	return out
}

// nodeRemedy is how a process gets the verbs node of d: in a container the
// node is passed in (a device plugin or --device), on a host ib_uverbs and
// udev make it.
func nodeRemedy(d *rdmadev.Device) string {
	node := rdmadev.DevDir + "/" + d.Uverbs
	return fmt.Sprintf("in a container, request this NIC: the pod's resource request for the RDMA device plugin that hands it out (resources.limits: the shared-device plugin's rdma/<resource>, or the SR-IOV device plugin's VF resource), or --device %s for docker/podman; on a host, ib_uverbs creates the node and udev names it (rdma-core's udev rules; udevadm trigger)", node)
}

func orRaw(p *rdmadev.Port) string {
	if p.State != "" {
		return p.State
	}
	return fmt.Sprintf("%q", p.RawState)
}

func portList(d *rdmadev.Device) string {
	var s []string
	for _, p := range d.Ports {
		s = append(s, strconv.Itoa(p.Num))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Candidates are the NICs that can serve a rail, by name.
func (s *Selection) Candidates() []*NIC {
	var out []*NIC
	for _, n := range s.NICs {
		if n.Candidate {
			out = append(out, n)
		}
	}
	return out
}

// NoCandidate says why no NIC is a candidate ("mlx5_0: its port 1 is
// DOWN; ..."), or where the suite looked when there is no RDMA device.
func (s *Selection) NoCandidate() string {
	if len(s.NICs) == 0 {
		return "no RDMA device: " + s.classState()
	}
	var why []string
	for _, n := range s.NICs {
		if !n.Candidate {
			why = append(why, n.Name+": "+n.Why)
		}
	}
	return "no RDMA NIC is a candidate: " + strings.Join(why, "; ")
}

func (s *Selection) classState() string {
	if !s.NICDir {
		return rdmadev.ClassDir + " does not exist"
	}
	return rdmadev.ClassDir + " is empty"
}

func (s *Selection) nicsThere() string {
	if len(s.NICs) == 0 {
		return "there is no RDMA device (" + s.classState() + ")"
	}
	var names []string
	for _, n := range s.NICs {
		names = append(names, n.Name)
	}
	return fmt.Sprintf("no such RDMA device in %s; there are %d (%s)", rdmadev.ClassDir, len(names), strings.Join(names, ", "))
}
