package optics

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
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
// ethtool or no recording is *verdict.Absent.
func Ethtool(root *hostfs.Root, netdev string, timeout time.Duration) (out, src string, err error) {
	if err := rdmadev.CheckName(netdev); err != nil {
		return "", "", &verdict.NotJudged{Msg: fmt.Sprintf("netdev %q: %v", netdev, err)}
	}
	return run(root, RecordedEthtool(netdev), []string{"ethtool"}, timeout, "-m", netdev)
}

// Mlxlink returns `mlxlink -d <bdf> -m -c` (live) or its recording.
func Mlxlink(root *hostfs.Root, bdf string, timeout time.Duration) (out, src string, err error) {
	if !pci.IsBDF(bdf) {
		return "", "", &verdict.NotJudged{Msg: fmt.Sprintf("mlxlink: %q is not a PCI address", bdf)}
	}
	return run(root, RecordedMlxlink(bdf), LinkTools, timeout, "-d", bdf, "-m", "-c")
}

func run(root *hostfs.Root, recorded string, tools []string, timeout time.Duration, args ...string) (string, string, error) {
	if !root.IsLive() {
		b, err := root.ReadFile(recorded)
		if err != nil {
			return "", "", &verdict.Absent{Msg: fmt.Sprintf("GDR_HOST_ROOT=%s holds no recorded %s (host tools run only on the live host)", root.Dir(), recorded)}
		}
		return string(b), root.Host(recorded), nil
	}
	var tool string
	for _, t := range tools {
		if p, err := exec.LookPath(t); err == nil {
			tool = p
			break
		}
	}
	if tool == "" {
		return "", "", &verdict.Absent{Msg: fmt.Sprintf("%v not found in PATH", tools)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.WaitDelay = 2 * time.Second
	b, err := cmd.CombinedOutput()
	src := tool
	for _, a := range args {
		src += " " + a
	}
	if ctx.Err() == context.DeadlineExceeded {
		return string(b), src, &verdict.NotJudged{Remedy: "run it by hand", Msg: fmt.Sprintf("%s did not finish within %v (GDR_TIMEOUT)", src, timeout)}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return string(b), src, &verdict.NotJudged{Msg: fmt.Sprintf("%s: %v", src, err)}
	}
	// A non-zero exit with output is parsed: ethtool's "not supported" and
	// mlxlink's errors are in it.
	return string(b), src, nil
}
