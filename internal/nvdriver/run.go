package nvdriver

import (
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// RecordedTopo is where a recorded host tree keeps `nvidia-smi topo -m`.
const RecordedTopo = "/cmd/nvidia-smi_topo_-m.txt"

// TopoM is the output of `nvidia-smi topo -m` and where it came from: run
// on the live host (within timeout), or read from a recorded tree's
// RecordedTopo. No recording, or no nvidia-smi, is an absent
// *verdict.Finding; a failing nvidia-smi one that fell short.
func TopoM(root *hostfs.Root, timeout time.Duration) (out, src string, err error) {
	if !root.IsLive() {
		b, err := root.ReadFile(RecordedTopo)
		if err != nil {
			return "", "", verdict.Absentf("run the suite on the live host (GDR_HOST_ROOT unset), or record nvidia-smi topo -m into the tree (fixtures/record)",
				"GDR_HOST_ROOT=%s is not the running host and holds no recorded %s; nvidia-smi is run only against the live host", root.Dir(), RecordedTopo)
		}
		return string(b), root.Host(RecordedTopo), nil
	}
	smi, looked := hostfs.LookTool("nvidia-smi")
	if smi == "" {
		return "", "", verdict.Absentf("install the NVIDIA driver utilities (nvidia-smi ships with them) and put nvidia-smi in PATH", "nvidia-smi not found in %s", strings.Join(looked, ", "))
	}
	// Standard output as printed: the matrix's header line starts with a
	// tab (its first column has no label), which a trimmed output loses,
	// and ParseTopo finds the header by it (seen on an H100, driver 580:
	// every live run failed TOPO-07 with "no header line").
	b, err := hostfs.Stdout(timeout, smi, "topo", "-m")
	if err != nil {
		return "", "", verdict.Failf("check that the NVIDIA driver is loaded and nvidia-smi works", "%v: %s", err, strings.TrimSpace(string(b)))
	}
	return string(b), smi + " topo -m", nil
}
