package hostfs

// Host tools (nvcc, nvidia-smi, ofed_info, dpkg, ...) run only on the live
// host, under a deadline; Run returns what they printed.

import (
	"bytes"
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = 2 * time.Second // a child holding the pipe open must not hang us
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("%s timed out after %v (GDR_TIMEOUT)", name, timeout)
	} else if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out.String()), err
}
