package gpucopy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/topo"
)

func TestSharing(t *testing.T) {
	name := func(pci string) string { return "GPU " + pci }
	assert.Equal(t, "it shares no PCI bridge or host bridge with another selected GPU: the contention is upstream of PCIe (host memory bandwidth, the CPU interconnect) or in the GPU",
		sharing(nil, name))

	// Two peers behind one bridge are grouped; the host bridge comes after,
	// in the order found.
	shared := []topo.Shared{
		{Peer: "b", Bridge: "0000:01:00.0", BridgeType: -1, HostBridge: "/sys/devices/pci0000:00"},
		{Peer: "c", HostBridge: "/sys/devices/pci0000:00"},
		{Peer: "d", Bridge: "0000:01:00.0", BridgeType: -1, HostBridge: "/sys/devices/pci0000:00"},
	}
	assert.Equal(t, "it shares PCI bridge 0000:01:00.0 with GPU b, GPU d; host bridge pci0000:00 (no PCI bridge in common) with GPU c",
		sharing(shared, name))
}
