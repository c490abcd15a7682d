// Package hosttool runs a read-only host tool (mstconfig, ethtool, mlxlink)
// on the live host, or, on a recorded host tree (GDR_HOST_ROOT), reads the
// output recorded for it under cmd/: the one place that decides between the
// two and says, as a verdict, why there is no output.
package hosttool

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Output runs the first of tools found in PATH with args (live host) or
// reads recorded (a host path in the tree), and returns the output and
// what produced it. No recording or no tool is an absent *verdict.Finding
// naming where it looked (the caller, which knows the package, may set its
// Remedy); a tool past timeout, or one that could not start, is not judged. A tool that ran and exited non-zero returns its
// output and no error: the caller parses what it said.
func Output(root *hostfs.Root, recorded string, tools []string, timeout time.Duration, args ...string) (out, src string, err error) {
	if !root.IsLive() {
		b, err := root.ReadFile(recorded)
		if err != nil {
			return "", "", verdict.Absentf("run the suite on the live host (GDR_HOST_ROOT unset), or record the tool's output into the tree (fixtures/record)",
				"GDR_HOST_ROOT=%s is not the running host and holds no recorded %s; %s runs only on the live host", root.Dir(), recorded, strings.Join(tools, "/"))
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
		return "", "", verdict.Absentf("", "%s not found in PATH", strings.Join(tools, " nor "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.WaitDelay = 2 * time.Second // a child holding the pipe open must not hang us
	b, runErr := cmd.CombinedOutput()
	src = strings.Join(append([]string{tool}, args...), " ")
	if ctx.Err() == context.DeadlineExceeded {
		return string(b), src, verdict.NotJudgedf("run it by hand", "%s did not finish within %v (GDR_TIMEOUT)", src, timeout)
	}
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		return string(b), src, verdict.NotJudgedf("check the tool's installation", "%s: %v", src, runErr)
	}
	return string(b), src, nil
}
