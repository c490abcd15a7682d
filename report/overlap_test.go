package report

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stamped gives evs times: the i-th event at base + steps[i] ms.
func stamped(evs []Event, base time.Time, ms ...int) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		t := base.Add(time.Duration(ms[i]) * time.Millisecond)
		e.Time = &t
		out[i] = e
	}
	return out
}

func te(action, pkg, test string) Event { return Event{Action: action, Package: pkg, Test: test} }

const (
	gpuPkg  = "github.com/gdrconf/gdrconf/conformance/gpu"
	pingPkg = "github.com/gdrconf/gdrconf/conformance/pingpong"
)

var t0 = time.Date(2026, 12, 4, 15, 37, 17, 0, time.UTC)

func TestOverlapsOneAtATime(t *testing.T) {
	evs := stamped([]Event{
		te("start", gpuPkg, ""), te("run", gpuPkg, "TestGPU09HtoDBandwidth"), te("pass", gpuPkg, "TestGPU09HtoDBandwidth"), te("pass", gpuPkg, ""),
		te("start", pingPkg, ""), te("run", pingPkg, "TestPP08Bandwidth"), te("pass", pingPkg, "TestPP08Bandwidth"), te("pass", pingPkg, ""),
		// A second round of the same packages (a cluster host's rounds).
		te("run", gpuPkg, "TestGPU09HtoDBandwidth"), te("pass", gpuPkg, "TestGPU09HtoDBandwidth"), te("pass", gpuPkg, ""),
		te("run", pingPkg, "TestPP08Bandwidth"), te("pass", pingPkg, "TestPP08Bandwidth"), te("pass", pingPkg, ""),
	}, t0, 0, 1, 500, 501, 501, 502, 900, 901, 1000, 1100, 1101, 1200, 1300, 1301)
	assert.Empty(t, Overlaps(evs), "back-to-back packages, also when one's end and the next's start share a time")
}

// go test -p 2: the GPU copy test starts while pingpong's bandwidth test
// runs (the events interleave in test.json as they did in make
// conformance on 2 cores).
func TestOverlapsInterleaved(t *testing.T) {
	evs := stamped([]Event{
		te("start", pingPkg, ""), te("run", pingPkg, "TestPP08Bandwidth"), te("run", pingPkg, "TestPP08Bandwidth/rail0"),
		te("start", gpuPkg, ""), te("run", gpuPkg, "TestGPU09HtoDBandwidth"),
		te("pass", gpuPkg, "TestGPU09HtoDBandwidth"), te("run", gpuPkg, "TestGPU10DtoHBandwidth"),
		te("pass", pingPkg, "TestPP08Bandwidth/rail0"), te("pass", pingPkg, "TestPP08Bandwidth"), te("pass", pingPkg, ""),
		te("pass", gpuPkg, "TestGPU10DtoHBandwidth"), te("pass", gpuPkg, ""),
	}, t0, 0, 10, 11, 100, 200, 900, 901, 2200, 2201, 2202, 2500, 2501)
	got := Overlaps(evs)
	require.Len(t, got, 1)
	assert.Equal(t, pingPkg, got[0].A, "the package already running")
	assert.Equal(t, gpuPkg, got[0].B)
	assert.Equal(t, "packages pingpong and gpu ran at the same time (from 15:37:17.200 for 2.001s)", got[0].String(),
		"until pingpong's last test ended")
}

// A binary killed mid-test leaves a test without an end; its package's
// fail event closes it, so the next package is not counted as beside it.
func TestOverlapsKilledBinary(t *testing.T) {
	evs := stamped([]Event{
		te("run", gpuPkg, "TestGPU09HtoDBandwidth"), te("fail", gpuPkg, ""),
		te("run", pingPkg, "TestPP08Bandwidth"), te("pass", pingPkg, "TestPP08Bandwidth"),
	}, t0, 0, 100, 200, 300)
	assert.Empty(t, Overlaps(evs))
	// Without times (a JUnit-only recording) nothing can be told.
	assert.Empty(t, Overlaps([]Event{te("run", gpuPkg, "A"), te("run", pingPkg, "B")}))
}

// An overlap fails the host outside any test: the run cannot be
// QUALIFIED, however its tests came out.
func TestOverlapIsARunError(t *testing.T) {
	evs := stamped([]Event{
		te("run", pingPkg, "TestPP08Bandwidth"), te("attr", pingPkg, "TestPP08Bandwidth"),
		te("run", gpuPkg, "TestGPU09HtoDBandwidth"), te("attr", gpuPkg, "TestGPU09HtoDBandwidth"),
		te("pass", gpuPkg, "TestGPU09HtoDBandwidth"), te("pass", pingPkg, "TestPP08Bandwidth"),
	}, t0, 0, 1, 50, 51, 400, 500)
	evs[1].Key, evs[1].Value = "gdr.req", "PP-08"
	evs[3].Key, evs[3].Value = "gdr.req", "GPU-09"
	r := Build([]Run{{Host: Identity{Host: "dgx-1"}, Events: evs}})
	assert.Equal(t, NotQualified, r.Verdict.Verdict)
	require.Len(t, r.Hosts[0].Errors, 1)
	assert.Contains(t, r.Hosts[0].Errors[0], "packages pingpong and gpu ran at the same time")
	assert.Contains(t, r.Hosts[0].Errors[0], "go test needs -p 1")
}

// Every recorded run whose events carry times ran its packages one at a
// time: the H200 runs through dist/run.sh (16 CPUs) and the lab's VMs.
// One that did not would read NOT QUALIFIED now, and this names it.
func TestRecordedRunsRanOneAtATime(t *testing.T) {
	ents, err := os.ReadDir(runsDir)
	require.NoError(t, err)
	timed := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		runs, err := LoadDir(filepath.Join(runsDir, e.Name()))
		require.NoError(t, err, e.Name())
		for _, r := range runs {
			for _, ev := range r.Events {
				if ev.Time != nil {
					timed++
					break
				}
			}
			assert.Empty(t, Overlaps(r.Events), "%s/%s", e.Name(), r.Host.Host)
		}
	}
	assert.Positive(t, timed, "some recordings carry event times")
}
