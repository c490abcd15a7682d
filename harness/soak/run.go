package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmsg"
	"github.com/gdrconf/gdrconf/internal/optics"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	model "github.com/gdrconf/gdrconf/internal/soak"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Result is the process's one soak run.
type Result struct {
	Series *model.Series
	// File is where the series was written; "" when it could not be.
	File string
	// RailsWhy says why no rail carried traffic ("" when rails ran), and
	// GPUsWhy why no GPU copied: what is absent and where the suite looked.
	RailsWhy, GPUsWhy string
	// Absent says why nothing was soaked (no rail and no GPU), with what to
	// do; nil when something was. The rest of the result is then empty.
	Absent *verdict.Finding
	// Problems are what went wrong on the way without stopping the soak: a
	// rail or GPU whose load stopped on an error, a series that could not
	// be written, kernel log records lost.
	Problems []string
}

var (
	once   sync.Once
	result *Result
	ranIn  string
)

// Run runs the soak once per test binary, in the first test that asks
// (TestSOAK01..07 each judge the same run), and returns it (with Absent
// set when there was nothing to soak). A soak that could not start ended
// that test (a connection that failed, a deadline too short); the later
// tests get nil and why.
func Run(t *testing.T) (*Result, string) {
	t.Helper()
	once.Do(func() {
		ranIn = t.Name()
		result = run(t)
	})
	if result == nil {
		return nil, "the soak did not run: " + ranIn + " says why"
	}
	return result, ""
}

// Skipped is the soak's state in a cluster round that cannot give it
// (GDR_SOAK_SKIP, set by rounds.sh): asked for, not run, and why.
func Skipped(why string) *verdict.Finding {
	return verdict.Absentf("soak this host on its own (GDR_SOAK=<duration> dist/run.sh, with GDR_ROLE and GDR_PEER for a partner), or run the cluster with an even number of hosts that all start in round 0",
		"the soak was asked for (GDR_SOAK) but not run here: %s", why)
}

// linkTimeout bounds one mlxlink run (it reads registers for seconds).
const linkTimeout = 30 * time.Second

// stopWithin bounds the end of the loads after the soak: one RDMA round or
// one batch of copies.
const stopWithin = 2 * time.Minute

func run(t *testing.T) *Result {
	cfg := testenv.Config(t)
	root := testenv.Root(t)
	if dl, ok := t.Deadline(); ok && time.Until(dl) < cfg.Soak+stopWithin+time.Minute {
		testenv.NotJudgedf(t, "run make soak, or go test -timeout 0 (every wait of the soak has its own deadline)",
			"go test's -timeout ends this test binary at %s, before GDR_SOAK=%s and the soak's wind-down are over", dl.Format(time.RFC3339), cfg.Soak)
	}
	s := &model.Series{Version: model.Version, Host: hostName(cfg), Planned: cfg.Soak, Interval: cfg.SoakInterval}
	res := &Result{Series: s}
	rl, why := startRails(t, cfg, s)
	res.RailsWhy = why
	gl, why := startGPUs(t, s)
	res.GPUsWhy = why
	if rl == nil && gl == nil {
		res.Absent = verdict.Absentf("run the soak on a host with a rail (rdma build) or a GPU (gpu build)",
			"nothing to soak: no rail (%s) and no GPU (%s)", res.RailsWhy, res.GPUsWhy)
		return res
	}
	dir, err := reportDir(cfg)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
	} else {
		res.File = filepath.Join(dir, model.SeriesFile)
	}
	rd := newReader(root, s, rl, gl)
	defer rd.close()
	if rd.kmsgWhy != "" {
		res.Problems = append(res.Problems, rd.kmsgWhy)
	}
	cut := WatchSignals()
	defer cut.Stop()
	s.Start = time.Now()
	t.Logf("soak: %s on %d rail(s) and %d GPU(s), a sample every %s, mlxlink every %s; the series goes to %s", s.Planned, len(s.Rails), len(s.GPUs), s.Interval, cfg.SoakLinkEvery, orNone(res.File))
	save := func(x *model.Series) error {
		if dir == "" {
			return nil
		}
		return model.Write(dir, x)
	}
	if err := Loop(s, NewRecorder(s), Sources{Read: rd.read, Save: save, Log: func(l string) { t.Log(l) }}, cut, cfg.SoakLinkEvery); err != nil {
		res.Problems = append(res.Problems, "writing the series: "+err.Error())
	}
	for _, l := range []*load{rl, gl} {
		if l != nil {
			res.Problems = append(res.Problems, l.Stop(stopWithin)...)
		}
	}
	res.Problems = append(res.Problems, rd.problems()...)
	if s.Cut != "" {
		t.Logf("soak CUT after %s of %s: %s; the report judges what was measured", s.Duration().Round(time.Second), s.Planned, s.Cut)
	}
	return res
}

func hostName(cfg config.Config) string {
	if cfg.HostName != "" {
		return cfg.HostName
	}
	h, _ := os.Hostname()
	return h
}

// reportDir is where the series goes: GDR_REPORTS (make and dist/run.sh
// set it), else a folder of its own under the temporary directory, named
// in the log, so a bare go test still leaves what it measured.
func reportDir(cfg config.Config) (string, error) {
	dir := cfg.Reports
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("gdrconf-soak-%d", os.Getpid()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the soak's report folder %s: %w", dir, err)
	}
	return dir, nil
}

func orNone(s string) string {
	if s == "" {
		return "nowhere (see the problems)"
	}
	return s
}

// load is one side's work (the rails' traffic, the GPUs' copies): a loop
// per item adding the bytes it moves, stopped together.
type load struct {
	moved []atomic.Int64
	ended []atomic.Bool            // item i's loop returned (the peer stopped first, an error)
	dead  []atomic.Pointer[string] // why item i's loop ended on an error
	names []string
	stop  chan struct{}
	wg    sync.WaitGroup
	// telemetry, for GPUs: item i's NVML readings (CopyBytes left nil).
	telemetry func(i int) GPUReading
}

func newLoad(names []string) *load {
	return &load{moved: make([]atomic.Int64, len(names)), ended: make([]atomic.Bool, len(names)), dead: make([]atomic.Pointer[string], len(names)), names: names, stop: make(chan struct{})}
}

// start runs fn for item i until stop; an error ends that item's loop.
func (l *load) start(i int, fn func(stop <-chan struct{}, moved *atomic.Int64) error) {
	l.wg.Go(func() {
		defer l.ended[i].Store(true)
		if err := fn(l.stop, &l.moved[i]); err != nil {
			why := fmt.Sprintf("%s: the load stopped: %v", l.names[i], err)
			l.dead[i].Store(&why)
		}
	})
}

// take is what item i moved since the last take; nil once its loop has
// ended and nothing more came (not measured, not zero: a peer that ended
// its soak a moment earlier stops this host's rail too, and that is no
// dip).
func (l *load) take(i int) *int64 {
	v := l.moved[i].Swap(0)
	if v == 0 && l.ended[i].Load() {
		return nil
	}
	return &v
}

// Stop ends every loop and waits for them at most within; it returns the
// loops that ended on an error, and those still running at the deadline.
func (l *load) Stop(within time.Duration) []string {
	close(l.stop)
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	var out []string
	select {
	case <-done:
	case <-time.After(within):
		out = append(out, fmt.Sprintf("the load did not stop within %s of the end (%s): a wait on the NIC or the GPU that never returned", within, strings.Join(l.names, ", ")))
	}
	for i := range l.dead {
		if w := l.dead[i].Load(); w != nil {
			out = append(out, *w)
		}
	}
	return out
}

// reader takes one sample's readings of the host.
type reader struct {
	root    *hostfs.Root
	s       *model.Series
	rails   *load
	gpus    *load
	ports   [][]counters.PortRef
	pcis    [][]string
	kw      *kmsg.Watcher
	kmsgWhy string
	lost    []string
	linkWhy map[string]string // NIC -> why mlxlink gave nothing (said once)
}

func newReader(root *hostfs.Root, s *model.Series, rl, gl *load) *reader {
	rd := &reader{root: root, s: s, rails: rl, gpus: gl, linkWhy: map[string]string{}}
	for _, r := range s.Rails {
		rd.ports = append(rd.ports, []counters.PortRef{{Device: r.Device, Port: r.Port}})
		var pcis []string
		for _, b := range append([]string{r.GPU, r.PCI}, r.Between...) {
			if b != "" {
				pcis = append(pcis, b)
			}
		}
		rd.pcis = append(rd.pcis, pcis)
	}
	kw, err := kmsg.Watch(root)
	if err != nil {
		rd.kmsgWhy = "kernel log not watched, SOAK-07 has nothing to judge: " + err.Error()
	}
	rd.kw = kw
	return rd
}

func (rd *reader) close() {
	if rd.kw != nil {
		_ = rd.kw.Close()
	}
}

// read is Loop's Read: the rails' bytes, states, counters (and mlxlink
// when due), the GPUs' bytes and NVML, the kernel log since the last read.
func (rd *reader) read(at time.Time, withLink bool) Reading {
	x := Reading{At: at, Rails: make([]RailReading, len(rd.s.Rails))}
	for i, r := range rd.s.Rails {
		rr := &x.Rails[i]
		if rd.rails != nil {
			rr.Bytes = rd.rails.take(i)
			if w := rd.rails.dead[i].Load(); w != nil {
				rr.Stopped = *w
			}
		}
		if st, err := rdmadev.PortState(rd.root, r.Device, r.Port); err == nil {
			rr.State = st
		}
		snap := counters.Take(rd.root, rd.ports[i], rd.pcis[i])
		rr.Counters = snap.Values
		if withLink && r.PCI != "" {
			rr.Link = rd.link(r.PCI)
		}
	}
	if rd.gpus != nil {
		x.GPUs = make([]GPUReading, len(rd.s.GPUs))
		for i := range x.GPUs {
			if rd.gpus.telemetry != nil {
				x.GPUs[i] = rd.gpus.telemetry(i)
			}
			x.GPUs[i].CopyBytes = rd.gpus.take(i)
		}
	}
	if rd.kw != nil {
		kr := rd.kw.Read(time.Now().Add(5 * time.Second))
		x.Kernel = kmsg.Scan(kr.Records)
		rd.lost = append(rd.lost, kr.Problems()...)
	}
	return x
}

// link runs mlxlink on the NIC at bdf where the tool is there; where it is
// not, or fails, it says so once and gives nil.
func (rd *reader) link(bdf string) *optics.Link {
	out, _, err := optics.Mlxlink(rd.root, bdf, linkTimeout)
	if err != nil {
		if _, said := rd.linkWhy[bdf]; !said {
			rd.linkWhy[bdf] = fmt.Sprintf("%s: no mlxlink reading, SOAK-04 has no BER to follow: %v", bdf, err)
		}
		return nil
	}
	return optics.ParseMlxlink(out)
}

func (rd *reader) problems() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range rd.lost { // the same problem at every read is said once
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var links []string
	for _, w := range rd.linkWhy {
		links = append(links, w)
	}
	sort.Strings(links)
	return append(out, links...)
}
