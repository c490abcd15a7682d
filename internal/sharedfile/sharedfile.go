// Package sharedfile reads files other hosts wrote into a shared folder
// (a cluster run's reports, a fleet's copies): what a node that died
// mid-write, a straggler still writing or a planted file leaves there must
// never hang, exhaust or stop a reader. A file that is not a regular file
// (a FIFO would block a plain read forever; a link to /dev/zero never
// ends) is refused by name, a file past its bound is refused by name, a
// line past its bound is skipped and counted, and a last line that lacks
// its newline is handed over marked as cut, for the caller to judge.
package sharedfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Bounds on what one file may hold.
const (
	// MaxFile bounds a whole file read at once (host.json, plan.json).
	MaxFile = 16 << 20
	// MaxLine bounds one line of a line-oriented file (test.json events):
	// go test -json writes one event per line, and a test's output line
	// longer than this is not worth a report's memory.
	MaxLine = 16 << 20
)

// Open opens path for reading only if it is a regular file. The open
// itself cannot block (O_NONBLOCK: a FIFO with no writer would), and the
// check is on the opened file, so a link that points elsewhere is judged
// by what it points to.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s): not read", path, kind(fi.Mode()))
	}
	return f, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	}
	return "mode " + m.String()
}

// ReadFile reads a regular file of at most limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes: not read", path, limit)
	}
	return b, nil
}

// Stats is what a line reader passed over.
type Stats struct {
	Lines int // lines handed to the caller
	// Long counts lines longer than the bound, skipped; LongAt is the
	// first one's number.
	Long, LongAt int
	// Cut: the last line had no newline (the writer stopped mid-line, or
	// is still writing); it was handed over with cut set.
	Cut bool
}

// Lines calls fn for each line of r (without its newline), skipping lines
// longer than maxLine. The last line, when it lacks a newline, is passed
// with cut true. An error of fn stops the reading and is returned. line is
// valid only until fn returns (it is most often the reader's own buffer):
// fn copies what it keeps.
func Lines(r io.Reader, maxLine int, fn func(line []byte, cut bool) error) (Stats, error) {
	var st Stats
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, long, err := readLine(br, maxLine)
		if len(line) == 0 && !long && errors.Is(err, io.EOF) {
			return st, nil
		}
		n++
		cut := errors.Is(err, io.EOF) // a last line without its newline
		switch {
		case long:
			st.Long++
			if st.LongAt == 0 {
				st.LongAt = n
			}
		default:
			st.Lines++
			if cut {
				st.Cut = true
			}
			if ferr := fn(line, cut); ferr != nil {
				return st, ferr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return st, nil
			}
			return st, err
		}
	}
}

// readLine reads one line; a line longer than max is read to its end and
// dropped (long). err is io.EOF when the line ended the input without a
// newline (or nothing was left).
func readLine(br *bufio.Reader, max int) (line []byte, long bool, err error) {
	chunk, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		// The whole line is in the buffer: handed over as it lies there,
		// not copied (a fleet's merge reads millions of lines).
		if len(chunk) > max+1 { // +1: the newline
			return nil, true, err
		}
		return trimNL(chunk), false, err
	}
	for {
		if !long {
			if len(line)+len(chunk) > max+1 {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			return trimNL(line), long, nil
		case errors.Is(err, bufio.ErrBufferFull):
			chunk, err = br.ReadSlice('\n')
		default:
			return trimNL(line), long, err
		}
	}
}

func trimNL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// Note says in one sentence what a reader of path passed over ("" when
// nothing): the lines skipped for their length, a cut last line that did
// not decode.
func (st Stats) Note(path string, cutLost bool) string {
	s := ""
	if st.Long > 0 {
		s = fmt.Sprintf("%s: %d line(s) longer than %d bytes skipped (the first is line %d)", path, st.Long, MaxLine, st.LongAt)
	}
	if cutLost {
		if s != "" {
			s += "; "
		} else {
			s = path + ": "
		}
		s += "its last line is cut short (the run was stopped mid-write, or is still writing): that event is lost"
	}
	return s
}
