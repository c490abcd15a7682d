package soak

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestJudgeThrottle(t *testing.T) {
	// GPU 1 warms from 60 C to 90 C; from minute 15 its clocks are held by
	// SW and HW thermal slowdown and fall to 1410 MHz.
	s := build(2, 30*time.Minute)
	for i, x := range s.Samples {
		e := x.At.Sub(s.Start)
		g := &s.Samples[i].GPUs[1]
		g.TempC = f(60 + 30*e.Minutes()/30)
		if e >= 15*time.Minute {
			g.Throttle = u(ClocksSwThermal | ClocksHwThermal)
			g.SMClockMHz = f(1410)
		}
	}
	// Application clocks and sync boost are not throttling.
	s.Samples[3].GPUs[0].Throttle = u(0x2 | 0x10)
	rs := JudgeThrottle(s, DefaultThresholds())
	checkNames(t, rs)
	assert.Empty(t, rs[0].Findings)
	require.Len(t, rs[1].Findings, 1)
	f := rs[1].Findings[0]
	assert.Equal(t, verdict.Warn, f.Level, "report-only: the site's cooling decides")
	assert.Equal(t, "gpu", f.Part)
	assert.Equal(t, "0000:2b:00.0", f.Device)
	assert.Contains(t, f.Cause, "GPU 0000:2b:00.0 (NVIDIA H200) was throttled (SW thermal slowdown, HW thermal slowdown) in 91 of 180 samples, 15m10s in all, from 00:15:00 into the run (01:15:00 UTC)")
	assert.Contains(t, f.Cause, "up to 90 C, SM clock between 1410 and 1980 MHz")
	assert.Contains(t, f.Evidence, "00:14:50 1980 MHz 75 C 480 W copy 410.0 Gbit/s reasons 0x0")
	assert.Contains(t, f.Evidence, "00:15:00 1410 MHz 75 C 480 W copy 410.0 Gbit/s reasons 0x60")
	assert.Equal(t, "910.000", attrs(rs[1])["gdr.throttled_sec"])

	th := DefaultThresholds()
	th.ThrottleLevel = verdict.Fail
	assert.Len(t, failing(JudgeThrottle(s, th)), 1, "a site that fails throttling says so")

	// NVML not read: absent.
	for i := range s.Samples {
		s.Samples[i].GPUs = nil
	}
	s.Unread = map[string]string{UnreadNVML: "libnvidia-ml.so.1 not found"}
	fs := failing(JudgeThrottle(s, DefaultThresholds()))
	require.Len(t, fs, 2)
	assert.Equal(t, verdict.Absent, fs[0].Kind())
	assert.Contains(t, fs[0].Cause, "NVML gave no clock event reasons in 180 samples, so its throttling could not be followed: libnvidia-ml.so.1 not found")
}

func TestJudgeKernel(t *testing.T) {
	s := build(2, 10*time.Minute)
	s.Events = append(s.Events,
		Event{At: s.Start.Add(4*time.Minute + 2*time.Second), Kind: Xid, Device: "0000:1b:00.0", Text: "NVRM: Xid (PCI:0000:1b:00): 79, pid=2231, name=gdrsoak, GPU has fallen off the bus."},
		Event{At: s.Start.Add(4*time.Minute + 3*time.Second), Kind: Xid, Device: "0000:1b:00.0", Text: "NVRM: Xid (PCI:0000:1b:00): 45, pid=2231, name=gdrsoak, Ch 00000010"},
		Event{At: s.Start.Add(6 * time.Minute), Kind: AER, Text: "pcieport 0000:16:00.0: AER: Corrected error received: 0000:18:00.0"},
	)
	rs := JudgeKernel(s, DefaultThresholds())
	checkNames(t, rs)
	require.Len(t, rs, 1)
	require.Len(t, rs[0].Findings, 2)
	f := rs[0].Findings[0]
	assert.Equal(t, verdict.Fail, f.Level)
	assert.Equal(t, "gpu", f.Part)
	assert.Equal(t, "0000:1b:00.0", f.Device)
	assert.Contains(t, f.Cause, "0000:1b:00.0 logged 2 Xid lines during the soak, the first at 00:04:02 into the run (01:04:02 UTC): Xid 79: GPU has fallen off the bus")
	assert.Equal(t, "00:04:02 NVRM: Xid (PCI:0000:1b:00): 79, pid=2231, name=gdrsoak, GPU has fallen off the bus.", f.Evidence[0])
	w := rs[0].Findings[1]
	assert.Equal(t, verdict.Warn, w.Level, "a corrected AER error warns")
	assert.Equal(t, "0000:18:00.0", w.Device)
	assert.Equal(t, "pcie link", w.Part)
	a := attrs(rs[0])
	assert.Equal(t, "2", a["gdr.xid_count"])
	assert.Equal(t, "1", a["gdr.aer_count"])

	// The kernel log not read: absent, never a pass.
	s = build(1, time.Minute)
	s.Unread = map[string]string{UnreadKmsg: "/dev/kmsg: permission denied"}
	fs := failing(JudgeKernel(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Equal(t, verdict.Absent, fs[0].Kind())
	assert.Contains(t, fs[0].Cause, "/dev/kmsg: permission denied")
}
