package optics

import (
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Recorded outputs in a host tree's cmd/.
func RecordedEthtool(netdev string) string { return "/cmd/ethtool_-m_" + netdev + ".txt" }
func RecordedMlxlink(bdf string) string    { return "/cmd/mlxlink_-d_" + bdf + "_-m_-c.txt" }

// LinkTools are tried in order: NVIDIA MFT's mlxlink, mstflint's mstlink.
var LinkTools = []string{"mlxlink", "mstlink"}

// Ethtool returns `ethtool -m <netdev>` (live) or its recording. No
// ethtool or no recording is an absent *verdict.Finding.
func Ethtool(root *hostfs.Root, netdev string, timeout time.Duration) (out, src string, err error) {
	if err := rdmadev.CheckName(netdev); err != nil {
		return "", "", verdict.NotJudgedf("", "netdev %q: %v", netdev, err)
	}
	return run(root, RecordedEthtool(netdev), []string{"ethtool"}, timeout, "-m", netdev)
}

// Mlxlink returns `mlxlink -d <bdf> -m -c` (live) or its recording.
func Mlxlink(root *hostfs.Root, bdf string, timeout time.Duration) (out, src string, err error) {
	if !pci.IsBDF(bdf) {
		return "", "", verdict.NotJudgedf("", "mlxlink: %q is not a PCI address", bdf)
	}
	return run(root, RecordedMlxlink(bdf), LinkTools, timeout, "-d", bdf, "-m", "-c")
}

func run(root *hostfs.Root, recorded string, tools []string, timeout time.Duration, args ...string) (string, string, error) {
	return hostfs.ToolOutput(root, recorded, tools, timeout, args...)
}
