// Package soak holds what a soak run measured, sample by sample, and the
// judges that read it over time: faults that show only after minutes or
// hours (a link that flaps, a BER that climbs, a GPU that throttles once it
// is warm, a rate that sags) and never in a snapshot.
//
// One Series is one host's run. The runner (harness/soak) appends a Sample
// per interval and writes the Series to the host's report folder
// (SeriesFile); the judges (judge*.go) turn it into verdict.Findings; the
// report draws it. Nothing here reads the host: the package takes recorded
// or constructed series as they are, so the judges are unit-tested on
// series of the real tools' shapes.
//
// A value that was not measured is nil (absent), never zero: a sample
// whose bandwidth could not be read says so, and no judge takes it for a
// dip.
package soak

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
)

// SeriesFile is the soak series' name in a host's report folder.
const SeriesFile = "soak.json"

// Version is the series layout written by this suite; a reader refuses a
// newer one by name instead of misreading it.
const Version = 1

// Series is one host's soak run.
type Series struct {
	Version int    `json:"version"`
	Host    string `json:"host"`
	// Emulated is set when any GPU in the run is the lab's emulated GPU:
	// every result drawn from the series is then labelled emulated.
	Emulated bool `json:"emulated,omitempty"`
	// Start and End bound the run; Planned is the duration asked for
	// (GDR_SOAK) and Interval the sampling interval (GDR_SOAK_INTERVAL).
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end"`
	Planned  time.Duration `json:"planned_ns"`
	Interval time.Duration `json:"interval_ns"`
	// Cut is why the run stopped before Planned ("SIGTERM", "interrupt",
	// "the peer left"), "" when it ran its duration.
	Cut string `json:"cut,omitempty"`
	// Downsampled is the original number of samples when Samples holds
	// fewer (a long run's series in summary.json); 0 when not.
	Downsampled int `json:"downsampled,omitempty"`
	// Unread names what the runner could not read during the whole run, by
	// source (UnreadKmsg, UnreadNVML, UnreadMlxlink, UnreadCounters), with
	// why ("/dev/kmsg: permission denied", "mlxlink not on PATH"): a judge
	// whose source was not read says it could not judge, instead of
	// passing on nothing.
	Unread map[string]string `json:"unread,omitempty"`

	Rails   []Rail   `json:"rails"`
	GPUs    []GPU    `json:"gpus"`
	Samples []Sample `json:"samples"`
	Events  []Event  `json:"events,omitempty"`
}

// Rail is one rail under load: its identity, fixed for the run.
type Rail struct {
	Index  int    `json:"index"`
	Device string `json:"device"` // RDMA device (mlx5_0, rxe0)
	Port   int    `json:"port"`
	PCI    string `json:"pci,omitempty"` // the NIC function
	GPU    string `json:"gpu,omitempty"` // the GPU whose memory the rail moves (PCI address)
	// Between are the PCI functions on the path from the GPU to the NIC
	// (switch ports, root ports), whose AER counters the samples hold.
	Between []string `json:"between,omitempty"`
	// Peer is the host at the other end, "" for loopback.
	Peer string `json:"peer,omitempty"`
	// Floor is the rail's bandwidth floor in Gbit/s and where it comes
	// from; nil when none is known (then no dip can be judged).
	Floor       *float64 `json:"floor_gbit_s,omitempty"`
	FloorSource string   `json:"floor_source,omitempty"`
}

// GPU is one GPU kept busy by the copy load.
type GPU struct {
	Index int    `json:"index"`
	PCI   string `json:"pci"`
	Name  string `json:"name,omitempty"`
}

// Sample is one interval's measurements, taken at At. Rails and GPUs are in
// the Series' order (Rails[i] is Series.Rails[i]).
type Sample struct {
	At    time.Time    `json:"at"`
	Rails []RailSample `json:"rails"`
	GPUs  []GPUSample  `json:"gpus,omitempty"`
}

// RailSample is one rail at one sample.
type RailSample struct {
	// Gbps is the RDMA WRITE rate over the interval; nil when not measured
	// (the engine was reconnecting, the sample came before the first
	// completion).
	Gbps *float64 `json:"gbit_s,omitempty"`
	// GbpsMin and GbpsMax are the lowest and highest rate of the samples a
	// downsampled sample stands for (Downsample; Gbps is then their mean);
	// nil in a series as measured.
	GbpsMin *float64 `json:"gbit_s_min,omitempty"`
	GbpsMax *float64 `json:"gbit_s_max,omitempty"`
	// State is the port's state when sampled (ACTIVE, DOWN, INIT, ...);
	// "" when it could not be read.
	State string `json:"state,omitempty"`
	// Counters are the cumulative counter values that changed since the
	// previous sample (all of them in the first): the NIC port's counters
	// and hw_counters, and the AER counters of the NIC, its GPU and the
	// functions Between. A counter that did not change is not repeated.
	Counters []Count `json:"counters,omitempty"`
	// Link is mlxlink's view of the port where it ran at this sample (it
	// runs every few minutes, where the tool is present); nil otherwise.
	Link *Link `json:"link,omitempty"`
}

// Count is one counter's cumulative value.
type Count struct {
	Key   counters.Key `json:"key"`
	Value uint64       `json:"value"`
}

// Link is what mlxlink said about the port (internal/optics.Link), the
// numbers the judges follow over time; nil fields were not printed.
type Link struct {
	EffectiveBER *float64 `json:"effective_ber,omitempty"`
	RawBER       *float64 `json:"raw_ber,omitempty"`
	SymbolBER    *float64 `json:"symbol_ber,omitempty"`
	LinkDown     *float64 `json:"link_down,omitempty"`
	Recovery     *float64 `json:"recovery,omitempty"`
	// TempC and RxPowerDBm are the module's DOM readings where read.
	TempC      *float64 `json:"temp_c,omitempty"`
	RxPowerDBm *float64 `json:"rx_power_dbm,omitempty"`
}

// GPUSample is one GPU at one sample, from NVML; nil fields were not read.
type GPUSample struct {
	SMClockMHz  *float64 `json:"sm_clock_mhz,omitempty"`
	MemClockMHz *float64 `json:"mem_clock_mhz,omitempty"`
	TempC       *float64 `json:"temp_c,omitempty"`
	PowerW      *float64 `json:"power_w,omitempty"`
	// Throttle is NVML's clock event reasons bit mask
	// (nvmlDeviceGetCurrentClocksEventReasons); nil when not read.
	Throttle *uint64 `json:"throttle,omitempty"`
	// CopyGbps is the copy engines' rate over the interval.
	CopyGbps *float64 `json:"copy_gbit_s,omitempty"`
}

// Event is something that happened at a moment: a kernel log line (an Xid,
// an AER report), a port that went down or came back, a rail's traffic
// that stopped on an error, the run being cut.
type Event struct {
	At   time.Time `json:"at"`
	Kind EventKind `json:"kind"`
	// Device is the part the event is about: a PCI address or an RDMA
	// device; "" for the host.
	Device string `json:"device,omitempty"`
	Rail   *int   `json:"rail,omitempty"`
	Text   string `json:"text"`
}

// EventKind names what an Event is.
type EventKind string

const (
	LinkDown EventKind = "link_down"
	LinkUp   EventKind = "link_up"
	Xid      EventKind = "xid"
	AER      EventKind = "aer"
	Cut      EventKind = "cut"
	// Stopped is a rail's traffic that ended on an error before the soak
	// did (an RC connection whose retries ran out while the link was
	// down, a peer that died): the rail carried nothing from then on.
	Stopped EventKind = "traffic_stopped"
)

// The sources Series.Unread names.
const (
	UnreadKmsg     = "kmsg"     // the kernel log (Xid and AER lines)
	UnreadNVML     = "nvml"     // the GPUs' clocks, throttle reasons, temperature, power
	UnreadMlxlink  = "mlxlink"  // mlxlink's BER and link counters
	UnreadCounters = "counters" // the ports' and PCI functions' counters
)

// Duration is how long the run actually ran.
func (s *Series) Duration() time.Duration { return s.End.Sub(s.Start) }

// Validate says what is inconsistent in s, naming the value: a reader
// refuses such a series instead of drawing or judging nonsense.
func (s *Series) Validate() error {
	if s.Version > Version {
		return fmt.Errorf("soak series version %d is newer than this suite's %d: use a newer gdrreport", s.Version, Version)
	}
	if s.Version < 1 {
		return fmt.Errorf("soak series version %d: not a soak series", s.Version)
	}
	if s.End.Before(s.Start) {
		return fmt.Errorf("soak series ends (%s) before it starts (%s)", s.End.Format(time.RFC3339), s.Start.Format(time.RFC3339))
	}
	for i, x := range s.Samples {
		if len(x.Rails) != len(s.Rails) {
			return fmt.Errorf("soak sample %d has %d rails, the series %d", i, len(x.Rails), len(s.Rails))
		}
		if len(x.GPUs) != 0 && len(x.GPUs) != len(s.GPUs) {
			return fmt.Errorf("soak sample %d has %d GPUs, the series %d", i, len(x.GPUs), len(s.GPUs))
		}
		if i > 0 && x.At.Before(s.Samples[i-1].At) {
			return fmt.Errorf("soak sample %d (%s) is before sample %d (%s)", i, x.At.Format(time.RFC3339), i-1, s.Samples[i-1].At.Format(time.RFC3339))
		}
	}
	return nil
}

// Write writes s as dir/SeriesFile, through a temporary file so a reader
// never sees half a series (the runner rewrites it as the run goes, so an
// interrupted run leaves what it measured).
func Write(dir string, s *Series) error {
	if s.Version == 0 {
		s.Version = Version
	}
	tmp, err := os.CreateTemp(dir, SeriesFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600; the report folder's other files are
	// readable by the people and collectors that read reports.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := json.NewEncoder(tmp).Encode(s); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, SeriesFile))
}

// maxSeriesBytes bounds what Read takes: 8 rails x 8 h at 10 s with every
// counter changing is far below it; more is not a series this suite wrote.
const maxSeriesBytes = 512 << 20

// Read reads dir/SeriesFile; os.ErrNotExist (wrapped) when the host ran no
// soak.
func Read(dir string) (*Series, error) {
	p := filepath.Join(dir, SeriesFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decode(p, io.LimitReader(f, maxSeriesBytes+1))
}

func decode(name string, r io.Reader) (*Series, error) {
	var s Series
	d := json.NewDecoder(r)
	if err := d.Decode(&s); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: cut short or larger than %d bytes: %w", name, maxSeriesBytes, err)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

// StopSource says who sends a run the signal sig (its name: "SIGTERM",
// "SIGINT"): the words a cut soak (Series.Cut) and a stopped run's report
// both use.
func StopSource(sig string) string {
	switch sig {
	case "SIGTERM":
		return "Slurm's scancel or time limit, Kubernetes deleting the pod"
	case "SIGINT":
		return "Ctrl-C"
	}
	return "a signal to the run"
}
