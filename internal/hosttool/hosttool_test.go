package hosttool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestRecorded(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{"/cmd/tool_-x.txt": "recorded output\n"})
	out, src, err := Output(root, "/cmd/tool_-x.txt", []string{"tool"}, time.Second, "-x")
	require.NoError(t, err)
	assert.Equal(t, "recorded output\n", out)
	assert.Contains(t, src, "cmd/tool_-x.txt")
	_, _, err = Output(root, "/cmd/other.txt", []string{"tool"}, time.Second)
	var a *verdict.Finding
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Contains(t, a.Cause, "holds no recorded /cmd/other.txt")
}

func TestLive(t *testing.T) {
	live, err := hostfs.New("/")
	require.NoError(t, err)
	_, _, err = Output(live, "", []string{"no-such-tool-x1", "no-such-tool-x2"}, time.Second)
	var a *verdict.Finding
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Equal(t, "no-such-tool-x1 nor no-such-tool-x2 not found in PATH", a.Cause)

	out, src, err := Output(live, "", []string{"sh"}, 5*time.Second, "-c", "echo said; exit 3")
	require.NoError(t, err, "a non-zero exit is the tool's answer, for the caller to parse")
	assert.Equal(t, "said\n", out)
	assert.Contains(t, src, "sh -c")

	_, _, err = Output(live, "", []string{"sh"}, 100*time.Millisecond, "-c", "sleep 5")
	var n *verdict.Finding
	require.ErrorAs(t, err, &n)
	assert.Equal(t, verdict.NotJudged, n.Kind())
	assert.Contains(t, n.Cause, "did not finish within 100ms")
}
