package install

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The port state names INST-12 acts on, as the kernel writes them
// (drivers/infiniband/core/sysfs.c: state_show's state_name table, "4:
// ACTIVE", "2: INIT"; phys_state_show's "5: LinkUp"); rdmadev keeps the
// name after the number.
const (
	portActive = "ACTIVE"
	portInit   = "INIT"
	physLinkUp = "LinkUp"
)

// Port is INST-12: the NIC the other areas use has an ACTIVE port (what
// ibv_devinfo shows as PORT_ACTIVE), read from sysfs so it needs no verbs
// library. The NIC is the selection's primary rail NIC at GDR_IB_PORT;
// only (GDR_RDMA_DEVICE) narrows the ports reported. exists says whether
// /sys/class/infiniband exists. Every port is reported as an Info line.
func Port(root *hostfs.Root, sel *rails.Selection, only string) Judged {
	var j Judged
	devs := sel.Devices
	if len(devs) == 0 {
		how := "missing (ib_core not loaded)"
		if sel.NICDir {
			how = "empty"
		}
		j.add(verdict.Absentf(reqs.RemedyNoRDMADevice, "no RDMA device: %s is %s", root.Host(rdmadev.ClassDir), how))
		return j
	}
	var report []string
	signs := PortSigns{Port: sel.Port}
	for _, d := range devs {
		if only != "" && d.Name != only {
			continue
		}
		for _, p := range d.Ports {
			desc := fmt.Sprintf("%s port %d: state %q, phys_state %q, link_layer %q, rate %q", d.Name, p.Num, p.RawState, p.RawPhysState, p.LinkLayer, p.Rate)
			j.info("%s", desc)
			report = append(report, desc)
			if p.Num != sel.Port {
				if p.Active() && signs.OtherPort == "" {
					signs.OtherPort = fmt.Sprintf("%s port %d", d.Name, p.Num)
				}
				continue // only GDR_IB_PORT is the port the other areas use
			}
			signs.Init = signs.Init || p.State == portInit && p.LinkLayer == "InfiniBand"
			signs.PhysDown = signs.PhysDown || p.PhysState != physLinkUp
		}
	}
	if r := sel.Primary; r != nil && r.NIC != nil {
		if r.NIC.PortState == portActive {
			j.attr("active_port", fmt.Sprintf("%s/%d", r.NIC.Name, r.NIC.Port))
			j.info("%s port %d is ACTIVE: %s (%s)", r.NIC.Name, r.NIC.Port, r.Reason, sel.PrimaryWhy)
			return j
		}
	} else {
		// No candidate NIC: an ACTIVE port on a NIC user space cannot
		// open is still an ACTIVE port (INST-11 judges the device nodes).
		for _, n := range sel.NICs {
			if n.PortState == portActive {
				j.attr("active_port", fmt.Sprintf("%s/%d", n.Name, n.Port))
				j.info("%s port %d is ACTIVE, but %s is not a rail candidate: %s", n.Name, n.Port, n.Name, n.Why)
				return j
			}
		}
	}
	if len(report) == 0 {
		j.add(verdict.Failf("check dmesg for the NIC driver's errors", "RDMA device(s) %s have no ports in sysfs", DevNames(devs)))
		return j
	}
	what := fmt.Sprintf("no RDMA port is ACTIVE at port %d (GDR_IB_PORT)", sel.Port)
	if only != "" {
		what = fmt.Sprintf("GDR_RDMA_DEVICE=%s port %d (GDR_IB_PORT) is not ACTIVE", only, sel.Port)
	}
	j.add(verdict.Failf(signs.Remedy(), "%s:\n%s", what, strings.Join(report, "\n")))
	return j
}

// PortSigns are what INST-12 saw on the ports of the NIC(s) it judged
// when none at GDR_IB_PORT is ACTIVE.
type PortSigns struct {
	Port      int    // GDR_IB_PORT
	OtherPort string // "mlx5_0 port 2": an ACTIVE port at another number
	Init      bool   // an InfiniBand port in INIT: link, no subnet manager
	PhysDown  bool   // a port whose phys_state is not LinkUp
}

// Remedy says what to do about the ports s describes, most specific
// first.
func (s PortSigns) Remedy() string {
	var r []string
	if s.OtherPort != "" {
		r = append(r, fmt.Sprintf("%s is ACTIVE: set GDR_IB_PORT to that port, or cable port %d", s.OtherPort, s.Port))
	}
	if s.Init {
		r = append(r, "a port in INIT has link but no subnet manager: start opensm on one host of the fabric (systemctl start opensm) or enable the switch's SM")
	}
	if s.PhysDown {
		r = append(r, "a port without phys_state LinkUp has no link: check cable/transceiver and the switch port; for RoCE bring the netdev up (ip link set <netdev> up)")
	}
	if len(r) == 0 {
		r = append(r, "check dmesg for the NIC driver's port messages and the switch port")
	}
	return strings.Join(r, "; ")
}
