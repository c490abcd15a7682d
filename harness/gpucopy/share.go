package gpucopy

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/topo"
)

// sharing words which bridges a GPU shares with which others, grouped by
// bridge in the order found; peer names each other GPU.
func sharing(shared []topo.Shared, peer func(pci string) string) string {
	if len(shared) == 0 {
		return "it shares no PCI bridge or host bridge with another selected GPU: the contention is upstream of PCIe (host memory bandwidth, the CPU interconnect) or in the GPU"
	}
	byWhere := map[string][]string{}
	var order []string
	for _, s := range shared {
		w := s.Where()
		if _, ok := byWhere[w]; !ok {
			order = append(order, w)
		}
		byWhere[w] = append(byWhere[w], peer(s.Peer))
	}
	var parts []string
	for _, w := range order {
		parts = append(parts, fmt.Sprintf("%s with %s", w, strings.Join(byWhere[w], ", ")))
	}
	return "it shares " + strings.Join(parts, "; ")
}
