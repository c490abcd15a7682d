// Package health takes the counter deltas and kernel log lines around a
// package's traffic (the HLTH requirements): the rail NIC's port counters
// and hw_counters and the PCIe AER counters of the rail's GPU, NIC and the
// bridges between them (internal/counters), and what the kernel logged
// meanwhile (internal/kmsg).
//
// A package keeps one Window. Each traffic test calls Around for the rail
// it drives: the first call for a rail takes the window's base snapshot,
// and every call records that test's own deltas (attribution). The HLTH
// test, declared last in the package so that it runs after the traffic
// tests, calls Judge: the delta since the base snapshot, per rail, fails
// on every error counter that rose. A HLTH test whose traffic did not run
// (a -run filter) says so through testenv.Absent; it never passes on
// nothing.
package health

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmsg"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Window is one package's counters and kernel log since its first traffic.
type Window struct {
	mu    sync.Mutex
	rails map[int]*watch // by rail index
	order []int
	ran   []string // traffic tests that called Around, in order

	log      *kmsg.Watcher
	logErr   error
	logStart time.Time
}

// watch is one rail's counters.
type watch struct {
	name  string
	rail  *rails.Rail
	ports []counters.PortRef
	pcis  []string
	where []string // what is read, for messages
	soft  map[string]bool
	base  *counters.Snapshot
	// rose: counter -> the tests during which it rose, with the delta.
	rose map[counters.Key][]string
}

// New returns an empty window.
func New() *Window { return &Window{rails: map[int]*watch{}} }

func (w *Window) watchFor(t testing.TB, r *rails.Rail) *watch {
	idx := max(r.Index, 0)
	if x := w.rails[idx]; x != nil {
		return x
	}
	sel := testenv.Selection(t)
	x := &watch{name: r.Name(), rail: r, soft: map[string]bool{}, rose: map[counters.Key][]string{}}
	if r.NIC != nil {
		port := r.NIC.Port
		if port < 1 {
			port = sel.Port
		}
		x.ports = append(x.ports, counters.PortRef{Device: r.NIC.Name, Port: port})
		x.where = append(x.where, rdmadev.PortDir(r.NIC.Name, port)+"/{counters,hw_counters}")
		if r.NIC.Software {
			x.soft[r.NIC.Name] = true
		}
	}
	devs, missing := sel.PathDevices(r)
	for _, d := range devs {
		x.pcis = append(x.pcis, d.Dev.BDF)
		x.where = append(x.where, fmt.Sprintf("%s/%s/aer_dev_* (%s)", pci.DevicesDir, d.Dev.BDF, d.Role))
	}
	for _, m := range missing {
		x.where = append(x.where, m+" (not in sysfs)")
	}
	if len(devs) == 0 {
		x.where = append(x.where, "no PCI function on this rail (software NIC, driver-only GPU): no AER counters")
	}
	w.rails[idx] = x
	w.order = append(w.order, idx)
	return x
}

func (x *watch) take(root *hostfs.Root) *counters.Snapshot {
	return counters.Take(root, x.ports, x.pcis)
}

// Around records that t drives traffic on rail r (nil: nothing is
// recorded): the window's base snapshot for r if this is its first
// traffic, this test's own snapshot now, and at t's end the counters that
// rose during t as gdr.counters_rose.
func (w *Window) Around(t testing.TB, r *rails.Rail) {
	t.Helper()
	if r == nil {
		return
	}
	root := testenv.Root(t)
	w.mu.Lock()
	if w.log == nil && w.logErr == nil {
		w.log, w.logErr = kmsg.Watch(root)
		w.logStart = time.Now()
	}
	x := w.watchFor(t, r)
	before := x.take(root)
	if x.base == nil {
		x.base = before
	}
	w.ran = append(w.ran, t.Name())
	w.mu.Unlock()
	t.Cleanup(func() {
		if t.Skipped() {
			// A test that skipped (no NIC, the peer skipped) drove no
			// traffic: it is not one the HLTH test judges.
			w.mu.Lock()
			if i := slices.Index(w.ran, t.Name()); i >= 0 {
				w.ran = slices.Delete(w.ran, i, i+1)
			}
			w.mu.Unlock()
			return
		}
		after := x.take(root)
		fs := counters.JudgeWith(counters.Diff(before, after), counters.Options{Software: x.soft})
		var rose []string
		w.mu.Lock()
		for _, f := range fs {
			if f.Class.Kind == counters.Data || !f.Rose() {
				continue
			}
			rose = append(rose, fmt.Sprintf("%s +%d (%s)", f.Key, f.Delta, levelWord(f.Level)))
			x.rose[f.Key] = append(x.rose[f.Key], fmt.Sprintf("%s +%d", t.Name(), f.Delta))
		}
		w.mu.Unlock()
		if len(rose) > 0 {
			testenv.Attr(t, "counters_rose", strings.Join(rose, ", "))
			t.Logf("counters that rose during this test (judged by the HLTH test): %s", strings.Join(rose, ", "))
		}
	})
}

// Ran returns the traffic tests recorded so far.
func (w *Window) Ran() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ran...)
}

// Judge is the HLTH test's body: for every rail traffic ran on, the
// counter delta since the window's base snapshot, with every error counter
// that rose failing t (counter, device, delta, meaning, the tests it rose
// during); then the kernel log since the first traffic. what names the
// traffic for messages ("the pingpong traffic tests").
func (w *Window) Judge(t *testing.T, id, what string) {
	t.Helper()
	root := testenv.Root(t)
	w.mu.Lock()
	ran := append([]string(nil), w.ran...)
	order := append([]int(nil), w.order...)
	w.mu.Unlock()
	if len(ran) == 0 {
		testenv.Absent(t, "run them together, e.g. -run 'Test(PP|GPU|HLTH)'", "%s: none of %s ran before this test in this binary (a -run filter?), so there is no traffic to judge counters around", id, what)
	}
	testenv.Attr(t, "tests_judged_count", len(ran))
	testenv.Attr(t, "tests_judged", strings.Join(ran, ", "))
	for _, idx := range order {
		w.mu.Lock()
		x := w.rails[idx]
		w.mu.Unlock()
		t.Run(x.name, func(t *testing.T) {
			testenv.Req(t, id)
			testenv.RailAttrs(t, x.rail)
			w.judgeRail(t, root, x)
		})
	}
	w.reportLog(t)
}

func (w *Window) judgeRail(t *testing.T, root *hostfs.Root, x *watch) {
	after := x.take(root)
	d := counters.Diff(x.base, after)
	testenv.Attr(t, "counters_read", strings.Join(x.where, "; "))
	if len(d.Problems) > 0 {
		testenv.Attr(t, "counters_problems", strings.Join(d.Problems, "; "))
	}
	if len(d.Absent) > 0 {
		testenv.Attr(t, "counters_absent", strings.Join(d.Absent, "; "))
	}
	if len(after.Values) == 0 {
		testenv.Absent(t, "", "no counter of %s could be read: looked at %s (%s)", x.rail, strings.Join(x.where, ", "),
			strings.Join(append(append([]string(nil), d.Absent...), d.Problems...), "; "))
	}
	w.mu.Lock()
	rose := make(map[counters.Key][]string, len(x.rose))
	for k, v := range x.rose {
		rose[k] = append([]string(nil), v...)
	}
	w.mu.Unlock()
	o := Outcome(d, x.soft, rose)
	testenv.Attr(t, "counters_count", len(after.Values))
	testenv.Attr(t, "counters_window_sec", d.Elapsed().Seconds())
	if len(o.Deltas) == 0 {
		testenv.Attr(t, "counter_deltas", "none rose")
	} else {
		testenv.Attr(t, "counter_deltas", strings.Join(o.Deltas, ", "))
	}
	t.Logf("%s: %d counters over %.1f s; rose: %s", x.name, len(after.Values), d.Elapsed().Seconds(), orNone(o.Deltas))
	testenv.Record(t, o.Findings...)
}

// Result is a rail's window judged.
type Result struct {
	Deltas []string // every counter that rose: "<key> +N"
	// Findings are the counters that warn or fail, each naming the tests
	// it rose during, with the remedy and part of its cause
	// (internal/counters).
	Findings []verdict.Finding
}

// Of returns r's findings of level l.
func (r Result) Of(l verdict.Level) []verdict.Finding {
	var out []verdict.Finding
	for _, f := range r.Findings {
		if f.Level == l {
			out = append(out, f)
		}
	}
	return out
}

// levelWord is how a counter's level reads beside it in gdr.counters_rose.
func levelWord(l verdict.Level) string {
	if l == counters.Report {
		return "report"
	}
	return l.String()
}

// Outcome judges the delta of a window (counters.JudgeWith, soft naming
// the software devices) and names for each finding the tests it rose
// during (rose: counter -> "test +N", from Around).
func Outcome(d counters.Delta, soft map[string]bool, rose map[counters.Key][]string) Result {
	var r Result
	for _, f := range counters.JudgeWith(d, counters.Options{Software: soft}) {
		if f.Rose() {
			r.Deltas = append(r.Deltas, fmt.Sprintf("%s +%d", f.Key, f.Delta))
		}
		during := strings.Join(rose[f.Key], ", ")
		if during == "" {
			during = "between tests"
		}
		if f.Level == counters.Fail || f.Level == counters.Warn {
			g := f.Finding
			g.Cause = fmt.Sprintf("%s (rose during: %s)", f.Cause, during)
			r.Findings = append(r.Findings, g)
		}
	}
	return r
}

// reportLog reports the kernel log lines that matter since the first
// traffic (kmsg.Scan): reported, not judged (the counters are the verdict;
// a line names the device and cause for the person reading it).
func (w *Window) reportLog(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.logErr != nil {
		testenv.Attr(t, "kmsg_note", "kernel log not read: "+w.logErr.Error())
		return
	}
	if w.log == nil {
		return
	}
	res := w.log.Read(time.Now().Add(2 * time.Second))
	// Judge runs once per binary: the device is not held beyond it.
	w.log.Close()
	w.log = nil
	ms := kmsg.Scan(res.Records)
	testenv.Attr(t, "kmsg_records_count", len(res.Records))
	testenv.Attr(t, "kmsg_matches_count", len(ms))
	if p := res.Problems(); len(p) > 0 {
		testenv.Attr(t, "kmsg_note", strings.Join(p, "; "))
	}
	if len(ms) == 0 {
		return
	}
	lines := make([]string, 0, len(ms))
	for _, m := range ms {
		lines = append(lines, m.String())
	}
	const most = 20
	if len(lines) > most {
		lines = append(lines[:most], fmt.Sprintf("... and %d more", len(lines)-most))
	}
	testenv.Attr(t, "kmsg", strings.Join(lines, "\n"))
	t.Logf("kernel log since the first traffic (%.0f s ago), lines that matter:\n%s", time.Since(w.logStart).Seconds(), strings.Join(lines, "\n"))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
