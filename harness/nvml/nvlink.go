package nvml

import (
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVLink is what NVML says about the NVLink links from GPU A toward GPU B.
type NVLink struct {
	Active int // A's links that are up (nvmlDeviceGetNvLinkState)
	// Direct counts A's active links whose remote end is B
	// (nvmlDeviceGetNvLinkRemotePciInfo names B's PCI address).
	Direct int
	// Switch and PeerSwitch count A's and B's active links to NVSwitches
	// (nvmlDeviceGetNvLinkRemoteDeviceType SWITCH): through the switches each
	// GPU reaches every other at the rate of its own switch links.
	Switch, PeerSwitch int
	// Other counts A's active links to something else: another GPU, or an
	// end NVML does not name in a way the suite recognises (a VM may see the
	// host's PCI addresses there).
	Other int
	// Version is the lowest NVLink version (nvml.h's nvmlNvlinkVersion_t)
	// among the links counted in Links; 0 when NVML does not say.
	Version int
	// P2P is nvmlDeviceGetP2PStatus(A, B, NVLINK) ("OK" when the pair talks
	// over NVLink), or the error of that call.
	P2P string
}

// Links is how many links carry A's traffic to B: its direct links plus,
// through NVSwitches, the fewer of the two GPUs' switch links.
func (n NVLink) Links() int { return n.Direct + min(n.Switch, n.PeerSwitch) }

// String is one line for reports: "18 links (18 direct, 0 via NVSwitch),
// 18 active, version 6, P2P over NVLink OK".
func (n NVLink) String() string {
	return fmt.Sprintf("%d links (%d direct, %d via NVSwitch: %d/%d switch links), %d active, %d to other ends, version %d, P2P over NVLink %s",
		n.Links(), n.Direct, min(n.Switch, n.PeerSwitch), n.Switch, n.PeerSwitch, n.Active, n.Other, n.Version, n.P2P)
}

// link is one active NVLink link of a GPU.
type link struct {
	remote   string // normalised PCI address of the remote end; "" when unknown
	toSwitch bool
	version  int
}

// activeLinks reads every active NVLink link of dev. Link indices the device
// does not have answer NOT_SUPPORTED or INVALID_ARGUMENT and are skipped; a
// GPU without NVLink has none.
func activeLinks(dev gonvml.Device, name string) ([]link, error) {
	var out []link
	for l := 0; l < gonvml.NVLINK_MAX_LINKS; l++ {
		st, ret := dev.GetNvLinkState(l)
		switch ret {
		case gonvml.SUCCESS:
		case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_INVALID_ARGUMENT:
			continue
		default:
			return nil, check(fmt.Sprintf("DeviceGetNvLinkState(%s, link %d)", name, l), ret)
		}
		if st != gonvml.FEATURE_ENABLED {
			continue
		}
		var k link
		if v, ret := dev.GetNvLinkVersion(l); ret == gonvml.SUCCESS {
			k.version = int(v)
		}
		if t, ret := dev.GetNvLinkRemoteDeviceType(l); ret == gonvml.SUCCESS && t == gonvml.NVLINK_DEVICE_TYPE_SWITCH {
			k.toSwitch = true
		} else if pci, ret := dev.GetNvLinkRemotePciInfo(l); ret == gonvml.SUCCESS {
			k.remote, _ = NormalizeBusID(cString(pci.BusId[:]))
		}
		out = append(out, k)
	}
	return out, nil
}

// NVLinkBetween reads the NVLink links from GPU a toward GPU b (PCI
// addresses, dddd:bb:dd.f). A GPU without NVLink gives zero links, no error.
func (h *Handle) NVLinkBetween(a, b string) (NVLink, error) {
	var n NVLink
	da, ret := h.nv.DeviceGetHandleByPciBusId(a)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", a), ret); err != nil {
		return n, err
	}
	db, ret := h.nv.DeviceGetHandleByPciBusId(b)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", b), ret); err != nil {
		return n, err
	}
	la, err := activeLinks(da, a)
	if err != nil {
		return n, err
	}
	lb, err := activeLinks(db, b)
	if err != nil {
		return n, err
	}
	n.Active = len(la)
	version := func(v int) {
		if v > 0 && (n.Version == 0 || v < n.Version) {
			n.Version = v
		}
	}
	for _, k := range la {
		switch {
		case k.toSwitch:
			n.Switch++
		case k.remote == b:
			n.Direct++
			version(k.version)
		default:
			n.Other++
		}
	}
	for _, k := range lb {
		if k.toSwitch {
			n.PeerSwitch++
		}
	}
	if min(n.Switch, n.PeerSwitch) > 0 {
		for _, k := range la {
			if k.toSwitch {
				version(k.version)
			}
		}
	}
	n.P2P, _ = h.P2PStatus(a, b, gonvml.P2P_CAPS_INDEX_NVLINK)
	return n, nil
}

// P2PStatus is nvmlDeviceGetP2PStatus(a, b, idx) as a name: "OK",
// "CHIPSET_NOT_SUPPORTED", "IOH_TOPOLOGY_NOT_SUPPORTED", ... On error the
// name says what failed ("unknown (NVML ...: Not Supported)") and the error
// is returned too.
func (h *Handle) P2PStatus(a, b string, idx gonvml.GpuP2PCapsIndex) (string, error) {
	da, ret := h.nv.DeviceGetHandleByPciBusId(a)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", a), ret); err != nil {
		return "unknown (" + err.Error() + ")", err
	}
	db, ret := h.nv.DeviceGetHandleByPciBusId(b)
	if err := check(fmt.Sprintf("DeviceGetHandleByPciBusId(%s)", b), ret); err != nil {
		return "unknown (" + err.Error() + ")", err
	}
	st, ret := da.GetP2PStatus(db, idx)
	if err := check("DeviceGetP2PStatus", ret); err != nil {
		return "unknown (" + err.Error() + ")", err
	}
	return P2PStatusName(st), nil
}

// P2PStatusName names an nvmlGpuP2PStatus_t value.
func P2PStatusName(s gonvml.GpuP2PStatus) string {
	switch s {
	case gonvml.P2P_STATUS_OK:
		return "OK"
	case gonvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED:
		return "CHIPSET_NOT_SUPPORTED"
	case gonvml.P2P_STATUS_GPU_NOT_SUPPORTED:
		return "GPU_NOT_SUPPORTED"
	case gonvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED:
		return "IOH_TOPOLOGY_NOT_SUPPORTED"
	case gonvml.P2P_STATUS_DISABLED_BY_REGKEY:
		return "DISABLED_BY_REGKEY"
	case gonvml.P2P_STATUS_NOT_SUPPORTED:
		return "NOT_SUPPORTED"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int(s))
}
