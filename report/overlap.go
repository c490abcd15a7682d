package report

import (
	"fmt"
	"path"
	"sort"
	"time"
)

// Overlap is a time when tests of two packages of one host ran at once.
type Overlap struct {
	A, B  string    // the packages, A the one already running
	At    time.Time // when B's test started while A had one running
	Until time.Time // when the two were last both running (At if unknown)
}

func (o Overlap) String() string {
	return fmt.Sprintf("packages %s and %s ran at the same time (from %s for %s)",
		path.Base(o.A), path.Base(o.B), o.At.UTC().Format("15:04:05.000"), o.Until.Sub(o.At).Round(time.Millisecond))
}

// overlapRemedy is what a run whose packages overlapped should do.
const overlapRemedy = "one package's GPU copies, RDMA traffic and NIC counter reads disturb another's " +
	"measurements, so neither's numbers can be judged: run the conformance packages one at a time " +
	"(make conformance and dist/run.sh do; go test needs -p 1)"

// Overlaps finds the packages of one host's events whose tests ran at the
// same time: a test of one package started while a test of another had
// started and not yet ended. go test runs up to -p package binaries at once
// (the CPU count by default), so on a many-core host the GPU copy tests would
// load the PCIe links another package's traffic crosses. Events without a
// time are left out; a package's own end (its pass or fail event) closes
// any test it left open (a binary that was killed). One Overlap per pair of
// packages, the first time they met.
func Overlaps(evs []Event) []Overlap {
	type ev struct {
		t   time.Time
		pkg string
		run bool // a test started; else one ended
		all bool // the package ended: nothing of it runs any more
	}
	var tl []ev
	for _, e := range evs {
		if e.Time == nil || e.Package == "" {
			continue
		}
		switch {
		case e.Test != "" && e.Action == "run":
			tl = append(tl, ev{t: *e.Time, pkg: e.Package, run: true})
		case e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			tl = append(tl, ev{t: *e.Time, pkg: e.Package})
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			tl = append(tl, ev{t: *e.Time, pkg: e.Package, all: true})
		}
	}
	sort.SliceStable(tl, func(a, b int) bool { return tl[a].t.Before(tl[b].t) })
	running := map[string]int{}
	found := map[[2]string]int{} // pair -> index in out
	var out []Overlap
	// meet records that pkg's event at t happened while other packages had
	// tests running: a start opens an overlap, any event extends one.
	meet := func(pkg string, t time.Time, start bool) {
		for other, n := range running {
			if other == pkg || n == 0 {
				continue
			}
			key := [2]string{min(other, pkg), max(other, pkg)}
			if j, ok := found[key]; ok {
				out[j].Until = t
			} else if start {
				found[key] = len(out)
				out = append(out, Overlap{A: other, B: pkg, At: t, Until: t})
			}
		}
	}
	for _, e := range tl {
		switch {
		case e.run:
			running[e.pkg]++
			meet(e.pkg, e.t, true)
		case running[e.pkg] > 0:
			meet(e.pkg, e.t, false)
			if e.all {
				delete(running, e.pkg)
			} else {
				running[e.pkg]--
			}
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].At.Equal(out[b].At) {
			return out[a].At.Before(out[b].At)
		}
		return out[a].A+" "+out[a].B < out[b].A+" "+out[b].B
	})
	return out
}
