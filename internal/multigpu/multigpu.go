// Package multigpu is the arithmetic of the suite's multi-GPU checks: which
// of several copies that ran at once really overlapped, and at what rate
// each ran then (Overlap), and what a GPU<->GPU NVLink connection carries in
// theory (NVLinkRate). The copy engines that time them live in
// harness/gpucopy (over harness/cuda); the verdicts in conformance/gpu.
package multigpu

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Span is one timed operation: a copy, or a batch of copies waited for
// together.
type Span struct{ Start, End time.Time }

// Duration is how long the operation took.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Lane is what one of several concurrent copy loops did inside the window
// where all of them were running.
type Lane struct {
	Ops   int           // operations wholly inside the window
	Bytes int64         // bytes they moved
	Busy  time.Duration // their summed durations
	GBps  float64       // Bytes / Busy, in 10^9 bytes per second
}

// Window is the stretch of time in which every lane was copying.
type Window struct {
	Start, End time.Time
	Lanes      []Lane
}

// Length is the window's duration.
func (w Window) Length() time.Duration { return w.End.Sub(w.Start) }

// Aggregate is the sum of the lanes' rates: what all of them moved together
// per second while all were running.
func (w Window) Aggregate() float64 {
	var s float64
	for _, l := range w.Lanes {
		s += l.GBps
	}
	return s
}

// Overlap finds the window in which every lane was copying (from the latest
// first start to the earliest last end) and each lane's rate over the
// operations wholly inside it, each of which moved bytesPerOp. Loops that
// start and stop at slightly different times would otherwise credit a lane
// with time it ran alone. Every lane needs at least minOps operations inside
// the window; fewer is an error saying which lane and how many, as is a lane
// without operations or operations that never overlapped.
func Overlap(lanes [][]Span, bytesPerOp int64, minOps int) (Window, error) {
	if len(lanes) == 0 {
		return Window{}, errors.New("no copy loops to compare")
	}
	if bytesPerOp <= 0 {
		return Window{}, fmt.Errorf("%d bytes per operation: must be positive", bytesPerOp)
	}
	minOps = max(minOps, 1)
	var w Window
	for i, l := range lanes {
		if len(l) == 0 {
			return Window{}, fmt.Errorf("copy loop %d timed no operation", i)
		}
		for j, s := range l {
			if s.End.Before(s.Start) {
				return Window{}, fmt.Errorf("copy loop %d, operation %d ends before it starts", i, j)
			}
		}
		first, last := l[0].Start, l[len(l)-1].End
		if i == 0 || first.After(w.Start) {
			w.Start = first
		}
		if i == 0 || last.Before(w.End) {
			w.End = last
		}
	}
	if !w.End.After(w.Start) {
		return Window{}, fmt.Errorf("the %d copy loops never ran at the same time (the last one started %v after the first one finished)",
			len(lanes), w.Start.Sub(w.End))
	}
	for i, l := range lanes {
		var ln Lane
		for _, s := range l {
			if s.Start.Before(w.Start) || s.End.After(w.End) {
				continue
			}
			ln.Ops++
			ln.Busy += s.Duration()
		}
		if ln.Ops < minOps {
			return Window{}, fmt.Errorf("copy loop %d completed %d operations inside the %v in which all %d loops ran, fewer than the %d a rate needs",
				i, ln.Ops, w.Length(), len(lanes), minOps)
		}
		ln.Bytes = int64(ln.Ops) * bytesPerOp
		if ln.Busy > 0 {
			ln.GBps = float64(ln.Bytes) / ln.Busy.Seconds() / 1e9
		}
		w.Lanes = append(w.Lanes, ln)
	}
	return w, nil
}

// NVLinkLinkGBps is the theoretical rate of one NVLink link in one
// direction, in GB/s, for a version as NVML's nvmlDeviceGetNvLinkVersion
// reports it (the nvmlNvlinkVersion_t values of nvml.h), with the
// generation's name. The rates are NVIDIA's: a link carries half of the
// bidirectional figure its architecture whitepaper gives per link
//
//	NVLink 1 (P100):        4 links, 160 GB/s total -> 20 GB/s per link and direction
//	NVLink 2 (V100):        6 links, 300 GB/s total -> 25
//	NVLink 3 (A100):       12 links, 600 GB/s total -> 25
//	NVLink 4 (H100, H200): 18 links, 900 GB/s total -> 25
//	NVLink 5 (B200):       18 links, 1.8 TB/s total -> 50
//
// Some drivers report the generation's own number instead (4 on Hopper);
// each of 1..4 lands on a rate of the same size either way (20 or 25 GB/s),
// so both readings are judged alike. Version 8 (NVLink 6) and anything
// newer are not known yet: ok is false and no floor is derived.
func NVLinkLinkGBps(version int) (gbps float64, gen string, ok bool) {
	switch version {
	case 1:
		return 20, "NVLink 1.0", true
	case 2:
		return 25, "NVLink 2.0", true
	case 3:
		return 25, "NVLink 2.2", true
	case 4:
		return 25, "NVLink 3.0", true
	case 5:
		return 25, "NVLink 3.1", true
	case 6:
		return 25, "NVLink 4.0", true
	case 7:
		return 50, "NVLink 5.0", true
	}
	return 0, fmt.Sprintf("NVLink version %d", version), false
}

// NVLinkRate is the theoretical rate in one direction of links NVLink links
// of version between two GPUs, and how it came about ("18 x NVLink 4.0 links
// x 25 GB/s = 450 GB/s").
func NVLinkRate(links, version int) (float64, string, error) {
	if links <= 0 {
		return 0, "", fmt.Errorf("%d NVLink links: no rate", links)
	}
	per, gen, ok := NVLinkLinkGBps(version)
	if !ok {
		return 0, "", fmt.Errorf("%s is not one this suite knows a per-link rate for (known: NVML versions 1..7, NVLink 1.0..5.0)", gen)
	}
	total := float64(links) * per
	return total, fmt.Sprintf("%d x %s links x %g GB/s = %g GB/s per direction", links, gen, per, total), nil
}

// LaneFunc is run by AtOnce: it prepares (a warm-up copy), calls arm, which
// returns once every lane has armed, then runs its timed loop until stop is
// closed. A lane that fails before arming must simply return its error.
type LaneFunc func(i int, arm func(), stop <-chan struct{}) error

// AtOnce runs n lanes on goroutines of their own so that their timed parts
// start together: it waits until every lane has armed (or returned), lets
// them go, closes stop window later, and waits for all of them. Lanes that
// do not arm within armWithin, or do not return within window+stopWithin,
// are an error naming how many; so is any lane's own error (joined). Every
// wait here has a deadline; a lane stuck in a driver call is left behind.
func AtOnce(n int, window, armWithin, stopWithin time.Duration, lane LaneFunc) error {
	var armed, done sync.WaitGroup
	armed.Add(n)
	done.Add(n)
	start, stop := make(chan struct{}), make(chan struct{})
	errs := make([]error, n)
	var mu sync.Mutex
	ready, left := 0, n // for the timeout messages
	count := func(p *int, d int) { mu.Lock(); *p += d; mu.Unlock() }
	get := func(p *int) int { mu.Lock(); defer mu.Unlock(); return *p }
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			var once sync.Once
			arm := func() { once.Do(func() { count(&ready, 1); armed.Done(); <-start }) }
			err := lane(i, arm, stop)
			once.Do(func() { count(&ready, 1); armed.Done() }) // a lane that never armed must not hold the others
			mu.Lock()
			errs[i] = err
			left--
			mu.Unlock()
		}()
	}
	if !waitWithin(&armed, armWithin) {
		close(start)
		close(stop)
		return fmt.Errorf("%d of %d copy loops were not ready within %v (a warm-up copy hangs)", n-get(&ready), n, armWithin)
	}
	close(start)
	time.Sleep(window)
	close(stop)
	if !waitWithin(&done, stopWithin) {
		return fmt.Errorf("%d of %d copy loops did not stop within %v of being told to", get(&left), n, stopWithin)
	}
	mu.Lock()
	defer mu.Unlock()
	var out []error
	for i, err := range errs {
		if err != nil {
			out = append(out, fmt.Errorf("copy loop %d: %w", i, err))
		}
	}
	return errors.Join(out...)
}

// waitWithin waits for wg at most d.
func waitWithin(wg *sync.WaitGroup, d time.Duration) bool {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}
