// Package counters reads the error and traffic counters that show whether a
// link stayed healthy while the suite drove traffic over it: an RDMA port's
// IBTA port counters (ports/<p>/counters), its driver's hw_counters
// (ports/<p>/hw_counters: mlx5 Q counters, rxe's software counters, ...),
// and a PCI function's AER counters (aer_dev_correctable, aer_dev_nonfatal,
// aer_dev_fatal; aer_rootport_total_err_* on root ports).
//
// A Snapshot holds what was readable at one moment, with every file that
// could not be read or parsed named in Problems and every counter directory
// that does not exist named in Absent (rxe has no counters/, a function
// without an AER capability has no aer_dev_* files). Diff turns two
// snapshots into changes, and Judge classifies each rise with the table in
// table.go: errors fail, corrected errors warn, informational and data
// counters are reported, unknown counters are reported and not judged.
// StallCause reads the same delta for one transfer that stalled or failed
// (stall.go): what the port's counters since the connection say it was.
//
// Every read goes through a hostfs.Root, so recorded trees under fixtures/
// and a host mounted elsewhere (GDR_HOST_ROOT) read the same way; where the
// files are (and which names are valid) is rdmadev's and pci's to say.
package counters

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// Source is the family a counter belongs to.
type Source string

const (
	// Port is ports/<p>/counters: the IBTA PortCounters (and
	// PortCountersExtended) attributes, read by the kernel through the
	// device's performance management agent.
	Port Source = "counters"
	// HW is ports/<p>/hw_counters: counters the driver defines (mlx5 Q and
	// congestion counters, rxe's software counters).
	HW Source = "hw_counters"
	// AER is a PCI function's Advanced Error Reporting counters.
	AER Source = "aer"
)

// AER groups: the file a counter came from.
const (
	AERCorrectable = "correctable" // aer_dev_correctable
	AERNonFatal    = "nonfatal"    // aer_dev_nonfatal
	AERFatal       = "fatal"       // aer_dev_fatal
	AERRootPort    = "rootport"    // aer_rootport_total_err_{cor,nonfatal,fatal}
)

// Key names one counter.
type Key struct {
	Device string // RDMA device name (mlx5_0, rxe0) or PCI address (0000:3b:00.0)
	Port   int    // RDMA port number; 0 for PCI functions
	Source Source
	Group  string // AER group; "" otherwise
	Name   string // as the kernel spells it: symbol_error, out_of_sequence, RxErr, TOTAL_ERR_COR
}

func (k Key) String() string {
	switch k.Source {
	case AER:
		if k.Group == AERRootPort {
			return fmt.Sprintf("%s aer_rootport_%s", k.Device, k.Name)
		}
		return fmt.Sprintf("%s aer_dev_%s %s", k.Device, k.Group, k.Name)
	default:
		return fmt.Sprintf("%s port %d %s/%s", k.Device, k.Port, k.Source, k.Name)
	}
}

// Snapshot is the counters readable at one moment.
type Snapshot struct {
	Taken  time.Time
	Values map[Key]uint64
	// Absent names counter directories or files that do not exist, with
	// what that usually means ("rxe0 port 1: no counters/ (no performance
	// management agent: software device)").
	Absent []string
	// Problems names files that exist but could not be read or parsed,
	// each with the file and the value or the error.
	Problems []string
}

func newSnapshot() *Snapshot {
	return &Snapshot{Taken: time.Now(), Values: map[Key]uint64{}}
}

// Merge adds o's values, absences and problems to s (s's time is kept).
func (s *Snapshot) Merge(o *Snapshot) {
	for k, v := range o.Values {
		s.Values[k] = v
	}
	s.Absent = append(s.Absent, o.Absent...)
	s.Problems = append(s.Problems, o.Problems...)
}

// Keys returns the snapshot's keys in a stable order.
func (s *Snapshot) Keys() []Key {
	ks := make([]Key, 0, len(s.Values))
	for k := range s.Values {
		ks = append(ks, k)
	}
	sortKeys(ks)
	return ks
}

func sortKeys(ks []Key) {
	sort.Slice(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Name < b.Name
	})
}

// ParseValue reads one counter file: a decimal number, as sysfs prints
// every counter. Older kernels print "N/A (no PMA)" for port counters the
// device cannot answer; that is ErrNotAvailable, not a malformed file.
func ParseValue(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "N/A") {
		return 0, ErrNotAvailable
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a counter value (want a decimal number)", s)
	}
	return v, nil
}

// ErrNotAvailable is a counter the kernel lists but cannot read ("N/A (no PMA)").
var ErrNotAvailable = errors.New("not available (the kernel printed N/A)")

// ReadPort reads an RDMA port's counters/ and hw_counters/. A missing port
// is an error; a missing counter directory is noted in Absent.
func ReadPort(r *hostfs.Root, dev string, port int) (*Snapshot, error) {
	if err := rdmadev.CheckPort(dev, port); err != nil {
		return nil, err
	}
	dir := rdmadev.PortDir(dev, port)
	if fi, err := r.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s port %d: %w", dev, port, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	s := newSnapshot()
	for _, src := range []Source{Port, HW} {
		sub := dir + "/" + string(src)
		names, err := r.ReadDir(sub)
		if errors.Is(err, fs.ErrNotExist) {
			s.Absent = append(s.Absent, fmt.Sprintf("%s port %d: no %s/ (%s)", dev, port, src, absentWhy(src)))
			continue
		}
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(n, ".") || (src == HW && n == "lifespan") {
				// lifespan is hw_counters' cache time in ms, a setting and not a counter.
				continue
			}
			p := sub + "/" + n
			if fi, err := r.Stat(p); err == nil && fi.IsDir() {
				continue
			}
			b, err := r.ReadString(p)
			if err != nil {
				// Some drivers list counters they refuse to read (EINVAL,
				// EOPNOTSUPP on a VF): named, not fatal.
				s.Problems = append(s.Problems, err.Error())
				continue
			}
			v, err := ParseValue(b)
			if errors.Is(err, ErrNotAvailable) {
				s.Absent = append(s.Absent, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			s.Values[Key{Device: dev, Port: port, Source: src, Name: n}] = v
		}
	}
	return s, nil
}

func absentWhy(src Source) string {
	if src == Port {
		return "the device has no performance management agent, as software devices such as rxe and siw"
	}
	return "the driver exports no hardware counters"
}

// AERFiles maps the sysfs file of a PCI function to its AER group.
var AERFiles = map[string]string{
	"aer_dev_correctable": AERCorrectable,
	"aer_dev_nonfatal":    AERNonFatal,
	"aer_dev_fatal":       AERFatal,
}

// rootPortFiles are the single-number totals a root port keeps for
// everything below it.
var rootPortFiles = []string{"aer_rootport_total_err_cor", "aer_rootport_total_err_nonfatal", "aer_rootport_total_err_fatal"}

// ParseAER reads an aer_dev_* file: one "NAME value" line per error type and
// a TOTAL_ERR_* line. Blank lines are ignored; anything else is an error
// naming the line.
func ParseAER(s string) (map[string]uint64, error) {
	out := map[string]uint64{}
	for i, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d %q: want \"NAME value\"", i+1, l)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %q is not a decimal count", i+1, l, f[1])
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("line %d: %s appears twice", i+1, f[0])
		}
		out[f[0]] = v
	}
	if len(out) == 0 {
		return nil, errors.New("no counters in the file")
	}
	return out, nil
}

// ReadAER reads a PCI function's AER counters. A function without them (no
// AER capability, or a kernel without CONFIG_PCIEAER) is noted in Absent; a
// missing function is an error.
func ReadAER(r *hostfs.Root, bdf string) (*Snapshot, error) {
	if !pci.IsBDF(bdf) {
		return nil, fmt.Errorf("PCI address %q is not valid", bdf)
	}
	dir := pci.DevicesDir + "/" + bdf
	if _, err := r.Stat(dir); err != nil {
		return nil, fmt.Errorf("PCI function %s: %w", bdf, err)
	}
	s := newSnapshot()
	found := 0
	for _, file := range []string{"aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"} {
		p := dir + "/" + file
		b, err := r.ReadString(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		found++
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			continue
		}
		m, err := ParseAER(b)
		if err != nil {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		for n, v := range m {
			s.Values[Key{Device: bdf, Source: AER, Group: AERFiles[file], Name: n}] = v
		}
	}
	for _, file := range rootPortFiles {
		p := dir + "/" + file
		b, err := r.ReadString(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		found++
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			continue
		}
		v, err := ParseValue(b)
		if err != nil {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		s.Values[Key{Device: bdf, Source: AER, Group: AERRootPort, Name: strings.TrimPrefix(file, "aer_rootport_")}] = v
	}
	if found == 0 {
		s.Absent = append(s.Absent, fmt.Sprintf("%s: no aer_dev_* files (no AER capability, or the kernel lacks CONFIG_PCIEAER)", bdf))
	}
	return s, nil
}

// PortRef names one RDMA port.
type PortRef struct {
	Device string
	Port   int
}

// Take reads every named port and PCI function into one snapshot. A port or
// function that cannot be read at all is a problem of the snapshot, not an
// error: the other counters are still worth comparing.
func Take(r *hostfs.Root, ports []PortRef, pcis []string) *Snapshot {
	s := newSnapshot()
	for _, p := range ports {
		ps, err := ReadPort(r, p.Device, p.Port)
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			continue
		}
		s.Merge(ps)
	}
	seen := map[string]bool{}
	for _, b := range pcis {
		if seen[b] {
			continue
		}
		seen[b] = true
		as, err := ReadAER(r, b)
		if err != nil {
			s.Problems = append(s.Problems, err.Error())
			continue
		}
		s.Merge(as)
	}
	return s
}
