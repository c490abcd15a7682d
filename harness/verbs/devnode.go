// Why opening a /dev/infiniband node failed: its mode, owner and the remedy.

package verbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Device nodes. ibv_open_device opens /dev/infiniband/uverbsN (rdma-core
// libibverbs/device.c, verbs_open_device); rdma_cm users open
// /dev/infiniband/rdma_cm. A non-root run that may not open one gets
// EACCES (the node's mode) or EPERM (a device cgroup, seccomp or an LSM):
// NodeAccess says which node, how it is set and what gives access.

// NodeAccess explains errno from opening the device node node (a host path
// such as /dev/infiniband/uverbs0, looked at through root): the cause (its
// mode, owner and group as stat shows them, who this process is) and the
// remedy, as fields: the host's configuration fell short.
func NodeAccess(root *hostfs.Root, node string, errno syscall.Errno) verdict.Finding {
	who := fmt.Sprintf("uid %d, gid %d", os.Geteuid(), os.Getegid())
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		who = u.Username + " (" + who + ")"
	}
	if gs, err := os.Getgroups(); err == nil && len(gs) > 0 {
		who += fmt.Sprintf(", groups %v", gs)
	}
	head := fmt.Sprintf("opening %s failed with %s as %s", root.Host(node), errnoName(errno), who)
	access := func(cause, remedy string) verdict.Finding {
		return verdict.Finding{Outcome: verdict.FellShort, Cause: head + "; " + cause, Remedy: remedy}
	}
	fi, err := root.Stat(node)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return access(root.Host(node)+" does not exist",
				fmt.Sprintf("load ib_uverbs (and rdma_ucm for rdma_cm), or in a container pass the node (--device %s; Kubernetes: an RDMA device plugin)", node))
		}
		return access(fmt.Sprintf("stat of it failed too (%v)", err), nodeRemedy(node, ""))
	}
	owner, group, uid, gid := "?", "?", -1, -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, gid = int(st.Uid), int(st.Gid)
		owner, group = strconv.Itoa(uid), strconv.Itoa(gid)
		if u, err := user.LookupId(owner); err == nil {
			owner = u.Username
		}
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
	}
	desc := fmt.Sprintf("%s is mode %04o (%s), owner %s (uid %d), group %s (gid %d)", root.Host(node), fi.Mode().Perm(), fi.Mode(), owner, uid, group, gid)
	if errno == syscall.EPERM && fi.Mode().Perm()&0o006 == 0o006 {
		return access(desc+", which allows every user: a device cgroup, seccomp or a security module denies it",
			"pass the device into the container (--device "+node+", or the Kubernetes RDMA device plugin / a privileged pod), or run as root")
	}
	g := ""
	if gid > 0 && fi.Mode().Perm()&0o060 == 0o060 {
		g = group
	}
	return access(desc, nodeRemedy(node, g))
}

// nodeRemedy is how to get access to node; group, when the node grants its
// group read and write, is the group to join.
func nodeRemedy(node, group string) string {
	if group != "" {
		return fmt.Sprintf("add the user to group %s (usermod -aG %s <user>, then log in again), or run as root", group, group)
	}
	return fmt.Sprintf("a udev rule giving users access (e.g. KERNEL==\"uverbs*\", MODE=\"0666\"; or GROUP=\"rdma\", MODE=\"0660\" and add the user to group rdma; then `udevadm trigger`), in a container pass the node (--device %s), or run as root", node)
}
