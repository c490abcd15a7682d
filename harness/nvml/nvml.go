// Package nvml opens NVML (libnvidia-ml.so.1, loaded at run time by go-nvml)
// for a test and answers the few questions the suite asks of it: driver and
// CUDA driver versions, and per GPU its PCI address, name, compute capability
// and BAR1 size.
//
// Open ties the library's lifetime to the test: Init now, Shutdown in
// t.Cleanup. A host without the library gets testenv.Absent naming the file
// and the package that ships it; any other NVML error fails with NVML's text.
package nvml

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
)

// Library is the soname go-nvml dlopens.
const Library = "libnvidia-ml.so.1"

// Package names the distribution packages that ship Library, for messages.
var Package = "the NVIDIA driver's user-space libraries (Debian/Ubuntu: libnvidia-compute-<version>; RHEL: nvidia-driver-libs or nvidia-driver-NVML; runfile: " + nvdriver.Runfile + ")"

// lib is one process-wide go-nvml instance: NVML's Init/Shutdown are
// reference counted, so every Open adds one and its cleanup removes it.
var lib = gonvml.New()

// Error is a failed NVML call: the function and NVML's own error text.
type Error struct {
	Op  string
	Ret gonvml.Return
}

func (e *Error) Error() string { return fmt.Sprintf("NVML %s: %s", e.Op, e.Ret.Error()) }

// Is lets errors.Is(err, gonvml.ERROR_NOT_SUPPORTED) work on wrapped errors.
func (e *Error) Is(target error) bool {
	r, ok := target.(gonvml.Return)
	return ok && r == e.Ret
}

func check(op string, ret gonvml.Return) error {
	if ret == gonvml.SUCCESS {
		return nil
	}
	return &Error{Op: op, Ret: ret}
}

// Handle is an initialised NVML. Its methods return errors naming the NVML
// call; they never panic on a missing GPU.
type Handle struct {
	nv gonvml.Interface
}

// Wrap makes a Handle over an already initialised NVML interface (unit tests
// pass go-nvml's mock here).
func Wrap(nv gonvml.Interface) *Handle { return &Handle{nv: nv} }

// Open initialises NVML for t and shuts it down when t ends.
func Open(t testing.TB) *Handle {
	t.Helper()
	h, err := open()
	if err != nil {
		var ne *Error
		if errors.As(err, &ne) && ne.Ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
			testenv.Absent(t, "install "+Package, "%v", err)
		}
		testenv.Failf(t, Remedy(err), "%v", err)
	}
	t.Cleanup(func() {
		if ret := h.nv.Shutdown(); ret != gonvml.SUCCESS {
			testenv.Errorf(t, "", "NVML Shutdown: %v", ret.Error())
		}
	})
	return h
}

// TryOpen initialises NVML for t, shutting it down when t ends, and returns
// the error instead of ending t when NVML is missing or broken: for checks
// that use NVML for a detail (the NVLink between two GPUs) and report its
// absence rather than stop.
func TryOpen(t testing.TB) (*Handle, error) {
	t.Helper()
	h, err := open()
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if ret := h.nv.Shutdown(); ret != gonvml.SUCCESS {
			testenv.Errorf(t, "", "NVML Shutdown: %v", ret.Error())
		}
	})
	return h, nil
}

// open initialises NVML. When the library does not load, go-nvml says only
// ERROR_LIBRARY_NOT_FOUND; the dlopen text (which names the missing file or
// the broken dependency) is added by trying the same dlopen ourselves.
func open() (*Handle, error) {
	ret := lib.Init()
	if ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
		why := "not found by the dynamic loader"
		var de *dl.Error
		if err := dl.Probe(Library); errors.As(err, &de) && de.Msg != "" {
			why = de.Msg
		}
		return nil, fmt.Errorf("%s does not load (%s): %w", Library, why, &Error{Op: "Init", Ret: ret})
	}
	if err := check("Init", ret); err != nil {
		return nil, err
	}
	return &Handle{nv: lib}, nil
}

// Remedy says what to do about an NVML error, for failure messages.
func Remedy(err error) string {
	var ne *Error
	if !errors.As(err, &ne) {
		return "see the NVML error above"
	}
	switch ne.Ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return "install " + Package
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return "load the NVIDIA kernel driver (modprobe nvidia) or reinstall the driver; check dmesg for NVRM errors"
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the user-space driver libraries and the loaded kernel module differ in version: reboot, or reload the module (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia), or reinstall one driver version"
	case gonvml.ERROR_NO_PERMISSION:
		return "run as a user that can open /dev/nvidia* (root, or the group the device nodes belong to)"
	case gonvml.ERROR_GPU_IS_LOST:
		return "the GPU fell off the bus: check dmesg for Xid 79, reseat/reset the GPU, then reboot"
	case gonvml.ERROR_FUNCTION_NOT_FOUND:
		return "libnvidia-ml is older than this call: upgrade the NVIDIA driver"
	}
	return "check dmesg for NVRM/Xid messages and the driver installation"
}

// DriverVersion is the display driver version NVML reports ("580.159.04").
func (h *Handle) DriverVersion() (string, error) {
	v, ret := h.nv.SystemGetDriverVersion()
	return strings.TrimSpace(v), check("SystemGetDriverVersion", ret)
}

// CUDADriverVersion is the highest CUDA version the driver supports, as
// CUDA encodes it (13000 for 13.0).
func (h *Handle) CUDADriverVersion() (int, error) {
	v, ret := h.nv.SystemGetCudaDriverVersion()
	return v, check("SystemGetCudaDriverVersion", ret)
}

// DeviceCount is the number of GPUs NVML sees.
func (h *Handle) DeviceCount() (int, error) {
	n, ret := h.nv.DeviceGetCount()
	return n, check("DeviceGetCount", ret)
}

// Device describes one GPU as NVML sees it.
type Device struct {
	Index     int
	BusID     string // normalised PCI address, lowercase dddd:bb:dd.f
	Name      string // "NVIDIA H200"
	CCMajor   int    // CUDA compute capability
	CCMinor   int
	BAR1Total uint64 // bytes; 0 when NVML does not report it
	BAR1Free  uint64
}

// CC is the compute capability as "9.0".
func (d Device) CC() string { return fmt.Sprintf("%d.%d", d.CCMajor, d.CCMinor) }

// Device returns what NVML reports about GPU i. BAR1 is optional (vGPU and
// some MIG set-ups refuse it): ERROR_NOT_SUPPORTED there leaves it zero.
func (h *Handle) Device(i int) (Device, error) {
	d := Device{Index: i}
	dev, ret := h.nv.DeviceGetHandleByIndex(i)
	if err := check(fmt.Sprintf("DeviceGetHandleByIndex(%d)", i), ret); err != nil {
		return d, err
	}
	pci, ret := dev.GetPciInfo()
	if err := check(fmt.Sprintf("DeviceGetPciInfo(%d)", i), ret); err != nil {
		return d, err
	}
	id, err := NormalizeBusID(cString(pci.BusId[:]))
	if err != nil {
		return d, fmt.Errorf("NVML DeviceGetPciInfo(%d): %w", i, err)
	}
	d.BusID = id
	if d.Name, ret = dev.GetName(); ret != gonvml.SUCCESS {
		return d, check(fmt.Sprintf("DeviceGetName(%d)", i), ret)
	}
	if d.CCMajor, d.CCMinor, ret = dev.GetCudaComputeCapability(); ret != gonvml.SUCCESS {
		return d, check(fmt.Sprintf("DeviceGetCudaComputeCapability(%d)", i), ret)
	}
	bar, ret := dev.GetBAR1MemoryInfo()
	switch ret {
	case gonvml.SUCCESS:
		d.BAR1Total, d.BAR1Free = bar.Bar1Total, bar.Bar1Free
	case gonvml.ERROR_NOT_SUPPORTED:
	default:
		return d, check(fmt.Sprintf("DeviceGetBAR1MemoryInfo(%d)", i), ret)
	}
	return d, nil
}

// Devices returns every GPU NVML sees, in NVML's index order.
func (h *Handle) Devices() ([]Device, error) {
	n, err := h.DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		d, err := h.Device(i)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// NormalizeBusID turns NVML's bus id ("00000000:3B:00.0", 8-digit domain,
// upper case) or a short "3b:00.0" into the suite's form "0000:3b:00.0", the
// spelling of /sys/bus/pci/devices. Anything else is an error naming the value.
func NormalizeBusID(s string) (string, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("PCI bus id %q: %s (want dddd:bb:dd.f)", orig, why)
	}
	parts := strings.Split(s, ":")
	var dom uint64
	switch len(parts) {
	case 2:
	case 3:
		var err error
		if parts[0] == "" || len(parts[0]) > 8 {
			return bad("bad domain")
		}
		if dom, err = strconv.ParseUint(parts[0], 16, 32); err != nil {
			return bad("bad domain")
		}
		if dom > 0xffff {
			return bad("domain above ffff")
		}
		parts = parts[1:]
	default:
		return bad("wrong number of ':'")
	}
	df := strings.Split(parts[1], ".")
	if len(df) != 2 {
		return bad("no '.' before the function")
	}
	num := func(v string, width int, max uint64) (uint64, bool) {
		if v == "" || len(v) > width {
			return 0, false
		}
		n, err := strconv.ParseUint(v, 16, 32)
		return n, err == nil && n <= max
	}
	bus, ok1 := num(parts[0], 2, 0xff)
	dev, ok2 := num(df[0], 2, 0x1f)
	fn, ok3 := num(df[1], 1, 7)
	if !ok1 || !ok2 || !ok3 {
		return bad("bus, device or function out of range")
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn), nil
}

// FormatCUDAVersion writes a CUDA version int (13000, 12040) as "13.0", "12.4".
func FormatCUDAVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}
