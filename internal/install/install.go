// Package install is the engine of the install checks (INST-*): it reads
// what the host's files say about the NVIDIA driver, the CUDA toolkit,
// rdma-core or MLNX_OFED, kernel modules and device nodes, and returns
// what it judged as verdict.Findings with the facts (attributes) beside
// them. conformance/install reads requirement -> engine -> record.
//
// It reads files and runs read-only host tools; what needs a loaded
// library (dlopen) is handed in by the caller (harness/dl), so the rules
// build and are unit-tested without cgo.
package install

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// Judged is what one check found: facts to record as gdr.<key>, in order,
// and findings (Info lines, failures, an absence that ends the test).
type Judged struct {
	Attrs    []verdict.Attr
	Findings []verdict.Finding
}

func (j *Judged) attr(key, value string) {
	j.Attrs = append(j.Attrs, verdict.Attr{Key: key, Value: value})
}

func (j *Judged) add(f *verdict.Finding) { j.Findings = append(j.Findings, *f) }

func (j *Judged) info(format string, args ...any) {
	j.Findings = append(j.Findings, verdict.Finding{Level: verdict.Info, Cause: fmt.Sprintf(format, args...)})
}

func (j *Judged) merge(o Judged) {
	j.Attrs = append(j.Attrs, o.Attrs...)
	j.Findings = append(j.Findings, o.Findings...)
}

// Source names whose rdma-core a result judged.
func Source(root *hostfs.Root, p virt.Process) string {
	switch {
	case root.NodeMounted():
		return "node's rdma-core under " + root.Dir()
	case !root.IsLive() && p.Container.In:
		return "node's rdma-core under " + root.Dir() + " (a recorded pod's tree)"
	case !root.IsLive():
		return "rdma-core under GDR_HOST_ROOT=" + root.Dir() + " (a recorded tree)"
	case p.Container.In:
		return "this image's"
	}
	return "this host's"
}

// NodeNotVisible says, in a container whose host root is its own "/"
// (GDR_HOST_ROOT=/, as deploy/k8s-pod-network sets it for a VF's netdev in
// the pod's namespace), that the node's files of what cannot be seen: the
// image's were judged, and in a container those are what the workloads'
// images stand in for. A fact (gdr.node_files), not an absence: the node's
// user space serves only the node's own processes.
func NodeNotVisible(root *hostfs.Root, p virt.Process, what string) Judged {
	var j Judged
	if !p.Container.In || root.Dir() != "/" {
		return j
	}
	j.attr("node_files", "not visible from this container (GDR_HOST_ROOT=/)")
	j.info("%s of the node not seen: GDR_HOST_ROOT is / and / is this image's (%s); this image's was judged. To see the node's too, mount the node's / read-only and set GDR_HOST_ROOT to it (deploy/k8s/job.yaml: a hostPath volume at /host and GDR_HOST_ROOT=/host)", what, p.Container)
	return j
}

// DevString names a PCI function as install's messages do: address and
// bound driver.
func DevString(d *pci.Device) string {
	drv := d.Driver
	if drv == "" {
		drv = "no driver"
	}
	return fmt.Sprintf("%s (%s)", d.BDF, drv)
}

// JoinDevs lists PCI functions (DevString).
func JoinDevs(ds []*pci.Device) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = DevString(d)
	}
	return strings.Join(s, ", ")
}

// DevNames lists RDMA devices by name.
func DevNames(ds []*rdmadev.Device) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Name
	}
	return strings.Join(s, ", ")
}

// FirstLines keeps tool output short enough for a failure message.
func FirstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// emptyOrMissing says how a class directory without devices looks.
func emptyOrMissing(exists bool) string {
	if exists {
		return "empty"
	}
	return "missing"
}
