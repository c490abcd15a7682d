package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// A cluster round's folder lives on the shared claim beside every other
// host's rounds: 1024 nodes leave 2,000 to 4,000 of them. Compacted
// (gdrreport -collect -compact, which dist/run.sh passes in a round), a
// round keeps its events as test.json.gz, every attribute and every
// RUN/PASS/FAIL line of every test, and of the tests' plain output at most
// CompactOutputBytes in all: when a round printed more, the tests that
// printed most keep their first and last lines (a panic's last words, a
// tool's summary) and a note of what was cut. The report reads the
// compacted file as it reads test.json (sharedfile.OpenEvents).
const (
	// CompactOutputBytes bounds the plain output one round keeps, before
	// compression. The suite's own runs print far less (the lab's full
	// one-rail round: 27 KB; docs/reports.md).
	CompactOutputBytes = 256 << 10
	// compactMinShare is the least a test keeps when the round's output
	// is cut: its first and last lines fit.
	compactMinShare = 2 << 10
)

// CompactStats says what compacting a round kept and cut.
type CompactStats struct {
	Events, Bytes int64 // lines read and their bytes
	// OutputBytes is the plain output read; CutBytes and CutLines what of
	// it was dropped, in CutTests tests.
	OutputBytes, CutBytes int64
	CutLines, CutTests    int
	GzBytes               int64 // the size of test.json.gz
}

// outputKey is one test's (or one package's) plain output.
type outputKey struct{ pkg, test string }

type compactLine struct {
	raw   []byte
	key   outputKey
	plain bool // a test's plain output (not an attribute or a RUN/PASS line)
}

// CompactEvents copies the go test -json lines of r to w, bounding the
// tests' plain output to limit bytes in all (CompactOutputBytes): nothing
// is cut when the round printed less; else each test keeps at most an
// equal share (a test that printed less keeps all of it, the rest share
// what it left), its first half from the start and its second half from
// the end, and a note where its lines were cut. Attributes, RUN/PASS/FAIL
// lines and every other event are kept as written.
func CompactEvents(r io.Reader, w io.Writer, limit int) (CompactStats, error) {
	var st CompactStats
	var lines []compactLine
	size := map[outputKey]int{}
	_, err := sharedfile.Lines(r, sharedfile.MaxLine, func(b []byte, cut bool) error {
		l := compactLine{raw: append(append([]byte(nil), b...), '\n')}
		st.Events++
		st.Bytes += int64(len(l.raw))
		var e struct{ Action, Package, Test, Output string }
		if json.Unmarshal(b, &e) != nil || e.Action == "" {
			// Not an event (gotestsum's or a shell's words): the
			// package-less output the report keeps as such.
			l.plain = len(bytes.TrimSpace(b)) > 0
		} else {
			l.key = outputKey{e.Package, e.Test}
			l.plain = e.Action == "output" && !framing.MatchString(e.Output)
		}
		if l.plain {
			size[l.key] += len(l.raw)
			st.OutputBytes += int64(len(l.raw))
		}
		lines = append(lines, l)
		return nil
	})
	if err != nil {
		return st, err
	}
	share := compactShare(size, limit)
	keep := make([]bool, len(lines))
	note := map[int]outputKey{} // a note goes before line i
	type cut struct{ lines, bytes int }
	cuts := map[outputKey]cut{}
	for i, l := range lines {
		keep[i] = !l.plain || size[l.key] <= share
	}
	// Each test over its share: its first lines up to half the share,
	// then its last lines up to the other half.
	byKey := map[outputKey][]int{}
	for i, l := range lines {
		if l.plain && size[l.key] > share {
			byKey[l.key] = append(byKey[l.key], i)
		}
	}
	keys := make([]outputKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].pkg+"\x00"+keys[i].test < keys[j].pkg+"\x00"+keys[j].test })
	for _, k := range keys {
		idx := byKey[k]
		head, tail := 0, 0
		h := 0
		for ; h < len(idx) && head+len(lines[idx[h]].raw) <= share/2; h++ {
			head += len(lines[idx[h]].raw)
			keep[idx[h]] = true
		}
		for t := len(idx) - 1; t >= h && tail+len(lines[idx[t]].raw) <= share/2; t-- {
			tail += len(lines[idx[t]].raw)
			keep[idx[t]] = true
		}
		var c cut
		first := -1
		for _, i := range idx {
			if !keep[i] {
				if first < 0 {
					first = i
				}
				c.lines++
				c.bytes += len(lines[i].raw)
			}
		}
		if first >= 0 {
			note[first], cuts[k] = k, c
			st.CutTests++
			st.CutLines += c.lines
			st.CutBytes += int64(c.bytes)
		}
	}
	for i, l := range lines {
		if k, ok := note[i]; ok {
			ev := Event{Action: "output", Package: k.pkg, Test: k.test,
				Output: fmt.Sprintf("gdrreport: %d lines (%d bytes) of this test's output cut here: a cluster round keeps %d KiB of plain output in all, each test its first and last lines (docs/reports.md)\n",
					cuts[k].lines, cuts[k].bytes, limit>>10)}
			b, err := json.Marshal(ev)
			if err != nil {
				return st, err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return st, err
			}
		}
		if keep[i] {
			if _, err := w.Write(l.raw); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// compactShare is the most plain output one test keeps so that all of them
// keep at most limit bytes: no bound when they printed less; else the
// water level over the tests' sizes (those below it keep everything), never
// below compactMinShare.
func compactShare(size map[outputKey]int, limit int) int {
	total := 0
	sizes := make([]int, 0, len(size))
	for _, s := range size {
		total += s
		sizes = append(sizes, s)
	}
	if total <= limit {
		return int(^uint(0) >> 1)
	}
	sort.Ints(sizes)
	left := limit
	for i, s := range sizes {
		share := left / (len(sizes) - i)
		if s > share {
			return max(share, compactMinShare)
		}
		left -= s
	}
	return max(left, compactMinShare)
}

// CompactDir compacts the run in dir: its test.json becomes test.json.gz
// (CompactEvents, then gzip), written beside it under a temporary name and
// renamed, and test.json is removed, so a reader finds one or the other,
// whole. A folder without test.json (already compact, or a run that did
// not end) is left as it is.
func CompactDir(dir string) (CompactStats, error) {
	src := filepath.Join(dir, EventsFile)
	in, err := sharedfile.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		return CompactStats{}, nil
	}
	if err != nil {
		return CompactStats{}, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".tmp-"+EventsGzFile+"-*")
	if err != nil {
		return CompactStats{}, err
	}
	defer os.Remove(tmp.Name())
	zw, err := gzip.NewWriterLevel(tmp, gzip.BestCompression)
	if err != nil {
		tmp.Close()
		return CompactStats{}, err
	}
	st, err := CompactEvents(in, zw, CompactOutputBytes)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, fmt.Errorf("compacting %s: %w", src, err)
	}
	if fi, err := os.Stat(tmp.Name()); err == nil {
		st.GzBytes = fi.Size()
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return st, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, EventsGzFile)); err != nil {
		return st, err
	}
	return st, os.Remove(src)
}
