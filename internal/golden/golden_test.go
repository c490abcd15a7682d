package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSectionComparesAndRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	require.NoError(t, os.WriteFile(path, []byte("head\n<!-- b -->\nold\n<!-- e -->\ntail\n"), 0o644))

	t.Setenv(Env, "")
	have, want, err := Section(path, "<!-- b -->\n", "<!-- e -->", "new\n")
	require.NoError(t, err)
	assert.Equal(t, "old\n", have)
	assert.Equal(t, "new\n", want)

	t.Setenv(Env, "1")
	have, want, err = Section(path, "<!-- b -->\n", "<!-- e -->", "new\n")
	require.NoError(t, err)
	assert.Equal(t, want, have)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "head\n<!-- b -->\nnew\n<!-- e -->\ntail\n", string(b))

	_, _, err = Section(path, "<!-- nope -->", "<!-- e -->", "x")
	assert.ErrorContains(t, err, "lacks the markers")
}

func TestFileComparesAndRewrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "g.txt")
	t.Setenv(Env, "")
	_, err := File(path, []byte("x"))
	assert.Error(t, err, "a missing golden file is an error, not a pass")

	t.Setenv(Env, "1")
	got, err := File(path, []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))

	t.Setenv(Env, "")
	got, err = File(path, []byte("y"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(got), "without UPDATE the file is read, never written")
	assert.Equal(t, "UPDATE=1 go test ./report", Hint("./report"))
}
