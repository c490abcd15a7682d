package cpio

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// align4 rounds n up to newc's 4-byte boundary.
func align4(n int) int { return (n + 3) &^ 3 }

// cpioEntry is one parsed newc entry.
type cpioEntry struct {
	name         string
	mode         uint32
	rmaj, rmin   uint32
	data         []byte
	headerOffset int
}

// readCpio is an independent newc reader used to check the writer.
func readCpio(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
		require.NoError(t, err)
		return uint32(v)
	}
	for {
		require.Zero(t, off%4, "entry at %d is not 4-byte aligned", off)
		require.Equal(t, "070701", string(b[off:off+6]))
		mode, size, rmaj, rmin, nsize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(nsize)-1])
		require.Equal(t, byte(0), b[off+110+int(nsize)-1], "name of %s is NUL-terminated", name)
		d := align4(off + 110 + int(nsize))
		e := cpioEntry{name: name, mode: mode, rmaj: rmaj, rmin: rmin, data: b[d : d+int(size)], headerOffset: off}
		off = align4(d + int(size))
		if name == "TRAILER!!!" {
			require.Equal(t, len(b), off, "nothing after the trailer")
			return out
		}
		out = append(out, e)
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.File("/usr/bin/tool", 0o755, []byte("hello")))
	require.NoError(t, w.Symlink("/lib", "usr/lib"))
	require.NoError(t, w.CharDev("/dev/console", 0o600, 5, 1))
	require.NoError(t, w.Dir("/tmp/", 0o1777))
	require.NoError(t, w.File("odd", 0o644, []byte("abc"))) // 3 bytes: needs padding
	require.NoError(t, w.File("empty", 0o644, nil))
	assert.ErrorContains(t, w.File("usr/bin/tool", 0o644, nil), "duplicate")
	assert.ErrorContains(t, w.File("/", 0o644, nil), "empty entry name")
	assert.ErrorContains(t, w.Symlink("x", ""), "empty target")
	assert.True(t, w.Has("/usr/bin"), "parents are created")
	require.NoError(t, w.Close())
	assert.Error(t, w.File("late", 0o644, nil), "no entries after Close")

	es := readCpio(t, buf.Bytes())
	var names []string
	byName := map[string]cpioEntry{}
	for _, e := range es {
		names = append(names, e.name)
		byName[e.name] = e
	}
	assert.Equal(t, []string{"usr", "usr/bin", "usr/bin/tool", "lib", "dev", "dev/console", "tmp", "odd", "empty"}, names)
	assert.Equal(t, uint32(modeDir|0o755), byName["usr"].mode)
	assert.Equal(t, uint32(modeFile|0o755), byName["usr/bin/tool"].mode)
	assert.Equal(t, "hello", string(byName["usr/bin/tool"].data))
	assert.Equal(t, uint32(modeSymlink|0o777), byName["lib"].mode)
	assert.Equal(t, "usr/lib", string(byName["lib"].data))
	assert.Equal(t, uint32(modeChar|0o600), byName["dev/console"].mode)
	assert.Equal(t, [2]uint32{5, 1}, [2]uint32{byName["dev/console"].rmaj, byName["dev/console"].rmin})
	assert.Equal(t, [2]uint32{0, 0}, [2]uint32{byName["odd"].rmaj, byName["odd"].rmin}, "device numbers do not leak")
	assert.Equal(t, uint32(modeDir|0o1777), byName["tmp"].mode)
	assert.Equal(t, "abc", string(byName["odd"].data))
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriterPropagatesWriteErrors(t *testing.T) {
	w := NewWriter(&failWriter{n: 1})
	assert.ErrorContains(t, w.File("a", 0o644, []byte("x")), "disk full")
	assert.ErrorContains(t, w.Close(), "disk full")
}

// The layer writer writes the same entries as the cpio writer, as a tar
// a container runtime unpacks: directories first, modes, symlinks.
func TestLayerWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewLayerWriter(&b)
	require.NoError(t, w.File("/opt/gdrconf/rounds.sh", 0o755, []byte("#!/bin/sh\n")))
	require.NoError(t, w.Symlink("/bin/sh", "busybox"))
	require.Error(t, w.File("/opt/gdrconf/rounds.sh", 0o644, nil), "one entry per name, as in the initramfs")
	require.NoError(t, w.Close())
	got := map[string]*tar.Header{}
	var order []string
	tr := tar.NewReader(&b)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got[h.Name] = h
		order = append(order, h.Name)
	}
	assert.Equal(t, []string{"opt/", "opt/gdrconf/", "opt/gdrconf/rounds.sh", "bin/", "bin/sh"}, order)
	assert.Equal(t, byte(tar.TypeReg), got["opt/gdrconf/rounds.sh"].Typeflag)
	assert.Equal(t, int64(0o755), got["opt/gdrconf/rounds.sh"].Mode)
	assert.Equal(t, int64(10), got["opt/gdrconf/rounds.sh"].Size)
	assert.Equal(t, byte(tar.TypeSymlink), got["bin/sh"].Typeflag)
	assert.Equal(t, "busybox", got["bin/sh"].Linkname)
	assert.Equal(t, byte(tar.TypeDir), got["opt/"].Typeflag)
}
