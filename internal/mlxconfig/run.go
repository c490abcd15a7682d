package mlxconfig

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
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
// it. On a recorded tree it reads RecordedQuery. No tool is *verdict.Absent
// naming where it looked; the tool's "cannot open" (not root, or not a
// device it knows) is *verdict.Absent saying so; another failure that left
// no table is *verdict.NotJudged.
func Run(root *hostfs.Root, bdf string, timeout time.Duration) (out, src string, err error) {
	if !pci.IsBDF(bdf) {
		return "", "", &verdict.NotJudged{Msg: fmt.Sprintf("mlxconfig: %q is not a PCI address", bdf)}
	}
	if !root.IsLive() {
		p := RecordedQuery(bdf)
		b, err := root.ReadFile(p)
		if err != nil {
			return "", "", &verdict.Absent{Msg: fmt.Sprintf("GDR_HOST_ROOT=%s is not the running host and holds no recorded %s; mstconfig runs only on the live host", root.Dir(), p)}
		}
		return string(b), root.Host(p), nil
	}
	var tool string
	for _, t := range Tools {
		if p, err := exec.LookPath(t); err == nil {
			tool = p
			break
		}
	}
	if tool == "" {
		return "", "", &verdict.Absent{Msg: fmt.Sprintf("neither %s found in PATH: install mstflint (Debian/Ubuntu/RHEL) or NVIDIA MFT to read the NIC's firmware settings", strings.Join(Tools, " nor "))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, "-d", bdf, "-e", "query")
	cmd.WaitDelay = 2 * time.Second
	b, runErr := cmd.CombinedOutput()
	src = tool + " -d " + bdf + " -e query"
	if ctx.Err() == context.DeadlineExceeded {
		return string(b), src, &verdict.NotJudged{Remedy: "run it by hand; a NIC that does not answer its configuration queries may need a firmware reset (mlxfwreset)",
			Msg: fmt.Sprintf("%s did not finish within %v (GDR_TIMEOUT)", src, timeout)}
	}
	if runErr != nil {
		// The tool exits 3 with "-E-" lines; Parse names them.
		if _, perr := Parse(string(b)); IsOpenError(perr) {
			return string(b), src, &verdict.Absent{Msg: fmt.Sprintf("%s: %q: the tool opens the device only as root (mtcr checks geteuid) and only for NVIDIA/Mellanox devices; run the suite as root", src, ErrOpen)}
		}
		var ee *exec.ExitError
		if !errors.As(runErr, &ee) {
			return string(b), src, &verdict.NotJudged{Remedy: "check the tool's installation", Msg: fmt.Sprintf("%s: %v", src, runErr)}
		}
	}
	return string(b), src, nil
}
