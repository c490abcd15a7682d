package hosttool

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A tool outside PATH is found in the extra directories, the
// newest-looking glob match first; a file that is not executable is not a
// tool, and looked says every place searched.
func TestLook(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", filepath.Join(dir, "empty"))
	for _, v := range []string{"cuda-11.8", "cuda-12.4"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, v, "bin"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, v, "bin", "nvcc"), []byte("#!/bin/sh\n"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cuda-12.4", "bin", "notexec"), nil, 0o644))

	found, looked := Look("nvcc", filepath.Join(dir, "cuda-*/bin"))
	assert.Equal(t, filepath.Join(dir, "cuda-12.4", "bin", "nvcc"), found)
	assert.Equal(t, []string{"PATH=" + filepath.Join(dir, "empty"), filepath.Join(dir, "cuda-*/bin")}, looked)

	found, looked = Look("notexec", filepath.Join(dir, "cuda-*/bin"))
	assert.Empty(t, found)
	assert.Len(t, looked, 2)

	t.Setenv("PATH", filepath.Join(dir, "cuda-11.8", "bin"))
	found, _ = Look("nvcc", filepath.Join(dir, "cuda-*/bin"))
	assert.Equal(t, filepath.Join(dir, "cuda-11.8", "bin", "nvcc"), found, "PATH wins")
}
