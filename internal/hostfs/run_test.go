package hostfs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	out, err := Run(5*time.Second, t.TempDir(), []string{"GDR_X=y"}, "sh", "-c", "echo $GDR_X; pwd >/dev/null; echo err >&2")
	require.NoError(t, err)
	assert.Equal(t, "y\nerr", out, "stdout and stderr, trimmed")

	out, err = Run(5*time.Second, "", nil, "sh", "-c", "echo no; exit 3")
	assert.Equal(t, "no", out)
	assert.EqualError(t, err, "sh -c echo no; exit 3: exit status 3")

	_, err = Run(100*time.Millisecond, "", nil, "sleep", "5")
	assert.EqualError(t, err, "sleep timed out after 100ms (GDR_TIMEOUT)")

	_, err = Run(time.Second, "", nil, "/nonexistent/tool")
	assert.ErrorContains(t, err, "/nonexistent/tool : ")
}

func TestStdout(t *testing.T) {
	out, err := Stdout(5*time.Second, "sh", "-c", "echo '{}'; echo warning >&2")
	require.NoError(t, err)
	assert.Equal(t, "{}\n", string(out), "standard error stays out of parsed output")

	_, err = Stdout(5*time.Second, "sh", "-c", "echo bad >&2; exit 2")
	assert.EqualError(t, err, "sh -c echo bad >&2; exit 2: exit status 2: bad")

	_, err = Stdout(100*time.Millisecond, "sleep", "5")
	assert.EqualError(t, err, "sleep timed out after 100ms (GDR_TIMEOUT)")
}
