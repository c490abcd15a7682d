// Package hosttool runs a read-only host tool (mstconfig, ethtool, mlxlink)
// on the live host, or, on a recorded host tree (GDR_HOST_ROOT), reads the
// output recorded for it under cmd/: the one place that decides between the
// two and says, as a verdict, why there is no output.
package hosttool

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Output runs the first of tools found in PATH with args (live host) or
// reads recorded (a host path in the tree), and returns the output and
// what produced it. No recording or no tool is *verdict.Absent naming where
// it looked; a tool past timeout, or one that could not start, is
// *verdict.NotJudged. A tool that ran and exited non-zero returns its
// output and no error: the caller parses what it said.
func Output(root *hostfs.Root, recorded string, tools []string, timeout time.Duration, args ...string) (out, src string, err error) {
	if !root.IsLive() {
		b, err := root.ReadFile(recorded)
		if err != nil {
			return "", "", &verdict.Absent{Msg: fmt.Sprintf("GDR_HOST_ROOT=%s is not the running host and holds no recorded %s; %s runs only on the live host", root.Dir(), recorded, strings.Join(tools, "/"))}
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
		return "", "", &verdict.Absent{Msg: fmt.Sprintf("%s not found in PATH", strings.Join(tools, " nor "))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.WaitDelay = 2 * time.Second // a child holding the pipe open must not hang us
	b, runErr := cmd.CombinedOutput()
	src = strings.Join(append([]string{tool}, args...), " ")
	if ctx.Err() == context.DeadlineExceeded {
		return string(b), src, &verdict.NotJudged{Remedy: "run it by hand", Msg: fmt.Sprintf("%s did not finish within %v (GDR_TIMEOUT)", src, timeout)}
	}
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		return string(b), src, &verdict.NotJudged{Remedy: "check the tool's installation", Msg: fmt.Sprintf("%s: %v", src, runErr)}
	}
	return string(b), src, nil
}
