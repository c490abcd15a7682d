package kmod

import (
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// RDMA lists the kernel modules whose state explains why a host has, or
// lacks, RDMA devices: the core, the user-space interfaces, the common NIC
// drivers, the software devices and GPU peer memory.
var RDMA = []string{
	"ib_core", "ib_uverbs", "rdma_ucm", "mlx5_core", "mlx5_ib", "mlx4_ib", "irdma", "bnxt_re",
	"efa", "qedr", "mana_ib", "rdma_rxe", "siw", "nvidia_peermem",
}

// Summary says which of names the host has (loaded, or built in) and which
// not, and where it looked: "loaded: ib_core (built in), mlx5_core; not
// loaded: ib_uverbs (from /proc/modules (2 modules), /sys/module)". Built-in
// modules have no /proc/modules line, so reading that file alone would call
// them missing.
func (h *Host) Summary(names []string) string {
	var have, missing []string
	for _, n := range names {
		st, err := h.Lookup(n)
		switch {
		case err == nil && st.Builtin:
			have = append(have, n+" (built in)")
		case err == nil && st.Loaded():
			have = append(have, n)
		default:
			missing = append(missing, n)
		}
	}
	return "loaded: " + orNone(have) + "; not loaded: " + orNone(missing) + " (from " + h.Sources() + ")"
}

// Has reports whether module name is loaded or built in.
func (h *Host) Has(name string) bool {
	st, err := h.Lookup(name)
	return err == nil && st.Loaded()
}

// RDMASummary is Summary(RDMA) for root, or why module state is unknown.
func RDMASummary(root *hostfs.Root) string {
	h, err := New(root)
	if err != nil {
		return "kernel modules unknown (" + err.Error() + ")"
	}
	return h.Summary(RDMA)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
