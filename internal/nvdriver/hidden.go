package nvdriver

// NVIDIA GPUs the PCI bus lists that CUDA does not show this process.
//
// An absent GPU is a skip; a GPU that is there but that CUDA cannot see
// is not absent. CUDA finds a GPU through the nvidia kernel driver bound to
// its PCI function and the driver's device files (/dev/nvidiactl and
// /dev/nvidia<minor>), which the process must be able to open; then
// CUDA_VISIBLE_DEVICES picks among what it found. Each step can hide GPUs
// from a process on a host that has them: the driver not bound (nouveau,
// vfio-pci, none), the driver excluding the GPU, the device files missing
// or denied (a device cgroup: Slurm's ConstrainDevices, a container
// runtime), a container not given GPUs at all, CUDA_VISIBLE_DEVICES naming
// none. Visibility says which, from the host's files and this process's
// settings; the test that needed the GPU fails with it.
//
// Which outcome: a host fault (binding, exclusion, device files the host
// never made, a driver that does not answer) fell short; the run's own
// configuration (a Slurm step without a GPU request, CUDA_VISIBLE_DEVICES,
// a container or cgroup not given the GPUs, a user not allowed to open
// them) is not judged: not a hardware fault, yet neither a pass nor absent.

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/gdrconf/gdrconf/internal/virt"
)

// CtlNode is the NVIDIA driver's control device (major 195, minor 255);
// GPUNode is the device file of the GPU whose Device Minor is minor.
const CtlNode = "/dev/nvidiactl"

// GPUNode is /dev/nvidia<minor>.
func GPUNode(minor string) string { return "/dev/nvidia" + minor }

// Remedies the suite gives for a GPU the NVIDIA driver does not hold.
const (
	NouveauRemedy = "blacklist nouveau: printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > /etc/modprobe.d/blacklist-nouveau.conf; update-initramfs -u (dracut -f on RHEL); reboot"
	vfioRemedy    = "give it back to the nvidia driver (driverctl unset-override <address>, or take its ID out of vfio-pci.ids on the kernel command line and reboot), unless it is passed through to a VM on purpose; then leave it out with GDR_GPU"
	unboundRemedy = "load the NVIDIA driver (modprobe nvidia) and check dmesg for NVRM errors (RmInitAdapter failed) that kept it from binding"
)

// Visibility is what CUDA showed this process, beside the PCI bus.
type Visibility struct {
	// Root is the running host's root (hostfs.Root.IsLive): the driver's
	// files under it (/proc/driver/nvidia/gpus), device files in
	// Root.Devices(). A recorded tree cannot show what CUDA sees: callers
	// judge visibility only on the live host.
	Root *hostfs.Root
	// GPUs are the NVIDIA GPUs on the PCI bus (pci.Device.IsGPU), in PCI
	// order; Want the addresses that must be visible (nil: every one).
	GPUs []*pci.Device
	Want []string
	// Seen are the PCI addresses CUDA lists. CUDA says what it answered
	// when it lists none ("cuInit(0): CUDA_ERROR_NO_DEVICE (...)", or
	// libcuda.so.1's dlopen error), and LibMissing that libcuda.so.1 did
	// not open at all.
	Seen       []string
	CUDA       string
	LibMissing bool
	// Slurm is Slurm's word on this process's GPUs, with
	// CUDA_VISIBLE_DEVICES (config.ParseSlurm reads both); Container
	// whether this process runs in one (internal/virt).
	Slurm     config.Slurm
	Container virt.Container
}

// Hidden is the judgement: which GPUs CUDA does not show, and why.
type Hidden struct {
	// Missing are the wanted GPUs CUDA does not list.
	Missing []*pci.Device
	// Subset, when set, says the process was handed some of the host's
	// GPUs on purpose and CUDA sees some of them: "CUDA_VISIBLE_DEVICES=0,1".
	// The missing ones are then out of this run's reach, no fault; Finding
	// is empty.
	Subset string
	// Finding is the judgement, empty for a subset: its Cause names both
	// counts, the addresses and the reasons, its Remedy what to do for
	// each; its Outcome is NotJudged when every reason is the run's
	// configuration, none the host's, else FellShort.
	Finding verdict.Finding
}

// Err is h's finding as an error (verdict.As reads it back); nil for a
// subset handed over on purpose.
func (h *Hidden) Err() error {
	if h == nil || h.Subset != "" {
		return nil
	}
	f := h.Finding
	return &f
}

// Judge compares CUDA's view with the PCI bus. It is nil when no wanted
// GPU is on the bus (absent: the caller's skip) or CUDA lists every
// wanted one.
//
// Partial views: where CUDA lists some GPUs but not others, the others are
// a deliberate subset (Hidden.Subset) when this process was handed some
// GPUs: CUDA_VISIBLE_DEVICES set to a list, a Slurm step given GPUs
// (SLURM_STEP_GPUS), or a container (a Kubernetes pod given nvidia.com/gpu:
// 4 of a node's 8). Not when CUDA shows fewer devices than
// CUDA_VISIBLE_DEVICES names (at most the bus's count), nor for a GPU whose
// device file this step or container opens: those were given to it.
// Elsewhere a GPU CUDA leaves out is judged like a host whose GPUs CUDA
// cannot see at all.
func Judge(v Visibility) *Hidden {
	want := v.GPUs
	if v.Want != nil {
		want = nil
		for _, d := range v.GPUs {
			if slices.Contains(v.Want, d.BDF) {
				want = append(want, d)
			}
		}
	}
	h := &Hidden{}
	for _, d := range want {
		if !slices.Contains(v.Seen, d.BDF) {
			h.Missing = append(h.Missing, d)
		}
	}
	if len(h.Missing) == 0 {
		return nil
	}
	infos := procGPUs(v.Root)
	if len(v.Seen) > 0 {
		if why := subset(v); why != "" {
			// A subset, unless CUDA shows fewer than it names, or a GPU
			// this process was given (its device file opens) is missing.
			if c := cvdShort(v); c != "" {
				h.Finding = verdict.Finding{Outcome: verdict.FellShort, Cause: headline(v, h.Missing) + "; " + c,
					Remedy: "check each GPU it names (nvidia-smi; dmesg for NVRM and Xid errors), and that it names only devices this host has"}
				return h
			}
			given := givenAnyway(v, h.Missing, infos)
			if len(given) == 0 {
				h.Subset = why
				return h
			}
			h.Missing = given
		}
	}
	var causes, remedies []string
	judged := true // every reason is the run's configuration
	add := func(cause, remedy string, run bool) {
		causes = append(causes, cause)
		if remedy != "" && !slices.Contains(remedies, remedy) {
			remedies = append(remedies, remedy)
		}
		judged = judged && run
	}
	// The GPUs the nvidia driver does not hold: nothing in this process
	// can make CUDA see them.
	var rest []*pci.Device
	byDriver := map[string][]string{}
	var drivers []string
	var excluded []string
	for _, d := range h.Missing {
		switch {
		case d.Driver != "nvidia":
			if _, ok := byDriver[d.Driver]; !ok {
				drivers = append(drivers, d.Driver)
			}
			byDriver[d.Driver] = append(byDriver[d.Driver], d.BDF)
		case infos[d.BDF].Excluded:
			excluded = append(excluded, d.BDF)
		default:
			rest = append(rest, d)
		}
	}
	for _, drv := range drivers {
		gpus := strings.Join(byDriver[drv], ", ")
		switch drv {
		case "nouveau":
			add(gpus+" bound to nouveau, not to the nvidia driver", NouveauRemedy, false)
		case "vfio-pci":
			add(gpus+" bound to vfio-pci (held for passthrough to a VM), not to the nvidia driver", vfioRemedy, false)
		case "":
			add(gpus+" bound to no driver (no driver link in "+pci.DevicesDir+"/<address>)", unboundRemedy, false)
		default:
			add(gpus+" bound to "+drv+", not to the nvidia driver", "unbind it from "+drv+" and bind it to nvidia (driverctl, or a reboot without that driver)", false)
		}
	}
	if len(excluded) > 0 {
		add(strings.Join(excluded, ", ")+" excluded by the nvidia driver (GPU Excluded: Yes in "+GPUsDir+"/<address>/information)",
			"take it out of NVreg_ExcludedGpus, or read dmesg for the NVRM error that made the driver exclude it", false)
	}
	if len(rest) > 0 {
		cause, remedy, run := processCause(v, rest, infos)
		add(cause, remedy, run)
	}
	h.Finding = verdict.Finding{Outcome: verdict.FellShort, Cause: headline(v, h.Missing) + "; " + strings.Join(causes, "; "),
		Remedy: strings.Join(remedies, "; ")}
	if judged {
		h.Finding.Outcome = verdict.NotJudged
	}
	return h
}

// headline names both counts and the addresses, then what CUDA answered:
// "the PCI bus lists 2 NVIDIA GPU(s) (0000:3b:00.0, 0000:4b:00.0) but CUDA
// sees none; cuInit(0): ...". Its first clause is the same for every test
// of one host, so the report lists the requirements under one cause.
func headline(v Visibility, missing []*pci.Device) string {
	var bus []string
	for _, d := range v.GPUs {
		bus = append(bus, d.BDF)
	}
	s := fmt.Sprintf("the PCI bus lists %d NVIDIA GPU(s) (%s)", len(v.GPUs), strings.Join(bus, ", "))
	if len(v.Seen) == 0 {
		s += " but CUDA sees none"
		if v.CUDA != "" {
			s += "; " + v.CUDA
		}
		return s
	}
	var miss []string
	for _, d := range missing {
		miss = append(miss, d.BDF)
	}
	return s + fmt.Sprintf(" but CUDA sees %d (%s), not %s", len(v.Seen), strings.Join(v.Seen, ", "), strings.Join(miss, ", "))
}

// subset says how this process was handed some of the host's GPUs on
// purpose, "" when it was not.
func subset(v Visibility) string {
	s := v.Slurm
	switch {
	case s.CUDAVisibleSet && s.CUDAVisible != "":
		return "CUDA_VISIBLE_DEVICES=" + s.CUDAVisible
	case s.JobID != "" && s.StepGPUs != "":
		return "the Slurm step's GPUs (SLURM_STEP_GPUS=" + s.StepGPUs + ")"
	case v.Container.In:
		return "the GPUs given to this " + v.Container.String()
	}
	return ""
}

// cvdShort says how CUDA shows fewer devices than CUDA_VISIBLE_DEVICES
// names (its entries, at most the GPUs on the bus), "" when it does not or
// the variable is unset. Which of them is missing cannot be told: its
// entries are CUDA's own indexes or UUIDs, not PCI addresses.
func cvdShort(v Visibility) string {
	s := v.Slurm
	if !s.CUDAVisibleSet || noDevice(s.CUDAVisible) {
		return ""
	}
	named := min(cvdNamed(s.CUDAVisible), len(v.GPUs))
	if len(v.Seen) >= named {
		return ""
	}
	return fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s names %d device(s) but CUDA sees %d", s.CUDAVisible, named, len(v.Seen))
}

// givenAnyway are the missing GPUs whose device file this process opens
// although it was handed a subset by a Slurm step or a container: those
// were given to it (a device cgroup or a runtime leaves out only the files
// of the GPUs it does not give), so CUDA leaving them out is no subset. A
// GPU whose Device Minor is unknown cannot be told and counts as not given.
func givenAnyway(v Visibility, missing []*pci.Device, infos map[string]GPUInfo) []*pci.Device {
	if v.Root == nil || (v.Slurm.CUDAVisibleSet && v.Slurm.CUDAVisible != "") {
		return nil // CUDA_VISIBLE_DEVICES picks among GPUs whose files all open
	}
	dev := v.Root.Devices()
	var out []*pci.Device
	for _, d := range missing {
		if m := infos[d.BDF].Minor; m != "" && dev.OpenProbe(GPUNode(m)) == nil {
			out = append(out, d)
		}
	}
	return out
}

// processCause says why CUDA does not show this process GPUs the nvidia
// driver holds, first match in the order a cause hides the next: the Slurm
// step, CUDA_VISIBLE_DEVICES naming no device, the device files, the
// library, CUDA_VISIBLE_DEVICES naming none CUDA finds; else the driver.
// run reports whether the cause is the run's configuration.
func processCause(v Visibility, gpus []*pci.Device, infos map[string]GPUInfo) (cause, remedy string, run bool) {
	s := v.Slurm
	if c := s.NoGPUsCause(); c != "" {
		return c, config.SlurmNoGPUsRemedy, true
	}
	const cvdRemedy = "unset CUDA_VISIBLE_DEVICES, or list the GPUs to test in it (indexes or GPU UUIDs)"
	if s.CUDAVisibleSet && noDevice(s.CUDAVisible) {
		return fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s names no GPU", s.CUDAVisible), cvdRemedy, true
	}
	missing, denied, perm := nodes(v.Root, gpus, infos)
	switch {
	case (len(missing) > 0 || len(denied) > 0 || len(perm) > 0) && v.Container.In:
		return fmt.Sprintf("this %s was not given them: %s", v.Container, nodeList(missing, denied, perm)), containerRemedy, true
	case len(missing) > 0:
		return "the driver's device files are missing: " + nodeList(missing, nil, nil),
			"the NVIDIA driver makes them through nvidia-modprobe (setuid) or its udev rule: install nvidia-modprobe, or run nvidia-modprobe -c <minor> for each GPU; check dmesg for NVRM errors", false
	case len(denied) > 0:
		return "a device cgroup denies them to this process: " + nodeList(nil, denied, perm),
			"run the suite where its GPUs' device files are allowed (a batch system's device constraint such as Slurm's ConstrainDevices with a GPU request, systemd's DevicePolicy, a container runtime's device rules)", true
	case len(perm) > 0:
		return "this process may not open them: " + nodeList(nil, nil, perm),
			"run as root, or as a user in the group the device files belong to (the driver's NVreg_DeviceFileGID and NVreg_DeviceFileMode)", true
	}
	if v.LibMissing {
		if v.Container.In {
			return fmt.Sprintf("this %s has the device files but no libcuda.so.1", v.Container),
				containerRemedy, true
		}
		return "libcuda.so.1, the driver's CUDA library, is not installed although the nvidia kernel driver holds them",
			"install the NVIDIA driver's CUDA library of the kernel module's version", false
	}
	if s.CUDAVisibleSet {
		return fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s names no GPU CUDA finds", s.CUDAVisible), cvdRemedy, true
	}
	return "the nvidia driver holds them and their device files open, yet CUDA does not list them",
		"read dmesg for NVRM errors (RmInitAdapter failed, Xid 79: fallen off the bus) and run nvidia-smi; reboot or reset the GPU (nvidia-smi -r); a driver and library of different versions shows here too", false
}

// containerRemedy is what a container not given GPUs needs.
const containerRemedy = "give the container its GPUs: in Kubernetes resources.limits nvidia.com/gpu (deploy/k8s's Job asks for them) with the NVIDIA device plugin and runtime; with docker or podman --gpus all (or --device nvidia.com/gpu=all through CDI)"

// cvdNamed counts the devices a CUDA_VISIBLE_DEVICES value names: its
// entries up to the first that is neither an index nor a GPU or MIG UUID,
// where CUDA stops reading (CUDA Programming Guide, "CUDA Environment
// Variables": empty makes no device visible; "If an invalid index is
// encountered, only devices with indices that appear before the invalid
// index in the list are visible"). "-1" and Slurm's old "NoDevFiles" name
// none.
func cvdNamed(v string) int {
	if strings.TrimSpace(v) == "" {
		return 0
	}
	n := 0
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		_, err := strconv.ParseUint(e, 10, 31)
		if err != nil && !strings.HasPrefix(e, "GPU-") && !strings.HasPrefix(e, "MIG-") {
			break
		}
		n++
	}
	return n
}

// noDevice reports a CUDA_VISIBLE_DEVICES value that names no device.
func noDevice(v string) bool { return cvdNamed(v) == 0 }

// nodes opens the control device and each GPU's node (by its Device Minor;
// a GPU without one is not probed) where this process opens device files,
// and sorts the ones it cannot reach by why: missing, denied by a device
// cgroup (EPERM), refused by their mode (EACCES). ENXIO and other errors
// of a driver behind the node count as reachable: CUDA gets that far.
func nodes(root *hostfs.Root, gpus []*pci.Device, infos map[string]GPUInfo) (missing, denied, perm []string) {
	if root == nil {
		return nil, nil, nil
	}
	dev := root.Devices()
	paths := []string{CtlNode}
	for _, d := range gpus {
		if m := infos[d.BDF].Minor; m != "" {
			paths = append(paths, GPUNode(m))
		}
	}
	for _, p := range paths {
		err := dev.OpenProbe(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, dev.Host(p))
		case errors.Is(err, syscall.EPERM):
			denied = append(denied, dev.Host(p))
		case errors.Is(err, syscall.EACCES):
			perm = append(perm, dev.Host(p))
		}
	}
	return missing, denied, perm
}

func nodeList(missing, denied, perm []string) string {
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, strings.Join(missing, ", ")+" missing")
	}
	if len(denied) > 0 {
		parts = append(parts, strings.Join(denied, ", ")+" denied (open: operation not permitted)")
	}
	if len(perm) > 0 {
		parts = append(parts, strings.Join(perm, ", ")+" refused (open: permission denied)")
	}
	return strings.Join(parts, "; ")
}

// procGPUs is the driver's information file of each GPU it holds, by
// address; what cannot be read is left out (the checks that read it judge it).
func procGPUs(root *hostfs.Root) map[string]GPUInfo {
	out := map[string]GPUInfo{}
	if root == nil {
		return out
	}
	gs, _ := ReadGPUs(root)
	for _, g := range gs {
		out[g.BDF] = g
	}
	return out
}
