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

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

const (
	remedyNodeMissing = "on a host: check udev (rdma-core installs 90-rdma-umad/rdma-ucm rules; udevadm trigger) or create it with mknod; in a container: request the NIC (the pod's resource request for its RDMA device plugin, or --device %s); a container given only some NICs lacks the others' nodes by design, and the rails leave those NICs out"
	remedyNotGiven    = "request the node's RDMA NICs in the pod's resources (deploy/k8s/job.yaml: rdma/rdma_shared_device_a, the RDMA shared device plugin's resource; with SR-IOV, the VF resource), or --device /dev/infiniband/uverbsN for docker/podman"
)

// DeviceNodes is INST-11: one /dev/infiniband/uverbsN per RDMA device and
// rdma_cm exist, and this user can open them read-write. Nodes are looked
// for where this process opens them (root.Devices(): its own /dev on the
// running host, also when GDR_HOST_ROOT mounts the node's "/" elsewhere;
// the tree's /dev in a recorded tree), which is where libibverbs stats and
// opens them (rdma-core libibverbs/init.c try_access_device). In a
// container (inPod) the pod's /dev holds the nodes of the NICs it was
// given: those are judged, and the node's other NICs are a fact (not given
// to this container); none given at all fails. exists says whether
// /sys/class/infiniband exists.
func DeviceNodes(root *hostfs.Root, devs []*rdmadev.Device, exists, inPod bool) Judged {
	var j Judged
	dr := root.Devices()
	var nodes []string
	all, _ := dr.Glob("/dev/infiniband/*")
	for _, n := range all {
		if !strings.HasPrefix(path.Base(n), ".") { // a recorded tree's .gitkeep
			nodes = append(nodes, n)
		}
	}
	if len(devs) == 0 && len(nodes) == 0 {
		how := "is missing"
		if exists {
			how = "is empty"
		}
		j.add(verdict.Absentf(reqs.RemedyNoRDMADevice, "no RDMA device (%s %s) and nothing in %s", root.Host("/sys/class/infiniband"), how, dr.Host("/dev/infiniband")))
		return j
	}
	// /sys/class/infiniband_verbs/uverbsN/ibdev names the device each node serves.
	verbs, _ := root.Glob("/sys/class/infiniband_verbs/uverbs*")
	want := map[string]string{}
	for _, v := range verbs {
		ib, _ := root.ReadString(v + "/ibdev")
		want["/dev/infiniband/"+path.Base(v)] = ib
	}
	if len(devs) > 0 && len(verbs) == 0 {
		km, err := kmod.New(root)
		if err != nil {
			j.add(verdict.NotJudgedf("", "kernel modules: %v", err))
			return j
		}
		_, state, err := ModuleState(root, km, "ib_uverbs")
		if err != nil {
			j.add(verdict.Of(err))
			return j
		}
		j.add(verdict.Failf("modprobe ib_uverbs (reload the NIC's RDMA driver if ib_uverbs is loaded; check dmesg)",
			"RDMA device(s) %s but no %s: user space cannot reach them (ib_uverbs %s)", DevNames(devs), root.Host("/sys/class/infiniband_verbs")+"/uverbs*", state))
	}
	var given, notGiven []string
	for _, v := range slices.Sorted(maps.Keys(want)) {
		if inPod && !dr.Exists(v) {
			notGiven = append(notGiven, want[v]+" ("+v+")")
			continue
		}
		given = append(given, want[v])
		j.merge(node(root, v, "verbs of "+want[v]))
	}
	if inPod {
		if len(notGiven) > 0 {
			j.attr("nics_not_given", strings.Join(notGiven, " "))
			j.info("not given to this container (the device plugin gave the pod other NICs; not a failure): %s", strings.Join(notGiven, ", "))
		}
		if len(given) > 0 {
			j.attr("nics_given", strings.Join(given, " "))
		} else if len(want) > 0 {
			j.add(verdict.Failf(remedyNotGiven, "no RDMA device was given to this container: none of %s exists in %s (the node has %s)",
				strings.Join(slices.Sorted(maps.Keys(want)), ", "), dr.Host("/dev/infiniband"), DevNames(devs)))
		}
	}
	if len(devs) > 0 || dr.Exists("/dev/infiniband/rdma_cm") {
		j.merge(node(root, "/dev/infiniband/rdma_cm", "RDMA connection manager"))
	}
	return j
}

// node judges one device node: it exists, and on the running host it is a
// character device this user opens read-write (a recorded tree's is only
// seen).
func node(root *hostfs.Root, p, what string) Judged {
	var j Judged
	dr := root.Devices()
	if !dr.Exists(p) {
		j.add(verdict.Failf(fmt.Sprintf(remedyNodeMissing, p), "%s (%s) is missing", dr.Host(p), what))
		return j
	}
	if !root.IsLive() {
		j.info("%s present (recorded tree: not opened)", p)
		return j
	}
	fi, err := os.Stat(p)
	if err == nil && fi.Mode()&os.ModeCharDevice == 0 {
		j.add(verdict.Failf("remove it and let udev recreate the device node (udevadm trigger)", "%s is not a character device (mode %v)", p, fi.Mode()))
		return j
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		remedy := "check dmesg"
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
			remedy = "make it 0666 (rdma-core's udev rules do) or add the user to its group, and in containers pass the device (--device " + p + ")"
		}
		j.add(verdict.Failf(remedy, "%s (%s) does not open read-write: %v (mode %v)", p, what, err, modeOf(p)))
		return j
	}
	f.Close()
	j.info("%s opens read-write (%s)", p, what)
	return j
}

// modeOf is a device node's mode and owner, for a message about why it
// does not open.
func modeOf(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "unknown"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%v uid %d gid %d", fi.Mode(), st.Uid, st.Gid)
	}
	return fi.Mode().String()
}
