package soak

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestJudgeFlap(t *testing.T) {
	s := build(2, 5*time.Minute)
	flap(s, 1)
	rs := JudgeFlaps(s, DefaultThresholds())
	checkNames(t, rs)
	require.Len(t, rs, 2)
	assert.Empty(t, rs[0].Findings, "the clean rail passes")
	fs := failing(rs)
	require.Len(t, fs, 1)
	f := fs[0]
	assert.Equal(t, "mlx5_1", f.Device)
	assert.Equal(t, "cable/optic", f.Part)
	assert.Equal(t, ReqFlap, f.Req)
	assert.Contains(t, f.Cause, "rail 1 mlx5_1 port 1 (GPU 0000:2b:00.0): the link went down 4 times")
	assert.Contains(t, f.Cause, "link_downed +4")
	assert.Contains(t, f.Cause, "4 link-down events")
	assert.Contains(t, f.Cause, "first at 00:00:59 into the run (01:00:59 UTC)")
	assert.Contains(t, f.Cause, "every 1m0s on average")
	assert.Contains(t, f.Evidence, "00:01:00 - DOWN")
	assert.Contains(t, f.Evidence, "00:00:50 352.4 Gbit/s ACTIVE")
	assert.Equal(t, "4", attrs(rs[1])["gdr.flaps_count"])
	assert.Equal(t, "40.000", attrs(rs[1])["gdr.down_sec"])

	// The counter alone is a witness too (no state read, no events).
	s = build(1, 5*time.Minute)
	setCounter(s, 0, 10, portKey("mlx5_0", "link_downed"), 1)
	for i := range s.Samples {
		s.Samples[i].Rails[0].State = ""
	}
	fs = failing(JudgeFlaps(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Contains(t, fs[0].Cause, "went down 1 time in 5m0s (link_downed +1), first at 00:01:50")

	// Nothing read: not judged, never a pass.
	s = build(1, time.Minute)
	for i := range s.Samples {
		s.Samples[i].Rails[0].State, s.Samples[i].Rails[0].Counters = "", nil
	}
	fs = failing(JudgeFlaps(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Equal(t, verdict.NotJudged, fs[0].Kind())
}

func TestJudgeBERRise(t *testing.T) {
	// Effective BER 1E-12 (at the ceiling, not above) until a retrain at
	// minute 20, 1E-9 after it; raw BER 1E-10 -> 1E-8 (sonic-mgmt's case).
	s := build(2, 30*time.Minute)
	for i, x := range s.Samples {
		l := x.Rails[0].Link
		if l == nil {
			continue
		}
		eff, raw := 1e-12, 1e-10
		if x.At.Sub(s.Start) > 20*time.Minute {
			eff, raw = 1e-9, 1e-8
		}
		s.Samples[i].Rails[0].Link = &Link{EffectiveBER: f(eff), SymbolBER: f(eff), RawBER: f(raw)}
	}
	rail := 0
	s.Events = append(s.Events, Event{At: s.Start.Add(20*time.Minute + 3*time.Second), Kind: LinkDown, Rail: &rail, Device: "mlx5_0", Text: "port 1 state DOWN (retrain)"})
	rs := JudgeBER(s, DefaultThresholds())
	checkNames(t, rs)
	assert.Empty(t, rs[1].Findings, "the clean rail passes")
	fs := failing(rs)
	var causes []string
	for _, f := range fs {
		causes = append(causes, f.Cause)
		assert.Equal(t, "mlx5_0", f.Device)
		assert.Equal(t, "cable/optic", f.Part)
	}
	all := strings.Join(causes, "\n")
	assert.Contains(t, all, "effective (post-FEC) BER 1.0e-09 at 00:25:00 into the run (01:25:00 UTC), above its ceiling 1.0e-12")
	assert.Contains(t, all, "effective (post-FEC) BER rose from 1.0e-12 at 00:00:10 into the run (01:00:10 UTC) to 1.0e-09 at 00:25:00 into the run (01:25:00 UTC) after the link went down at 00:20:03 into the run (01:20:03 UTC), 1000 times")
	assert.Contains(t, all, "raw (pre-FEC) BER rose from 1.0e-10", "the pre-FEC rise alone fails")
	assert.Equal(t, "1.00e-09", attrs(rs[0])["gdr.effective_ber"])
	assert.Equal(t, "1000.000", attrs(rs[0])["gdr.ber_rise_ratio"])
	assert.Contains(t, fs[0].Evidence, "00:20:00 effective 1.0e-12 symbol 1.0e-12 raw 1.0e-10")

	// No mlxlink: absent, saying why.
	s = build(1, 10*time.Minute)
	for i := range s.Samples {
		s.Samples[i].Rails[0].Link = nil
	}
	s.Unread = map[string]string{UnreadMlxlink: "mlxlink and mstlink not on PATH"}
	fs = failing(JudgeBER(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Equal(t, verdict.Absent, fs[0].Kind())
	assert.Contains(t, fs[0].Cause, "no mlxlink reading in the run, so its BER could not be followed: mlxlink and mstlink not on PATH")
}

func TestJudgeRates(t *testing.T) {
	// Over 30 minutes: rail 0's symbol errors rise 50 (100 an hour, under
	// IBTA's 120); rail 1's rise 90 (180 an hour), its RoCE retransmit
	// counters rise in a loss burst every 90 s, and its NIC's PCIe link
	// replays (corrected: a warning).
	s := build(2, 30*time.Minute)
	setCounter(s, 0, sampleAt(s, 10*time.Minute), portKey("mlx5_0", "symbol_error"), 20)
	setCounter(s, 0, sampleAt(s, 20*time.Minute), portKey("mlx5_0", "symbol_error"), 50)
	setCounter(s, 1, sampleAt(s, 10*time.Minute), portKey("mlx5_1", "symbol_error"), 30)
	setCounter(s, 1, sampleAt(s, 25*time.Minute), portKey("mlx5_1", "symbol_error"), 90)
	n := uint64(0)
	for e := 90 * time.Second; e < 30*time.Minute; e += 90 * time.Second {
		n += 40
		setCounter(s, 1, sampleAt(s, e), hwKey("mlx5_1", "out_of_sequence"), n)
		setCounter(s, 1, sampleAt(s, e), hwKey("mlx5_1", "local_ack_timeout_err"), n/10)
	}
	setCounter(s, 1, sampleAt(s, 12*time.Minute), aerKey("0000:28:00.0", counters.AERCorrectable, "RxErr"), 3)
	setCounter(s, 1, sampleAt(s, 12*time.Minute), aerKey("0000:28:00.0", counters.AERCorrectable, "TOTAL_ERR_COR"), 3)
	rs := JudgeRates(s, DefaultThresholds())
	checkNames(t, rs)
	assert.Empty(t, rs[0].Findings, "100 symbol errors an hour is under 120")
	a := attrs(rs[0])
	assert.Equal(t, "100.559", a["gdr.errors_per_hour"], "50 in 29m50s")
	assert.Equal(t, "120.000", a["gdr.max_errors_per_hour"])
	var fails, warns []string
	for _, f := range rs[1].Findings {
		switch f.Level {
		case verdict.Fail:
			fails = append(fails, f.Cause)
		case verdict.Warn:
			warns = append(warns, f.Cause)
			assert.Equal(t, "0000:28:00.0", f.Device)
		}
	}
	require.Len(t, fails, 3, "%v", fails)
	all := strings.Join(fails, "\n")
	assert.Contains(t, all, "mlx5_1 port 1 counters/symbol_error rose by 90 in 29m50s, 181.0 an hour, above 120 an hour")
	assert.Contains(t, all, "mlx5_1 port 1 hw_counters/out_of_sequence rose by 760 in 29m50s, 1528.5 an hour, above 0 an hour")
	assert.Contains(t, all, "first at 00:01:30 into the run (01:01:30 UTC), last at 00:28:30")
	require.Len(t, warns, 1, "the total is explained by RxErr: %v", warns)
	assert.Contains(t, warns[0], "0000:28:00.0 aer_dev_correctable RxErr rose by 3")
	for _, f := range rs[1].Findings {
		if f.Level == verdict.Fail {
			assert.NotEmpty(t, f.Remedy)
			assert.NotEmpty(t, f.Part)
		}
	}
	assert.Equal(t, verdict.Fail, rs[1].Findings[0].Level, "failures first: the test records the first one's values")

	// rxe's timer retransmits warn on a software rail (no PCI function).
	s = build(1, 10*time.Minute)
	s.Rails[0].PCI, s.Rails[0].Device = "", "rxe0"
	setCounter(s, 0, 0, hwKey("rxe0", "completer_retry_err"), 0)
	setCounter(s, 0, 5, hwKey("rxe0", "completer_retry_err"), 191)
	fs := JudgeRates(s, DefaultThresholds())[0].Findings
	require.NotEmpty(t, fs)
	for _, f := range fs {
		assert.NotEqual(t, verdict.Fail, f.Level, f.Cause)
	}

	// No counter read: absent where the runner said why.
	s = build(1, time.Minute)
	for i := range s.Samples {
		s.Samples[i].Rails[0].Counters = nil
	}
	s.Unread = map[string]string{UnreadCounters: "/sys/class/infiniband/mlx5_0/ports/1/counters: permission denied"}
	fs = failing(JudgeRates(s, DefaultThresholds()))
	require.Len(t, fs, 1)
	assert.Equal(t, verdict.Absent, fs[0].Kind())
}
