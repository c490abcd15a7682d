package cluster

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// FileOps counts what the barrier and the planner do on the shared folder:
// each call that reaches the file server once (an open, a directory
// listing, a file created, linked or removed) and the bytes read. On NFS
// every one is a round trip to the server, so what a fleet of N tasks
// costs the server is N times what one task does; the simulation of a
// 1024-host fleet measures it with these counts.
type FileOps struct {
	Opens   atomic.Int64 // files opened to read (missing ones too)
	Lists   atomic.Int64 // directory listings
	Entries atomic.Int64 // names those listings returned
	Writes  atomic.Int64 // files created (a temporary file and its rename or link count once)
	Removes atomic.Int64
	Bytes   atomic.Int64 // bytes read from files
}

// fsys is the shared folder as the barrier and the planner use it, counted
// when n is set.
type fsys struct{ n *FileOps }

// readFile reads a regular file of at most limit bytes (sharedfile.ReadFile).
func (f fsys) readFile(path string, limit int64) ([]byte, error) {
	if f.n != nil {
		f.n.Opens.Add(1)
	}
	b, err := sharedfile.ReadFile(path, limit)
	if f.n != nil {
		f.n.Bytes.Add(int64(len(b)))
	}
	return b, err
}

// open opens a regular file to read (sharedfile.Open); what is read from
// it is counted.
func (f fsys) open(path string) (io.ReadCloser, error) {
	if f.n != nil {
		f.n.Opens.Add(1)
	}
	fh, err := sharedfile.Open(path)
	switch {
	case err != nil:
		return nil, err
	case f.n == nil:
		return fh, nil
	}
	return counted{fh, f.n}, nil
}

type counted struct {
	*os.File
	n *FileOps
}

func (c counted) Read(b []byte) (int, error) {
	k, err := c.File.Read(b)
	c.n.Bytes.Add(int64(k))
	return k, err
}

// names lists a folder's entries by name only: no stat of each entry, one
// listing however many there are.
func (f fsys) names(dir string) ([]string, error) {
	if f.n != nil {
		f.n.Lists.Add(1)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if f.n != nil {
		f.n.Entries.Add(int64(len(names)))
	}
	return names, err
}

// write stores b at path atomically: a temporary file in the same folder,
// renamed (writeFile).
func (f fsys) write(path string, b []byte) error {
	if f.n != nil {
		f.n.Writes.Add(1)
	}
	return writeFile(path, b)
}

// create makes an empty file at path, or reports it there already.
func (f fsys) create(path string) error {
	if f.n != nil {
		f.n.Writes.Add(1)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return fh.Close()
}

func (f fsys) remove(path string) error {
	if f.n != nil {
		f.n.Removes.Add(1)
	}
	return os.Remove(path)
}

// writeOnce stores b at path unless a file is there already, atomically
// either way: b goes to a temporary file that is then hard-linked to path,
// which fails when path exists. This is the lock file recipe of open(2)
// (man-pages, O_EXCL: "create a unique file on the same filesystem ... use
// link(2) to make a link to the lockfile ... Otherwise, use stat(2) on the
// unique file to check if its link count has increased to 2"): link is
// atomic on NFS too, and a link whose reply was lost (EEXIST on the
// retransmission) is told by the link count. created says whether this
// call's b is the one at path. A file system without hard links falls
// back to O_EXCL: a reader may then see the file before its content is
// complete, and reads it again (readClosed).
func (f fsys) writeOnce(path string, b []byte) (created bool, err error) {
	if f.n != nil {
		f.n.Writes.Add(1)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return false, err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	defer os.Remove(tmp.Name())
	if err := errors.Join(werr, cerr); err != nil {
		return false, err
	}
	lerr := os.Link(tmp.Name(), path)
	switch {
	case lerr == nil:
		return true, nil
	case errors.Is(lerr, fs.ErrExist):
		if fi, err := os.Stat(tmp.Name()); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink == 2 {
				return true, nil // it was this call's link
			}
		}
		return false, nil
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, errors.Join(lerr, err)
	}
	_, werr = fh.Write(b)
	return true, errors.Join(werr, fh.Close())
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
