// Package cpio writes the lab's boot and image archives: a "newc" cpio
// archive (the initramfs the VMs boot) or, the same entries, a tar (an OCI
// image layer).
package cpio

import (
	"archive/tar"
	"fmt"
	"io"
	"path"
	"strings"
)

// Writer writes a "newc" cpio archive, the format the kernel unpacks as an
// initramfs. Only what an initramfs needs is supported: directories, regular
// files and symlinks, all owned by root. From NewLayerWriter it writes the
// same entries as a tar instead: an OCI image layer (make lab-k8s).
type Writer struct {
	w      io.Writer
	tw     *tar.Writer
	ino    uint32
	closed bool
	seen   map[string]bool
	err    error

	rmajor, rminor uint32 // device numbers of the entry being written
}

// NewWriter returns a writer that appends entries to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, ino: 1, seen: map[string]bool{}}
}

// NewLayerWriter returns a writer of the same entries as a tar archive.
func NewLayerWriter(w io.Writer) *Writer {
	c := NewWriter(w)
	c.tw = tar.NewWriter(w)
	return c
}

const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
)

// cleanName turns "/a/b" or "a/b/" into "a/b"; the kernel wants relative names.
func cleanName(name string) (string, error) {
	n := strings.TrimPrefix(path.Clean("/"+name), "/")
	if n == "" || n == "." {
		return "", fmt.Errorf("cpio: empty entry name %q", name)
	}
	return n, nil
}

// Dir adds a directory (and, like mkdir -p, its missing parents).
func (c *Writer) Dir(name string, perm uint32) error {
	n, err := cleanName(name)
	if err != nil {
		return err
	}
	return c.mkdirAll(n, perm)
}

func (c *Writer) mkdirAll(n string, perm uint32) error {
	if c.seen[n] {
		return nil
	}
	if d := path.Dir(n); d != "." {
		if err := c.mkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	c.seen[n] = true
	return c.entry(n, modeDir|perm&0o7777, nil)
}

// File adds a regular file with the given content and permission bits.
func (c *Writer) File(name string, perm uint32, data []byte) error {
	n, err := c.claim(name)
	if err != nil {
		return err
	}
	return c.entry(n, modeFile|perm&0o7777, data)
}

// Symlink adds a symbolic link name -> target.
func (c *Writer) Symlink(name, target string) error {
	if target == "" {
		return fmt.Errorf("cpio: symlink %q has an empty target", name)
	}
	n, err := c.claim(name)
	if err != nil {
		return err
	}
	return c.entry(n, modeSymlink|0o777, []byte(target))
}

// CharDev adds a character device node (the kernel needs /dev/console
// before /init runs, when no devtmpfs is mounted yet).
func (c *Writer) CharDev(name string, perm, major, minor uint32) error {
	n, err := c.claim(name)
	if err != nil {
		return err
	}
	c.rmajor, c.rminor = major, minor
	defer func() { c.rmajor, c.rminor = 0, 0 }()
	return c.entry(n, modeChar|perm&0o7777, nil)
}

// Has reports whether name was already added.
func (c *Writer) Has(name string) bool {
	n, err := cleanName(name)
	return err == nil && c.seen[n]
}

// claim cleans name, adds its missing parent directories and reserves it:
// a second entry of one name is an error.
func (c *Writer) claim(name string) (string, error) {
	n, err := cleanName(name)
	if err != nil {
		return "", err
	}
	if err := c.parents(n); err != nil {
		return "", err
	}
	if c.seen[n] {
		return "", fmt.Errorf("cpio: duplicate entry %q", n)
	}
	c.seen[n] = true
	return n, nil
}

func (c *Writer) parents(n string) error {
	if d := path.Dir(n); d != "." {
		return c.mkdirAll(d, 0o755)
	}
	return nil
}

func (c *Writer) entry(name string, mode uint32, data []byte) error {
	if c.err != nil {
		return c.err
	}
	if c.closed {
		return fmt.Errorf("cpio: write after Close")
	}
	if c.tw != nil {
		return c.tarEntry(name, mode, data)
	}
	nlink := uint32(1)
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, c.rmajor, c.rminor, len(name)+1, 0)
	c.ino++
	c.write([]byte(hdr))
	c.write([]byte(name + "\x00"))
	c.pad(len(hdr) + len(name) + 1)
	c.write(data)
	c.pad(len(data))
	return c.err
}

func (c *Writer) tarEntry(name string, mode uint32, data []byte) error {
	h := &tar.Header{Name: name, Mode: int64(mode & 0o7777), Format: tar.FormatPAX, Uname: "root", Gname: "root"}
	switch mode & 0o170000 {
	case modeDir:
		h.Typeflag, h.Name = tar.TypeDir, name+"/"
	case modeSymlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, string(data)
		data = nil
	case modeChar:
		h.Typeflag, h.Devmajor, h.Devminor = tar.TypeChar, int64(c.rmajor), int64(c.rminor)
	default:
		h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
	}
	if c.err = c.tw.WriteHeader(h); c.err == nil && len(data) > 0 {
		_, c.err = c.tw.Write(data)
	}
	return c.err
}

func (c *Writer) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

// pad aligns to 4 bytes, as newc requires after the name and after the data.
func (c *Writer) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// Close writes the trailer entry; it does not close the underlying writer.
func (c *Writer) Close() error {
	if c.closed {
		return c.err
	}
	if c.tw != nil {
		c.closed = true
		if c.err == nil {
			c.err = c.tw.Close()
		}
		return c.err
	}
	if err := c.entry("TRAILER!!!", 0, nil); err != nil {
		return err
	}
	c.closed = true
	return c.err
}
