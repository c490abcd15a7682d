package hostfs

// Host tools (nvcc, nvidia-smi, ofed_info, dpkg, ...) run only on the live
// host, under a deadline; Run returns what they printed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Run runs name with args in dir ("" for the current one), with env added to
// this process's environment (nil: unchanged), for at most timeout, and
// returns its combined output, trimmed. The error names the command, or
// says it timed out (timeout is GDR_TIMEOUT, hence the wording).
func Run(timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	var out bytes.Buffer
	err := run(timeout, dir, env, &out, &out, name, args...)
	return strings.TrimSpace(out.String()), err
}

// Stdout runs name with args for at most timeout and returns what it wrote
// to standard output, for tools whose output is parsed (JSON) and whose
// warnings on standard error must not mix in. The error names the command
// and, when it failed, what it wrote to standard error.
func Stdout(timeout time.Duration, name string, args ...string) ([]byte, error) {
	var out, stderr bytes.Buffer
	err := run(timeout, "", nil, &out, &stderr, name, args...)
	if err != nil && stderr.Len() > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), err
}

// run is the one way the suite starts a host tool: under a deadline, and
// without waiting on a child that holds the output pipe open.
func run(timeout time.Duration, dir string, env []string, stdout, stderr *bytes.Buffer, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = 2 * time.Second // a child holding the pipe open must not hang us
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%s %w after %v (GDR_TIMEOUT)", name, errTimedOut, timeout)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// errTimedOut marks a tool that ran past its deadline (ToolOutput tells it
// from a failure).
var errTimedOut = errors.New("timed out")
