// Package kmsg reads the kernel log (/dev/kmsg, through a hostfs.Root) and
// picks out the lines that matter while GPUDirect RDMA traffic runs: NVIDIA
// Xid events, the GPU falling off the bus, mlx5 health and CQE errors, PCIe
// AER reports, IOMMU faults and kernel BUGs.
//
// Reading never blocks: the device is opened non-blocking and read until it
// has nothing more (EAGAIN), the end of a recorded file, or a deadline,
// whichever comes first. What could not be read is said, not hidden: an
// unreadable log (kernel.dmesg_restrict=1 without CAP_SYSLOG, no /dev/kmsg
// in the tree) is an error naming the cause, records the kernel overwrote
// before they were read are counted, and a read cut short by the deadline
// says so.
package kmsg

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Path is the kernel log device.
const Path = "/dev/kmsg"

// Record is one kernel log record.
type Record struct {
	Level    int           // syslog level: 0 emerg .. 3 err, 4 warning .. 7 debug
	Facility int           // 0 kernel
	Seq      uint64        // the kernel's sequence number
	Time     time.Duration // since boot
	Text     string        // the message, without the dictionary lines
	Dict     map[string]string
}

func (r Record) String() string {
	return fmt.Sprintf("[%12.6f] %s", r.Time.Seconds(), r.Text)
}

// ParseRecord parses one record as /dev/kmsg returns it:
// "<prefix>,<seq>,<usec>,<flags>[,...];<text>\n" followed by
// " KEY=value\n" dictionary lines.
func ParseRecord(s string) (Record, error) {
	head, rest, ok := strings.Cut(s, ";")
	if !ok {
		return Record{}, fmt.Errorf("kmsg record %q: no ';' after the header", trunc(s))
	}
	f := strings.Split(head, ",")
	if len(f) < 4 {
		return Record{}, fmt.Errorf("kmsg record %q: header %q has fewer than 4 fields", trunc(s), head)
	}
	pri, err1 := strconv.ParseUint(f[0], 10, 32)
	seq, err2 := strconv.ParseUint(f[1], 10, 64)
	usec, err3 := strconv.ParseUint(f[2], 10, 63)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Record{}, fmt.Errorf("kmsg record %q: header %q: want numbers for priority, sequence and time", trunc(s), head)
	}
	r := Record{Level: int(pri & 7), Facility: int(pri >> 3), Seq: seq, Time: time.Duration(usec) * time.Microsecond}
	lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	r.Text = unescape(lines[0])
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, " ") {
			return Record{}, fmt.Errorf("kmsg record %q: line %q is neither the message nor a dictionary entry", trunc(s), l)
		}
		k, v, _ := strings.Cut(strings.TrimPrefix(l, " "), "=")
		if r.Dict == nil {
			r.Dict = map[string]string{}
		}
		r.Dict[k] = v
	}
	return r, nil
}

// unescape undoes the kernel's \xNN escaping of non-printable bytes.
func unescape(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Result is what one read returned.
type Result struct {
	Records []Record
	// Lost counts records the kernel overwrote before they were read
	// (EPIPE from the device, or gaps in sequence numbers).
	Lost uint64
	// Incomplete says why reading stopped before the end of the log ("" if
	// it reached the end).
	Incomplete string
	// Malformed names records that did not parse.
	Malformed []string
}

// Problems lists what the result could not cover, for reports.
func (r Result) Problems() []string {
	var out []string
	if r.Lost > 0 {
		out = append(out, fmt.Sprintf("%d kernel log records were overwritten before they were read (a flood of messages, or a small log buffer)", r.Lost))
	}
	if r.Incomplete != "" {
		out = append(out, r.Incomplete)
	}
	return append(out, r.Malformed...)
}

// Watcher reads the records logged after it was started.
type Watcher struct {
	fd      int
	path    string
	pending string // a partial record (recorded files only)
	lastSeq uint64
	haveSeq bool
}

// bufSize is larger than any record the kernel returns (a read with a
// smaller buffer fails with EINVAL).
const bufSize = 16 << 10

// open opens host path p non-blocking. Errors say why the log is unreadable.
func open(r *hostfs.Root, p string) (int, string, error) {
	real, err := r.Real(p)
	if err != nil {
		return -1, "", fmt.Errorf("kernel log %s: %w", p, err)
	}
	fd, err := syscall.Open(real, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", unreadable(r, p, err)
	}
	return fd, real, nil
}

// ErrUnreadable wraps every reason the log could not be opened.
var ErrUnreadable = errors.New("kernel log not readable")

func unreadable(r *hostfs.Root, p string, err error) error {
	where := p
	if r.Dir() != "/" {
		where = r.Host(p)
	}
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w: %s: %v (kernel.dmesg_restrict=1 allows only CAP_SYSLOG: run as root)", ErrUnreadable, where, err)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w: %s does not exist (no /dev in the host root, or a container without the device)", ErrUnreadable, where)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnreadable, where, err)
}

// Watch opens the log and positions it at its end, so that Read returns
// only what is logged afterwards. Close it when done.
func Watch(r *hostfs.Root) (*Watcher, error) {
	fd, real, err := open(r, Path)
	if err != nil {
		return nil, err
	}
	// SEEK_END on /dev/kmsg means "after the newest record"; on a recorded
	// file, its end.
	if _, err := syscall.Seek(fd, 0, io.SeekEnd); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("%w: %s: seek to the end: %v", ErrUnreadable, real, err)
	}
	return &Watcher{fd: fd, path: real}, nil
}

// ReadAll reads the whole log (what the kernel still holds), until the
// deadline.
func ReadAll(r *hostfs.Root, deadline time.Time) (Result, error) {
	fd, real, err := open(r, Path)
	if err != nil {
		return Result{}, err
	}
	w := &Watcher{fd: fd, path: real}
	defer w.Close()
	return w.Read(deadline), nil
}

// Close releases the device.
func (w *Watcher) Close() error {
	if w.fd < 0 {
		return nil
	}
	err := syscall.Close(w.fd)
	w.fd = -1
	return err
}

// Read returns the records that arrived since the last Read (or Watch),
// stopping at the end of what is there or at the deadline.
func (w *Watcher) Read(deadline time.Time) Result {
	var res Result
	if w.fd < 0 {
		res.Incomplete = "kernel log watcher already closed"
		return res
	}
	buf := make([]byte, bufSize)
	var chunks []string
	overruns := uint64(0)
	for {
		if time.Now().After(deadline) {
			res.Incomplete = fmt.Sprintf("stopped reading %s at the deadline: later records were not read", w.path)
			break
		}
		n, err := syscall.Read(w.fd, buf)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EPIPE) {
			// The kernel overwrote records since the last read; the next
			// read continues with the oldest one left (the sequence gap
			// says how many, when there is an earlier record to compare).
			overruns++
			continue
		}
		if errors.Is(err, syscall.EAGAIN) || (err == nil && n == 0) {
			break
		}
		if err != nil {
			res.Incomplete = fmt.Sprintf("reading %s: %v", w.path, err)
			break
		}
		chunks = append(chunks, string(buf[:n]))
	}
	w.parse(chunks, &res)
	if res.Lost == 0 {
		res.Lost = overruns
	}
	return res
}

// parse splits what was read into records. /dev/kmsg returns one record
// per read; a recorded file returns arbitrary chunks, so records are
// rejoined by their layout: a header line, then dictionary lines that
// start with a space.
func (w *Watcher) parse(chunks []string, res *Result) {
	text := w.pending + strings.Join(chunks, "")
	w.pending = ""
	if i := strings.LastIndexByte(text, '\n'); i < len(text)-1 {
		w.pending, text = text[i+1:], text[:i+1]
	}
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		s := cur.String()
		cur.Reset()
		r, err := ParseRecord(s)
		if err != nil {
			res.Malformed = append(res.Malformed, err.Error())
			return
		}
		if w.haveSeq && r.Seq > w.lastSeq+1 {
			res.Lost += r.Seq - w.lastSeq - 1
		}
		if !w.haveSeq || r.Seq > w.lastSeq {
			w.lastSeq, w.haveSeq = r.Seq, true
		}
		res.Records = append(res.Records, r)
	}
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, " ") {
			flush()
		}
		cur.WriteString(l)
	}
	flush()
}
