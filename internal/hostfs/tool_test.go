package hostfs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestToolOutputRecorded(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{"/cmd/tool_-x.txt": "recorded output\n"})
	out, src, err := hostfs.ToolOutput(root, "/cmd/tool_-x.txt", []string{"tool"}, time.Second, "-x")
	require.NoError(t, err)
	assert.Equal(t, "recorded output\n", out)
	assert.Contains(t, src, "cmd/tool_-x.txt")
	_, _, err = hostfs.ToolOutput(root, "/cmd/other.txt", []string{"tool"}, time.Second)
	var a *verdict.Finding
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Contains(t, a.Cause, "holds no recorded /cmd/other.txt")
}

func TestToolOutputLive(t *testing.T) {
	live, err := hostfs.New("/")
	require.NoError(t, err)
	_, _, err = hostfs.ToolOutput(live, "", []string{"no-such-tool-x1", "no-such-tool-x2"}, time.Second)
	var a *verdict.Finding
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Equal(t, "no-such-tool-x1 nor no-such-tool-x2 not found in PATH", a.Cause)

	out, src, err := hostfs.ToolOutput(live, "", []string{"sh"}, 5*time.Second, "-c", "echo said; exit 3")
	require.NoError(t, err, "a non-zero exit is the tool's answer, for the caller to parse")
	assert.Equal(t, "said\n", out)
	assert.Contains(t, src, "sh -c")

	_, _, err = hostfs.ToolOutput(live, "", []string{"sh"}, 100*time.Millisecond, "-c", "sleep 5")
	var n *verdict.Finding
	require.ErrorAs(t, err, &n)
	assert.Equal(t, verdict.NotJudged, n.Kind())
	assert.Contains(t, n.Cause, "did not finish within 100ms")
}

func TestLookTool(t *testing.T) {
	bin, extra := t.TempDir(), t.TempDir()
	t.Setenv("PATH", bin)
	for _, d := range []string{"cuda-12.4", "cuda-12.8"} {
		require.NoError(t, os.MkdirAll(filepath.Join(extra, d), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(extra, d, "nvcc"), []byte("#!/bin/sh\n"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(bin, "plain"), []byte("not executable"), 0o644))

	p, looked := hostfs.LookTool("nvcc", filepath.Join(extra, "cuda-*"))
	assert.Equal(t, filepath.Join(extra, "cuda-12.8", "nvcc"), p, "the newest-looking directory first")
	assert.Equal(t, []string{"PATH=" + bin, filepath.Join(extra, "cuda-*")}, looked)

	p, looked = hostfs.LookTool("plain", bin)
	assert.Empty(t, p, "a file without an execute bit is no tool")
	assert.Equal(t, []string{"PATH=" + bin, bin}, looked)

	require.NoError(t, os.WriteFile(filepath.Join(bin, "nvcc"), []byte("#!/bin/sh\n"), 0o755))
	p, _ = hostfs.LookTool("nvcc", filepath.Join(extra, "cuda-*"))
	assert.Equal(t, filepath.Join(bin, "nvcc"), p, "PATH before the extra directories")
}
