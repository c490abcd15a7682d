package hostfs

// Finding a host tool (PATH, then where packages install it) and reading
// its output: run on the live host, or as recorded under a host tree's cmd/.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// LookTool finds the executable name in PATH, then in dirs (globs allowed,
// newest-looking match first: /usr/local/cuda-12.* lists 12.8 before 12.4).
// looked lists where it searched, for a message that names it.
func LookTool(name string, dirs ...string) (found string, looked []string) {
	looked = append(looked, "PATH="+os.Getenv("PATH"))
	if p, err := exec.LookPath(name); err == nil {
		return p, looked
	}
	for _, e := range dirs {
		ds, _ := filepath.Glob(e)
		sort.Sort(sort.Reverse(sort.StringSlice(ds)))
		looked = append(looked, e)
		for _, d := range ds {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p, looked
			}
		}
	}
	return "", looked
}

// ToolOutput runs the first of tools found in PATH with args (live host) or
// reads recorded (a host path in the tree), and returns the output and
// what produced it. No recording or no tool is an absent *verdict.Finding
// naming where it looked (the caller, which knows the package, may set its
// Remedy); a tool past timeout, or one that could not start, is not
// judged. A tool that ran and exited non-zero returns its output and no
// error: the caller parses what it said.
func ToolOutput(root *Root, recorded string, tools []string, timeout time.Duration, args ...string) (out, src string, err error) {
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
		if p, _ := LookTool(t); p != "" {
			tool = p
			break
		}
	}
	if tool == "" {
		return "", "", verdict.Absentf("", "%s not found in PATH", strings.Join(tools, " nor "))
	}
	var b bytes.Buffer
	runErr := run(timeout, "", nil, &b, &b, tool, args...)
	src = strings.Join(append([]string{tool}, args...), " ")
	if errors.Is(runErr, errTimedOut) {
		return b.String(), src, verdict.NotJudgedf("run it by hand", "%s did not finish within %v (GDR_TIMEOUT)", src, timeout)
	}
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		return b.String(), src, verdict.NotJudgedf("check the tool's installation", "%s: %v", src, errors.Unwrap(runErr))
	}
	return b.String(), src, nil
}
