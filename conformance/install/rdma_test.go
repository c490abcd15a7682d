package install

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/install"
)

// INST-07: the rdma-core libraries load (install.Libraries: the loader on
// the running host, the node's files under a pod's GDR_HOST_ROOT, and the
// image's libraries the suite's verbs calls use).
func TestINST07RDMACoreLibraries(t *testing.T) {
	testenv.Req(t, "INST-07")
	devs, _ := rdmaDevices(t)
	record(t, install.Libraries(testenv.Root(t), proc(t), devs, dl.Probe))
}

// INST-08: a libibverbs provider is installed, and one for every RDMA
// device's driver, the host's and in a pod the image's (install.Providers).
func TestINST08VerbsProviders(t *testing.T) {
	testenv.Req(t, "INST-08")
	devs, _ := rdmaDevices(t)
	record(t, install.Providers(testenv.Root(t), proc(t), devs))
}

// INST-09: which RDMA stack is installed (MLNX_OFED or inbox rdma-core),
// and its service is not in a failed state. On the running host ofed_info,
// dpkg/rpm and systemctl are run (install.StackLive); a pod's node or a
// recorded tree is read as files (install.StackFromFiles).
func TestINST09RDMAStack(t *testing.T) {
	testenv.Req(t, "INST-09")
	root := testenv.Root(t)
	devs, _ := rdmaDevices(t)
	if root.Dir() != "/" {
		record(t, install.StackFromFiles(root, proc(t), devs))
		return
	}
	record(t, install.StackLive(root, proc(t), devs, dl.Probe, install.Tools{Timeout: testenv.Config(t).Timeout}))
}

// INST-10: the RDMA kernel modules are loaded, and every RDMA-capable NIC
// has its RDMA driver (install.Modules).
func TestINST10RDMAKernelModules(t *testing.T) {
	testenv.Req(t, "INST-10")
	root := testenv.Root(t)
	devs, classExists := rdmaDevices(t)
	record(t, install.Modules(root, modules(t, root), devs, classExists))
}

// INST-11: one /dev/infiniband/uverbsN per RDMA device and rdma_cm exist,
// and this user can open them read-write. In a container (internal/virt)
// the pod's /dev holds the nodes of the NICs it was given: those are
// judged, and the node's other NICs are reported as not given to this
// container, a fact; none given at all fails.
func TestINST11RDMADeviceNodes(t *testing.T) {
	testenv.Req(t, "INST-11")
	devs, exists := rdmaDevices(t)
	record(t, install.DeviceNodes(testenv.Root(t), devs, exists, proc(t).Container.In))
}

// INST-12: the NIC the other areas use has an ACTIVE port (what ibv_devinfo
// shows as PORT_ACTIVE), read from sysfs so it needs no verbs library. The
// NIC is the selection's primary rail NIC (GDR_RDMA_DEVICE, or the nearest
// candidate NIC of GDR_GPU's or rail 0's GPU), at port GDR_IB_PORT.
func TestINST12RDMAPortActive(t *testing.T) {
	testenv.Req(t, "INST-12")
	rdmaDevices(t) // a malformed RDMA device is not judged
	sel := testenv.Selection(t)
	if r := sel.Primary; r != nil && r.NIC != nil && len(sel.Devices) > 0 {
		testenv.RailAttrs(t, r)
	}
	record(t, install.Port(testenv.Root(t), sel, testenv.Config(t).RDMADevice))
}
