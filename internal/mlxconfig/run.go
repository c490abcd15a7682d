package mlxconfig

import (
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Tools are the query tools in the order tried: mstflint's open build
// (Debian/Ubuntu/RHEL package mstflint), then NVIDIA MFT's.
var Tools = []string{"mstconfig", "mlxconfig"}

// RecordedQuery is where a recorded host tree keeps a device's query.
func RecordedQuery(bdf string) string { return "/cmd/mstconfig_-d_" + bdf + "_-e_query.txt" }

// Run queries the firmware configuration of the PCI function bdf, read
// only (`-e query`; never `set`), and returns the output and what produced
// it. On a recorded tree it reads RecordedQuery. No tool is an absent
// *verdict.Finding naming where it looked; the tool's "cannot open" (not
// root, or not a device it knows) is absent too, saying so; another
// failure that left no table is not judged.
func Run(root *hostfs.Root, bdf string, timeout time.Duration) (out, src string, err error) {
	if !pci.IsBDF(bdf) {
		return "", "", verdict.NotJudgedf("", "mlxconfig: %q is not a PCI address", bdf)
	}
	out, src, err = hostfs.ToolOutput(root, RecordedQuery(bdf), Tools, timeout, "-d", bdf, "-e", "query")
	if err != nil {
		if f, ok := verdict.As(err); ok && f.Kind() == verdict.Absent && root.IsLive() {
			f.Remedy = "install mstflint (Debian/Ubuntu/RHEL) or NVIDIA MFT to read the NIC's firmware settings"
		}
		return out, src, err
	}
	// The tool exits 3 with "-E-" lines; "cannot open" is not root, or not
	// a device it knows (mtcr checks geteuid before anything else).
	if _, perr := Parse(out); IsOpenError(perr) {
		return out, src, verdict.Absentf("run the suite as root", "%s: %q: the tool opens the device only as root and only for NVIDIA/Mellanox devices", src, ErrOpen)
	}
	return out, src, nil
}
