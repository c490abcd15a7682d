package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestJudgeDip(t *testing.T) {
	// Rail 0 below its floor for 30 s from minute 3 (three samples), and
	// for one sample at minute 7: two dips, the first too long.
	s := build(2, 10*time.Minute)
	for _, e := range []time.Duration{3*time.Minute + 10*time.Second, 3*time.Minute + 20*time.Second, 3*time.Minute + 30*time.Second, 7 * time.Minute} {
		s.Samples[sampleAt(s, e)].Rails[0].Gbps = f(150)
	}
	s.Samples[sampleAt(s, 3*time.Minute+20*time.Second)].Rails[0].Gbps = f(120.3)
	rs := JudgeDips(s, DefaultThresholds())
	checkNames(t, rs)
	assert.Empty(t, rs[1].Findings)
	require.Len(t, rs[0].Findings, 1)
	f := rs[0].Findings[0]
	assert.Equal(t, "mlx5_0", f.Device)
	assert.Contains(t, f.Cause, "rail 0 mlx5_0 port 1 (GPU 0000:1b:00.0) was below its floor 360.0 Gbit/s (PP-08 floor: 0.9 of the port's payload rate) 2 times for 40s in all; the longest, 30s from 00:03:10 into the run (01:03:10 UTC), went down to 120.3 Gbit/s, longer than the 20s allowed")
	assert.Equal(t, []string{"00:02:50 371.8 Gbit/s ACTIVE", "00:03:00 371.0 Gbit/s ACTIVE", "00:03:10 150.0 Gbit/s ACTIVE", "00:03:20 120.3 Gbit/s ACTIVE", "00:03:30 150.0 Gbit/s ACTIVE", "00:03:40 371.4 Gbit/s ACTIVE", "00:03:50 371.8 Gbit/s ACTIVE"}, f.Evidence)
	a := attrs(rs[0])
	assert.Equal(t, "2", a["gdr.dip_count"])
	assert.Equal(t, "30.000", a["gdr.dip_longest_sec"])
	assert.Equal(t, "40.000", a["gdr.dip_total_sec"])

	// A sample not measured inside a dip counts in its length, and is no
	// dip of its own elsewhere.
	s.Samples[sampleAt(s, 3*time.Minute+20*time.Second)].Rails[0].Gbps = nil
	s.Samples[sampleAt(s, 5*time.Minute)].Rails[0].Gbps = nil
	a = attrs(JudgeDips(s, DefaultThresholds())[0])
	assert.Equal(t, "2", a["gdr.dip_count"])
	assert.Equal(t, "30.000", a["gdr.dip_longest_sec"])

	// No floor: absent; no rate measured: not judged.
	s = build(2, time.Minute)
	s.Rails[0].Floor = nil
	for i := range s.Samples {
		s.Samples[i].Rails[1].Gbps = nil
	}
	rs = JudgeDips(s, DefaultThresholds())
	assert.Equal(t, verdict.Absent, rs[0].Findings[0].Kind())
	assert.Contains(t, rs[0].Findings[0].Cause, "has no bandwidth floor")
	assert.Equal(t, verdict.NotJudged, rs[1].Findings[0].Kind())
	assert.Contains(t, rs[1].Findings[0].Cause, "none of the 6 samples measured its bandwidth")
}

func TestJudgeSag(t *testing.T) {
	// A host memory/CPU hog from a third of the run: rail 1's rate falls
	// to 70% of what it started at.
	s := build(2, 20*time.Minute)
	for i, x := range s.Samples {
		if x.At.Sub(s.Start) > 7*time.Minute {
			*s.Samples[i].Rails[1].Gbps *= 0.7
		}
	}
	rs := JudgeStable(s, DefaultThresholds())
	checkNames(t, rs)
	assert.Empty(t, rs[0].Findings)
	require.Len(t, rs[1].Findings, 1)
	f := rs[1].Findings[0]
	assert.Contains(t, f.Cause, "rail 1 mlx5_1 port 1 (GPU 0000:2b:00.0) sagged over the run: its last quarter averaged 260.0 Gbit/s, 0.70 of its first quarter's 371.4 Gbit/s, below 0.80; its worst 1m0s averaged 260.0 Gbit/s, from 00:07:20 into the run (01:07:20 UTC)")
	assert.Contains(t, f.Cause, "into the run (")
	assert.Equal(t, "0.700", attrs(rs[1])["gdr.stable_ratio"])
	assert.Contains(t, f.Evidence, "last quarter:")
	assert.Equal(t, SrcStable, f.Source)
	// The sag also holds the rail under its floor.
	assert.Len(t, failing(JudgeDips(s, DefaultThresholds())), 1)

	// GDR_SOAK_STABLE_FRACTION lowered to 0.6: 0.70 is kept, and a sag
	// below it names the setting as the threshold's source.
	th := DefaultThresholds()
	th.MinStableRatio, th.StableSource = 0.6, "GDR_SOAK_STABLE_FRACTION"
	assert.Empty(t, failing(JudgeStable(s, th)))
	th.MinStableRatio = 0.75
	fs := failing(JudgeStable(s, th))
	require.Len(t, fs, 1)
	assert.Equal(t, "GDR_SOAK_STABLE_FRACTION", fs[0].Source)
	assert.Contains(t, fs[0].Cause, "below 0.75")

	// A software device's rates (make lab-soak: 0.013 Gbit/s under TCG)
	// keep their digits: one decimal read 0.0.
	s = build(2, 20*time.Minute)
	for i, x := range s.Samples {
		*s.Samples[i].Rails[1].Gbps /= 10000
		if x.At.Sub(s.Start) > 7*time.Minute {
			*s.Samples[i].Rails[1].Gbps *= 0.5
		}
	}
	fs = failing(JudgeStable(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Contains(t, fs[0].Cause, "its last quarter averaged 0.0186 Gbit/s, 0.50 of its first quarter's 0.0371 Gbit/s")
	assert.Contains(t, fs[0].Evidence, "00:00:10 0.0372 Gbit/s ACTIVE")

	// Too few samples: not judged.
	s = build(1, 30*time.Second)
	fs = failing(JudgeStable(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Equal(t, verdict.NotJudged, fs[0].Kind())
}

func TestJudgeTrafficStopped(t *testing.T) {
	// Rail 1's traffic ends on an error at minute 4, after its link went
	// down at 3:50; its later samples are not measured, so no dip shows,
	// yet the rail carried nothing for the rest of the soak.
	s := build(2, 10*time.Minute)
	for i, x := range s.Samples {
		if x.At.Sub(s.Start) >= 4*time.Minute {
			s.Samples[i].Rails[1].Gbps = nil
		}
	}
	one := 1
	down := s.Samples[sampleAt(s, 3*time.Minute+50*time.Second)].At
	at := s.Samples[sampleAt(s, 4*time.Minute)].At
	s.Events = append(s.Events,
		Event{At: down, Kind: LinkDown, Device: "mlx5_1", Rail: &one, Text: "mlx5_1 port 1: DOWN (was ACTIVE)"},
		Event{At: at, Kind: Stopped, Device: "mlx5_1", Rail: &one, Text: "rail1 mlx5_1: the load stopped: transport retry counter exceeded"})
	rs := JudgeDips(s, DefaultThresholds())
	assert.Empty(t, rs[0].Findings)
	fs := failing(rs[1:])
	require.Len(t, fs, 1)
	f := fs[0]
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Contains(t, f.Cause, "rail 1 mlx5_1 port 1 (GPU 0000:2b:00.0): its traffic stopped on an error 00:04:00 into the run (01:04:00 UTC), and the rail carried nothing for the 6m0s the soak ran after it: rail1 mlx5_1: the load stopped: transport retry counter exceeded; its link went down before it, 00:03:50 into the run")
	assert.Equal(t, counters.PartLink, f.Part)
	assert.Contains(t, f.Remedy, "retries ran out")
	assert.Equal(t, "240.000", attrs(rs[1])["gdr.traffic_stopped_sec"])
	assert.Contains(t, f.Evidence, "00:04:00 - ACTIVE")

	// No floor (a software device): the stop still fails the rail.
	s.Rails[1].Floor = nil
	fs = failing(JudgeDips(s, DefaultThresholds())[1:])
	require.Len(t, fs, 2)
	assert.Equal(t, verdict.FellShort, fs[0].Kind())
	assert.Equal(t, verdict.Absent, fs[1].Kind())

	// Stopped as the run was cut: said, not failed.
	s.Cut = "SIGTERM"
	s.End = at.Add(s.Interval)
	fs = failing(JudgeDips(s, DefaultThresholds())[1:])
	require.Len(t, fs, 1)
	assert.Equal(t, verdict.Absent, fs[0].Kind())
}
