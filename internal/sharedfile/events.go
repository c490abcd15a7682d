package sharedfile

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// A run's go test -json events in its report folder, by the names readers
// try in turn (OpenEvents).
const (
	// EventsFile is the events as gotestsum wrote them (make conformance,
	// dist/run.sh once the run ended).
	EventsFile = "test.json"
	// EventsGzFile is the events of a cluster round kept small on the
	// shared folder (gdrreport -collect -compact): gzip, the plain output
	// of each test bounded.
	EventsGzFile = "test.json.gz"
	// EventsPartial is test.json while the run writes it (dist/run.sh
	// renames it when the run ends).
	EventsPartial = "test.json.partial"
)

// MaxInflated bounds what a compressed events file may inflate to: a
// planted or damaged file must not keep a reader busy for ever. A round's
// events, uncompressed, are a few MB.
const MaxInflated = 1 << 30

// Events is a run's events file opened to read, inflated when compressed.
type Events struct {
	Path    string // the file opened
	Partial bool   // it is EventsPartial: the run did not end
	r       io.Reader
	c       io.Closer
	z       *inflater
}

func (e *Events) Read(p []byte) (int, error) { return e.r.Read(p) }

// Close closes the file.
func (e *Events) Close() error { return e.c.Close() }

// Damage says what reading a compressed file passed over (a stream cut or
// corrupted, or too large to inflate), naming the file; "" when nothing.
// The events before the damage were read: the last of them is cut (as a
// plain file's last line is when its writer stopped).
func (e *Events) Damage() string { return e.z.damage() }

// OpenEvents opens the events of the run in dir: test.json, else
// test.json.gz (inflated as it is read), else test.json.partial. open
// opens one file (nil: Open; a caller that counts its reads passes its
// own). The error wraps fs.ErrNotExist only when there is none of them; a
// file that is there but is not a regular file, or a .gz that is not gzip,
// is an error naming it.
func OpenEvents(dir string, open func(string) (io.ReadCloser, error)) (*Events, error) {
	if open == nil {
		open = func(p string) (io.ReadCloser, error) { return Open(p) }
	}
	for _, name := range []string{EventsFile, EventsGzFile, EventsPartial} {
		path := filepath.Join(dir, name)
		f, err := open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		e := &Events{Path: path, Partial: name == EventsPartial, r: f, c: f}
		if name == EventsGzFile {
			zr, err := gzip.NewReader(f)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s is not a gzip stream (%v): not read", path, err)
			}
			e.z = &inflater{zr: zr, path: path, limit: MaxInflated}
			e.r = e.z
		}
		return e, nil
	}
	return nil, fmt.Errorf("%s: no %s, %s or %s: %w", dir, EventsFile, EventsGzFile, EventsPartial, fs.ErrNotExist)
}

// HasEvents says whether dir holds a finished run's events (test.json or
// test.json.gz; the partial file of a run that did not end is not one).
func HasEvents(dir string) bool {
	for _, name := range []string{EventsFile, EventsGzFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// inflater reads a gzip stream to its end or its first damage, which ends
// the reading as the end of the file would (io.EOF) and is kept to be said:
// a round whose compressed file was cut or corrupted still gives the
// events before it.
type inflater struct {
	zr    *gzip.Reader
	path  string
	n     int64
	limit int64
	why   string
}

func (z *inflater) Read(p []byte) (int, error) {
	if z.why != "" {
		return 0, io.EOF
	}
	if left := z.limit - z.n; int64(len(p)) > left {
		if left <= 0 {
			z.why = fmt.Sprintf("%s inflates past %d bytes: the rest is not read", z.path, z.limit)
			return 0, io.EOF
		}
		p = p[:left]
	}
	k, err := z.zr.Read(p)
	z.n += int64(k)
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return k, err
	}
	z.why = fmt.Sprintf("%s: its gzip stream is damaged after %d bytes of events (%v): the events after them are lost", z.path, z.n, err)
	return k, io.EOF
}

func (z *inflater) damage() string {
	if z == nil {
		return ""
	}
	return z.why
}
