package nvdriver

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// GPUsDir holds one directory per GPU the driver manages, named by its PCI
// address, each with an "information" file (kernel-open/nvidia/nv-procfs.c).
const GPUsDir = "/proc/driver/nvidia/gpus"

// GPUInfo is what /proc/driver/nvidia/gpus/<bdf>/information says: a
// GPU's identity without NVML (no cgo, no library), so a report made by a
// CGO_ENABLED=0 binary still names each GPU's UUID and VBIOS.
type GPUInfo struct {
	BDF      string `json:"bdf"`
	Model    string `json:"model,omitempty"`
	UUID     string `json:"uuid,omitempty"`
	VBIOS    string `json:"vbios,omitempty"`
	Firmware string `json:"gsp_firmware,omitempty"` // "GPU Firmware": GSP firmware, when GSP runs
	Excluded bool   `json:"excluded,omitempty"`     // "GPU Excluded: Yes": the driver refused the GPU (NVreg_ExcludedGpus or a fault)
	// Minor is "Device Minor": N of the GPU's node /dev/nvidiaN; "" unread.
	Minor string `json:"-"`
}

// ParseGPUInformation parses one information file. Lines are "Key: \t value";
// a value the driver could not read ("??.??.??.??.??", "N/A") is left empty.
func ParseGPUInformation(b []byte) (GPUInfo, error) {
	var g GPUInfo
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if strings.Trim(v, "?.") == "" || v == "N/A" {
			v = ""
		}
		switch k {
		case "Model":
			g.Model, n = v, n+1
		case "GPU UUID":
			g.UUID = v
		case "Video BIOS":
			g.VBIOS = strings.ToUpper(v) // nvidia-smi and NVML print it upper case
		case "Bus Location":
			g.BDF, n = strings.ToLower(v), n+1
		case "GPU Firmware":
			g.Firmware = v
		case "Device Minor":
			if _, err := strconv.ParseUint(v, 10, 8); err == nil {
				g.Minor = v
			}
		case "GPU Excluded":
			g.Excluded = strings.EqualFold(v, "yes")
		}
	}
	if n == 0 {
		return g, fmt.Errorf("no Model or Bus Location line in %s", clip.QuoteN(string(b), 120))
	}
	if g.BDF != "" && !pci.IsBDF(g.BDF) {
		return g, fmt.Errorf("the Bus Location line %q is not a PCI address", g.BDF)
	}
	return g, nil
}

// gpuDirs lists the driver's per-GPU directories under GPUsDir (names that
// are PCI addresses), in PCI order. No driver (no directory) is none and no
// error; an unreadable directory is an error.
func gpuDirs(root *hostfs.Root) ([]string, error) {
	dirs, err := root.ReadDir(GPUsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	sort.Strings(dirs)
	out := dirs[:0]
	for _, d := range dirs {
		if pci.IsBDF(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// ReadGPUs reads every GPU's information file through root, in PCI order.
// No driver (no directory) is no GPUs and no error; a file that does not
// parse is an error naming it, the others are still returned.
func ReadGPUs(root *hostfs.Root) ([]GPUInfo, error) {
	dirs, err := gpuDirs(root)
	if err != nil {
		return nil, err
	}
	var out []GPUInfo
	var errs []error
	for _, d := range dirs {
		p := GPUsDir + "/" + d + "/information"
		b, err := root.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g, err := ParseGPUInformation(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if g.BDF == "" {
			g.BDF = d
		}
		out = append(out, g)
	}
	return out, errors.Join(errs...)
}

// NUMAStatusFile is created beside a GPU's information file only where the
// driver puts the GPU's memory on a NUMA node of its own: GPUs coherently
// attached to their CPU over NVLink-C2C (GH200, GB200, GB300). It is absent
// on PCIe GPUs, where the driver's NUMA status is "disabled"
// (open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c
// nv_procfs_read_numa_status; hwloc's topology-linux.c reads it for the
// same purpose).
const NUMAStatusFile = "numa_status"

// C2CGPUs lists the GPUs (PCI addresses, in order) the driver shows as
// coherently attached over NVLink-C2C: those with a numa_status file. No
// driver is none; an unreadable directory is an error.
func C2CGPUs(root *hostfs.Root) ([]string, error) {
	dirs, err := gpuDirs(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dirs {
		if root.Exists(GPUsDir + "/" + d + "/" + NUMAStatusFile) {
			out = append(out, strings.ToLower(d))
		}
	}
	return out, nil
}

// IsC2C reports whether the GPU at PCI address bdf (any case) is coherently
// attached over NVLink-C2C (C2CGPUs). An unreadable driver directory is an
// error; the caller then treats the GPU as a PCIe one and says so.
func IsC2C(root *hostfs.Root, bdf string) (bool, error) {
	gpus, err := C2CGPUs(root)
	if err != nil {
		return false, err
	}
	n, err := pci.NormalizeAddr(bdf)
	if err != nil {
		return false, fmt.Errorf("GPU %q: %w", bdf, err)
	}
	for _, g := range gpus {
		if g == n {
			return true, nil
		}
	}
	return false, nil
}
