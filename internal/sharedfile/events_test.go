package sharedfile

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

func readAll(t *testing.T, dir string) (string, *Events) {
	t.Helper()
	e, err := OpenEvents(dir, nil)
	require.NoError(t, err)
	defer e.Close()
	b, err := io.ReadAll(e)
	require.NoError(t, err)
	return string(b), e
}

const two = "{\"Action\":\"start\"}\n{\"Action\":\"pass\"}\n"

// A cluster round keeps its events compressed; a recording from before
// keeps them plain; a run that did not end left only the partial file.
// Each reads the same, and the order is test.json, test.json.gz, partial.
func TestOpenEventsEveryForm(t *testing.T) {
	plain, packed, partial, both := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(plain, EventsFile), []byte(two), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(packed, EventsGzFile), gz(t, two), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(partial, EventsPartial), []byte(two), 0o644))
	// A node that stopped between writing the .gz and removing test.json:
	// the plain file is the whole record.
	require.NoError(t, os.WriteFile(filepath.Join(both, EventsFile), []byte(two), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(both, EventsGzFile), gz(t, "{}\n"), 0o644))
	for _, d := range []string{plain, packed, partial, both} {
		s, e := readAll(t, d)
		assert.Equal(t, two, s, d)
		assert.Empty(t, e.Damage())
		assert.Equal(t, d == partial, e.Partial)
	}
	assert.True(t, HasEvents(plain))
	assert.True(t, HasEvents(packed))
	assert.False(t, HasEvents(partial), "a run that did not end is not a finished run's events")

	_, err := OpenEvents(t.TempDir(), nil)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// A .gz that is no gzip is refused by name; one cut short or corrupted
// gives the events before the damage and says where it stopped; one that
// inflates past the bound stops there. None is a hang or a crash.
func TestOpenEventsDamagedGzip(t *testing.T) {
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, EventsGzFile), []byte(two), 0o644))
	_, err := OpenEvents(foreign, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(foreign, EventsGzFile)+" is not a gzip stream")
	assert.NotErrorIs(t, err, fs.ErrNotExist)

	long := strings.Repeat(two, 2000)
	full := gz(t, long)
	cut := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cut, EventsGzFile), full[:len(full)/2], 0o644))
	s, e := readAll(t, cut)
	assert.True(t, strings.HasPrefix(long, s), "what was read is the stream's start")
	assert.NotEmpty(t, s)
	assert.Contains(t, e.Damage(), "its gzip stream is damaged after")
	assert.Contains(t, e.Damage(), "the events after them are lost")

	corrupt := t.TempDir()
	bad := append([]byte(nil), full...)
	bad[len(bad)-5] ^= 0xff // the CRC-32 trailer
	require.NoError(t, os.WriteFile(filepath.Join(corrupt, EventsGzFile), bad, 0o644))
	s, e = readAll(t, corrupt)
	assert.Equal(t, long, s)
	assert.Contains(t, e.Damage(), "checksum")

	bomb := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bomb, EventsGzFile), full, 0o644))
	e, err = OpenEvents(bomb, nil)
	require.NoError(t, err)
	e.z.limit = 100
	b, err := io.ReadAll(e)
	require.NoError(t, err)
	assert.Len(t, b, 100)
	assert.Contains(t, e.Damage(), "inflates past 100 bytes: the rest is not read")
	e.Close()
}
