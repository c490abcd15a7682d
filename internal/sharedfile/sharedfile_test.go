package sharedfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO (a plain read blocks for ever), a link to /dev/zero (never ends)
// and a folder are refused by name, at once.
func TestOpenRefusesWhatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "test.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	zero := filepath.Join(dir, "host.json")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := Open(fifo)
		assert.EqualError(t, err, fifo+" is not a regular file (a FIFO): not read")
		_, err = ReadFile(zero, MaxFile)
		assert.EqualError(t, err, zero+" is not a regular file (a character device): not read")
		_, err = Open(dir)
		assert.ErrorContains(t, err, "(a folder)")
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
	big := filepath.Join(dir, "plan.json")
	require.NoError(t, os.WriteFile(big, make([]byte, 1025), 0o644))
	_, err := ReadFile(big, 1024)
	assert.EqualError(t, err, big+" is larger than 1024 bytes: not read")
	b, err := ReadFile(big, 1025)
	require.NoError(t, err)
	assert.Len(t, b, 1025)
}

func lines(t *testing.T, in string, max int) ([]string, []bool, Stats) {
	t.Helper()
	var got []string
	var cuts []bool
	st, err := Lines(strings.NewReader(in), max, func(l []byte, cut bool) error {
		got = append(got, string(l))
		cuts = append(cuts, cut)
		return nil
	})
	require.NoError(t, err)
	return got, cuts, st
}

func TestLines(t *testing.T) {
	got, cuts, st := lines(t, "a\nbb\r\n\nccc", 10)
	assert.Equal(t, []string{"a", "bb", "", "ccc"}, got)
	assert.Equal(t, []bool{false, false, false, true}, cuts, "the last line lacks its newline")
	assert.True(t, st.Cut)
	assert.Equal(t, "", st.Note("t.json", false))

	// A line past the bound is skipped, also one longer than the reader's
	// buffer, and the lines after it are read.
	long := strings.Repeat("x", 200<<10)
	got, _, st = lines(t, "a\n"+long+"\nb\n"+long, 1000)
	assert.Equal(t, []string{"a", "b"}, got)
	assert.Equal(t, 2, st.Long)
	assert.Equal(t, 2, st.LongAt)
	assert.False(t, st.Cut, "the cut last line was the long one: skipped")
	assert.Equal(t, "t.json: 2 line(s) longer than 16777216 bytes skipped (the first is line 2); its last line is cut short (the run was stopped mid-write, or is still writing): that event is lost",
		st.Note("t.json", true))

	// One past the bound but within the buffer, between lines of a
	// buffer's length and more (read in place and gathered).
	mid := strings.Repeat("m", 11)
	edge := strings.Repeat("e", 64<<10)
	got, _, st = lines(t, "a\n"+mid+"\nb\n"+edge+"\nc", 100<<10)
	assert.Equal(t, []string{"a", mid, "b", edge, "c"}, got)
	got, _, st = lines(t, "a\n"+mid+"\nb\n"+mid+"\n", 10)
	assert.Equal(t, []string{"a", "b"}, got)
	assert.Equal(t, 2, st.Long)

	got, _, st = lines(t, "", 10)
	assert.Empty(t, got)
	assert.Equal(t, Stats{}, st)
	got, cuts, _ = lines(t, "one\n", 10)
	assert.Equal(t, []string{"one"}, got)
	assert.Equal(t, []bool{false}, cuts)
}
