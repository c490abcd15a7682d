package hostfstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCopyKeepsLinks(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a", "b", "f"), []byte("x\n"), 0o644))
	require.NoError(t, os.Symlink("../a/b", filepath.Join(src, "a", "l")))
	dst := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, Copy(src, dst))
	b, err := os.ReadFile(filepath.Join(dst, "a", "b", "f"))
	require.NoError(t, err)
	assert.Equal(t, "x\n", string(b))
	l, err := os.Readlink(filepath.Join(dst, "a", "l"))
	require.NoError(t, err)
	assert.Equal(t, "../a/b", l, "a link stays a link, with its target as written")
	assert.Error(t, Copy(filepath.Join(src, "missing"), dst))
}
