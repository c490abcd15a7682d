package install

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/install"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
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
	root := testenv.Root(t)
	// Nodes are looked for where this process opens them (its own /dev on
	// the running host, also when GDR_HOST_ROOT mounts the node's "/"
	// elsewhere; the tree's /dev in a recorded tree): that is where
	// libibverbs stats and opens them (rdma-core libibverbs/init.c
	// try_access_device).
	dr := root.Devices()
	devs, exists := rdmaDevices(t)
	var nodes []string
	all, _ := dr.Glob("/dev/infiniband/*")
	for _, n := range all {
		if !strings.HasPrefix(path.Base(n), ".") { // a recorded tree's .gitkeep
			nodes = append(nodes, n)
		}
	}
	if len(devs) == 0 && len(nodes) == 0 {
		testenv.Absent(t, reqs.RemedyNoRDMADevice, "no RDMA device (%s %s) and nothing in %s", root.Host("/sys/class/infiniband"), map[bool]string{true: "is empty", false: "is missing"}[exists], dr.Host("/dev/infiniband"))
	}
	// /sys/class/infiniband_verbs/uverbsN/ibdev names the device each node serves.
	verbs, _ := root.Glob("/sys/class/infiniband_verbs/uverbs*")
	want := map[string]string{}
	for _, v := range verbs {
		ib, _ := root.ReadString(v + "/ibdev")
		want["/dev/infiniband/"+path.Base(v)] = ib
	}
	if len(devs) > 0 && len(verbs) == 0 {
		_, state, err := install.ModuleState(root, modules(t, root), "ib_uverbs")
		testenv.Stop(t, err)
		testenv.Errorf(t, "modprobe ib_uverbs (reload the NIC's RDMA driver if ib_uverbs is loaded; check dmesg)",
			"RDMA device(s) %s but no %s: user space cannot reach them (ib_uverbs %s)", install.DevNames(devs), root.Host("/sys/class/infiniband_verbs")+"/uverbs*", state)
	}
	// In a container the device plugin gives the pod the nodes of the NICs
	// it may use; the node's other NICs have none here by design.
	inPod := proc(t).Container.In
	check := func(node, what string) {
		if !dr.Exists(node) {
			testenv.Errorf(t, "on a host: check udev (rdma-core installs 90-rdma-umad/rdma-ucm rules; udevadm trigger) or create it with mknod; in a container: request the NIC (the pod's resource request for its RDMA device plugin, or --device "+node+"); a container given only some NICs lacks the others' nodes by design, and the rails leave those NICs out",
				"%s (%s) is missing", dr.Host(node), what)
			return
		}
		if !root.IsLive() {
			t.Logf("%s present (recorded tree: not opened)", node)
			return
		}
		fi, err := os.Stat(node)
		if err == nil && fi.Mode()&os.ModeCharDevice == 0 {
			testenv.Errorf(t, "remove it and let udev recreate the device node (udevadm trigger)", "%s is not a character device (mode %v)", node, fi.Mode())
			return
		}
		f, err := os.OpenFile(node, os.O_RDWR, 0)
		if err != nil {
			remedy := "check dmesg"
			if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
				remedy = "make it 0666 (rdma-core's udev rules do) or add the user to its group, and in containers pass the device (--device " + node + ")"
			}
			testenv.Errorf(t, remedy, "%s (%s) does not open read-write: %v (mode %v)", node, what, err, install.ModeOf(node))
			return
		}
		f.Close()
		t.Logf("%s opens read-write (%s)", node, what)
	}
	var given, notGiven []string
	for _, v := range slices.Sorted(maps.Keys(want)) {
		if inPod && !dr.Exists(v) {
			notGiven = append(notGiven, want[v]+" ("+v+")")
			continue
		}
		given = append(given, want[v])
		check(v, "verbs of "+want[v])
	}
	if inPod {
		if len(notGiven) > 0 {
			testenv.Attr(t, "nics_not_given", strings.Join(notGiven, " "))
			t.Logf("not given to this container (the device plugin gave the pod other NICs; not a failure): %s", strings.Join(notGiven, ", "))
		}
		if len(given) > 0 {
			testenv.Attr(t, "nics_given", strings.Join(given, " "))
		} else if len(want) > 0 {
			testenv.Errorf(t, "request the node's RDMA NICs in the pod's resources (deploy/k8s/job.yaml: rdma/rdma_shared_device_a, the RDMA shared device plugin's resource; with SR-IOV, the VF resource), or --device /dev/infiniband/uverbsN for docker/podman",
				"no RDMA device was given to this container: none of %s exists in %s (the node has %s)", strings.Join(slices.Sorted(maps.Keys(want)), ", "), dr.Host("/dev/infiniband"), install.DevNames(devs))
		}
	}
	if len(devs) > 0 || dr.Exists("/dev/infiniband/rdma_cm") {
		check("/dev/infiniband/rdma_cm", "RDMA connection manager")
	}
}

// INST-12: the NIC the other areas use has an ACTIVE port (what ibv_devinfo
// shows as PORT_ACTIVE), read from sysfs so it needs no verbs library. The
// NIC is the selection's primary rail NIC (GDR_RDMA_DEVICE, or the nearest
// candidate NIC of GDR_GPU's or rail 0's GPU), at port GDR_IB_PORT.
func TestINST12RDMAPortActive(t *testing.T) {
	testenv.Req(t, "INST-12")
	root := testenv.Root(t)
	devs, exists := rdmaDevices(t)
	cfg := testenv.Config(t)
	if len(devs) == 0 {
		testenv.Absent(t, reqs.RemedyNoRDMADevice, "no RDMA device: %s is %s", root.Host(rdmadev.ClassDir), map[bool]string{true: "empty", false: "missing (ib_core not loaded)"}[exists])
	}
	sel := testenv.Selection(t)
	var report []string
	signs := install.PortSigns{Port: sel.Port}
	for _, d := range devs {
		if cfg.RDMADevice != "" && d.Name != cfg.RDMADevice {
			continue
		}
		for _, p := range d.Ports {
			desc := fmt.Sprintf("%s port %d: state %q, phys_state %q, link_layer %q, rate %q", d.Name, p.Num, p.RawState, p.RawPhysState, p.LinkLayer, p.Rate)
			t.Log(desc)
			report = append(report, desc)
			if p.Num != sel.Port {
				if p.Active() && signs.OtherPort == "" {
					signs.OtherPort = fmt.Sprintf("%s port %d", d.Name, p.Num)
				}
				continue // only GDR_IB_PORT is the port the other areas use
			}
			signs.Init = signs.Init || p.State == "INIT" && p.LinkLayer == "InfiniBand"
			signs.PhysDown = signs.PhysDown || p.PhysState != "LinkUp"
		}
	}
	if r := sel.Primary; r != nil && r.NIC != nil {
		testenv.RailAttrs(t, r)
		if r.NIC.PortState == "ACTIVE" {
			testenv.Attr(t, "active_port", fmt.Sprintf("%s/%d", r.NIC.Name, r.NIC.Port))
			t.Logf("%s port %d is ACTIVE: %s (%s)", r.NIC.Name, r.NIC.Port, r.Reason, sel.PrimaryWhy)
			return
		}
	} else {
		// No candidate NIC: an ACTIVE port on a NIC user space cannot open
		// is still an ACTIVE port (INST-11 judges the device nodes).
		for _, n := range sel.NICs {
			if n.PortState == "ACTIVE" {
				testenv.Attr(t, "active_port", fmt.Sprintf("%s/%d", n.Name, n.Port))
				t.Logf("%s port %d is ACTIVE, but %s is not a rail candidate: %s", n.Name, n.Port, n.Name, n.Why)
				return
			}
		}
	}
	if len(report) == 0 {
		testenv.Failf(t, "check dmesg for the NIC driver's errors", "RDMA device(s) %s have no ports in sysfs", install.DevNames(devs))
	}
	what := fmt.Sprintf("no RDMA port is ACTIVE at port %d (GDR_IB_PORT)", sel.Port)
	if cfg.RDMADevice != "" {
		what = fmt.Sprintf("GDR_RDMA_DEVICE=%s port %d (GDR_IB_PORT) is not ACTIVE", cfg.RDMADevice, sel.Port)
	}
	testenv.Failf(t, signs.Remedy(), "%s:\n%s", what, strings.Join(report, "\n"))
}
