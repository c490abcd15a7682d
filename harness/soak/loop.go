package soak

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	model "github.com/gdrconf/gdrconf/internal/soak"
)

// Cutter is how a soak learns to stop before its time: SIGINT (Ctrl-C),
// SIGTERM (Slurm's scancel and time limit, Kubernetes' pod deletion), or a
// reason of the runner's own (the peer left). The first reason wins.
type Cutter struct {
	once   sync.Once
	done   chan struct{}
	mu     sync.Mutex
	reason string
	sig    chan os.Signal
	quit   chan struct{}
}

// NewCutter returns a Cutter without signal handling (Cut only).
func NewCutter() *Cutter { return &Cutter{done: make(chan struct{}), quit: make(chan struct{})} }

// WatchSignals returns a Cutter that SIGINT and SIGTERM cut. While it
// watches, those signals do not kill the process: the soak stops its load,
// writes its series and its tests report the cut. Stop gives them back.
func WatchSignals() *Cutter {
	c := NewCutter()
	c.sig = make(chan os.Signal, 2)
	signal.Notify(c.sig, os.Interrupt, syscall.SIGTERM)
	// Slurm signals every process of the step: test2json, which reads this
	// binary's output, dies at once, and Go's default for a write to a
	// broken pipe on stdout is to die too, before the cut series is saved.
	// Ignored, the write fails and the soak winds down and saves.
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		select {
		case s := <-c.sig:
			c.Cut(SignalReason(s))
		case <-c.quit:
		}
	}()
	return c
}

// SignalReason names a signal as Series.Cut says it.
func SignalReason(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT (interrupted)"
	case syscall.SIGTERM:
		return "SIGTERM (the job was stopped: " + model.StopSource("SIGTERM") + ")"
	}
	return s.String()
}

// Cut stops the soak for why; only the first reason is kept.
func (c *Cutter) Cut(why string) {
	c.once.Do(func() {
		c.mu.Lock()
		c.reason = why
		c.mu.Unlock()
		close(c.done)
	})
}

// Done is closed once the soak is cut.
func (c *Cutter) Done() <-chan struct{} { return c.done }

// Reason is why the soak was cut, "" while it was not.
func (c *Cutter) Reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// Stop ends the signal watch (the signals' default action again, SIGPIPE's
// too: what the binary writes after the saved series may end it).
func (c *Cutter) Stop() {
	if c.sig != nil {
		signal.Stop(c.sig)
		signal.Reset(syscall.SIGPIPE)
		select {
		case <-c.quit:
		default:
			close(c.quit)
		}
	}
}

// Sources are what Loop calls: Read takes one sample's readings (withLink:
// mlxlink is due), Save writes the series, Log prints the progress line.
type Sources struct {
	Read func(at time.Time, withLink bool) Reading
	Save func(*model.Series) error
	Log  func(line string)
}

// Loop samples s every s.Interval until s.Start+s.Planned or until cut,
// recording through rec and saving after every sample. The last sample
// comes at the end (or the cut) whatever is left of its interval, so the
// tail of the run is measured too. linkEvery paces the mlxlink readings
// (the first sample takes one, for a baseline). It returns the first Save
// error, if any; the loop goes on after one (a full disk must not stop
// the load's own judgement).
func Loop(s *model.Series, rec *Recorder, src Sources, cut *Cutter, linkEvery time.Duration) error {
	end := s.Start.Add(s.Planned)
	next := s.Start.Add(s.Interval)
	var lastLink time.Time
	var saveErr error
	for {
		wait := time.Until(next)
		if e := time.Until(end); e < wait {
			wait = e
		}
		timer := time.NewTimer(max(wait, 0))
		cutNow := false
		select {
		case <-timer.C:
		case <-cut.Done():
			timer.Stop()
			cutNow = true
		}
		now := time.Now()
		withLink := lastLink.IsZero() || now.Sub(lastLink) >= linkEvery
		if withLink {
			lastLink = now
		}
		step := rec.Add(src.Read(now, withLink))
		if cutNow {
			s.Cut = cut.Reason()
			s.Events = append(s.Events, model.Event{At: now, Kind: model.Cut, Text: "soak cut after " + now.Sub(s.Start).Round(time.Second).String() + " of " + s.Planned.String() + ": " + s.Cut})
		}
		if err := src.Save(s); err != nil && saveErr == nil {
			saveErr = err
			src.Log(fmt.Sprintf("soak: writing the series failed (the run goes on): %v", err))
		}
		src.Log(Progress(s, step, now))
		if cutNow || !now.Before(end) {
			return saveErr
		}
		next = next.Add(s.Interval)
		for !next.After(now) { // a slow read: skip the ticks it missed
			next = next.Add(s.Interval)
		}
	}
}

// Progress is the line printed per interval: elapsed and remaining, each
// rail's rate, each GPU's copy rate and clock, what rose and what happened.
func Progress(s *model.Series, st Step, now time.Time) string {
	el := now.Sub(s.Start).Round(time.Second)
	left := max(s.Planned-el, 0).Round(time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s of %s, %s left:", el, s.Planned, left)
	for i, r := range st.Sample.Rails {
		name := fmt.Sprintf("rail%d", i)
		if i < len(s.Rails) {
			name = fmt.Sprintf("rail%d %s", s.Rails[i].Index, s.Rails[i].Device)
		}
		fmt.Fprintf(&b, " %s %s", name, gbit(r.Gbps))
		if r.State != "" && r.State != "ACTIVE" {
			fmt.Fprintf(&b, " (%s)", r.State)
		}
		b.WriteString(";")
	}
	for i, g := range st.Sample.GPUs {
		if g.CopyGbps == nil && g.SMClockMHz == nil {
			continue
		}
		fmt.Fprintf(&b, " gpu%d copy %s", i, gbit(g.CopyGbps))
		if g.SMClockMHz != nil {
			fmt.Fprintf(&b, " %.0f MHz", *g.SMClockMHz)
		}
		if g.TempC != nil {
			fmt.Fprintf(&b, " %.0f C", *g.TempC)
		}
		b.WriteString(";")
	}
	if len(st.Rose) > 0 {
		b.WriteString(" rose: " + strings.Join(st.Rose, ", ") + ";")
	}
	for _, e := range st.Events {
		fmt.Fprintf(&b, " %s: %s;", e.Kind, e.Text)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func gbit(g *float64) string {
	if g == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.2f Gb/s", *g)
}
